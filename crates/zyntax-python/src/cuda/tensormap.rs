//! `zyntax.cuda.TensorMap` (issue 13 item 2): a TMA tensor map built with
//! `cuTensorMapEncodeTiled` from a DeviceArray or any
//! `__cuda_array_interface__` / DLPack tensor, passed by value to a kernel's
//! `tensormap` parameter. The map keeps the tensor's memory alive (and so
//! does a graph that captured a launch with it: the launch keeps the map).

use super::{cuda_from_cuda_array_interface, dlpack_view, type_name, DeviceArray, OrPy};
use crate::checked::Text;
use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use zyntax_cuda as zc;
use zyntax_hir::tensormap::{Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc};
use zyntax_hir::Type;

/// A TMA tensor map over a GPU tensor. Dimensions, strides, box and
/// coordinates are innermost first, as in PTX and the driver.
#[pyclass(frozen, name = "TensorMap", module = "zyntax.cuda")]
pub struct CudaTensorMap {
    pub(crate) inner: zc::TensorMap,
}

fn arg_err(msg: impl Into<String>) -> PyErr {
    ArgumentError::new_err(msg.into())
}

fn choice<T: Copy>(
    what: &str,
    s: &str,
    from: fn(&str) -> Option<T>,
    choices: String,
) -> PyResult<T> {
    from(s).ok_or_else(|| {
        arg_err(format!(
            "TensorMap argument '{what}': unknown value {s:?} (expected one of {choices})"
        ))
    })
}

