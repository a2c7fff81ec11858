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
//!
//! One file per concern: `dtype` (numpy element types), `dlpack` (the
//! DLPack ABI and `from_dlpack`), `interface` (reading numpy's and CUDA's
//! array interfaces), `array` (`DeviceArray`), `memory` (managed,
//! registered and pinned memory), `devices`, `streams` (streams, events,
//! graphs), `modules`, `kernels` (the launch path) and `tensormap`.
//! This file holds the error mapping they share and the registration on
//! `zyntax._native`.

use crate::checked::Checked;
use crate::errors::{guard, CudaError as PyCudaError, LaunchError as PyLaunchError};
use pyo3::prelude::*;
use zyntax_cuda as zc;

// Reading launch arguments natively (issue 25).
mod abi;
mod array;
mod devices;
mod dlpack;
mod dtype;
// The one fatbin parser and image rules, for zyntax.fatbin and zyntax.bundle (issue 28).
mod fatbin;
mod interface;
mod kernels;
mod memory;
mod modules;
// Call plans of zyntax.kernels replayed natively (issue 25).
mod plans;
mod streams;
// Tensor maps for TMA (issue 13 item 2).
mod tensormap;
// PyTorch tensors read and made through libtorch's C functions (issue 25).
mod torch_c;

// Re-exported so that the files import each other's items as `super::X`
// and the rest of the crate as `crate::cuda::X`.
pub(crate) use array::*;
pub(crate) use devices::*;
pub(crate) use dlpack::*;
pub(crate) use dtype::*;
pub(crate) use interface::*;
pub(crate) use kernels::*;
pub(crate) use memory::*;
pub(crate) use modules::*;
pub(crate) use streams::*;
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
    m.add("CudaArgPlan", py.get_type::<abi::ArgPlan>())?;
    m.add("CudaArgLauncher", py.get_type::<abi::ArgLauncher>())?;
    m.add("CudaArgDispatch", py.get_type::<abi::ArgDispatch>())?;
    m.add("KernelLaunchers", py.get_type::<abi::KernelLaunchers>())?;
    m.add("CudaCallPlans", py.get_type::<plans::CallPlans>())?;
    m.add("CudaCallKey", py.get_type::<plans::CallKey>())?;
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
    m.add_function(wrap_pyfunction!(fatbin::cuda_parse_fatbin, m)?)?;
    m.add_function(wrap_pyfunction!(fatbin::cuda_bundle_runs_on, m)?)?;
    m.add_function(wrap_pyfunction!(fatbin::cuda_bundle_choose, m)?)?;
    m.add_function(wrap_pyfunction!(fatbin::cuda_bundle_check_image, m)?)?;
    m.add_function(wrap_pyfunction!(torch_c::cuda_torch_c_load, m)?)?;
    m.add_function(wrap_pyfunction!(torch_c::cuda_torch_c_read, m)?)?;
    m.add_function(wrap_pyfunction!(torch_c::cuda_torch_c_empty, m)?)?;
    m.add_function(wrap_pyfunction!(torch_c::cuda_torch_c_enable, m)?)?;
    m.add_function(wrap_pyfunction!(torch_c::cuda_torch_c_stream, m)?)?;
    m.add_function(wrap_pyfunction!(torch_c::cuda_torch_c_stream_enable, m)?)?;
    crate::program::register(m)?;
    Ok(())
}
