//! Python bindings of the CUDA runtime (`zyntax-cuda`), re-exported by
//! `python/zyntax/cuda.py`.
//!
//! Everything here is registered on `zyntax._native` with a `Cuda` prefix
//! (`CudaDevice`, `CudaKernel`, ...) or `cuda_` for functions, so the names
//! cannot collide with the HIR bindings; `zyntax.cuda` gives them their short
//! names. The launch path (`CudaKernel.launch`, `CudaLauncher.__call__`) is
//! kept lean: the parameter layout is computed once per kernel, arguments are
//! encoded into a stack buffer, and nothing is allocated for plain scalars
//! and `DeviceArray`s.

use crate::checked::{self, Checked, Flag, Is, Text};
use crate::errors::{guard, ArgumentError, CudaError as PyCudaError, LaunchError as PyLaunchError};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};
use std::ffi::c_void;
use std::sync::Arc;
use zyntax_cuda as zc;
use zyntax_hir::ScalarType;

// Tensor maps for TMA (issue 13 item 2).
mod tensormap;
pub use tensormap::CudaTensorMap;

// ---------------------------------------------------------------- errors

pub(crate) fn err(py: Python<'_>, e: zc::CudaError) -> PyErr {
    let (kind, name) = match &e {
        zc::CudaError::Launch(l) => return PyLaunchError::new_err(l.to_string()),
        zc::CudaError::NoDriver { .. } => ("no_driver", None),
        zc::CudaError::NoDevice { .. } => ("no_device", None),
        zc::CudaError::Driver { name, .. } => ("driver", Some(name.clone())),
        zc::CudaError::Jit { name, .. } => ("jit", Some(name.clone())),
        zc::CudaError::KernelNotFound { .. } => ("kernel_not_found", None),
        zc::CudaError::OutOfMemory { .. } => ("out_of_memory", None),
        zc::CudaError::Invalid(_) => ("invalid", None),
        zc::CudaError::Binding { .. } => ("binding", None),
    };
    let pe = PyCudaError::new_err(e.to_string());
    let v = pe.value(py);
    // Best effort: the message carries the same information.
    let _ = v.setattr("kind", kind);
    let _ = v.setattr("driver_error", name);
    if let zc::CudaError::Jit { log, .. } = &e {
        let _ = v.setattr("log", log.clone());
    }
    pe
}

fn launch_err(kernel: &str, msg: impl Into<String>) -> PyErr {
    PyLaunchError::new_err(zc::LaunchError::new(kernel, msg).to_string())
}

pub(crate) trait OrPy<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}
impl<T> OrPy<T> for zc::Result<T> {
    #[inline]
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| err(py, e))
    }
}

pub(crate) fn device(py: Python<'_>, ordinal: u32) -> PyResult<zc::Device> {
    zc::Device::get(ordinal).py(py)
}

// ---------------------------------------------------------------- dtypes

/// An element type as numpy's array-interface `typestr` spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dtype {
    typestr: String,
    itemsize: usize,
    /// The HIR scalar it corresponds to (for checking pointer arguments).
    pub(crate) elem: Option<ScalarType>,
}

impl Dtype {
    fn parse(typestr: &str) -> PyResult<Dtype> {
        let bad = || ArgumentError::new_err(format!("unsupported dtype '{typestr}'"));
        let mut chars = typestr.chars();
        let order = chars.next().ok_or_else(bad)?;
        let kind = chars.next().ok_or_else(bad)?;
        let itemsize: usize = chars.as_str().parse().map_err(|_| bad())?;
        if order == '>' && itemsize > 1 {
            return Err(ArgumentError::new_err(format!(
                "big-endian dtype '{typestr}' cannot be used on the GPU"
            )));
        }
        if itemsize == 0 {
            return Err(bad());
        }
        use ScalarType as S;
        let elem = match (kind, itemsize) {
            ('b', 1) => Some(S::Bool),
            ('i', 1) => Some(S::I8),
            ('i', 2) => Some(S::I16),
            ('i', 4) => Some(S::I32),
            ('i', 8) => Some(S::I64),
            ('u', 1) => Some(S::U8),
            ('u', 2) => Some(S::U16),
            ('u', 4) => Some(S::U32),
            ('u', 8) => Some(S::U64),
            ('f', 2) => Some(S::F16),
            ('f', 4) => Some(S::F32),
            ('f', 8) => Some(S::F64),
            // ml_dtypes.bfloat16 and other 2-byte opaque types: unchecked.
            _ => None,
        };
        Ok(Dtype {
            typestr: typestr.to_owned(),
            itemsize,
            elem,
        })
    }

    /// DLPack (code, bits) of this dtype.
    fn dlpack(&self) -> PyResult<(u8, u8)> {
        let bits = (self.itemsize * 8) as u8;
        let kind = self.typestr.chars().nth(1).unwrap_or('?');
        Ok(match kind {
            'i' => (0, bits),
            'u' => (1, bits),
            'f' => (2, bits),
            'V' if self.itemsize == 2 => (4, 16), // bfloat16
            'c' => (5, bits),
            'b' => (6, 8),
            _ => {
                return Err(ArgumentError::new_err(format!(
                    "dtype '{}' has no DLPack equivalent",
                    self.typestr
                )))
            }
        })
    }

    fn from_dlpack(code: u8, bits: u8, lanes: u16) -> PyResult<Dtype> {
        if lanes != 1 {
            return Err(ArgumentError::new_err(
                "DLPack tensors with vector lanes are not supported",
            ));
        }
        let n = usize::from(bits / 8);
        let ts = match code {
            0 => format!("<i{n}"),
            1 => format!("<u{n}"),
            2 => format!("<f{n}"),
            4 if bits == 16 => "<V2".to_owned(),
            5 => format!("<c{n}"),
            6 => "|b1".to_owned(),
            _ => {
                return Err(ArgumentError::new_err(format!(
                    "unsupported DLPack dtype (code {code}, {bits} bits)"
                )))
            }
        };
        let mut d = Dtype::parse(&ts)?;
        if code == 4 {
            d.elem = Some(ScalarType::BF16);
        }
        Ok(d)
    }
}

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NP: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NP.get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// numpy's canonical typestr of anything `numpy.dtype()` accepts.
pub(crate) fn normalize_dtype(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<Dtype> {
    if let Ok(s) = dtype.cast::<PyString>() {
        let s = s.to_str()?;
        if s == "bfloat16" || s == "bf16" {
            let mut d = Dtype::parse("<V2")?;
            d.elem = Some(ScalarType::BF16);
            return Ok(d);
        }
    }
    let d = numpy(py)?.getattr("dtype")?.call1((dtype,))?;
    let ts: String = d.getattr("str")?.extract()?;
    let mut out = Dtype::parse(&ts)?;
    if d.getattr("name")?.extract::<String>()? == "bfloat16" {
        out.elem = Some(ScalarType::BF16);
    }
    Ok(out)
}

// ---------------------------------------------------------------- DLPack ABI

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

const KDL_CPU: i32 = 1;
const KDL_CUDA: i32 = 2;
const KDL_CUDA_HOST: i32 = 3;
const KDL_CUDA_MANAGED: i32 = 13;

/// What we export: the managed tensor first, so a pointer to it is a pointer
/// to the whole context.
#[repr(C)]
struct ExportCtx {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
    _owner: Arc<Owner>,
}

unsafe extern "C" fn export_deleter(p: *mut DLManagedTensor) {
    if !p.is_null() {
        // SAFETY: `p` is the first field of a boxed ExportCtx we leaked in `__dlpack__`;
        // the protocol calls the deleter exactly once.
        drop(unsafe { Box::from_raw(p.cast::<ExportCtx>()) });
    }
}

const DLTENSOR: &std::ffi::CStr = c"dltensor";
const USED_DLTENSOR: &std::ffi::CStr = c"used_dltensor";

unsafe extern "C" fn capsule_destructor(cap: *mut ffi::PyObject) {
    // SAFETY: called by CPython with a live capsule. A capsule still named
    // "dltensor" was never consumed, so its tensor is still ours to delete.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, DLTENSOR.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(cap, DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
            if !p.is_null() {
                if let Some(d) = (*p).deleter {
                    d(p);
                }
            }
        }
    }
}