/// A GPU view of `tensor` (no copy); host arrays are an `ArgumentError`.
fn device_view(py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<DeviceArray> {
    if let Ok(d) = tensor.cast::<DeviceArray>() {
        let d = d.get();
        return Ok(DeviceArray {
            ptr: d.ptr,
            shape: d.shape.clone(),
            strides: d.strides.clone(),
            dtype: d.dtype.clone(),
            device: d.device.clone(),
            owner: d.owner.clone(),
        });
    }
    let dlpack = tensor.hasattr("__dlpack__")? && tensor.hasattr("__dlpack_device__")?;
    // PyTorch's array interface spells bf16 as the opaque 2-byte '<V2' (older
    // versions raise instead): DLPack names the type, so it reads those.
    if let Ok(cai) = tensor.getattr("__cuda_array_interface__") {
        let opaque = cai
            .get_item("typestr")
            .and_then(|t| t.extract::<String>())
            .is_ok_and(|t| t.get(1..2) == Some("V"));
        if !(opaque && dlpack) {
            return cuda_from_cuda_array_interface(py, tensor);
        }
    }
    if dlpack {
        return dlpack_view(py, tensor, "TensorMap argument 'tensor'");
    }
    Err(arg_err(format!(
        "TensorMap argument 'tensor': must be a GPU tensor (DeviceArray, \
         __cuda_array_interface__ or DLPack), got {} (copy host arrays with zyntax.cuda.to_device)",
        type_name(tensor)
    )))
}

#[pymethods]
impl CudaTensorMap {
    /// A tiled tensor map over `tensor` moving boxes of `box` elements
    /// (innermost first). Every field is checked before the driver sees it:
    /// an `ArgumentError` names the bad one.
    #[staticmethod]
    #[pyo3(signature = (tensor, r#box, *, swizzle=Text("none".into()), element_strides=None,
                        interleave=Text("none".into()), oob_fill=Text("zero".into()),
                        l2_promotion=Text("none".into()), dtype=None),
           text_signature = "(tensor, box, *, swizzle='none', element_strides=None, \
                              interleave='none', oob_fill='zero', l2_promotion='none', dtype=None)")]
    #[allow(clippy::too_many_arguments)]
    fn tiled(
        py: Python<'_>,
        tensor: &Bound<'_, PyAny>,
        r#box: Vec<u32>,
        swizzle: Text,
        element_strides: Option<Vec<u32>>,
        interleave: Text,
        oob_fill: Text,
        l2_promotion: Text,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CudaTensorMap> {
        guard(|| {
            let swizzle = choice(
                "swizzle",
                swizzle.as_str(),
                Swizzle::from_name,
                Swizzle::choices(),
            )?;
            let interleave = choice(
                "interleave",
                interleave.as_str(),
                Interleave::from_name,
                Interleave::choices(),
            )?;
            let oob_fill = choice(
                "oob_fill",
                oob_fill.as_str(),
                OobFill::from_name,
                OobFill::choices(),
            )?;
            let l2_promotion = choice(
                "l2_promotion",
                l2_promotion.as_str(),
                L2Promotion::from_name,
                L2Promotion::choices(),
            )?;
            let a = device_view(py, tensor)?;
            let rank = a.shape.len();
            if !(1..=5).contains(&rank) {
                return Err(arg_err(format!(
                    "TensorMap rank: the tensor has {rank} dimensions; a tensor map has 1 to 5"
                )));
            }
            let elem = match dtype {
                Some(t) => match crate::types::to_type(t)? {
                    Type::Scalar(s) => s,
                    other => {
                        return Err(arg_err(format!(
                            "TensorMap argument 'dtype': expected a scalar type, got {other}"
                        )))
                    }
                },
                None => a.dtype.elem.ok_or_else(|| {
                    arg_err(format!(
                        "TensorMap dtype: the tensor's dtype '{}' has no zyntax element type \
                         (pass dtype=, e.g. dtype='bf16')",
                        a.dtype.typestr
                    ))
                })?,
            };
            if elem.size_bytes() as usize != a.dtype.itemsize {
                return Err(arg_err(format!(
                    "TensorMap argument 'dtype': {elem} is {} bytes, the tensor's elements {}",
                    elem.size_bytes(),
                    a.dtype.itemsize
                )));
            }
            // Innermost first; C order when the tensor gives no strides.
            let dims: Vec<u64> = a.shape.iter().rev().map(|&d| d as u64).collect();
            let strides: Vec<isize> = match &a.strides {
                Some(s) => s.iter().rev().copied().collect(),
                None => super::c_strides(&a.shape, a.dtype.itemsize)
                    .into_iter()
                    .rev()
                    .collect(),
            };
            if strides[0] != a.dtype.itemsize as isize && dims[0] > 1 {
                return Err(arg_err(format!(
                    "TensorMap strides[0]: the innermost dimension must be contiguous \
                     (stride {} bytes, elements of {} bytes)",
                    strides[0], a.dtype.itemsize
                )));
            }
            let mut outer = Vec::with_capacity(rank - 1);
            for (k, &s) in strides.iter().enumerate().skip(1) {
                let s = u64::try_from(s).map_err(|_| {
                    arg_err(format!(
                        "TensorMap strides[{k}]: negative stride {s} bytes is not supported"
                    ))
                })?;
                outer.push(s);
            }
            let desc = TensorMapDesc {
                dtype: elem,
                dims,
                strides: outer,
                box_dims: r#box,
                elem_strides: element_strides.unwrap_or_else(|| vec![1; rank]),
                swizzle,
                interleave,
                oob_fill,
                l2_promotion,
            };
            desc.validate(a.ptr).map_err(|e| arg_err(e.to_string()))?;
            let owner: zc::KeepAlive = a.owner.clone();
            let inner = zc::TensorMap::tiled(&a.device, a.ptr, desc, Some(owner)).py(py)?;
            Ok(CudaTensorMap { inner })
        })
    }

    /// Elements per dimension, innermost first.
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.desc().dims)
    }
    /// Byte strides of dimensions 1.. (innermost first).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.desc().strides)
    }
    /// Box extent per dimension, innermost first.
    #[getter(r#box)]
    fn box_dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.desc().box_dims)
    }
    #[getter]
    fn element_strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.desc().elem_strides)
    }
    #[getter]
    fn swizzle(&self) -> &'static str {
        self.inner.desc().swizzle.name()
    }
    #[getter]
    fn oob_fill(&self) -> &'static str {
        self.inner.desc().oob_fill.name()
    }
    /// The element type's `.zir` name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.desc().dtype.name()
    }
    /// Bytes one box moves: what a load completes on its mbarrier.
    #[getter]
    fn box_bytes(&self) -> u64 {
        self.inner.desc().box_bytes()
    }
    /// Bytes one box spans in shared memory: `box_bytes` plus the padding of
    /// rows narrower than the swizzle span (each takes a whole span).
    #[getter]
    fn shared_bytes(&self) -> u64 {
        self.inner.desc().shared_bytes()
    }
    /// The tensor's device address.
    #[getter]
    fn address(&self) -> u64 {
        self.inner.address()
    }
    #[getter]
    fn device(&self) -> u32 {
        self.inner.device()
    }
    /// The 128 encoded bytes (the `CUtensorMap`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, self.inner.bytes())
    }
    fn __repr__(&self) -> String {
        let d = self.inner.desc();
        format!(
            "TensorMap(dtype={}, dims={:?}, box={:?}, swizzle={:?}, device={})",
            d.dtype,
            d.dims,
            d.box_dims,
            d.swizzle.name(),
            self.inner.device()
        )
    }
}
