//! The DLPack ABI: consuming `__dlpack__` capsules (`from_dlpack`) and
//! exporting DeviceArrays.

use super::{device, type_name, DeviceArray, Dtype, Owner};
use crate::errors::{guard, ArgumentError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ffi::c_void;
use std::sync::Arc;

// The DLPack C structs (dlpack.h, version 0.8 layout); their fields are
// read and written by the importers and the exporter in sibling files.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DLDevice {
    pub(super) device_type: i32,
    pub(super) device_id: i32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DLDataType {
    pub(super) code: u8,
    pub(super) bits: u8,
    pub(super) lanes: u16,
}
#[repr(C)]
pub(super) struct DLTensor {
    pub(super) data: *mut c_void,
    pub(super) device: DLDevice,
    pub(super) ndim: i32,
    pub(super) dtype: DLDataType,
    pub(super) shape: *mut i64,
    pub(super) strides: *mut i64,
    pub(super) byte_offset: u64,
}
#[repr(C)]
pub(super) struct DLManagedTensor {
    pub(super) dl_tensor: DLTensor,
    pub(super) manager_ctx: *mut c_void,
    pub(super) deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

const KDL_CPU: i32 = 1;
pub(super) const KDL_CUDA: i32 = 2;
const KDL_CUDA_HOST: i32 = 3;
pub(super) const KDL_CUDA_MANAGED: i32 = 13;

/// What we export: the managed tensor first, so a pointer to it is a pointer
/// to the whole context.
#[repr(C)]
pub(super) struct ExportCtx {
    pub(super) managed: DLManagedTensor,
    pub(super) shape: Vec<i64>,
    pub(super) strides: Vec<i64>,
    pub(super) _owner: Arc<Owner>,
}

pub(super) unsafe extern "C" fn export_deleter(p: *mut DLManagedTensor) {
    if !p.is_null() {
        // SAFETY: `p` is the first field of a boxed ExportCtx we leaked in `__dlpack__`;
        // the protocol calls the deleter exactly once.
        drop(unsafe { Box::from_raw(p.cast::<ExportCtx>()) });
    }
}

pub(super) const DLTENSOR: &std::ffi::CStr = c"dltensor";
const USED_DLTENSOR: &std::ffi::CStr = c"used_dltensor";

pub(super) unsafe extern "C" fn capsule_destructor(cap: *mut ffi::PyObject) {
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
pub(super) struct DlpackTensor(pub(super) *mut DLManagedTensor);
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
pub(super) fn consume_capsule(cap: &Bound<'_, PyAny>) -> PyResult<DlpackTensor> {
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
