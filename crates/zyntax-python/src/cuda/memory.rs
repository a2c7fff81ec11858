//! Memory kinds beyond the pool: managed (unified) memory with prefetch and
//! advice, registered host arrays, and page-locked (pinned) host buffers.

use super::{
    device, err, host_view, normalize_dtype, numel, opt_stream, parse_shape, CudaStream,
    DeviceArray, OrPy, Owner,
};
use crate::checked::{Checked, Is, Text};
use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use zyntax_cuda as zc;

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
