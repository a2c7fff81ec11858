//! The structured control-flow scopes of the Python builder: `if_`, `if_else`,
//! `for_range` and `loop_`.

use super::*;

#[pymethods]
impl IfScope {
    fn __enter__(&self, py: Python<'_>) -> PyResult<()> {
        let mut me = lock(&self.st)?;
        if me.used {
            return Err(BuildError::new_err("an if_ scope can be entered only once"));
        }
        me.used = true;
        let cond = self.cond;
        let (frame, id) = self.owner.with_state(py, |st| {
            let b =
                st.b.as_mut()
                    .ok_or_else(|| InternalError::new_err("no builder"))?;
            let f = b.begin_if(cond, &[]).map_err(build_err)?;
            Ok((f, FnShared::open_scope(st)))
        })?;
        me.frame = Some(frame);
        me.scope = Some(id);
        Ok(())
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let mut me = lock(&self.st)?;
        let (Some(frame), Some(id)) = (me.frame.take(), me.scope.take()) else {
            return Ok(false);
        };
        if is_exc(exc_type) {
            self.owner.unwind_scope(id);
            return Ok(false);
        }
        self.owner.with_state(py, |st| {
            self.owner.close_scope(st, id, "if_")?;
            let b =
                st.b.as_mut()
                    .ok_or_else(|| InternalError::new_err("no builder"))?;
            b.end_if(frame, &[]).map_err(build_err).map(|_| ())
        })?;
        Ok(false)
    }
}

#[pymethods]
impl IfElse {
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        {
            let me = slf.get();
            let mut st = lock(&me.st)?;
            if st.phase != Phase::New {
                return Err(BuildError::new_err(
                    "an if_else scope can be entered only once",
                ));
            }
            let id = me.owner.with_state(py, |s| Ok(FnShared::open_scope(s)))?;
            st.scope = Some(id);
            st.phase = Phase::Entered;
        }
        Ok(slf)
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let mut me = lock(&self.st)?;
        let Some(id) = me.scope.take() else {
            return Ok(false);
        };
        if is_exc(exc_type) {
            self.owner.unwind_scope(id);
            me.phase = Phase::Done;
            return Ok(false);
        }
        let phase = me.phase;
        let frame = me.frame.take();
        let n_results = self.result_types.len();
        let results = self.owner.with_state(py, |st| {
            self.owner.close_scope(st, id, "if_else")?;
            let b = st.b.as_mut().ok_or_else(|| InternalError::new_err("no builder"))?;
            match (phase, frame) {
                (Phase::Done, _) => Ok(None),
                // No else branch: the (empty) else block falls through to the merge.
                (Phase::ThenDone, Some(frame)) if n_results == 0 => {
                    b.end_if(frame, &[]).map(Some).map_err(build_err)
                }
                (Phase::ThenDone, _) => Err(BuildError::new_err(
                    "an if_else that yields values needs an else branch",
                )),
                _ => Err(BuildError::new_err(
                    "if_else needs its then-branch: `with ie.then: ...` (or unpack `as (then, else_)`)",
                )),
            }
        })?;
        if let Some(r) = results {
            me.results = r;
        }
        me.phase = Phase::Done;
        Ok(false)
    }

    /// The then-branch scope.
    #[getter]
    fn then(slf: Py<Self>) -> IfBranch {
        IfBranch {
            parent: slf,
            is_else: false,
        }
    }
    /// The else-branch scope.
    #[getter]
    fn else_(slf: Py<Self>) -> IfBranch {
        IfBranch {
            parent: slf,
            is_else: true,
        }
    }
    fn __iter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let pair = (
            IfBranch {
                parent: slf.clone_ref(py),
                is_else: false,
            },
            IfBranch {
                parent: slf,
                is_else: true,
            },
        );
        Ok(pair.into_pyobject(py)?.try_iter()?.into_any().unbind())
    }

    /// Sets the values the open branch passes to the merge point.
    #[pyo3(signature = (*values))]
    fn yield_(&self, values: &Bound<'_, PyTuple>) -> PyResult<()> {
        let ops = self.owner.opnds(values)?;
        let mut me = lock(&self.st)?;
        if !matches!(me.phase, Phase::InThen | Phase::InElse) {
            return Err(BuildError::new_err(
                "yield_ must be called inside a branch of the if_else",
            ));
        }
        me.pending = Some(ops);
        Ok(())
    }

    /// The merged values (after the `with` block).
    #[getter]
    fn results(&self) -> PyResult<Vec<PyValue>> {
        let me = lock(&self.st)?;
        if me.phase != Phase::Done {
            return Err(BuildError::new_err(
                "if_else results are available after its `with` block",
            ));
        }
        let st = lock(&self.owner.state)?;
        let b =
            st.b.as_ref()
                .ok_or_else(|| BuildError::new_err("the builder is closed"))?;
        me.results
            .iter()
            .map(|v| Ok(self.owner.wrap(*v, ty_of(b, *v).map_err(build_err)?)))
            .collect()
    }
}

