//! Loaded modules (PTX, cubin, fatbin) and the kernel signatures they carry.

use super::{device, host_view, normalize_dtype, numel, numpy, type_name, CudaKernel, OrPy};
use crate::checked::{self, Checked, Flag, Is, Text};
use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use zyntax_cuda as zc;
use zyntax_hir::ScalarType;

/// A loaded module (PTX, cubin or fatbin), cached per process by content.
#[pyclass(frozen, name = "Module", module = "zyntax.cuda")]
pub struct CudaModule {
    inner: zc::Module,
    /// Kernel signatures from the module's HIR, when it was given.
    hir: Option<zyntax_hir::Module>,
    /// Kernel signatures given explicitly (e.g. from a ptx_cache entry's JSON).
    sigs: std::collections::HashMap<String, zc::Signature>,
}

impl CudaModule {
    fn hir_global(&self, name: &str) -> Option<&zyntax_hir::GlobalVar> {
        self.hir.as_ref()?.global(name)
    }
}

/// numpy's name of a scalar's storage (bf16: its bits as uint16).
fn numpy_name(s: ScalarType) -> &'static str {
    use ScalarType as S;
    match s {
        S::Bool => "bool",
        S::I8 => "int8",
        S::I16 => "int16",
        S::I32 => "int32",
        S::I64 => "int64",
        S::U8 => "uint8",
        S::U16 | S::BF16 => "uint16",
        S::U32 => "uint32",
        S::U64 => "uint64",
        S::F16 => "float16",
        S::F32 => "float32",
        S::F64 => "float64",
    }
}

/// `{"params": ["ptr<global, f32>", "u32"], "max_threads": [256, 1, 1] | None,
/// "shared_bytes": 0}` to a signature; the types in `.zir` spelling.
fn signature_from_dict(name: &str, d: &Bound<'_, PyAny>) -> PyResult<zc::Signature> {
    let bad = |m: String| ArgumentError::new_err(format!("signature of `{name}`: {m}"));
    let d = d.cast::<PyDict>().map_err(|_| {
        bad(format!(
            "expected a dict, got {}",
            crate::types::type_name(d)
        ))
    })?;
    // Each field through the checked conversions, named in the error.
    let py = d.py();
    let field = |e: PyErr, key: &str| {
        let msg = e.value(py).to_string();
        if msg.contains(&format!("'{key}'")) {
            bad(msg)
        } else {
            bad(format!("'{key}': {msg}"))
        }
    };
    let params = d
        .get_item("params")?
        .ok_or_else(|| bad("missing 'params'".to_owned()))?
        .extract::<checked::TextList>()
        .map_err(|e| field(e, "params"))?;
    let types = params
        .0
        .iter()
        .map(|t| crate::types::parse_type_text(t))
        .collect::<PyResult<Vec<_>>>()?;
    let mut sig = zc::Signature::from_types(&types).map_err(|e| bad(e.to_string()))?;
    if let Some(m) = d.get_item("max_threads")? {
        if !m.is_none() {
            sig.max_threads =
                Some(checked::dim3(&m, "max_threads", 1).map_err(|e| field(e, "max_threads"))?);
        }
    }
    if let Some(c) = d.get_item("cluster")? {
        if !c.is_none() {
            sig.cluster = Some(checked::dim3(&c, "cluster", 1).map_err(|e| field(e, "cluster"))?);
        }
    }
    if let Some(g) = d.get_item("grid_sync")? {
        sig.grid_sync = g.extract::<Flag>().map_err(|e| field(e, "grid_sync"))?.0;
    }
    for key in ["shared_bytes", "dynamic_shared_bytes"] {
        if let Some(b) = d.get_item(key)? {
            if !b.is_none() {
                sig.shared_bytes = checked::arg::<u32>(&b, key).map_err(|e| field(e, key))?;
            }
        }
    }
    Ok(sig)
}