/// A consumed DLPack tensor; calls the producer's deleter when dropped.
struct DlpackTensor(*mut DLManagedTensor);
// SAFETY: the producer's deleter may be called from any thread (DLPack contract).
unsafe impl Send for DlpackTensor {}
unsafe impl Sync for DlpackTensor {}
impl Drop for DlpackTensor {
    fn drop(&mut self) {
        // SAFETY: we own the managed tensor since we renamed its capsule.
        unsafe {
            if let Some(d) = (*self.0).deleter {
                d(self.0);
            }
        }
    }
}

/// Takes ownership of the tensor in a `__dlpack__` capsule.
fn consume_capsule(cap: &Bound<'_, PyAny>) -> PyResult<DlpackTensor> {
    // SAFETY: checks the capsule type and name before reading the pointer; the
    // rename marks it consumed so its destructor no longer deletes the tensor.
    unsafe {
        if ffi::PyCapsule_IsValid(cap.as_ptr(), DLTENSOR.as_ptr()) != 1 {
            return Err(ArgumentError::new_err(
                "__dlpack__() did not return an unconsumed 'dltensor' capsule",
            ));
        }
        let p =
            ffi::PyCapsule_GetPointer(cap.as_ptr(), DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
        if p.is_null() {
            return Err(PyErr::fetch(cap.py()));
        }
        if ffi::PyCapsule_SetName(cap.as_ptr(), USED_DLTENSOR.as_ptr()) != 0 {
            return Err(PyErr::fetch(cap.py()));
        }
        Ok(DlpackTensor(p))
    }
}

// ---------------------------------------------------------------- DeviceArray

/// What keeps a DeviceArray's memory alive.
enum Owner {
    Pool(#[allow(dead_code)] zc::DeviceBuffer),
    /// A foreign object exporting `__cuda_array_interface__`.
    Foreign(#[allow(dead_code)] Py<PyAny>),
    Dlpack(#[allow(dead_code)] DlpackTensor),
    Managed(zc::ManagedBuffer),
    /// A registered host array: the registration is dropped (unregistered)
    /// before the array it refers to.
    Registered(
        #[allow(dead_code)] zc::HostRegistration,
        #[allow(dead_code)] Py<PyAny>,
    ),
}

/// An n-dimensional array in device memory.
#[pyclass(frozen, name = "DeviceArray", module = "zyntax.cuda")]
pub struct DeviceArray {
    ptr: u64,
    shape: Vec<usize>,
    /// Byte strides; `None` means C-contiguous.
    strides: Option<Vec<isize>>,
    dtype: Dtype,
    device: zc::Device,
    owner: Arc<Owner>,
}

fn c_strides(shape: &[usize], itemsize: usize) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = itemsize as isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i].max(1) as isize;
    }
    s
}

fn numel(shape: &[usize]) -> PyResult<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| ArgumentError::new_err("argument 'shape': the element count overflows"))
}

/// An integer or a sequence of integers, each a checked `usize` (a negative,
/// huge, `float` or `bool` dimension is an `ArgumentError` naming `shape`).
fn parse_shape(obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let text = obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>();
    match obj.try_iter() {
        Ok(items) if !text => items
            .map(|d| checked::index::<usize>(&d?, "shape"))
            .collect(),
        _ => Ok(vec![checked::index::<usize>(obj, "shape")?]),
    }
}

impl DeviceArray {
    fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.itemsize
    }
    fn is_c_contiguous(&self) -> bool {
        match &self.strides {
            None => true,
            Some(s) => {
                numel(&self.shape).is_ok_and(|n| n <= 1)
                    || *s == c_strides(&self.shape, self.dtype.itemsize)
            }
        }
    }
    fn require_contiguous(&self, what: &str) -> PyResult<()> {
        if self.is_c_contiguous() {
            Ok(())
        } else {
            Err(ArgumentError::new_err(format!(
                "{what} needs a C-contiguous DeviceArray (this one has strides {:?})",
                self.strides
            )))
        }
    }
    /// The array as a program binding (its owner keeps the memory alive).
    pub(crate) fn binding(&self) -> zc::Binding {
        zc::Binding {
            ptr: self.ptr,
            shape: self.shape.clone(),
            elem: self.dtype.elem,
            device: self.device.ordinal(),
            strides: self.strides.clone(),
            owner: self.owner.clone(),
        }
    }

    /// While `stream` captures, the graph keeps this array's memory (and
    /// `other`, the copy's other side) alive.
    fn keep_in_capture(&self, stream: Option<&zc::Stream>, other: Option<zc::KeepAlive>) {
        if let Some(s) = stream.filter(|s| s.capture_active()) {
            s.keep_alive(self.owner.clone());
            if let Some(o) = other {
                s.keep_alive(o);
            }
        }
    }
    fn new_pool(shape: Vec<usize>, dtype: Dtype, buf: zc::DeviceBuffer) -> DeviceArray {
        DeviceArray {
            ptr: buf.ptr(),
            shape,
            strides: None,
            dtype,
            device: buf.device().clone(),
            owner: Arc::new(Owner::Pool(buf)),
        }
    }
}

/// Host memory as numpy's `__array_interface__` describes it.
struct HostView {
    ptr: usize,
    shape: Vec<usize>,
    dtype: Dtype,
    readonly: bool,
}

fn host_view(obj: &Bound<'_, PyAny>) -> PyResult<HostView> {
    let ai = obj.getattr("__array_interface__").map_err(|_| {
        ArgumentError::new_err(format!(
            "expected a numpy array (an object with __array_interface__), got {}",
            type_name(obj)
        ))
    })?;
    let ai = ai.cast::<PyDict>()?;
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        ai.get_item(k)?
            .ok_or_else(|| ArgumentError::new_err(format!("__array_interface__ has no '{k}'")))
    };
    let shape: Vec<usize> = get("shape")?.extract()?;
    let dtype = Dtype::parse(&get("typestr")?.extract::<String>()?)?;
    let (ptr, readonly): (usize, bool) = get("data")?.extract().map_err(|_| {
        ArgumentError::new_err("host array must expose its data pointer (not a buffer object)")
    })?;
    if let Some(s) = ai.get_item("strides")? {
        if !s.is_none() {
            let s: Vec<isize> = s.extract()?;
            if numel(&shape)? > 1 && s != c_strides(&shape, dtype.itemsize) {
                return Err(ArgumentError::new_err(
                    "host array must be C-contiguous (use numpy.ascontiguousarray)",
                ));
            }
        }
    }
    Ok(HostView {
        ptr,
        shape,
        dtype,
        readonly,
    })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}

fn opt_stream<'a>(s: Option<&'a Bound<'_, CudaStream>>) -> Option<&'a zc::Stream> {
    s.map(|s| &s.get().inner)
}

fn check_stream_device(py: Python<'_>, s: Option<&zc::Stream>, dev: &zc::Device) -> PyResult<()> {
    match s {
        Some(s) if s.device() != dev => Err(err(
            py,
            zc::CudaError::Invalid(format!(
                "stream is on device {}, the array on device {}",
                s.device().ordinal(),
                dev.ordinal()
            )),
        )),
        _ => Ok(()),
    }
}

