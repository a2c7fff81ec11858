//! Kernels and their launch path: argument conversion (a fast path for
//! DeviceArrays and Python scalars), launch options, and bound launchers.

use super::{
    consume_capsule, is_device_memory, launch_err, numel, pointer_device, producer_stream,
    read_cai, type_name, wait_foreign_stream, CudaStream, CudaTensorMap, DeviceArray, DlpackTensor,
    Dtype, OrPy, KDL_CUDA, KDL_CUDA_MANAGED,
};
use crate::checked::{Checked, Flag, Is};
use crate::errors::{guard, ArgumentError, LaunchError as PyLaunchError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyTuple, PyType};
use std::ffi::c_void;
use std::sync::Arc;
use zyntax_cuda as zc;
use zyntax_hir::ScalarType;

/// How the Python launch path converts each parameter (computed once per kernel).
#[derive(Clone, Copy)]
enum Conv {
    Pointer,
    Int,
    Float,
    Bool,
    Bytes,
}

/// A kernel: `kernel.launch(grid, block, *args)` or `kernel[grid, block](*args)`.
#[pyclass(frozen, name = "Kernel", module = "zyntax.cuda")]
pub struct CudaKernel {
    pub(crate) inner: zc::Kernel,
    plan: Vec<Conv>,
}

impl CudaKernel {
    pub(super) fn new(inner: zc::Kernel) -> CudaKernel {
        let plan = inner
            .params()
            .iter()
            .map(|p| match p {
                zc::ParamKind::Ptr { .. }
                | zc::ParamKind::Raw {
                    bytes: 8,
                    float: false,
                } => Conv::Pointer,
                zc::ParamKind::Scalar(s) if s.is_float() => Conv::Float,
                zc::ParamKind::Scalar(ScalarType::Bool) => Conv::Bool,
                zc::ParamKind::Scalar(_) => Conv::Int,
                zc::ParamKind::Raw { float: true, .. } => Conv::Float,
                zc::ParamKind::Raw { .. } => Conv::Int,
                zc::ParamKind::Bytes(_) | zc::ParamKind::TensorMap => Conv::Bytes,
            })
            .collect();
        CudaKernel { inner, plan }
    }

    /// Converts and encodes all arguments, then launches. `keep` holds
    /// DLPack tensors until the launch is queued; when `captured` is a
    /// stream that is capturing, the arguments' owners move into the graph.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn launch_impl(
        &self,
        py: Python<'_>,
        cfg: &zc::LaunchConfig,
        opts: &zc::LaunchOptions,
        stream: zc::CUstream,
        captured: Option<&zc::Stream>,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<()> {
        let k = &self.inner;
        let n = args.len();
        if let Err(e) = k.check_arg_count(n) {
            return Err(PyLaunchError::new_err(e.to_string()));
        }
        let mut keep: Vec<DlpackTensor> = Vec::new();
        let r = launch_slots(k, cfg, opts, stream, |slots| {
            for (i, a) in args.iter().enumerate() {
                let kind = &k.params()[i];
                let arg = fast_arg(py, k, i, self.plan[i], kind, &a, &mut keep)?;
                k.encode_arg(i, arg, slots)
                    .map_err(|e| PyLaunchError::new_err(e.to_string()))?;
            }
            Ok(())
        })?;
        if let Some(s) = captured.filter(|s| r.is_ok() && s.capture_active()) {
            keep_captured(s, args.iter(), keep);
        } else {
            drop(keep);
        }
        r.py(py)
    }

    fn config(
        &self,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        shared_mem: Option<Checked<u32>>,
    ) -> PyResult<zc::LaunchConfig> {
        Ok(zc::LaunchConfig {
            grid: dims(grid, "grid")?,
            block: dims(block, "block")?,
            shared_bytes: shared_mem.map_or(self.inner.signature().shared_bytes, |c| c.0),
        })
    }
}

