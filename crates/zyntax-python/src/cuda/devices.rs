//! Devices and the driver: `Device`, `is_available`, `device_count`,
//! `driver_version`.

use super::{device, OrPy};
use crate::checked::Checked;
use crate::errors::guard;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zyntax_cuda as zc;

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