/// Device ordinal owning a device pointer, or `None` for host / unknown memory.
fn pointer_device(ptr: u64) -> Option<u32> {
    let mut ord: i32 = -1;
    // SAFETY: the driver is initialised (callers got a Device first); writes one int.
    let rc = unsafe {
        zc::cudarc_sys::cuPointerGetAttribute(
            (&mut ord as *mut i32).cast(),
            zc::cudarc_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    };
    (rc == zc::cudarc_sys::CUresult::CUDA_SUCCESS && ord >= 0).then_some(ord as u32)
}

fn is_device_memory(ptr: u64) -> bool {
    let mut ty: u32 = 0;
    // SAFETY: as above; writes one unsigned int.
    let rc = unsafe {
        zc::cudarc_sys::cuPointerGetAttribute(
            (&mut ty as *mut u32).cast(),
            zc::cudarc_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr,
        )
    };
    // CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_UNIFIED = 4
    rc == zc::cudarc_sys::CUresult::CUDA_SUCCESS && (ty == 2 || ty == 4)
}

/// Reads a `__cuda_array_interface__` dict: (ptr, shape, strides, dtype, stream).
#[allow(clippy::type_complexity)]
fn read_cai(
    cai: &Bound<'_, PyAny>,
) -> PyResult<(u64, Vec<usize>, Option<Vec<isize>>, Dtype, Option<usize>)> {
    let d = cai.cast::<PyDict>()?;
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(k)?
            .ok_or_else(|| ArgumentError::new_err(format!("__cuda_array_interface__ has no '{k}'")))
    };
    let (ptr, _ro): (u64, bool) = get("data")?.extract()?;
    let shape: Vec<usize> = get("shape")?.extract()?;
    let dtype = Dtype::parse(&get("typestr")?.extract::<String>()?)?;
    let strides = match d.get_item("strides")? {
        Some(s) if !s.is_none() => Some(s.extract::<Vec<isize>>()?),
        _ => None,
    };
    if let Some(m) = d.get_item("mask")? {
        if !m.is_none() {
            return Err(ArgumentError::new_err(
                "masked __cuda_array_interface__ arrays are not supported",
            ));
        }
    }
    let stream = match d.get_item("stream")? {
        Some(s) if !s.is_none() => Some(s.extract::<usize>()?),
        _ => None,
    };
    Ok((ptr, shape, strides, dtype, stream))
}

/// The stream a `__cuda_array_interface__` producer's work is on: the
/// interface's `stream`, or for a PyTorch tensor (whose interface is version 2,
/// without one) torch's current stream on `device`, as a DLPack consumer
/// would be told; `None` when nothing needs waiting for.
fn producer_stream(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    cai_stream: Option<usize>,
    device: u32,
) -> PyResult<Option<usize>> {
    if cai_stream.is_some() {
        return Ok(cai_stream);
    }
    let module: String = obj.get_type().module()?.extract()?;
    if module != "torch" && !module.starts_with("torch.") {
        return Ok(None);
    }
    let Ok(torch) = py.import("sys")?.getattr("modules")?.get_item("torch") else {
        return Ok(None);
    };
    let current = torch
        .getattr("cuda")?
        .call_method1("current_stream", (device,))?;
    let handle: usize = current.getattr("cuda_stream")?.extract()?;
    Ok((handle != 0).then_some(handle))
}

/// Makes the legacy default stream (which orders our blocking streams) wait
/// for work on a foreign stream named by `__cuda_array_interface__`.
fn wait_foreign_stream(py: Python<'_>, dev: &zc::Device, stream: usize) -> PyResult<()> {
    // 1 and 2 are the legacy / per-thread default streams: already ordered with ours.
    if stream <= 2 {
        return Ok(());
    }
    let ev = zc::Event::new(dev, false).py(py)?;
    // SAFETY: the producer promises `stream` is a live stream of this device.
    unsafe { ev.record_raw(stream as zc::CUstream) }.py(py)?;
    zc::Stream::legacy_default(dev).wait(&ev).py(py)
}

