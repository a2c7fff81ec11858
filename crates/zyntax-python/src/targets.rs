//! `target_table` and `arch_for_capability`: the target table of
//! `zyntax_hir::arch` for Python (`zyntax.targets` reads it; there is no
//! Python copy of these facts).

use crate::checked::Checked;
use crate::errors::guard;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zyntax_hir::arch::{self, ArchFacts};
use zyntax_hir::Arch;

fn row<'py>(py: Python<'py>, r: &ArchFacts) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", r.arch.name())?;
    d.set_item("compute_capability", r.compute_capability)?;
    d.set_item("arch_specific", r.arch_specific)?;
    d.set_item("ptx_version", r.default_ptx.to_string())?;
    d.set_item("min_ptx_version", r.min_ptx.to_string())?;
    d.set_item("features", r.features.clone())?;
    d.set_item("max_shared_bytes", r.max_shared_bytes)?;
    d.set_item("max_blocks_per_sm", r.max_blocks_per_sm)?;
    d.set_item("max_threads_per_sm", r.max_threads_per_sm)?;
    Ok(d)
}

/// The target table: `archs` (one dict per arch, oldest first: `name`,
/// `compute_capability`, `arch_specific`, `ptx_version` (the default),
/// `min_ptx_version`, `features`, `max_shared_bytes`, `max_blocks_per_sm`,
/// `max_threads_per_sm`), `default_arch` and `ptx_versions` (those LLVM emits).
#[pyfunction]
pub fn target_table(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    guard(|| {
        let rows = arch::target_table()
            .iter()
            .map(|r| row(py, r))
            .collect::<PyResult<Vec<_>>>()?;
        let d = PyDict::new(py);
        d.set_item("archs", rows)?;
        d.set_item("default_arch", Arch::DEFAULT.name())?;
        let versions: Vec<String> = arch::ptx_versions().iter().map(|v| v.to_string()).collect();
        d.set_item("ptx_versions", versions)?;
        Ok(d)
    })
}

/// The arch the runtime compiles for on a device of compute capability
/// `major.minor` (`Arch::for_device`: 9.0 gets `sm_90a`, newer devices the
/// newest portable arch), or `None` below sm_70.
#[pyfunction]
pub fn arch_for_capability(
    major: Checked<u32>,
    minor: Checked<u32>,
) -> PyResult<Option<&'static str>> {
    guard(|| Ok(Arch::for_device(major.0, minor.0).map(Arch::name)))
}
