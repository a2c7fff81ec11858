//! The kernel fusion planner (`zyntax_opt::fusion`) for `zyntax.fusion`.

use crate::checked::Text;
use crate::errors::BuildError;
use pyo3::prelude::*;

/// Plans the fusion of a launch sequence given as JSON; returns the plan as JSON.
#[pyfunction]
pub fn fusion_plan(sequence: Text) -> PyResult<String> {
    zyntax_opt::fusion::plan_json(&sequence).map_err(|e| BuildError::new_err(e.to_string()))
}
