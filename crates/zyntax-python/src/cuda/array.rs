//! `DeviceArray`: an n-dimensional array in device memory, its allocation
//! (`empty`, `to_device`) and host copies.

use super::{
    capsule_destructor, check_stream_device, device, export_deleter, host_view, normalize_dtype,
    numpy, opt_stream, owner_of, CudaStream, DLDataType, DLDevice, DLManagedTensor, DLTensor,
    DlpackTensor, Dtype, ExportCtx, OrPy, DLTENSOR, KDL_CUDA,
};
use crate::checked::{self, Checked, Flag, Is};
use crate::errors::{guard, ArgumentError, CudaError as PyCudaError};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use std::ffi::c_void;
use std::sync::Arc;
use zyntax_cuda as zc;
use zyntax_hir::ScalarType;

/// What keeps a DeviceArray's memory alive.
pub(super) enum Owner {
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
    pub(super) ptr: u64,
    pub(super) shape: Vec<usize>,
    /// Byte strides; `None` means C-contiguous.
    pub(super) strides: Option<Vec<isize>>,
    pub(super) dtype: Dtype,
    pub(super) device: zc::Device,
    pub(super) owner: Arc<Owner>,
}

pub(super) fn c_strides(shape: &[usize], itemsize: usize) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = itemsize as isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i].max(1) as isize;
    }
    s
}

pub(super) fn numel(shape: &[usize]) -> PyResult<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| ArgumentError::new_err("argument 'shape': the element count overflows"))
}

/// An integer or a sequence of integers, each a checked `usize` (a negative,
/// huge, `float` or `bool` dimension is an `ArgumentError` naming `shape`).
pub(super) fn parse_shape(obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
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
