//! Reading foreign arrays: numpy's `__array_interface__` (host memory) and
//! `__cuda_array_interface__` (device memory, with its producer's stream).

use super::{c_strides, device, err, numel, CudaStream, DeviceArray, Dtype, OrPy, Owner};
use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use zyntax_cuda as zc;

/// Host memory as numpy's `__array_interface__` describes it.
pub(super) struct HostView {
    pub(super) ptr: usize,
    pub(super) shape: Vec<usize>,
    pub(super) dtype: Dtype,
    pub(super) readonly: bool,
}

pub(super) fn host_view(obj: &Bound<'_, PyAny>) -> PyResult<HostView> {
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

pub(super) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}

pub(super) fn opt_stream<'a>(s: Option<&'a Bound<'_, CudaStream>>) -> Option<&'a zc::Stream> {
    s.map(|s| &s.get().inner)
}

pub(super) fn check_stream_device(
    py: Python<'_>,
    s: Option<&zc::Stream>,
    dev: &zc::Device,
) -> PyResult<()> {
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
pub(super) fn pointer_device(ptr: u64) -> Option<u32> {
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

pub(super) fn is_device_memory(ptr: u64) -> bool {
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
pub(super) fn read_cai(
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
pub(super) fn producer_stream(
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
    // The raw handle without building a torch Stream object (~5 us less);
    // torch builds without it answer through the public spelling.
    let handle: usize = match torch
        .getattr("_C")
        .and_then(|c| c.getattr("_cuda_getCurrentRawStream"))
    {
        Ok(raw) => raw.call1((device,))?.extract()?,
        Err(_) => torch
            .getattr("cuda")?
            .call_method1("current_stream", (device,))?
            .getattr("cuda_stream")?
            .extract()?,
    };
    Ok((handle != 0).then_some(handle))
}

thread_local! {
    /// One event per device and thread for [`wait_foreign_stream`]: a wait
    /// uses the event's latest record at the time of the call, so reusing
    /// it is exact (and saves an event creation per foreign launch).
    static WAIT_EVENTS: std::cell::RefCell<Vec<(u32, std::rc::Rc<zc::Event>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Makes the legacy default stream (which orders our blocking streams) wait
/// for work on a foreign stream named by `__cuda_array_interface__`.
pub(super) fn wait_foreign_stream(py: Python<'_>, dev: &zc::Device, stream: usize) -> PyResult<()> {
    // 1 and 2 are the legacy / per-thread default streams: already ordered with ours.
    if stream <= 2 {
        return Ok(());
    }
    let ord = dev.ordinal();
    let cached = WAIT_EVENTS.with(|e| {
        e.borrow()
            .iter()
            .find(|(d, _)| *d == ord)
            .map(|(_, ev)| std::rc::Rc::clone(ev))
    });
    let ev = match cached {
        Some(ev) => ev,
        None => {
            let ev = std::rc::Rc::new(zc::Event::new(dev, false).py(py)?);
            WAIT_EVENTS.with(|e| e.borrow_mut().push((ord, std::rc::Rc::clone(&ev))));
            ev
        }
    };
    // SAFETY: the producer promises `stream` is a live stream of this device.
    unsafe { ev.record_raw(stream as zc::CUstream) }.py(py)?;
    zc::Stream::legacy_default(dev).wait(&ev).py(py)
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