/// Encodes a launch's parameters with `encode` (which fills the 8-byte
/// slots of every parameter, in the kernel's slot layout) into a stack
/// buffer and queues the kernel on `stream`. The outer error is the
/// encoder's (nothing was launched), the inner one the driver's.
#[inline]
pub(super) fn launch_slots(
    k: &zc::Kernel,
    cfg: &zc::LaunchConfig,
    opts: &zc::LaunchOptions,
    stream: zc::CUstream,
    encode: impl FnOnce(&mut [u64]) -> PyResult<()>,
) -> PyResult<zc::Result<()>> {
    let n = k.params().len();
    let (total, offsets) = k.slot_layout();
    let mut stack = [0u64; zc::kernel::STACK_SLOTS];
    let mut heap;
    let slots: &mut [u64] = if total <= zc::kernel::STACK_SLOTS {
        &mut stack[..]
    } else {
        heap = vec![0u64; total];
        &mut heap[..]
    };
    encode(slots)?;
    let mut ptrs_stack = [std::ptr::null_mut::<c_void>(); zc::kernel::STACK_SLOTS];
    let mut ptrs_heap;
    let ptrs: &mut [*mut c_void] = if n <= zc::kernel::STACK_SLOTS {
        &mut ptrs_stack[..]
    } else {
        ptrs_heap = vec![std::ptr::null_mut(); n];
        &mut ptrs_heap[..]
    };
    let base = slots.as_mut_ptr();
    for (p, off) in ptrs.iter_mut().zip(offsets) {
        // SAFETY: offsets are within the slot buffer (same layout).
        *p = unsafe { base.add(*off) }.cast();
    }
    // SAFETY: the encoder checked every argument against the kernel's
    // parameters; the encoded values live on this stack frame for the call;
    // memory safety of what the kernel does with its pointers is the
    // caller's contract (documented in zyntax.cuda).
    Ok(unsafe { k.launch_raw_with(cfg, opts, stream, ptrs.as_mut_ptr()) })
}

/// The owner that keeps the memory behind a kernel or copy argument alive:
/// a DeviceArray's buffer (or foreign producer), any other non-scalar object
/// itself (a tensor exporting `__cuda_array_interface__` or DLPack, a host
/// array). Scalars and raw integer addresses own nothing.
pub(super) fn owner_of(a: &Bound<'_, PyAny>) -> Option<zc::KeepAlive> {
    if let Ok(d) = a.cast::<DeviceArray>() {
        return Some(d.get().owner.clone() as zc::KeepAlive);
    }
    if a.is_instance_of::<PyInt>() || a.is_instance_of::<PyFloat>() || a.is_none() {
        return None;
    }
    Some(Arc::new(a.clone().unbind()))
}

/// Registers the owners of `args` (and of imported DLPack tensors) with a
/// capturing stream: the captured graph then keeps them alive.
pub(super) fn keep_captured<'py>(
    s: &zc::Stream,
    args: impl Iterator<Item = Bound<'py, PyAny>>,
    dlpack: Vec<DlpackTensor>,
) {
    for a in args {
        if let Some(o) = owner_of(&a) {
            s.keep_alive(o);
        }
    }
    for t in dlpack {
        s.keep_alive(Arc::new(t));
    }
}

fn stream_for(
    py: Python<'_>,
    k: &zc::Kernel,
    s: Option<&Bound<'_, CudaStream>>,
) -> PyResult<zc::CUstream> {
    match s {
        None => Ok(std::ptr::null_mut()),
        Some(s) => {
            let s = &s.get().inner;
            if s.device() != k.device() {
                return Err(launch_err(
                    k.name(),
                    format!(
                        "stream is on device {}, the kernel on device {}",
                        s.device().ordinal(),
                        k.device().ordinal()
                    ),
                ));
            }
            let _ = py;
            Ok(s.raw())
        }
    }
}

/// Grid or block dimensions: an int or a tuple/list of 1 to 3 ints
/// (`ArgumentError` naming `what` otherwise).
#[inline]
pub(crate) fn dims(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<[u32; 3]> {
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        if let Ok(v) = i.extract::<u32>() {
            return Ok([v, 1, 1]);
        }
    }
    // Zero passes: the launch check reports it against the device's limits.
    crate::checked::dim3(obj, what, 0)
}