#[pymethods]
impl DeviceArray {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let s = self
            .strides
            .clone()
            .unwrap_or_else(|| c_strides(&self.shape, self.dtype.itemsize));
        PyTuple::new(py, s)
    }
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.dtype.elem == Some(ScalarType::BF16) {
            if let Ok(m) = py.import("ml_dtypes") {
                return numpy(py)?
                    .getattr("dtype")?
                    .call1((m.getattr("bfloat16")?,));
            }
        }
        numpy(py)?.getattr("dtype")?.call1((&self.dtype.typestr,))
    }
    #[getter]
    fn typestr(&self) -> &str {
        &self.dtype.typestr
    }
    #[getter]
    fn itemsize(&self) -> usize {
        self.dtype.itemsize
    }
    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }
    #[getter]
    fn size(&self) -> usize {
        self.shape.iter().product()
    }
    #[getter(nbytes)]
    fn py_nbytes(&self) -> usize {
        self.nbytes()
    }
    /// The device address of element 0.
    #[getter]
    fn ptr(&self) -> u64 {
        self.ptr
    }
    #[getter]
    fn device(&self) -> u32 {
        self.device.ordinal()
    }
    #[getter]
    fn is_c_contiguous_(&self) -> bool {
        self.is_c_contiguous()
    }
    fn __len__(&self) -> PyResult<usize> {
        self.shape
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d DeviceArray"))
    }
    fn __repr__(&self) -> String {
        format!(
            "DeviceArray(shape={:?}, dtype='{}', device={}, ptr={:#x})",
            self.shape,
            self.dtype.typestr,
            self.device.ordinal(),
            self.ptr
        )
    }

    /// The CUDA Array Interface (v3) for CuPy, PyTorch, Numba, ...
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", &self.dtype.typestr)?;
        d.set_item("data", (self.ptr, false))?;
        d.set_item("version", 3)?;
        match &self.strides {
            Some(s) if !self.is_c_contiguous() => d.set_item("strides", PyTuple::new(py, s)?)?,
            _ => d.set_item("strides", py.None())?,
        }
        // Our streams are ordered with the legacy default stream, so consumers
        // on it (PyTorch's and CuPy's default) need no extra synchronization.
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        (KDL_CUDA, self.device.ordinal() as i32)
    }

    /// Exports a DLPack capsule. `stream` is the consumer's stream; it is made
    /// to wait for work queued on the legacy default stream (and so on every
    /// blocking zyntax stream).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let _ = max_version; // we always produce the unversioned capsule, which every consumer accepts
        guard(|| {
            let me = slf.get();
            if copy == Some(true) {
                return Err(PyTypeError::new_err(
                    "DeviceArray.__dlpack__ does not copy (copy=True)",
                ));
            }
            if let Some(dd) = dl_device {
                if !dd.is_none() {
                    let (t, id): (i32, i32) = dd.extract()?;
                    if t != KDL_CUDA || id != me.device.ordinal() as i32 {
                        return Err(PyTypeError::new_err(
                            "DeviceArray can only be exported to its own CUDA device",
                        ));
                    }
                }
            }
            if let Some(s) = stream {
                if !s.is_none() {
                    let s: i64 = s.extract()?;
                    if s > 2 {
                        let ev = zc::Event::new(&me.device, false).py(py)?;
                        zc::Stream::legacy_default(&me.device).record(&ev).py(py)?;
                        me.device.bind().py(py)?;
                        // SAFETY: the consumer passes a live stream of this device.
                        let rc = unsafe {
                            zc::cudarc_sys::cuStreamWaitEvent(s as zc::CUstream, ev.raw(), 0)
                        };
                        if rc != zc::cudarc_sys::CUresult::CUDA_SUCCESS {
                            return Err(PyCudaError::new_err(format!(
                                "__dlpack__: could not order consumer stream {s:#x} ({rc:?})"
                            )));
                        }
                    }
                }
            }
            let (code, bits) = me.dtype.dlpack()?;
            let shape: Vec<i64> = me.shape.iter().map(|&d| d as i64).collect();
            let strides: Vec<i64> = me
                .strides
                .clone()
                .unwrap_or_else(|| c_strides(&me.shape, me.dtype.itemsize))
                .iter()
                .map(|&s| (s / me.dtype.itemsize as isize) as i64)
                .collect();
            let mut ctx = Box::new(ExportCtx {
                managed: DLManagedTensor {
                    dl_tensor: DLTensor {
                        data: me.ptr as *mut c_void,
                        device: DLDevice {
                            device_type: KDL_CUDA,
                            device_id: me.device.ordinal() as i32,
                        },
                        ndim: me.shape.len() as i32,
                        dtype: DLDataType {
                            code,
                            bits,
                            lanes: 1,
                        },
                        shape: std::ptr::null_mut(),
                        strides: std::ptr::null_mut(),
                        byte_offset: 0,
                    },
                    manager_ctx: std::ptr::null_mut(),
                    deleter: Some(export_deleter),
                },
                shape,
                strides,
                _owner: me.owner.clone(),
            });
            ctx.managed.dl_tensor.shape = ctx.shape.as_mut_ptr();
            ctx.managed.dl_tensor.strides = ctx.strides.as_mut_ptr();
            let raw = Box::into_raw(ctx);
            // SAFETY: `raw` is a leaked ExportCtx whose first field is the
            // managed tensor; the capsule destructor or the consumer frees it.
            unsafe {
                (*raw).managed.manager_ctx = raw.cast();
                let cap =
                    ffi::PyCapsule_New(raw.cast(), DLTENSOR.as_ptr(), Some(capsule_destructor));
                if cap.is_null() {
                    drop(Box::from_raw(raw));
                    return Err(PyErr::fetch(py));
                }
                Ok(Bound::from_owned_ptr(py, cap))
            }
        })
    }

    /// Copies to a new numpy array (waits for the copy; the GIL is released meanwhile).
    #[pyo3(signature = (stream=None))]
    fn to_host<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Is<'py, CudaStream>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            self.require_contiguous("to_host")?;
            let shape = PyTuple::new(py, &self.shape)?;
            let out = numpy(py)?
                .getattr("empty")?
                .call1((shape, self.dtype(py)?))?;
            self.copy_to_host(py, &out, stream, Flag(true))?;
            Ok(out)
        })
    }

    /// Copies into an existing C-contiguous numpy array of the same size in bytes.
    /// With `sync=False` the copy is only queued: keep `out` alive and do not
    /// read it before synchronizing the stream.
    #[pyo3(signature = (out, stream=None, sync=Flag(true)),
        text_signature = "($self, out, stream=None, sync=True)")]
    fn copy_to_host(
        &self,
        py: Python<'_>,
        out: &Bound<'_, PyAny>,
        stream: Option<Is<'_, CudaStream>>,
        sync: Flag,
    ) -> PyResult<()> {
        let sync = sync.0;
        guard(|| {
            self.require_contiguous("copy_to_host")?;
            let hv = host_view(out)?;
            if hv.readonly {
                return Err(ArgumentError::new_err(
                    "copy_to_host: the destination array is read-only",
                ));
            }
            let n = self.nbytes();
            if numel(&hv.shape)? * hv.dtype.itemsize != n {
                return Err(ArgumentError::new_err(format!(
                    "copy_to_host: destination has {} bytes, the DeviceArray {n}",
                    numel(&hv.shape)? * hv.dtype.itemsize
                )));
            }
            let s = opt_stream(stream.as_deref()).cloned();
            check_stream_device(py, s.as_ref(), &self.device)?;
            self.keep_in_capture(s.as_ref(), owner_of(out));
            let dev = self.device.clone();
            let src = self.ptr;
            let _span = zc::memory::copy_span("DtoH", n as u64);
            py.detach(move || -> zc::Result<()> {
                dev.bind()?;
                let raw = s.as_ref().map_or(std::ptr::null_mut(), zc::Stream::raw);
                // SAFETY: `out` is a live, writable host array of `n` bytes; the
                // caller keeps it alive (documented) or we synchronize below.
                let rc = unsafe {
                    zc::cudarc_sys::cuMemcpyDtoHAsync_v2(hv.ptr as *mut c_void, src, n, raw)
                };
                zc::check_driver(rc, "cuMemcpyDtoHAsync")?;
                if sync {
                    // SAFETY: valid stream (or the legacy stream).
                    zc::check_driver(
                        unsafe { zc::cudarc_sys::cuStreamSynchronize(raw) },
                        "cuStreamSynchronize",
                    )?;
                }
                Ok(())
            })
            .py(py)
        })
    }

    /// Copies from a C-contiguous host array of the same size in bytes.
    #[pyo3(signature = (src, stream=None, sync=Flag(true)),
        text_signature = "($self, src, stream=None, sync=True)")]
    fn copy_from_host(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        stream: Option<Is<'_, CudaStream>>,
        sync: Flag,
    ) -> PyResult<()> {
        let sync = sync.0;
        guard(|| {
            self.require_contiguous("copy_from_host")?;
            let hv = host_view(src)?;
            let n = self.nbytes();
            if numel(&hv.shape)? * hv.dtype.itemsize != n {
                return Err(ArgumentError::new_err(format!(
                    "copy_from_host: source has {} bytes, the DeviceArray {n}",
                    numel(&hv.shape)? * hv.dtype.itemsize
                )));
            }
            let s = opt_stream(stream.as_deref()).cloned();
            check_stream_device(py, s.as_ref(), &self.device)?;
            self.keep_in_capture(s.as_ref(), owner_of(src));
            htod(py, &self.device, self.ptr, hv.ptr, n, s, sync)
        })
    }

    /// Queues a device-to-device copy from another DeviceArray of the same size.
    #[pyo3(signature = (src, stream=None))]
    fn copy_from(
        &self,
        py: Python<'_>,
        src: Is<'_, DeviceArray>,
        stream: Option<Is<'_, CudaStream>>,
    ) -> PyResult<()> {
        guard(|| {
            let src = src.get();
            self.require_contiguous("copy_from")?;
            src.require_contiguous("copy_from")?;
            if src.nbytes() != self.nbytes() {
                return Err(ArgumentError::new_err(format!(
                    "copy_from: source has {} bytes, destination {}",
                    src.nbytes(),
                    self.nbytes()
                )));
            }
            let s = opt_stream(stream.as_deref());
            check_stream_device(py, s, &self.device)?;
            self.keep_in_capture(s, Some(src.owner.clone()));
            // SAFETY: both ranges are live device arrays of nbytes bytes.
            unsafe {
                zc::memory::copy_device_async(
                    &self.device,
                    self.ptr,
                    src.ptr,
                    self.nbytes() as u64,
                    s,
                )
            }
            .py(py)
        })
    }

    /// Queues setting every byte to zero.
    #[pyo3(signature = (stream=None))]
    fn zero_(&self, py: Python<'_>, stream: Option<Is<'_, CudaStream>>) -> PyResult<()> {
        guard(|| {
            self.require_contiguous("zero_")?;
            let s = opt_stream(stream.as_deref());
            check_stream_device(py, s, &self.device)?;
            self.keep_in_capture(s, None);
            self.device.bind().py(py)?;
            let raw = s.map_or(std::ptr::null_mut(), zc::Stream::raw);
            // SAFETY: the range is this array's memory.
            let rc = unsafe { zc::cudarc_sys::cuMemsetD8Async(self.ptr, 0, self.nbytes(), raw) };
            zc::check_driver(rc, "cuMemsetD8Async").py(py)
        })
    }

    /// The same memory with another shape (C-contiguous arrays only).
    fn reshape(&self, shape: &Bound<'_, PyAny>) -> PyResult<DeviceArray> {
        guard(|| {
            self.require_contiguous("reshape")?;
            let shape = parse_shape(shape)?;
            if numel(&shape)? != self.shape.iter().product::<usize>() {
                return Err(ArgumentError::new_err(format!(
                    "cannot reshape {:?} to {shape:?}",
                    self.shape
                )));
            }
            Ok(DeviceArray {
                ptr: self.ptr,
                shape,
                strides: None,
                dtype: self.dtype.clone(),
                device: self.device.clone(),
                owner: self.owner.clone(),
            })
        })
    }
}

