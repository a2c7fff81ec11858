//! The Python `FunctionBuilder`'s hand-written methods: blocks, constants and scalar ops, memory, calls and control flow, structured
//! control flow, variables and finishing.

use super::*;

#[pymethods]
impl FunctionBuilder {
    #[getter]
    fn name(&self) -> String {
        self.sh.name.clone()
    }

    /// The function's parameters (the entry block's parameters).
    #[getter]
    fn params(&self, py: Python<'_>) -> PyResult<Vec<PyValue>> {
        self.sh.run_n(py, |b| Ok(b.params()))
    }

    /// The i-th parameter.
    fn param(&self, py: Python<'_>, index: Checked<usize>) -> PyResult<PyValue> {
        self.sh.run1(py, |b| b.try_param(index.0))
    }

    #[getter]
    fn returns(&self) -> Vec<PyHirType> {
        self.sh.returns.iter().cloned().map(PyHirType).collect()
    }

    #[getter]
    fn is_finished(&self) -> PyResult<bool> {
        Ok(lock(&self.sh.state)?.b.is_none())
    }

    /// Whether the current block already ends in a terminator.
    #[getter]
    fn is_terminated(&self, py: Python<'_>) -> PyResult<bool> {
        self.sh.run(py, |b| Ok(b.is_terminated()))
    }

    #[getter]
    fn current_block(&self, py: Python<'_>) -> PyResult<Option<PyBlock>> {
        let cur = self.sh.run(py, |b| Ok(b.current_block()))?;
        Ok(cur.map(|id| PyBlock {
            owner: self.sh.clone(),
            id,
        }))
    }

    #[getter]
    fn entry(&self, py: Python<'_>) -> PyResult<PyBlock> {
        let e = self.sh.run(py, |b| match b.func().entry() {
            Some(e) => Ok(e),
            None => berr(b.name(), "function has no entry block"),
        })?;
        Ok(PyBlock {
            owner: self.sh.clone(),
            id: e,
        })
    }

