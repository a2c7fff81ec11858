//! Variables of `zyntax.hir.FunctionBuilder`: SSA construction in the Rust
//! builder (`zyntax_hir::ssa`). A front-end declares variables, assigns and
//! reads them in whatever block it is in, and seals blocks once every branch
//! to them exists; the builder adds the block parameters where paths join.
//! The `#[pymethods]` of `FunctionBuilder` (one block, in `hir.rs`) forward here.

use super::{mat, FnShared, FunctionBuilder, PyBlock, PyValue};
use crate::checked::{Is, Text};
use crate::errors::BuildError;
use crate::types::{to_type, PyHirType};
use pyo3::prelude::*;
use std::sync::Arc;
use zyntax_hir::{Type, Var};

/// A variable of a function under construction (see
/// `FunctionBuilder.declare_var`): assign it with `def_var`, read it with
/// `use_var`.
#[pyclass(frozen, name = "Var", module = "zyntax.hir")]
pub struct PyVar {
    owner: Arc<FnShared>,
    id: Var,
    ty: Type,
    name: Option<String>,
}

#[pymethods]
impl PyVar {
    /// The type of every value the variable holds.
    #[getter]
    fn r#type(&self) -> PyHirType {
        PyHirType(self.ty.clone())
    }
    /// The name given to `declare_var`, if any.
    #[getter]
    fn name(&self) -> Option<String> {
        self.name.clone()
    }
    /// Index of the variable in its function (`var{id}` in messages).
    #[getter]
    fn id(&self) -> u32 {
        self.id.0
    }
    /// Name of the function the variable belongs to.
    #[getter]
    fn function(&self) -> String {
        self.owner.name.clone()
    }
    fn __repr__(&self) -> String {
        let name = self
            .name
            .as_deref()
            .map(|n| format!(" {n:?}"))
            .unwrap_or_default();
        format!(
            "<Var {}{name}: {} in @{}>",
            self.id, self.ty, self.owner.name
        )
    }
}

impl FunctionBuilder {
    /// The variable's id, if it belongs to this builder.
    fn var_id(&self, var: &Bound<'_, PyVar>) -> PyResult<Var> {
        let v = var.get();
        if !Arc::ptr_eq(&v.owner, &self.sh) {
            return Err(BuildError::new_err(format!(
                "variable {} belongs to @{}, not @{}",
                v.id, v.owner.name, self.sh.name
            )));
        }
        Ok(v.id)
    }

    pub(super) fn ssa_declare_var(
        &self,
        py: Python<'_>,
        ty: &Bound<'_, PyAny>,
        name: Option<Text>,
    ) -> PyResult<PyVar> {
        let ty = to_type(ty)?;
        let name = name.map(|n| n.0);
        let id = self.sh.run(py, |fb| {
            Ok(match &name {
                Some(n) => fb.declare_named_var(n.clone(), ty.clone()),
                None => fb.declare_var(ty.clone()),
            })
        })?;
        Ok(PyVar {
            owner: self.sh.clone(),
            id,
            ty,
            name,
        })
    }

    pub(super) fn ssa_def_var(
        &self,
        py: Python<'_>,
        var: Is<'_, PyVar>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = self.var_id(&var)?;
        let ty = var.get().ty.clone();
        // A Python number becomes a constant of the variable's type.
        let (o, _) = self.sh.opnd(value)?;
        self.sh.run(py, |fb| {
            let v = mat(fb, &o, &ty)?;
            fb.def_var(id, v)
        })
    }

    pub(super) fn ssa_use_var(&self, py: Python<'_>, var: Is<'_, PyVar>) -> PyResult<PyValue> {
        let id = self.var_id(&var)?;
        self.sh.run1(py, |fb| fb.use_var(id))
    }

    pub(super) fn ssa_seal_block(&self, py: Python<'_>, block: Is<'_, PyBlock>) -> PyResult<()> {
        let id = self.block_id(&block)?;
        self.sh.run(py, |fb| fb.seal_block(id))
    }

    pub(super) fn ssa_seal_all_blocks(&self, py: Python<'_>) -> PyResult<()> {
        self.sh.run(py, |fb| fb.seal_all_blocks())
    }

    pub(super) fn ssa_is_sealed(&self, py: Python<'_>, block: Is<'_, PyBlock>) -> PyResult<bool> {
        let id = self.block_id(&block)?;
        self.sh.run(py, |fb| Ok(fb.is_sealed(id)))
    }
}