#[pymethods]
impl CudaModule {
    /// Loads `image` (PTX text as `str`/`bytes`, or cubin/fatbin bytes) on
    /// `device`. `zir`, the module's `.zir` text, gives kernels their HIR
    /// signatures (stricter argument checks, launch bounds); `signatures`
    /// gives them explicitly: `{kernel: {"params": [type, ...],
    /// "max_threads": [x, y, z] | None, "shared_bytes": int}}`.
    #[staticmethod]
    #[pyo3(signature = (image, device=Checked(0), zir=None, signatures=None),
        text_signature = "(image, device=0, zir=None, signatures=None)")]
    fn load(
        py: Python<'_>,
        image: &Bound<'_, PyAny>,
        device: Checked<u32>,
        zir: Option<Text>,
        signatures: Option<Is<'_, PyDict>>,
    ) -> PyResult<Self> {
        guard(|| {
            let mut sigs = std::collections::HashMap::new();
            if let Some(d) = signatures {
                for (k, v) in d.iter() {
                    let name = checked::text(&k, "signatures")?;
                    let sig = signature_from_dict(&name, &v)?;
                    sigs.insert(name, sig);
                }
            }
            // Checked before the driver is touched.
            enum Image {
                Ptx(String),
                Binary(Vec<u8>),
            }
            let image = if image.is_instance_of::<PyString>() {
                Image::Ptx(checked::text(image, "image")?)
            } else if let Ok(b) = image.cast::<PyBytes>() {
                Image::Binary(b.as_bytes().to_vec())
            } else {
                return Err(ArgumentError::new_err(format!(
                    "argument 'image': expected str (PTX) or bytes, got {}",
                    type_name(image)
                )));
            };
            let dev = self::device(py, device.0)?;
            let hir = match zir {
                Some(t) => Some(zyntax_hir::parse_module(&t).map_err(|e| {
                    crate::errors::ParseError::new_err(format!("zir passed to Module.load: {e}"))
                })?),
                None => None,
            };
            let inner = match image {
                Image::Ptx(s) => py.detach(move || zc::Module::load_ptx(&dev, &s)).py(py)?,
                Image::Binary(b) => py.detach(move || zc::Module::load(&dev, &b)).py(py)?,
            };
            Ok(CudaModule { inner, hir, sigs })
        })
    }
    /// A copy of module global `name` (`__constant__` / `__device__`) as a
    /// numpy array, after the device finished earlier work. `dtype` defaults
    /// to the global's element type when the module was loaded with its HIR
    /// (vectors: shape `(count, lanes)`; bf16 as uint16 bits), else uint8.
    #[pyo3(signature = (name, dtype=None))]
    fn read_global<'py>(
        &self,
        py: Python<'py>,
        name: Text,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let g = self.inner.global(&name).py(py)?;
            let hg = self.hir_global(&name);
            let (dt, lanes): (Bound<'py, PyAny>, Option<u32>) = match (dtype, hg) {
                (Some(d), _) => (d.clone(), None),
                (None, Some(h)) => {
                    let lanes = match h.elem {
                        zyntax_hir::Type::Vector(_, n) => Some(n),
                        _ => None,
                    };
                    let lane = h.elem.elem_scalar().unwrap_or(ScalarType::U8);
                    (PyString::new(py, numpy_name(lane)).into_any(), lanes)
                }
                (None, None) => (PyString::new(py, "uint8").into_any(), None),
            };
            let itemsize = normalize_dtype(py, &dt)?.itemsize as u64;
            if g.len_bytes() % itemsize != 0 {
                return Err(ArgumentError::new_err(format!(
                    "read_global: global `{}` has {} bytes, not a whole number of {itemsize}-byte elements",
                    g.name(),
                    g.len_bytes()
                )));
            }
            let mut buf = vec![0u8; g.len_bytes() as usize];
            py.detach(|| g.read(&mut buf)).py(py)?;
            let np = numpy(py)?;
            let arr = np
                .getattr("frombuffer")?
                .call1((PyBytes::new(py, &buf), dt))?
                .call_method0("copy")?;
            match lanes {
                Some(n) => arr.call_method1("reshape", ((-1i64, i64::from(n)),)),
                None => Ok(arr),
            }
        })
    }

    /// Overwrites module global `name` with the C-contiguous numpy array
    /// `data` (exactly the global's size; with the module's HIR, also of its
    /// element dtype), after the device finished earlier work; later
    /// launches see it.
    fn write_global(&self, py: Python<'_>, name: Text, data: &Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            let hv = host_view(data)
                .map_err(|e| ArgumentError::new_err(format!("write_global: {e}")))?;
            if let Some(h) = self.hir_global(&name) {
                let lane = h.elem.elem_scalar();
                let ok = hv.dtype.elem == lane
                    || (lane == Some(ScalarType::BF16) && hv.dtype.elem == Some(ScalarType::U16));
                if !ok {
                    return Err(ArgumentError::new_err(format!(
                        "write_global: global `{name}` holds {}, got an array of dtype '{}'",
                        h.elem, hv.dtype.typestr
                    )));
                }
            }
            let g = self.inner.global(&name).py(py)?;
            let n = numel(&hv.shape)? * hv.dtype.itemsize;
            if n as u64 != g.len_bytes() {
                return Err(ArgumentError::new_err(format!(
                    "write_global: global `{name}` has {} bytes, the array {n}",
                    g.len_bytes()
                )));
            }
            // SAFETY: a C-contiguous host array of `n` bytes (checked above), alive for the call.
            let src = unsafe { std::slice::from_raw_parts(hv.ptr as *const u8, n) };
            g.write(src).py(py)
        })
    }

    /// Kernel names declared in the PTX.
    #[getter]
    fn kernel_names(&self) -> Vec<String> {
        self.inner.kernel_names()
    }
    #[getter]
    fn info_log(&self) -> String {
        self.inner.info_log().to_owned()
    }
    #[getter]
    fn device(&self) -> u32 {
        self.inner.device().ordinal()
    }
    /// Looks up a kernel; its parameters come from the HIR (if `zir` was
    /// given at load) or else from the PTX.
    fn kernel(&self, py: Python<'_>, name: Text) -> PyResult<CudaKernel> {
        guard(|| {
            let sig = match (
                self.sigs.get(name.as_str()),
                self.hir.as_ref().and_then(|m| m.function(&name)),
            ) {
                (Some(s), _) => Some(s.clone()),
                (None, Some(f)) => Some(
                    zc::Signature::from_kernel(self.hir.as_ref().expect("matched"), f).py(py)?,
                ),
                (None, None) => None,
            };
            Ok(CudaKernel::new(self.inner.kernel(&name, sig).py(py)?))
        })
    }
    /// `module.saxpy` is `module.kernel("saxpy")`; a missing kernel is an
    /// AttributeError here, so `hasattr` and `getattr(m, x, default)` work.
    fn __getattr__(&self, py: Python<'_>, name: Text) -> PyResult<CudaKernel> {
        if name.starts_with('_') {
            return Err(pyo3::exceptions::PyAttributeError::new_err(name.0));
        }
        self.kernel(py, name)
            .map_err(|e| pyo3::exceptions::PyAttributeError::new_err(e.to_string()))
    }
}