    /// Overrides the recorded source location for the following instructions
    /// (for front-ends that compile another language); `None` restores
    /// automatic Python locations. With `function=True` it is also the
    /// function's own location (its header: errors about the whole function
    /// and the PTX line table's entry name it).
    #[pyo3(signature = (file, line=Checked(1), col=Checked(1), *, function=Flag(false)),
        text_signature = "($self, file, line=1, col=1, *, function=False)")]
    fn set_location(
        &self,
        file: Option<Text>,
        line: Checked<u32>,
        col: Checked<u32>,
        function: Flag,
    ) -> PyResult<()> {
        let mut st = lock(&self.sh.state)?;
        st.loc_override = file.map(|f| Loc {
            file: Some(f.0),
            line: line.0,
            col: col.0,
        });
        if function.0 {
            let loc = st.loc_override.clone();
            if let Some(b) = st.b.as_mut() {
                b.set_function_loc(loc);
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------ blocks

    /// A new block whose parameters have the given types (placed on first `switch_to`).
    #[pyo3(signature = (*param_types))]
    fn block(&self, py: Python<'_>, param_types: &Bound<'_, PyTuple>) -> PyResult<PyBlock> {
        let tys = to_types(param_types.as_any())?;
        let id = self.sh.run(py, |b| Ok(b.create_block(&tys)))?;
        Ok(PyBlock {
            owner: self.sh.clone(),
            id,
        })
    }

    /// Continue appending at the end of `block`.
    fn switch_to(&self, py: Python<'_>, block: Is<'_, PyBlock>) -> PyResult<()> {
        let blk = block.get();
        if !Arc::ptr_eq(&blk.owner, &self.sh) {
            return Err(BuildError::new_err(format!(
                "{} belongs to @{}, not @{}",
                blk.id, blk.owner.name, self.sh.name
            )));
        }
        let id = blk.id;
        self.sh.run(py, |b| {
            b.switch_to(id);
            Ok(())
        })
    }

    // ------------------------------------------------------------ constants and scalar ops

    /// A constant of type `type` (int, float or bool).
    #[pyo3(name = "const")]
    fn const_(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        r#type: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let ty = to_type(r#type)?;
        let (o, _) = self.sh.opnd(value)?;
        if let Opnd::V(_) = o {
            return Err(ArgumentError::new_err(
                "const() takes a Python number or bool, not a Value",
            ));
        }
        self.sh.run1(py, |fb| mat(fb, &o, &ty))
    }

    /// Generic two-operand op by name (`"add"`, `"shr"`, ...).
    fn binary(
        &self,
        py: Python<'_>,
        op: Text,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let op = enum_name("binary op", &op, BinOp::ALL, BinOp::from_name, BinOp::name)?;
        self.sh.binary(py, op, a, b)
    }

    /// Generic one-operand op by name (`"neg"`, `"sqrt"`, ...).
    fn unary(&self, py: Python<'_>, op: Text, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        let op = enum_name("unary op", &op, UnOp::ALL, UnOp::from_name, UnOp::name)?;
        self.sh.unary(py, op, a)
    }

    /// `a * b + c` (floats), fused.
    fn fma(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        c: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let ops = [self.sh.opnd(a)?, self.sh.opnd(b)?, self.sh.opnd(c)?];
        let ty = ops.iter().find_map(|o| o.1.clone()).ok_or_else(|| {
            ArgumentError::new_err("`fma` needs at least one zyntax.hir.Value operand")
        })?;
        self.sh.run1(py, |fb| {
            let a = mat(fb, &ops[0].0, &ty)?;
            let b = mat(fb, &ops[1].0, &ty)?;
            let c = mat(fb, &ops[2].0, &ty)?;
            fb.fma(a, b, c)
        })
    }

    /// Generic comparison by name (`"eq"`, `"ne"`, `"lt"`, `"le"`, `"gt"`, `"ge"`); gives a bool.
    fn cmp(
        &self,
        py: Python<'_>,
        op: Text,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let op = enum_name("comparison", &op, CmpOp::ALL, CmpOp::from_name, CmpOp::name)?;
        self.sh.cmp(py, op, a, b)
    }

    /// `cond ? a : b`.
    fn select(
        &self,
        py: Python<'_>,
        cond: &Bound<'_, PyAny>,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (oc, _) = self.sh.opnd(cond)?;
        let (oa, ta) = self.sh.opnd(a)?;
        let (ob, tb) = self.sh.opnd(b)?;
        let ty = ta.or(tb).ok_or_else(|| {
            ArgumentError::new_err("`select` needs a zyntax.hir.Value as a or b to infer the type")
        })?;
        self.sh.run1(py, |fb| {
            let c = mat(fb, &oc, &Type::BOOL)?;
            let a = mat(fb, &oa, &ty)?;
            let b = mat(fb, &ob, &ty)?;
            fb.select(c, a, b)
        })
    }

    /// Numeric conversion to `type`.
    fn cast(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        r#type: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let ty = to_type(r#type)?;
        let (v, _) = self.sh.value(value, "the operand of `cast`")?;
        self.sh.run1(py, |fb| fb.cast(v, ty))
    }

    /// Reinterprets the bits of `value` as `type` (same size).
    fn bitcast(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        r#type: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let ty = to_type(r#type)?;
        let (v, _) = self.sh.value(value, "the operand of `bitcast`")?;
        self.sh.run1(py, |fb| fb.bitcast(v, ty))
    }

    /// Reads lane `lane` of a vector.
    fn extract(
        &self,
        py: Python<'_>,
        vector: &Bound<'_, PyAny>,
        lane: Checked<u32>,
    ) -> PyResult<PyValue> {
        let (v, _) = self.sh.value(vector, "the vector of `extract`")?;
        self.sh.run1(py, |fb| fb.extract(v, lane.0))
    }

    /// A copy of `vector` with lane `lane` replaced by `scalar`.
    fn insert(
        &self,
        py: Python<'_>,
        vector: &Bound<'_, PyAny>,
        scalar: &Bound<'_, PyAny>,
        lane: Checked<u32>,
    ) -> PyResult<PyValue> {
        let (v, vt) = self.sh.value(vector, "the vector of `insert`")?;
        let (os, _) = self.sh.opnd(scalar)?;
        let et = vt.elem_scalar().map(Type::Scalar).unwrap_or(vt);
        self.sh.run1(py, |fb| {
            let s = mat(fb, &os, &et)?;
            fb.insert(v, s, lane.0)
        })
    }

    // ------------------------------------------------------------ memory

    /// Loads the pointee of `ptr`.
    fn load(&self, py: Python<'_>, ptr: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        let (p, _) = self.sh.value(ptr, "the pointer of `load`")?;
        self.sh.run1(py, |fb| fb.load(p))
    }

    /// Stores `value` at `ptr` (a literal takes the pointee type).
    fn store(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (p, pt) = self.sh.value(ptr, "the pointer of `store`")?;
        let (ov, _) = self.sh.opnd(value)?;
        let et = pt.pointee().cloned().unwrap_or(pt);
        self.sh.run(py, |fb| {
            let v = mat(fb, &ov, &et)?;
            fb.store(p, v)
        })
    }

    /// `ptr + index` elements (a literal index is an i64).
    fn ptr_add(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        index: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (p, _) = self.sh.value(ptr, "the pointer of `ptr_add`")?;
        let (oi, _) = self.sh.opnd(index)?;
        self.sh.run1(py, |fb| {
            let i = mat(fb, &oi, &Type::I64)?;
            fb.ptr_add(p, i)
        })
    }

    /// Address-space cast (to/from generic) or change of pointee type.
    fn ptr_cast(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        r#type: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let ty = to_type(r#type)?;
        let (p, _) = self.sh.value(ptr, "the pointer of `ptr_cast`")?;
        self.sh.run1(py, |fb| fb.ptr_cast(p, ty))
    }

    /// Per-thread stack memory of `count` elements; returns a local pointer.
    #[pyo3(signature = (elem, count=Checked(1)), text_signature = "($self, elem, count=1)")]
    fn alloca(
        &self,
        py: Python<'_>,
        elem: &Bound<'_, PyAny>,
        count: Checked<u64>,
    ) -> PyResult<PyValue> {
        let t = to_type(elem)?;
        self.sh.run1(py, |fb| fb.alloca(t, count.0))
    }

    /// Static shared memory of `count` elements for the block; returns a
    /// shared pointer aligned to `align` bytes (a power of two up to 1024; 0:
    /// the default, the element's alignment and at least 16).
    #[pyo3(signature = (elem, count, align=Checked(0)),
        text_signature = "($self, elem, count, align=0)")]
    fn shared_alloc(
        &self,
        py: Python<'_>,
        elem: &Bound<'_, PyAny>,
        count: Checked<u64>,
        align: Checked<u32>,
    ) -> PyResult<PyValue> {
        let t = to_type(elem)?;
        self.sh
            .run1(py, |fb| fb.shared_alloc_aligned(t, count.0, align.0))
    }

    /// Pointer to the block's dynamic shared memory (size given at launch),
    /// aligned to `align` bytes (as for `shared_alloc`).
    #[pyo3(signature = (elem, align=Checked(0)), text_signature = "($self, elem, align=0)")]
    fn dyn_shared(
        &self,
        py: Python<'_>,
        elem: &Bound<'_, PyAny>,
        align: Checked<u32>,
    ) -> PyResult<PyValue> {
        let t = to_type(elem)?;
        self.sh.run1(py, |fb| fb.dyn_shared_aligned(t, align.0))
    }

    // ------------------------------------------------------------ calls and control flow

    /// Calls `callee` (a function of this module, by name or builder). Returns
    /// `None`, one `Value`, or a tuple for several results. `returns` declares
    /// the result types of a function not (yet) declared in the module.
    #[pyo3(signature = (callee, *args, returns=None))]
    fn call(
        &self,
        py: Python<'_>,
        callee: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        returns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let name: String = if let Ok(fb) = callee.cast::<FunctionBuilder>() {
            fb.get().sh.name.clone()
        } else if let Ok(s) = callee.cast::<PyString>() {
            s.to_cow()?.trim_start_matches('@').to_string()
        } else {
            return Err(ArgumentError::new_err(format!(
                "callee must be a function name or a FunctionBuilder, got {}",
                type_name(callee)
            )));
        };
        let declared = {
            let ms = lock(&self.sh.module.state)?;
            ms.decls
                .iter()
                .find(|d| d.name == name)
                .map(|d| (d.params.clone(), d.returns.clone()))
        };
        let (params, rets) = match (declared, returns) {
            (_, Some(r)) => (Vec::new(), to_types(r)?),
            (Some((p, r)), None) => (p, r),
            (None, None) => {
                return Err(BuildError::new_err(format!(
                "unknown function @{name}: declare it in this module first, or pass returns=[...]"
            )))
            }
        };
        let ops = self.sh.opnds(args)?;
        let vals = self.sh.run_n(py, |fb| {
            let a = mat_all(fb, &ops, &params)?;
            fb.call(name, &a, &rets)
        })?;
        Ok(match vals.len() {
            0 => py.None(),
            1 => vals.into_iter().next().map_or_else(
                || py.None(),
                |v| {
                    v.into_pyobject(py)
                        .map(|b| b.into_any().unbind())
                        .unwrap_or_else(|_| py.None())
                },
            ),
            _ => PyTuple::new(py, vals)?.into_any().unbind(),
        })
    }

    /// Jumps to `block`, passing `args` to its parameters.
    #[pyo3(signature = (block, *args))]
    fn jump(
        &self,
        py: Python<'_>,
        block: Is<'_, PyBlock>,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<()> {
        let id = self.block_id(&block)?;
        let ops = self.sh.opnds(args)?;
        self.sh.run(py, |fb| {
            let tys = block_param_types(fb, id)?;
            let a = mat_all(fb, &ops, &tys)?;
            fb.jump(id, &a)
        })
    }

    /// Conditional branch to `then_block(*then_args)` or `else_block(*else_args)`.
    #[pyo3(signature = (cond, then_block, else_block, then_args=None, else_args=None))]
    fn br(
        &self,
        py: Python<'_>,
        cond: &Bound<'_, PyAny>,
        then_block: Is<'_, PyBlock>,
        else_block: Is<'_, PyBlock>,
        then_args: Option<&Bound<'_, PyAny>>,
        else_args: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (c, _) = self.sh.value(cond, "the condition of `br`")?;
        let t = self.block_id(&then_block)?;
        let e = self.block_id(&else_block)?;
        let ta = self.opnd_seq(then_args)?;
        let ea = self.opnd_seq(else_args)?;
        self.sh.run(py, |fb| {
            let tt = block_param_types(fb, t)?;
            let et = block_param_types(fb, e)?;
            let ta = mat_all(fb, &ta, &tt)?;
            let ea = mat_all(fb, &ea, &et)?;
            fb.branch(c, t, &ta, e, &ea)
        })
    }

    /// Returns from the function (literals take the declared return types).
    #[pyo3(signature = (*values))]
    fn ret(&self, py: Python<'_>, values: &Bound<'_, PyTuple>) -> PyResult<()> {
        let ops = self.sh.opnds(values)?;
        let rets = self.sh.returns.clone();
        self.sh.run(py, |fb| {
            let v = mat_all(fb, &ops, &rets)?;
            fb.ret(&v)
        })
    }

    fn unreachable(&self, py: Python<'_>) -> PyResult<()> {
        self.sh.run(py, |fb| fb.unreachable())
    }

    // ------------------------------------------------------------ structured control flow

    /// `with b.if_(cond): ...` — the body runs when `cond` is true.
    fn if_(&self, cond: &Bound<'_, PyAny>) -> PyResult<IfScope> {
        let (c, _) = self.sh.value(cond, "the condition of `if_`")?;
        Ok(IfScope {
            owner: self.sh.clone(),
            cond: c,
            st: Mutex::new(IfScopeState::default()),
        })
    }

    /// `with b.if_else(cond) as (then, else_): with then: ...; with else_: ...`.
    /// With `results=[types]`, each branch calls `yield_(*values)` and the merged
    /// values are in `.results` after the `with`.
    #[pyo3(signature = (cond, results=None))]
    fn if_else(
        &self,
        cond: &Bound<'_, PyAny>,
        results: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<IfElse> {
        let (c, _) = self.sh.value(cond, "the condition of `if_else`")?;
        let result_types = match results {
            Some(r) => to_types(r)?,
            None => Vec::new(),
        };
        Ok(IfElse {
            owner: self.sh.clone(),
            cond: c,
            result_types,
            st: Mutex::new(IfElseState::default()),
        })
    }

    /// `with b.for_range(start, stop, step) as i: ...` — a counted loop with
    /// `step > 0`. Literal bounds take the type of the first `Value` among them
    /// (or `type`, default i32).
    #[pyo3(signature = (start, stop, step=None, *, r#type=None))]
    fn for_range(
        &self,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        step: Option<&Bound<'_, PyAny>>,
        r#type: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<ForRange> {
        Ok(ForRange {
            inner: self.loop_spec(start, stop, step, r#type, None)?,
        })
    }

    /// Like `for_range`, carrying `carry` values around the loop:
    /// `with b.loop(0, n, carry=[acc0]) as lp: lp.next(b.add(lp.carried[0], x))`;
    /// the final carried values are in `lp.results` afterwards.
    #[pyo3(signature = (start, stop, step=None, *, carry=None, r#type=None))]
    fn r#loop(
        &self,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        step: Option<&Bound<'_, PyAny>>,
        carry: Option<&Bound<'_, PyAny>>,
        r#type: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Loop> {
        Ok(Loop {
            inner: self.loop_spec(start, stop, step, r#type, carry)?,
        })
    }

    // ------------------------------------------------------------ variables (hir/ssa.rs)

    /// A new variable of `type` (SSA construction): assign it with `def_var`
    /// and read it with `use_var` in any block; the builder adds the block
    /// parameters where paths join. `name` appears in error messages.
    #[pyo3(signature = (r#type, name=None))]
    fn declare_var(
        &self,
        py: Python<'_>,
        r#type: &Bound<'_, PyAny>,
        name: Option<Text>,
    ) -> PyResult<PyVar> {
        self.ssa_declare_var(py, r#type, name)
    }

    /// Assigns `value` (a `Value` of the variable's type, or a Python number)
    /// to `var` in the current block.
    fn def_var(
        &self,
        py: Python<'_>,
        var: Is<'_, PyVar>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.ssa_def_var(py, var, value)
    }

    /// The value of `var` in the current block. A read that some path from
    /// the entry reaches without an assignment is a BuildError (here, or when
    /// the block that waited for it is sealed).
    fn use_var(&self, py: Python<'_>, var: Is<'_, PyVar>) -> PyResult<PyValue> {
        self.ssa_use_var(py, var)
    }

    /// Declares that every branch to `block` exists; a later branch to it is a
    /// BuildError. The structured scopes seal the blocks they create, and
    /// `finish` seals every block left unsealed.
    fn seal_block(&self, py: Python<'_>, block: Is<'_, PyBlock>) -> PyResult<()> {
        self.ssa_seal_block(py, block)
    }

    /// Seals every block not sealed yet.
    fn seal_all_blocks(&self, py: Python<'_>) -> PyResult<()> {
        self.ssa_seal_all_blocks(py)
    }

    /// Whether `block` is sealed.
    fn is_sealed(&self, py: Python<'_>, block: Is<'_, PyBlock>) -> PyResult<bool> {
        self.ssa_is_sealed(py, block)
    }

    // ------------------------------------------------------------ finishing

    /// Finishes the function and adds it to its module; the builder is closed.
    /// Adds the implicit `return` of a function that returns nothing, exactly
    /// as leaving a `with` block does. `prune=True` drops the blocks no path
    /// from the entry reaches (code a translator emitted after a `return`).
    #[pyo3(signature = (*, prune=Flag(false)), text_signature = "($self, *, prune=False)")]
    fn finish(&self, py: Python<'_>, prune: Flag) -> PyResult<()> {
        self.implicit_return(py)?;
        self.sh.finish(prune.0)
    }

    /// Drops the function under construction without adding it to the module
    /// (its name is free again), as leaving `with` on an exception does.
    fn abandon(&self) {
        self.sh.abandon();
    }

    /// One instruction by its `.zir` mnemonic (`"cmp.lt"`, `"atomic.add.device"`,
    /// `"shfl.idx"`), for front-ends that translate another language: `args`
    /// are `Value`s, `results` the result types (`None`: the ones the row's
    /// rule gives for the operands), `imm` the immediates the row's operand
    /// template names (`alloca`: `elem`, `count`; `shfl.*`: `width`; ...).
    /// The op comes from the instruction table; the operand types are checked
    /// against the row's rules here (hir/emit.rs), the rest at `verify`.
    #[pyo3(signature = (mnemonic, args, results=None, imm=None))]
    fn inst(
        &self,
        py: Python<'_>,
        mnemonic: Text,
        args: &Bound<'_, PyAny>,
        results: Option<&Bound<'_, PyAny>>,
        imm: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<PyValue>> {
        self.emit_inst(py, &mnemonic, args, results, imm)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Without an exception: adds the implicit `return` of a function that
    /// returns nothing, then finishes. With one: abandons the function.
    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            self.sh.abandon();
            return Ok(false);
        }
        if lock(&self.sh.state)?.b.is_none() {
            return Ok(false); // finished explicitly inside the block
        }
        self.finish(py, Flag(false))?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<zyntax.hir.FunctionBuilder @{}>", self.sh.name)
    }

    /// The function built so far, as `.zir` text.
    fn to_zir(&self, py: Python<'_>) -> PyResult<String> {
        self.sh.run(py, |fb| Ok(zh::print_function(fb.func())))
    }
}