/// The launch hot path: DeviceArray and Python scalars first.
#[inline]
fn fast_arg<'a>(
    py: Python<'_>,
    k: &zc::Kernel,
    i: usize,
    conv: Conv,
    kind: &zc::ParamKind,
    a: &'a Bound<'_, PyAny>,
    keep: &mut Vec<DlpackTensor>,
) -> PyResult<zc::KernelArg<'a>> {
    match conv {
        Conv::Pointer => {
            if let Ok(d) = a.cast::<DeviceArray>() {
                let d = d.get();
                return Ok(zc::KernelArg::Ptr {
                    ptr: d.ptr,
                    device: Some(d.device.ordinal()),
                    elem: d.dtype.elem,
                });
            }
            // A raw device address (what prepared library calls pass): the
            // slow path's protocol probes would cost microseconds per argument.
            if a.is_exact_instance_of::<PyInt>() {
                if let Ok(v) = a.extract::<u64>() {
                    return Ok(zc::KernelArg::Int(i128::from(v)));
                }
            }
        }
        Conv::Float => {
            if let Ok(f) = a.cast_exact::<PyFloat>() {
                return Ok(zc::KernelArg::Float(f.value()));
            }
        }
        Conv::Int => {
            if a.is_exact_instance_of::<PyInt>() {
                if let Ok(v) = a.extract::<i64>() {
                    return Ok(zc::KernelArg::Int(i128::from(v)));
                }
            }
        }
        Conv::Bool | Conv::Bytes => {}
    }
    convert_arg(py, k, i, kind, a, keep)
}

/// Converts any supported Python object to a kernel argument (slow path).
pub(super) fn convert_arg<'a>(
    py: Python<'_>,
    k: &zc::Kernel,
    i: usize,
    kind: &zc::ParamKind,
    a: &'a Bound<'_, PyAny>,
    keep: &mut Vec<DlpackTensor>,
) -> PyResult<zc::KernelArg<'a>> {
    let bad = |msg: String| launch_err(k.name(), format!("argument #{i} ({kind}): {msg}"));
    let wants_pointer = matches!(
        kind,
        zc::ParamKind::Ptr { .. }
            | zc::ParamKind::Raw {
                bytes: 8,
                float: false
            }
    );
    if let Ok(d) = a.cast::<DeviceArray>() {
        let d = d.get();
        return Ok(zc::KernelArg::Ptr {
            ptr: d.ptr,
            device: Some(d.device.ordinal()),
            elem: d.dtype.elem,
        });
    }
    if let Ok(b) = a.cast::<PyBool>() {
        return Ok(zc::KernelArg::Bool(b.is_true()));
    }
    if matches!(kind, zc::ParamKind::Scalar(ScalarType::Bool)) {
        if let Ok(b) = a.extract::<bool>() {
            return Ok(zc::KernelArg::Bool(b));
        }
    }
    if let Ok(t) = a.cast::<CudaTensorMap>() {
        return Ok(zc::KernelArg::TensorMap(&t.get().inner));
    }
    if let zc::ParamKind::Bytes(_) = kind {
        if let Ok(b) = a.cast::<PyBytes>() {
            return Ok(zc::KernelArg::Bytes(b.as_bytes()));
        }
        return Err(bad(format!("expected bytes, got {}", type_name(a))));
    }
    if wants_pointer {
        if let Some(arg) = torch_arg(py, k, a, &bad)? {
            return Ok(arg);
        }
        if let Ok(cai) = a.getattr("__cuda_array_interface__") {
            let (ptr, shape, _strides, dtype, stream) = read_cai(&cai)?;
            let dev = if numel(&shape)? == 0 {
                None
            } else {
                match pointer_device(ptr) {
                    Some(d) if is_device_memory(ptr) => Some(d),
                    _ => {
                        return Err(bad(format!(
                            "{} exposes host memory; device memory is needed",
                            type_name(a)
                        )))
                    }
                }
            };
            if let Some(s) = producer_stream(py, a, stream, k.device().ordinal())? {
                wait_foreign_stream(py, k.device(), s)?;
            }
            return Ok(zc::KernelArg::Ptr {
                ptr,
                device: dev,
                elem: dtype.elem,
            });
        }
        if a.hasattr("__dlpack_device__")? && a.hasattr("__dlpack__")? {
            let (dt, id): (i32, i32) = a.call_method0("__dlpack_device__")?.extract()?;
            if !matches!(dt, KDL_CUDA | KDL_CUDA_MANAGED) {
                return Err(bad(format!(
                    "{} is a host array (DLPack device type {dt}); device memory is needed \
                     (copy it with zyntax.cuda.to_device)",
                    type_name(a)
                )));
            }
            let kwargs = PyDict::new(py);
            kwargs.set_item("stream", 1)?;
            let cap = a.call_method("__dlpack__", (), Some(&kwargs))?;
            let t = consume_capsule(&cap)?;
            // SAFETY: valid managed tensor owned by `t`.
            let (ptr, dtype) = unsafe {
                let dl = &(*t.0).dl_tensor;
                (
                    dl.data as u64 + dl.byte_offset,
                    Dtype::from_dlpack(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)?,
                )
            };
            keep.push(t);
            return Ok(zc::KernelArg::Ptr {
                ptr,
                device: u32::try_from(id).ok(),
                elem: dtype.elem,
            });
        }
        if a.hasattr("__array_interface__")? || a.hasattr("__array__")? {
            return Err(bad(format!(
                "{} is a host array; device memory is needed (copy it with zyntax.cuda.to_device)",
                type_name(a)
            )));
        }
        if matches!(kind, zc::ParamKind::Ptr { .. }) {
            if let Ok(v) = a.cast::<PyInt>() {
                let v: u64 = v
                    .extract()
                    .map_err(|_| bad("not a device address".to_owned()))?;
                return Ok(zc::KernelArg::Int(i128::from(v)));
            }
            return Err(bad(format!("expected device memory, got {}", type_name(a))));
        }
    }
    if a.cast::<PyFloat>().is_ok() {
        return Ok(zc::KernelArg::Float(a.extract::<f64>()?));
    }
    if let Ok(v) = a.extract::<i128>() {
        return Ok(zc::KernelArg::Int(v));
    }
    if let Ok(v) = a.extract::<f64>() {
        return Ok(zc::KernelArg::Float(v));
    }
    Err(bad(format!("cannot pass {} to the kernel", type_name(a))))
}