fn htod(
    py: Python<'_>,
    dev: &zc::Device,
    dst: u64,
    src: usize,
    n: usize,
    s: Option<zc::Stream>,
    sync: bool,
) -> PyResult<()> {
    let dev = dev.clone();
    let _span = zc::memory::copy_span("HtoD", n as u64);
    py.detach(move || -> zc::Result<()> {
        dev.bind()?;
        let raw = s.as_ref().map_or(std::ptr::null_mut(), zc::Stream::raw);
        // SAFETY: `src` is a live host array of `n` bytes (kept alive by the
        // caller until synchronized when `sync` is false).
        let rc = unsafe { zc::cudarc_sys::cuMemcpyHtoDAsync_v2(dst, src as *const c_void, n, raw) };
        zc::check_driver(rc, "cuMemcpyHtoDAsync")?;
        if sync {
            // SAFETY: valid stream (or the legacy stream).
            zc::check_driver(
                unsafe { zc::cudarc_sys::cuStreamSynchronize(raw) },
                "cuStreamSynchronize",
            )?;
        }
        Ok(())
    })
    .py(py)
}

/// An uninitialised DeviceArray from the memory pool.
#[pyfunction]
#[pyo3(signature = (shape, dtype, device=Checked(0), stream=None),
    text_signature = "(shape, dtype, device=0, stream=None)")]
pub fn cuda_empty(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    device: Checked<u32>,
    stream: Option<Is<'_, CudaStream>>,
) -> PyResult<DeviceArray> {
    guard(|| {
        let shape = parse_shape(shape)?;
        let dtype = normalize_dtype(py, dtype)?;
        let dev = self::device(py, device.0)?;
        let s = opt_stream(stream.as_deref());
        check_stream_device(py, s, &dev)?;
        let bytes = numel(&shape)?.checked_mul(dtype.itemsize).ok_or_else(|| {
            ArgumentError::new_err("argument 'shape': the array's byte size overflows")
        })?;
        let buf = zc::DeviceBuffer::alloc(&dev, bytes as u64, s).py(py)?;
        Ok(DeviceArray::new_pool(shape, dtype, buf))
    })
}

// ---------------------------------------------------------------- memory kinds

/// A DeviceArray in managed (unified) memory: the same address works on the
/// host and the device. Refused when larger than the device's free memory.
#[pyfunction]
#[pyo3(signature = (shape, dtype, device=Checked(0)),
    text_signature = "(shape, dtype, device=0)")]
pub fn cuda_managed_empty(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    device: Checked<u32>,
) -> PyResult<DeviceArray> {
    guard(|| {
        let shape = parse_shape(shape)?;
        let dtype = normalize_dtype(py, dtype)?;
        let dev = self::device(py, device.0)?;
        let bytes = numel(&shape)?.checked_mul(dtype.itemsize).ok_or_else(|| {
            ArgumentError::new_err("argument 'shape': the array's byte size overflows")
        })?;
        let buf = zc::ManagedBuffer::new(&dev, bytes as u64).py(py)?;
        Ok(DeviceArray {
            ptr: buf.ptr(),
            shape,
            strides: None,
            dtype,
            device: dev,
            owner: Arc::new(Owner::Managed(buf)),
        })
    })
}

/// Registers a C-contiguous, writable numpy array with the driver (page-locked,
/// mapped) and returns a DeviceArray over the same memory (zero-copy: kernels
/// read and write the host array). Unregistered when the DeviceArray and
/// everything using it (graphs, programs) are gone.
#[pyfunction]
#[pyo3(signature = (array, device=Checked(0)),
    text_signature = "(array, device=0)")]
pub fn cuda_register_host(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    device: Checked<u32>,
) -> PyResult<DeviceArray> {
    guard(|| {
        let hv = host_view(array)?;
        if hv.readonly {
            return Err(err(
                py,
                zc::CudaError::Invalid("register_host: the array is read-only".to_owned()),
            ));
        }
        let dev = self::device(py, device.0)?;
        let n = numel(&hv.shape)? * hv.dtype.itemsize;
        // SAFETY: the array's memory stays alive: the owner holds the array.
        let reg = unsafe { zc::HostRegistration::new(&dev, hv.ptr as *mut u8, n) }.py(py)?;
        Ok(DeviceArray {
            ptr: reg.device_ptr(),
            shape: hv.shape,
            strides: None,
            dtype: hv.dtype,
            device: dev,
            owner: Arc::new(Owner::Registered(reg, array.clone().unbind())),
        })
    })
}

fn managed_of<'a>(
    py: Python<'_>,
    a: &'a DeviceArray,
    what: &str,
) -> PyResult<&'a zc::ManagedBuffer> {
    match &*a.owner {
        Owner::Managed(m) => Ok(m),
        _ => Err(err(
            py,
            zc::CudaError::Invalid(format!(
                "{what} needs a managed array (zyntax.cuda.managed_empty)"
            )),
        )),
    }
}

fn location(py: Python<'_>, to: &Bound<'_, PyAny>) -> PyResult<zc::Location> {
    if let Ok(s) = to.extract::<String>() {
        if s == "host" || s == "cpu" {
            return Ok(zc::Location::Host);
        }
    }
    match to.extract::<u32>() {
        Ok(d) => {
            self::device(py, d)?;
            Ok(zc::Location::Device(d))
        }
        Err(_) => Err(ArgumentError::new_err(
            "location must be a device ordinal or 'host'",
        )),
    }
}

/// Queues migrating a managed array to a device (ordinal) or `"host"`.
#[pyfunction]
#[pyo3(signature = (array, to, stream=None))]
pub fn cuda_prefetch(
    py: Python<'_>,
    array: Is<'_, DeviceArray>,
    to: &Bound<'_, PyAny>,
    stream: Option<Is<'_, CudaStream>>,
) -> PyResult<()> {
    guard(|| {
        let m = managed_of(py, array.get(), "prefetch")?;
        let loc = location(py, to)?;
        m.prefetch(loc, opt_stream(stream.as_deref())).py(py)
    })
}

/// Advice for a managed array: `read_mostly`, `preferred_location`,
/// `accessed_by` (or `unset_...`), for a device ordinal or `"host"`.
#[pyfunction]
#[pyo3(signature = (array, advice, location=None))]
pub fn cuda_advise(
    py: Python<'_>,
    array: Is<'_, DeviceArray>,
    advice: Text,
    location: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    guard(|| {
        let a = array.get();
        let m = managed_of(py, a, "advise")?;
        let loc = match location {
            Some(l) => self::location(py, l)?,
            None => zc::Location::Device(a.device.ordinal()),
        };
        m.advise(zc::Advice::parse(&advice).py(py)?, loc).py(py)
    })
}

/// `"device"` (pool), `"managed"`, `"registered"` (host memory) or `"foreign"`.
#[pyfunction]
pub fn cuda_memory_kind(array: Is<'_, DeviceArray>) -> &'static str {
    match &*array.get().owner {
        Owner::Pool(_) => "device",
        Owner::Managed(_) => "managed",
        Owner::Registered(..) => "registered",
        Owner::Foreign(_) | Owner::Dlpack(_) => "foreign",
    }
}

/// Copies a C-contiguous numpy array to a new DeviceArray.
#[pyfunction]
#[pyo3(signature = (array, device=Checked(0), stream=None, sync=Flag(true)),
    text_signature = "(array, device=0, stream=None, sync=True)")]
pub fn cuda_to_device(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    device: Checked<u32>,
    stream: Option<Is<'_, CudaStream>>,
    sync: Flag,
) -> PyResult<DeviceArray> {
    let sync = sync.0;
    guard(|| {
        let hv = host_view(array)?;
        let dev = self::device(py, device.0)?;
        let s = opt_stream(stream.as_deref()).cloned();
        check_stream_device(py, s.as_ref(), &dev)?;
        let n = numel(&hv.shape)? * hv.dtype.itemsize;
        let buf = zc::DeviceBuffer::alloc(&dev, n as u64, s.as_ref()).py(py)?;
        htod(py, &dev, buf.ptr(), hv.ptr, n, s, sync)?;
        Ok(DeviceArray::new_pool(hv.shape, hv.dtype, buf))
    })
}

