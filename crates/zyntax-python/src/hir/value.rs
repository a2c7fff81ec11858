//! The Python `Value` and `Block` handles.

use super::*;

#[pymethods]
impl PyValue {
    #[getter]
    fn r#type(&self) -> PyHirType {
        PyHirType(self.ty.clone())
    }
    /// Index of the value in its function (`v{id}` in `.zir` before canonicalization).
    #[getter]
    fn id(&self) -> u32 {
        self.id.0
    }
    #[getter]
    fn name(&self) -> String {
        self.id.to_string()
    }
    /// Name of the function the value belongs to.
    #[getter]
    fn function(&self) -> String {
        self.owner.name.clone()
    }
    fn __repr__(&self) -> String {
        format!("<Value {}: {} in @{}>", self.id, self.ty, self.owner.name)
    }
    fn __hash__(&self) -> u64 {
        (Arc::as_ptr(&self.owner) as u64).wrapping_mul(31) ^ u64::from(self.id.0)
    }
    fn __bool__(&self) -> PyResult<bool> {
        Err(PyTypeError::new_err(
            "a zyntax Value is symbolic and has no truth value; use b.if_(cond) or b.select()",
        ))
    }
    fn __richcmp__(
        slf: &Bound<'_, Self>,
        other: &Bound<'_, PyAny>,
        op: pyo3::basic::CompareOp,
    ) -> PyResult<Py<PyAny>> {
        use pyo3::basic::CompareOp as C;
        let py = slf.py();
        let me = slf.get();
        let cmp = match op {
            C::Eq | C::Ne => {
                let same = other.cast::<PyValue>().is_ok_and(|o| {
                    let o = o.get();
                    Arc::ptr_eq(&o.owner, &me.owner) && o.id == me.id
                });
                let r = if matches!(op, C::Eq) { same } else { !same };
                return Ok(PyBool::new(py, r).to_owned().into_any().unbind());
            }
            C::Lt => CmpOp::Lt,
            C::Le => CmpOp::Le,
            C::Gt => CmpOp::Gt,
            C::Ge => CmpOp::Ge,
        };
        let v = me.owner.cmp(py, cmp, slf.as_any(), other)?;
        Ok(v.into_pyobject(py)?.into_any().unbind())
    }

    fn __add__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Add, slf.as_any(), o)
    }
    fn __radd__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Add, o, slf.as_any())
    }
    fn __sub__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Sub, slf.as_any(), o)
    }
    fn __rsub__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Sub, o, slf.as_any())
    }
    fn __mul__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Mul, slf.as_any(), o)
    }
    fn __rmul__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Mul, o, slf.as_any())
    }
    fn __truediv__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Div, slf.as_any(), o)
    }
    fn __rtruediv__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Div, o, slf.as_any())
    }
    fn __floordiv__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Div, slf.as_any(), o)
    }
    fn __rfloordiv__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Div, o, slf.as_any())
    }
    fn __mod__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Rem, slf.as_any(), o)
    }
    fn __rmod__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Rem, o, slf.as_any())
    }
    fn __and__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::And, slf.as_any(), o)
    }
    fn __rand__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::And, o, slf.as_any())
    }
    fn __or__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get().owner.binary(slf.py(), BinOp::Or, slf.as_any(), o)
    }
    fn __ror__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get().owner.binary(slf.py(), BinOp::Or, o, slf.as_any())
    }
    fn __xor__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Xor, slf.as_any(), o)
    }
    fn __rxor__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Xor, o, slf.as_any())
    }
    fn __lshift__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Shl, slf.as_any(), o)
    }
    fn __rlshift__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Shl, o, slf.as_any())
    }
    fn __rshift__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Shr, slf.as_any(), o)
    }
    fn __rrshift__(slf: &Bound<'_, Self>, o: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        slf.get()
            .owner
            .binary(slf.py(), BinOp::Shr, o, slf.as_any())
    }
    fn __neg__(slf: &Bound<'_, Self>) -> PyResult<PyValue> {
        slf.get().owner.unary(slf.py(), UnOp::Neg, slf.as_any())
    }
    fn __invert__(slf: &Bound<'_, Self>) -> PyResult<PyValue> {
        slf.get().owner.unary(slf.py(), UnOp::Not, slf.as_any())
    }
}

#[pymethods]
impl PyBlock {
    #[getter]
    fn id(&self) -> u32 {
        self.id.0
    }
    #[getter]
    fn name(&self) -> String {
        self.id.to_string()
    }
    /// The block's parameters.
    #[getter]
    fn params(&self, py: Python<'_>) -> PyResult<Vec<PyValue>> {
        let id = self.id;
        self.owner.run_n(py, |b| b.block_params(id))
    }
    fn __repr__(&self) -> String {
        format!("<Block {} in @{}>", self.id, self.owner.name)
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyBlock>().is_ok_and(|o| {
            let o = o.get();
            Arc::ptr_eq(&o.owner, &self.owner) && o.id == self.id
        })
    }
    fn __hash__(&self) -> u64 {
        (Arc::as_ptr(&self.owner) as u64).wrapping_mul(31) ^ u64::from(self.id.0)
    }
}