/// `torch.Tensor` and its dtypes' element types, read once the program has
/// imported torch (never imported here).
struct TorchTypes {
    tensor: Py<PyType>,
    dtypes: Vec<(Py<PyAny>, ScalarType)>,
}

fn torch_types(py: Python<'_>) -> PyResult<Option<&'static TorchTypes>> {
    static TORCH: PyOnceLock<TorchTypes> = PyOnceLock::new();
    if let Some(t) = TORCH.get(py) {
        return Ok(Some(t));
    }
    let Ok(torch) = py.import("sys")?.getattr("modules")?.get_item("torch") else {
        return Ok(None);
    };
    let Ok(tensor) = torch
        .getattr("Tensor")
        .and_then(|t| Ok(t.cast_into::<PyType>()?))
    else {
        return Ok(None);
    };
    use ScalarType as S;
    let names = [
        ("float32", S::F32),
        ("float64", S::F64),
        ("float16", S::F16),
        ("bfloat16", S::BF16),
        ("int8", S::I8),
        ("int16", S::I16),
        ("int32", S::I32),
        ("int64", S::I64),
        ("uint8", S::U8),
        ("uint16", S::U16),
        ("uint32", S::U32),
        ("uint64", S::U64),
        ("bool", S::Bool),
    ];
    let dtypes = names
        .iter()
        .filter_map(|(n, s)| torch.getattr(*n).ok().map(|d| (d.unbind(), *s)))
        .collect();
    let got = TORCH.get_or_init(py, || TorchTypes {
        tensor: tensor.unbind(),
        dtypes,
    });
    Ok(Some(got))
}

/// A PyTorch tensor as a pointer argument, read through `data_ptr()`,
/// `get_device()` and `dtype` (not its `__cuda_array_interface__` dict,
/// which torch builds in Python per access); like that path, the legacy
/// default stream first waits for torch's current stream. None for
/// anything that is not a torch tensor.
fn torch_arg<'a>(
    py: Python<'_>,
    k: &zc::Kernel,
    a: &Bound<'_, PyAny>,
    bad: &dyn Fn(String) -> PyErr,
) -> PyResult<Option<zc::KernelArg<'a>>> {
    let Some(tt) = torch_types(py)? else {
        return Ok(None);
    };
    if !a.is_instance(tt.tensor.bind(py))? {
        return Ok(None);
    }
    let dev: i64 = a.call_method0(intern!(py, "get_device"))?.extract()?;
    if dev < 0 {
        return Err(bad(format!(
            "{} is a host tensor; device memory is needed (tensor.cuda())",
            type_name(a)
        )));
    }
    let ptr: u64 = a.call_method0(intern!(py, "data_ptr"))?.extract()?;
    let dtype = a.getattr(intern!(py, "dtype"))?;
    let elem = tt
        .dtypes
        .iter()
        .find(|(d, _)| d.bind(py).is(&dtype))
        .map(|(_, s)| *s);
    if let Some(s) = producer_stream(py, a, None, k.device().ordinal())? {
        wait_foreign_stream(py, k.device(), s)?;
    }
    Ok(Some(zc::KernelArg::Ptr {
        ptr,
        device: Some(dev as u32),
        elem,
    }))
}