/// Wraps (without copying) any object exporting `__cuda_array_interface__`;
/// the object is kept alive by the DeviceArray.
#[pyfunction]
pub fn cuda_from_cuda_array_interface(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
) -> PyResult<DeviceArray> {
    guard(|| {
        if !obj.hasattr("__cuda_array_interface__")? {
            return Err(ArgumentError::new_err(format!(
                "argument 'obj': expected an object with __cuda_array_interface__, got {}",
                type_name(obj)
            )));
        }
        let cai = obj.getattr("__cuda_array_interface__")?;
        let (ptr, shape, strides, dtype, stream) = read_cai(&cai)?;
        zc::init().py(py)?;
        let ord = if numel(&shape)? == 0 {
            Some(0)
        } else {
            pointer_device(ptr)
        };
        let Some(ord) = ord else {
            return Err(ArgumentError::new_err(format!(
                "argument 'obj': the __cuda_array_interface__ of {} points to memory the CUDA \
                 driver does not know (not a GPU tensor)",
                type_name(obj)
            )));
        };
        let dev = self::device(py, ord)?;
        if let Some(s) = producer_stream(py, obj, stream, ord)? {
            wait_foreign_stream(py, &dev, s)?;
        }
        Ok(DeviceArray {
            ptr,
            shape,
            strides,
            dtype,
            device: dev,
            owner: Arc::new(Owner::Foreign(obj.clone().unbind())),
        })
    })
}

/// Imports a DLPack-exporting object (PyTorch, CuPy, JAX, ...) without copying.
#[pyfunction]
pub fn cuda_from_dlpack(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<DeviceArray> {
    dlpack_view(py, obj, "argument 'obj'")
}

/// [`cuda_from_dlpack`] for the argument `what` names (in its errors).
pub(crate) fn dlpack_view(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<DeviceArray> {
    guard(|| {
        if !obj.hasattr("__dlpack__")? || !obj.hasattr("__dlpack_device__")? {
            return Err(ArgumentError::new_err(format!(
                "{what}: expected a DLPack tensor (with __dlpack__ and \
                 __dlpack_device__), got {}",
                type_name(obj)
            )));
        }
        let (dt, id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
        if !matches!(dt, KDL_CUDA | KDL_CUDA_MANAGED) {
            return Err(ArgumentError::new_err(format!(
                "{what}: must be a GPU tensor, but this {} lives in {} memory (DLPack device \
                 type {dt}); copy host arrays with zyntax.cuda.to_device",
                type_name(obj),
                if dt == KDL_CPU || dt == KDL_CUDA_HOST {
                    "host"
                } else {
                    "non-CUDA"
                }
            )));
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item("stream", 1)?; // we consume on the legacy default stream
        let cap = obj.call_method("__dlpack__", (), Some(&kwargs))?;
        let t = consume_capsule(&cap)?;
        // SAFETY: a valid managed tensor we now own (freed by DlpackTensor's Drop).
        let (ptr, shape, strides, dtype) = unsafe {
            let dl = &(*t.0).dl_tensor;
            let nd = usize::try_from(dl.ndim).unwrap_or(0);
            let shape: Vec<usize> = if nd == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(dl.shape, nd)
                    .iter()
                    .map(|&d| d.max(0) as usize)
                    .collect()
            };
            let dtype = Dtype::from_dlpack(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)?;
            let strides = if dl.strides.is_null() || nd == 0 {
                None
            } else {
                Some(
                    std::slice::from_raw_parts(dl.strides, nd)
                        .iter()
                        .map(|&s| s as isize * dtype.itemsize as isize)
                        .collect::<Vec<_>>(),
                )
            };
            (dl.data as u64 + dl.byte_offset, shape, strides, dtype)
        };
        let dev = self::device(py, u32::try_from(id).unwrap_or(0))?;
        Ok(DeviceArray {
            ptr,
            shape,
            strides,
            dtype,
            device: dev,
            owner: Arc::new(Owner::Dlpack(t)),
        })
    })
}

// ---------------------------------------------------------------- pinned memory

/// Page-locked host memory; `numpy.asarray(buf)` views it without copying
/// (see `zyntax.cuda.pinned_empty`).
#[pyclass(frozen, name = "PinnedBuffer", module = "zyntax.cuda")]
pub struct CudaPinnedBuffer {
    inner: zc::PinnedBuffer,
}

#[pymethods]
impl CudaPinnedBuffer {
    #[new]
    #[pyo3(signature = (nbytes, device=Checked(0)),
        text_signature = "(nbytes, device=0)")]
    fn new(py: Python<'_>, nbytes: Checked<usize>, device: Checked<u32>) -> PyResult<Self> {
        guard(|| {
            let dev = self::device(py, device.0)?;
            Ok(CudaPinnedBuffer {
                inner: zc::PinnedBuffer::new(&dev, nbytes.0).py(py)?,
            })
        })
    }
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.len()
    }
    #[getter]
    fn ptr(&self) -> usize {
        self.inner.as_ptr() as usize
    }
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", (self.inner.len(),))?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.inner.as_ptr() as usize, false))?;
        d.set_item("version", 3)?;
        Ok(d)
    }
}

// ---------------------------------------------------------------- devices

/// A CUDA device (its primary context is shared with PyTorch, CuPy, ...).
#[pyclass(frozen, name = "Device", module = "zyntax.cuda")]
pub struct CudaDevice {
    inner: zc::Device,
}

#[pymethods]
impl CudaDevice {
    #[new]
    #[pyo3(signature = (ordinal=Checked(0)),
        text_signature = "(ordinal=0)")]
    fn new(py: Python<'_>, ordinal: Checked<u32>) -> PyResult<Self> {
        guard(|| {
            Ok(CudaDevice {
                inner: device(py, ordinal.0)?,
            })
        })
    }
    #[getter]
    fn ordinal(&self) -> u32 {
        self.inner.ordinal()
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.props().name.clone()
    }
    #[getter]
    fn compute_capability(&self) -> (u32, u32) {
        self.inner.props().compute_capability
    }
    /// `"sm_90"` style architecture name.
    #[getter]
    fn arch(&self) -> String {
        self.inner.arch_name()
    }
    #[getter]
    fn sm_count(&self) -> u32 {
        self.inner.props().sm_count
    }
    #[getter]
    fn max_threads_per_block(&self) -> u32 {
        self.inner.props().max_threads_per_block
    }
    #[getter]
    fn max_shared_per_block(&self) -> u32 {
        self.inner.props().max_shared_per_block
    }
    #[getter]
    fn max_shared_per_block_optin(&self) -> u32 {
        self.inner.props().max_shared_per_block_optin
    }
    #[getter]
    fn total_memory(&self) -> u64 {
        self.inner.props().total_memory
    }
    /// Every property as a dict.
    fn properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.inner.props();
        let d = PyDict::new(py);
        d.set_item("name", &p.name)?;
        d.set_item("compute_capability", p.compute_capability)?;
        d.set_item("sm_count", p.sm_count)?;
        d.set_item("max_threads_per_block", p.max_threads_per_block)?;
        d.set_item("max_block_dim", p.max_block_dim.to_vec())?;
        d.set_item("max_grid_dim", p.max_grid_dim.to_vec())?;
        d.set_item("max_shared_per_block", p.max_shared_per_block)?;
        d.set_item("max_shared_per_block_optin", p.max_shared_per_block_optin)?;
        d.set_item("max_shared_per_sm", p.max_shared_per_sm)?;
        d.set_item("max_registers_per_block", p.max_registers_per_block)?;
        d.set_item("warp_size", p.warp_size)?;
        d.set_item("total_memory", p.total_memory)?;
        d.set_item("clock_rate_khz", p.clock_rate_khz)?;
        d.set_item("memory_clock_rate_khz", p.memory_clock_rate_khz)?;
        d.set_item("memory_bus_width", p.memory_bus_width)?;
        d.set_item("l2_cache_bytes", p.l2_cache_bytes)?;
        Ok(d)
    }
    /// Waits for all work on the device (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let d = self.inner.clone();
        guard(|| py.detach(move || d.synchronize()).py(py))
    }
    /// `(free, total)` device memory in bytes.
    fn mem_info(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        guard(|| self.inner.mem_info().py(py))
    }
    /// Counters of this device's memory pool.
    fn memory_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.memory_stats();
        let d = PyDict::new(py);
        d.set_item("in_use_bytes", s.in_use_bytes)?;
        d.set_item("cached_bytes", s.cached_bytes)?;
        d.set_item("reserved_bytes", s.in_use_bytes + s.cached_bytes)?;
        d.set_item("peak_in_use_bytes", s.peak_in_use_bytes)?;
        d.set_item("allocs", s.allocs)?;
        d.set_item("frees", s.frees)?;
        d.set_item("cache_hits", s.cache_hits)?;
        d.set_item("cache_misses", s.cache_misses)?;
        d.set_item("driver_allocs", s.driver_allocs)?;
        d.set_item("driver_frees", s.driver_frees)?;
        d.set_item("limit", s.limit)?;
        Ok(d)
    }
    /// Caps the pool's in-use plus cached bytes (`None` removes the cap).
    #[pyo3(signature = (limit))]
    fn set_memory_limit(&self, py: Python<'_>, limit: Option<Checked<u64>>) -> PyResult<()> {
        guard(|| self.inner.set_memory_limit(limit.map(|c| c.0)).py(py))
    }
    /// Returns cached pool blocks to the driver (synchronizes the device first).
    fn empty_cache(&self, py: Python<'_>) -> PyResult<()> {
        let d = self.inner.clone();
        guard(|| py.detach(move || d.empty_cache()).py(py))
    }
    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