#[pymethods]
impl IfBranch {
    fn __enter__(&self, py: Python<'_>) -> PyResult<()> {
        self.parent.get().enter_branch(py, self.is_else)
    }
    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.parent
            .get()
            .exit_branch(py, self.is_else, is_exc(exc_type))?;
        Ok(false)
    }
    /// Sets the values this branch passes to the merge point.
    #[pyo3(signature = (*values))]
    fn yield_(&self, values: &Bound<'_, PyTuple>) -> PyResult<()> {
        self.parent.get().yield_(values)
    }
}

#[pymethods]
impl ForRange {
    fn __enter__(&self, py: Python<'_>) -> PyResult<PyValue> {
        Ok(self.inner.enter(py)?.0)
    }
    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.inner.exit(py, is_exc(exc_type))?;
        Ok(false)
    }
}

#[pymethods]
impl Loop {
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.get().inner.enter(py)?;
        Ok(slf)
    }
    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.inner.exit(py, is_exc(exc_type))?;
        Ok(false)
    }

    /// The induction variable (inside the loop).
    #[getter]
    fn index(&self) -> PyResult<PyValue> {
        let me = lock(&self.inner.st)?;
        let f = me
            .frame
            .as_ref()
            .ok_or_else(|| BuildError::new_err("the loop index exists only inside the loop"))?;
        Ok(self.inner.owner.wrap(f.iv, self.inner.ty.clone()))
    }

    /// The carried values of the current iteration (inside the loop).
    #[getter]
    fn carried(&self) -> PyResult<Vec<PyValue>> {
        let me = lock(&self.inner.st)?;
        let f = me
            .frame
            .as_ref()
            .ok_or_else(|| BuildError::new_err("carried values exist only inside the loop"))?;
        let st = lock(&self.inner.owner.state)?;
        let b =
            st.b.as_ref()
                .ok_or_else(|| BuildError::new_err("the builder is closed"))?;
        f.carried
            .iter()
            .map(|v| Ok(self.inner.owner.wrap(*v, ty_of(b, *v).map_err(build_err)?)))
            .collect()
    }

    /// Sets the carried values for the next iteration.
    #[pyo3(signature = (*values))]
    fn next(&self, values: &Bound<'_, PyTuple>) -> PyResult<()> {
        let ops = self.inner.owner.opnds(values)?;
        let mut me = lock(&self.inner.st)?;
        let f = me
            .frame
            .as_ref()
            .ok_or_else(|| BuildError::new_err("next() must be called inside the loop"))?;
        if ops.len() != f.carried.len() {
            return Err(BuildError::new_err(format!(
                "the loop carries {} value(s), next() got {}",
                f.carried.len(),
                ops.len()
            )));
        }
        me.next = Some(ops);
        Ok(())
    }

    /// The carried values after the loop.
    #[getter]
    fn results(&self) -> PyResult<Vec<PyValue>> {
        let me = lock(&self.inner.st)?;
        let r = me.results.as_ref().ok_or_else(|| {
            BuildError::new_err("loop results are available after its `with` block")
        })?;
        let st = lock(&self.inner.owner.state)?;
        let b =
            st.b.as_ref()
                .ok_or_else(|| BuildError::new_err("the builder is closed"))?;
        r.iter()
            .map(|v| Ok(self.inner.owner.wrap(*v, ty_of(b, *v).map_err(build_err)?)))
            .collect()
    }
}