#[pymethods]
impl CudaKernel {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    #[getter]
    fn num_params(&self) -> usize {
        self.inner.params().len()
    }
    /// Parameter kinds as text (`ptr<f32>`, `u32`, `f32` from PTX as `f32`/`b32`...).
    #[getter]
    fn param_kinds(&self) -> Vec<String> {
        self.inner
            .params()
            .iter()
            .map(ToString::to_string)
            .collect()
    }
    /// Declared launch bounds, if any.
    #[getter]
    fn max_threads(&self) -> Option<(u32, u32, u32)> {
        self.inner
            .signature()
            .max_threads
            .map(|m| (m[0], m[1], m[2]))
    }
    /// Most threads per block this kernel can be launched with on its device.
    #[getter]
    fn max_threads_per_block(&self) -> u32 {
        self.inner.max_block_threads()
    }
    #[getter]
    fn num_regs(&self) -> u32 {
        self.inner.attrs().num_regs
    }
    #[getter]
    fn static_shared_bytes(&self) -> u32 {
        self.inner.attrs().static_shared_bytes
    }
    #[getter]
    fn local_bytes(&self) -> u32 {
        self.inner.attrs().local_bytes
    }
    #[getter]
    fn device(&self) -> u32 {
        self.inner.device().ordinal()
    }