#[pyfunction]
pub fn cuda_is_available() -> bool {
    zc::is_available()
}

#[pyfunction]
pub fn cuda_device_count(py: Python<'_>) -> PyResult<u32> {
    guard(|| zc::device_count().py(py))
}

/// `(major, minor)` of the installed driver's CUDA version.
#[pyfunction]
pub fn cuda_driver_version(py: Python<'_>) -> PyResult<(u32, u32)> {
    guard(|| zc::driver_version().py(py))
}

// ---------------------------------------------------------------- streams, events

/// A stream. Blocking by default (ordered with the legacy default stream,
/// which PyTorch and CuPy use by default).
#[pyclass(frozen, name = "Stream", module = "zyntax.cuda")]
pub struct CudaStream {
    pub(crate) inner: zc::Stream,
}

fn capture_mode(s: &str) -> PyResult<zc::CaptureMode> {
    match s {
        "global" => Ok(zc::CaptureMode::Global),
        "thread_local" => Ok(zc::CaptureMode::ThreadLocal),
        "relaxed" => Ok(zc::CaptureMode::Relaxed),
        _ => Err(ArgumentError::new_err(format!(
            "capture mode must be 'global', 'thread_local' or 'relaxed', not '{s}'"
        ))),
    }
}

#[pymethods]
impl CudaStream {
    #[new]
    #[pyo3(signature = (device=Checked(0), non_blocking=Flag(false)),
        text_signature = "(device=0, non_blocking=False)")]
    fn new(py: Python<'_>, device: Checked<u32>, non_blocking: Flag) -> PyResult<Self> {
        let non_blocking = non_blocking.0;
        guard(|| {
            let dev = self::device(py, device.0)?;
            Ok(CudaStream {
                inner: zc::Stream::new(&dev, non_blocking).py(py)?,
            })
        })
    }
    /// Wraps a foreign stream handle (e.g. `torch.cuda.current_stream().cuda_stream`);
    /// the caller keeps that stream alive.
    #[staticmethod]
    #[pyo3(signature = (handle, device=Checked(0)),
        text_signature = "(handle, device=0)")]
    fn from_handle(py: Python<'_>, handle: Checked<usize>, device: Checked<u32>) -> PyResult<Self> {
        guard(|| {
            let dev = self::device(py, device.0)?;
            // SAFETY: documented contract: a live stream of this device.
            Ok(CudaStream {
                inner: unsafe { zc::Stream::from_raw(&dev, handle.0 as zc::CUstream) },
            })
        })
    }
    /// The legacy default stream of a device.
    #[staticmethod]
    #[pyo3(signature = (device=Checked(0)),
        text_signature = "(device=0)")]
    fn legacy_default(py: Python<'_>, device: Checked<u32>) -> PyResult<Self> {
        guard(|| {
            Ok(CudaStream {
                inner: zc::Stream::legacy_default(&self::device(py, device.0)?),
            })
        })
    }
    #[getter]
    fn handle(&self) -> usize {
        self.inner.handle()
    }
    #[getter]
    fn device(&self) -> u32 {
        self.inner.device().ordinal()
    }
    /// Waits for the stream's work (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.inner.clone();
        guard(|| py.detach(move || s.synchronize()).py(py))
    }
    fn query(&self, py: Python<'_>) -> PyResult<bool> {
        guard(|| self.inner.query().py(py))
    }
    /// Records `event` (a new one if `None`) and returns it.
    #[pyo3(signature = (event=None))]
    fn record(&self, py: Python<'_>, event: Option<Is<'_, CudaEvent>>) -> PyResult<Py<CudaEvent>> {
        guard(|| {
            let ev = match event {
                Some(e) => e.0.unbind(),
                None => Py::new(
                    py,
                    CudaEvent {
                        inner: zc::Event::new(self.inner.device(), true).py(py)?,
                    },
                )?,
            };
            self.inner.record(&ev.get().inner).py(py)?;
            Ok(ev)
        })
    }
    /// Makes future work on this stream wait for `event` (or all work queued so far on another stream).
    fn wait(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            if let Ok(e) = other.cast::<CudaEvent>() {
                return self.inner.wait(&e.get().inner).py(py);
            }
            if let Ok(s) = other.cast::<CudaStream>() {
                let ev = zc::Event::new(self.inner.device(), false).py(py)?;
                s.get().inner.record(&ev).py(py)?;
                return self.inner.wait(&ev).py(py);
            }
            Err(ArgumentError::new_err(
                "Stream.wait expects an Event or a Stream",
            ))
        })
    }
    /// Starts capturing this stream's work into a graph.
    #[pyo3(signature = (mode=Text::from("thread_local")),
        text_signature = "($self, mode='thread_local')")]
    fn begin_capture(&self, py: Python<'_>, mode: Text) -> PyResult<()> {
        guard(|| self.inner.begin_capture(capture_mode(&mode)?).py(py))
    }
    /// Ends the capture and returns the captured graph.
    fn end_capture(&self, py: Python<'_>) -> PyResult<CudaGraph> {
        guard(|| {
            Ok(CudaGraph {
                inner: self.inner.end_capture().py(py)?,
            })
        })
    }
    fn is_capturing(&self, py: Python<'_>) -> PyResult<bool> {
        guard(|| self.inner.is_capturing().py(py))
    }
    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// A stream marker for dependencies and timing.
#[pyclass(frozen, name = "Event", module = "zyntax.cuda")]
pub struct CudaEvent {
    inner: zc::Event,
}

#[pymethods]
impl CudaEvent {
    #[new]
    #[pyo3(signature = (device=Checked(0), timing=Flag(true)),
        text_signature = "(device=0, timing=True)")]
    fn new(py: Python<'_>, device: Checked<u32>, timing: Flag) -> PyResult<Self> {
        let timing = timing.0;
        guard(|| {
            let dev = self::device(py, device.0)?;
            Ok(CudaEvent {
                inner: zc::Event::new(&dev, timing).py(py)?,
            })
        })
    }
    /// Records the event on `stream` (the legacy default stream if `None`).
    #[pyo3(signature = (stream=None))]
    fn record(&self, py: Python<'_>, stream: Option<Is<'_, CudaStream>>) -> PyResult<()> {
        guard(|| match stream {
            Some(s) => self.inner.record(&s.get().inner).py(py),
            // SAFETY: null is the legacy default stream.
            None => unsafe { self.inner.record_raw(std::ptr::null_mut()) }.py(py),
        })
    }
    /// Waits for the event (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        guard(|| py.detach(|| self.inner.synchronize()).py(py))
    }
    fn query(&self, py: Python<'_>) -> PyResult<bool> {
        guard(|| self.inner.query().py(py))
    }
    /// Milliseconds from this event to `end`.
    fn elapsed_ms(&self, py: Python<'_>, end: Is<'_, CudaEvent>) -> PyResult<f32> {
        guard(|| self.inner.elapsed_ms(&end.get().inner).py(py))
    }
}

// ---------------------------------------------------------------- graphs

/// A captured graph; `instantiate()` makes it replayable.
#[pyclass(frozen, name = "Graph", module = "zyntax.cuda")]
pub struct CudaGraph {
    inner: zc::Graph,
}

#[pymethods]
impl CudaGraph {
    #[getter]
    fn num_nodes(&self, py: Python<'_>) -> PyResult<usize> {
        guard(|| self.inner.num_nodes().py(py))
    }
    #[getter]
    fn num_kernel_nodes(&self, py: Python<'_>) -> PyResult<usize> {
        guard(|| self.inner.num_kernel_nodes().py(py))
    }
    /// How many owners (arrays, tensors, host buffers) the graph keeps alive.
    #[getter]
    fn num_owners(&self) -> usize {
        self.inner.num_owners()
    }
    fn instantiate(&self, py: Python<'_>) -> PyResult<CudaGraphExec> {
        guard(|| {
            Ok(CudaGraphExec {
                inner: self.inner.instantiate().py(py)?,
            })
        })
    }
}

/// An executable graph.
#[pyclass(frozen, name = "GraphExec", module = "zyntax.cuda")]
pub struct CudaGraphExec {
    inner: zc::GraphExec,
}

#[pymethods]
impl CudaGraphExec {
    /// Queues one replay on `stream` (legacy default stream if `None`).
    #[pyo3(signature = (stream=None))]
    fn launch(&self, py: Python<'_>, stream: Option<Is<'_, CudaStream>>) -> PyResult<()> {
        guard(|| self.inner.launch(opt_stream(stream.as_deref())).py(py))
    }
    #[getter]
    fn num_kernel_nodes(&self) -> usize {
        self.inner.num_kernel_nodes()
    }
    /// Replaces the arguments (and optionally grid/block/shared memory) of the
    /// `index`-th captured launch of `kernel` for later replays.
    #[pyo3(signature = (index, kernel, *args, grid=None, block=None, shared_mem=None))]
    #[allow(clippy::too_many_arguments)]
    fn set_kernel_args(
        &self,
        py: Python<'_>,
        index: Checked<usize>,
        kernel: Is<'_, CudaKernel>,
        args: &Bound<'_, PyTuple>,
        grid: Option<&Bound<'_, PyAny>>,
        block: Option<&Bound<'_, PyAny>>,
        shared_mem: Option<Checked<u32>>,
    ) -> PyResult<()> {
        guard(|| {
            let k = kernel.get();
            let cfg = match (grid, block) {
                (Some(g), Some(b)) => Some(zc::LaunchConfig {
                    grid: dims(g, "grid")?,
                    block: dims(b, "block")?,
                    shared_bytes: shared_mem
                        .map(|c| c.0)
                        .unwrap_or(k.inner.signature().shared_bytes),
                }),
                (None, None) => None,
                _ => {
                    return Err(ArgumentError::new_err(
                        "arguments 'grid' and 'block': pass both, or neither",
                    ))
                }
            };
            let mut keep: Vec<DlpackTensor> = Vec::new();
            let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
            let mut kargs = Vec::with_capacity(items.len());
            for (i, a) in items.iter().enumerate() {
                let kind = k
                    .inner
                    .params()
                    .get(i)
                    .cloned()
                    .unwrap_or(zc::ParamKind::Bytes(0));
                kargs.push(convert_arg(py, &k.inner, i, &kind, a, &mut keep)?);
            }
            // The executable owns the new arguments' memory from now on.
            let mut owners: Vec<zc::KeepAlive> = items.iter().filter_map(owner_of).collect();
            owners.extend(keep.into_iter().map(|t| Arc::new(t) as zc::KeepAlive));
            // SAFETY: as for a launch; the caller vouches for buffer sizes,
            // and `owners` keeps every argument's memory alive.
            unsafe {
                self.inner
                    .set_kernel_args(index.0, &k.inner, cfg.as_ref(), &kargs, owners)
            }
            .py(py)
        })
    }
}

// ---------------------------------------------------------------- modules, kernels

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
    fn new(inner: zc::Kernel) -> CudaKernel {
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
        let (total, offsets) = k.slot_layout();
        let mut keep: Vec<DlpackTensor> = Vec::new();
        let mut stack = [0u64; zc::kernel::STACK_SLOTS];
        let mut heap;
        let slots: &mut [u64] = if total <= zc::kernel::STACK_SLOTS {
            &mut stack[..]
        } else {
            heap = vec![0u64; total];
            &mut heap[..]
        };
        for (i, a) in args.iter().enumerate() {
            let kind = &k.params()[i];
            let arg = fast_arg(py, k, i, self.plan[i], kind, &a, &mut keep)?;
            k.encode_arg(i, arg, slots)
                .map_err(|e| PyLaunchError::new_err(e.to_string()))?;
        }
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
        // SAFETY: arguments were checked against the kernel's parameters; the
        // encoded values live on this stack frame for the call; memory safety
        // of what the kernel does with its pointers is the caller's contract
        // (documented in zyntax.cuda).
        let r = unsafe { k.launch_raw_with(cfg, opts, stream, ptrs.as_mut_ptr()) };
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

/// The owner that keeps the memory behind a kernel or copy argument alive:
/// a DeviceArray's buffer (or foreign producer), any other non-scalar object
/// itself (a tensor exporting `__cuda_array_interface__` or DLPack, a host
/// array). Scalars and raw integer addresses own nothing.
fn owner_of(a: &Bound<'_, PyAny>) -> Option<zc::KeepAlive> {
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
fn keep_captured<'py>(
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
fn convert_arg<'a>(
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
    kernel: Py<CudaKernel>,
    cfg: zc::LaunchConfig,
    opts: zc::LaunchOptions,
    stream_raw: usize,
    /// Keeps the stream alive as long as the launcher.
    _stream: Option<Py<CudaStream>>,
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

/// Waits for all work on `device` (GIL released).
#[pyfunction]
#[pyo3(signature = (device=Checked(0)),
    text_signature = "(device=0)")]
pub fn cuda_synchronize(py: Python<'_>, device: Checked<u32>) -> PyResult<()> {
    guard(|| {
        let d = self::device(py, device.0)?;
        py.detach(move || d.synchronize()).py(py)
    })
}

/// Number of modules in the per-process module cache.
#[pyfunction]
pub fn cuda_module_cache_len() -> usize {
    zc::module_cache_len()
}

/// Registers the CUDA classes and functions on `zyntax._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CudaDevice", py.get_type::<CudaDevice>())?;
    m.add("CudaStream", py.get_type::<CudaStream>())?;
    m.add("CudaEvent", py.get_type::<CudaEvent>())?;
    m.add("CudaModule", py.get_type::<CudaModule>())?;
    m.add("CudaKernel", py.get_type::<CudaKernel>())?;
    m.add("CudaLauncher", py.get_type::<CudaLauncher>())?;
    m.add("CudaGraph", py.get_type::<CudaGraph>())?;
    m.add("CudaGraphExec", py.get_type::<CudaGraphExec>())?;
    m.add("CudaPinnedBuffer", py.get_type::<CudaPinnedBuffer>())?;
    m.add("DeviceArray", py.get_type::<DeviceArray>())?;
    m.add("CudaTensorMap", py.get_type::<CudaTensorMap>())?;
    m.add_function(wrap_pyfunction!(cuda_is_available, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_driver_version, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_empty, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_to_device, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_from_cuda_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_module_cache_len, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_managed_empty, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_register_host, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_prefetch, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_advise, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_memory_kind, m)?)?;
    crate::program::register(m)?;
    Ok(())
}