    /// Validates and queues one launch; returns immediately. `cluster`
    /// (blocks per cluster), `pdl` (programmatic dependent launch) and
    /// `cooperative` (all blocks co-resident, for `grid_sync`) launch through
    /// `cuLaunchKernelEx` with the matching attributes.
    #[pyo3(signature = (grid, block, *args, shared_mem=None, stream=None, cluster=None,
        pdl=Flag(false), cooperative=Flag(false)),
        text_signature = "($self, grid, block, *args, shared_mem=None, stream=None, cluster=None, \
        pdl=False, cooperative=False)")]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        shared_mem: Option<Checked<u32>>,
        stream: Option<Is<'_, CudaStream>>,
        cluster: Option<&Bound<'_, PyAny>>,
        pdl: Flag,
        cooperative: Flag,
    ) -> PyResult<()> {
        guard(|| {
            let cfg = self.config(grid, block, shared_mem)?;
            let opts = launch_options(cluster, pdl.0, cooperative.0)?;
            self.inner.check_config(&cfg).py(py)?;
            self.inner.check_options(&cfg, &opts).py(py)?;
            let stream = stream.as_deref();
            let s = stream_for(py, &self.inner, stream)?;
            self.launch_impl(py, &cfg, &opts, s, stream.map(|s| &s.get().inner), args)
        })
    }

    /// A launcher with a validated configuration: `launcher(*args)` only
    /// converts arguments and launches (the fastest path).
    #[pyo3(signature = (grid, block, shared_mem=None, stream=None, *, cluster=None,
        pdl=Flag(false), cooperative=Flag(false)),
        text_signature = "($self, grid, block, shared_mem=None, stream=None, *, cluster=None, \
        pdl=False, cooperative=False)")]
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        slf: &Bound<'_, Self>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        shared_mem: Option<Checked<u32>>,
        stream: Option<Is<'_, CudaStream>>,
        cluster: Option<&Bound<'_, PyAny>>,
        pdl: Flag,
        cooperative: Flag,
    ) -> PyResult<CudaLauncher> {
        let py = slf.py();
        let stream: Option<Py<CudaStream>> = stream.map(|s| s.0.unbind());
        guard(|| {
            let me = slf.get();
            let cfg = me.config(grid, block, shared_mem)?;
            let opts = launch_options(cluster, pdl.0, cooperative.0)?;
            me.inner.check_config(&cfg).py(py)?;
            me.inner.check_options(&cfg, &opts).py(py)?;
            let raw = stream_for(py, &me.inner, stream.as_ref().map(|s| s.bind(py)))?;
            Ok(CudaLauncher {
                kernel: slf.clone().unbind(),
                cfg,
                opts,
                stream_raw: raw as usize,
                _stream: stream,
            })
        })
    }

    /// `kernel[grid, block]` or `kernel[grid, block, shared_mem]` or
    /// `kernel[grid, block, shared_mem, stream]` gives a launcher.
    fn __getitem__(slf: &Bound<'_, Self>, key: &Bound<'_, PyTuple>) -> PyResult<CudaLauncher> {
        let n = key.len();
        if !(2..=4).contains(&n) {
            return Err(ArgumentError::new_err(
                "use kernel[grid, block] or kernel[grid, block, shared_mem(, stream)]",
            ));
        }
        let shared = if n >= 3 {
            let s = key.get_item(2)?;
            if s.is_none() {
                None
            } else {
                Some(Checked(crate::checked::arg::<u32>(&s, "shared_mem")?))
            }
        } else {
            None
        };
        let stream = if n == 4 {
            let s = key.get_item(3)?;
            if s.is_none() {
                None
            } else {
                Some(s.extract::<Is<'_, CudaStream>>().map_err(|e| {
                    ArgumentError::new_err(format!("kernel[grid, block, shared_mem, stream]: {e}"))
                })?)
            }
        } else {
            None
        };
        CudaKernel::prepare(
            slf,
            &key.get_item(0)?,
            &key.get_item(1)?,
            shared,
            stream,
            None,
            Flag(false),
            Flag(false),
        )
    }

    /// Clusters of `cluster` blocks of `block` threads with `shared_mem`
    /// dynamic shared bytes that can be resident at once (0: none fits;
    /// the grid of a persistent cluster kernel). Raises the kernel's dynamic
    /// shared memory limit first when `shared_mem` exceeds 48 KiB.
    #[pyo3(signature = (block, cluster, shared_mem=None))]
    fn max_active_clusters(
        &self,
        py: Python<'_>,
        block: &Bound<'_, PyAny>,
        cluster: &Bound<'_, PyAny>,
        shared_mem: Option<Checked<u32>>,
    ) -> PyResult<u32> {
        let shared = shared_mem.map_or(0, |s| s.0);
        let block = crate::checked::dim3(block, "block", 1)?;
        let c = crate::checked::dim3(cluster, "cluster", 1)?;
        let cfg = zc::LaunchConfig {
            grid: c,
            block,
            shared_bytes: shared,
        };
        guard(|| {
            if shared > 48 * 1024 {
                self.inner.set_max_dynamic_shared(shared).py(py)?;
            }
            self.inner.max_active_clusters(&cfg, c).py(py)
        })
    }

    /// Raises the dynamic shared memory this kernel may use (done
    /// automatically by launches that ask for more than 48 KiB).
    fn set_max_dynamic_shared(&self, py: Python<'_>, nbytes: Checked<u32>) -> PyResult<()> {
        guard(|| self.inner.set_max_dynamic_shared(nbytes.0).py(py))
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// The launch options of `cluster=`, `pdl=`, `cooperative=`.
fn launch_options(
    cluster: Option<&Bound<'_, PyAny>>,
    pdl: bool,
    cooperative: bool,
) -> PyResult<zc::LaunchOptions> {
    Ok(zc::LaunchOptions {
        cluster: cluster
            .filter(|c| !c.is_none())
            .map(|c| crate::checked::dim3(c, "cluster", 1))
            .transpose()?,
        pdl,
        cooperative,
    })
}

/// A kernel bound to a validated launch configuration.
#[pyclass(frozen, name = "Launcher", module = "zyntax.cuda")]
pub struct CudaLauncher {
    pub(super) kernel: Py<CudaKernel>,
    pub(super) cfg: zc::LaunchConfig,
    pub(super) opts: zc::LaunchOptions,
    pub(super) stream_raw: usize,
    /// Keeps the stream alive as long as the launcher.
    pub(super) _stream: Option<Py<CudaStream>>,
}

#[pymethods]
impl CudaLauncher {
    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        guard(|| {
            self.kernel.get().launch_impl(
                py,
                &self.cfg,
                &self.opts,
                self.stream_raw as zc::CUstream,
                self._stream.as_ref().map(|s| &s.get().inner),
                args,
            )
        })
    }
    #[getter]
    fn grid(&self) -> (u32, u32, u32) {
        (self.cfg.grid[0], self.cfg.grid[1], self.cfg.grid[2])
    }
    #[getter]
    fn block(&self) -> (u32, u32, u32) {
        (self.cfg.block[0], self.cfg.block[1], self.cfg.block[2])
    }
    #[getter]
    fn shared_mem(&self) -> u32 {
        self.cfg.shared_bytes
    }
}
