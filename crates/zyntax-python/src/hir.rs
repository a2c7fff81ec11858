//! `zyntax.hir`: modules, the function builder, values, blocks and the
//! structured-control-flow context managers, over `zyntax_hir::FunctionBuilder`.
//!
//! Ownership: a `Module` owns the declarations of its functions; each
//! `FunctionBuilder` owns the function under construction until `finish()`
//! moves it into the module. `Value`s and `Block`s keep a reference to the
//! builder that made them, so a value from another function is rejected with
//! a clear error instead of silently indexing the wrong arena.
//!
//! Locking: Python is never called while a builder or module lock is held
//! (operands and locations are converted first), and a builder lock is taken
//! before a module lock, never the other way round.

use crate::checked::{self, Checked, Flag, Is, Text, TextList};
use crate::errors::{guard, ArgumentError, BuildError, InternalError, ParseError, VerifyError};
use crate::loc::caller_loc;
use crate::types::{enum_name, parse_layout, to_type, to_types, type_name, PyHirType};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::sync::{Arc, Mutex, MutexGuard};
use zyntax_hir as zh;

mod builder_core;
mod builder_gpu;
mod builder_hopper;
mod emit;
// Written whole by crates/zyntax-hir/src/gen.rs (a test keeps it current): rustfmt leaves it as generated.
#[rustfmt::skip]
mod generated;
mod module;
mod scopes;
mod ssa;
mod value;
pub use ssa::PyVar;
use zyntax_hir::{
    Arch, AtomicOp, BinOp, BitOp, BlockId, CacheHint, CmpOp, Dim, ForFrame, FunctionKind, IfFrame,
    KernelInfo, Loc, MatchMode, MbarrierOp, OptLevel, PtxVersion, ReduxOp, ScalarType, Scope,
    ShflMode, Type, UnOp, ValueId, VoteMode,
};

/// All 32 lanes of a warp.
pub const FULL_MASK: u32 = 0xffff_ffff;

fn lock<T>(m: &Mutex<T>) -> PyResult<MutexGuard<'_, T>> {
    m.lock().map_err(|_| {
        InternalError::new_err("zyntax builder state was poisoned by an earlier internal error")
    })
}

fn build_err(e: zh::BuildError) -> PyErr {
    BuildError::new_err(e.to_string())
}

fn berr<T>(function: &str, message: impl Into<String>) -> zh::BuildResult<T> {
    Err(zh::BuildError {
        function: function.to_string(),
        message: message.into(),
    })
}

// ====================================================================== module

struct Decl {
    name: String,
    params: Vec<Type>,
    returns: Vec<Type>,
    /// `None` while its builder is open.
    func: Option<zh::Function>,
}

struct ModState {
    name: String,
    targets: Vec<Arch>,
    ptx_version: Option<PtxVersion>,
    decls: Vec<Decl>,
    globals: Vec<zh::GlobalVar>,
    record_locations: bool,
}

impl ModState {
    fn from_hir(m: zh::Module) -> ModState {
        ModState {
            name: m.name,
            targets: m.targets,
            ptx_version: m.ptx_version,
            globals: m.globals,
            decls: m
                .functions
                .into_iter()
                .map(|f| Decl {
                    name: f.name.clone(),
                    params: f.param_types(),
                    returns: f.returns.clone(),
                    func: Some(f),
                })
                .collect(),
            record_locations: true,
        }
    }

    /// The module as HIR; fails while a function is still being built.
    fn snapshot(&self) -> PyResult<zh::Module> {
        let mut m = zh::Module::new(self.name.clone());
        m.targets = self.targets.clone();
        m.ptx_version = self.ptx_version;
        m.globals = self.globals.clone();
        for d in &self.decls {
            match &d.func {
                Some(f) => m.functions.push(f.clone()),
                None => {
                    return Err(BuildError::new_err(format!(
                        "function @{} is still being built: call finish() on its builder \
                         (or leave its `with` block) first",
                        d.name
                    )))
                }
            }
        }
        Ok(m)
    }
}

pub struct ModShared {
    state: Mutex<ModState>,
}

/// A compilation unit: functions plus GPU target metadata.
///
/// Create functions with `kernel()`, `device_function()`, `host_function()` or
/// `function()`; each returns a `FunctionBuilder`, usable as a context manager
/// that finishes the function on exit.
#[pyclass(frozen, name = "Module", module = "zyntax.hir")]
pub struct HirModule {
    inner: Arc<ModShared>,
}

fn parse_arch(s: &str) -> PyResult<Arch> {
    enum_name("arch", s, &Arch::ALL, Arch::from_name, Arch::name)
}

pub fn parse_ptx(s: &str) -> PyResult<PtxVersion> {
    let bad = || BuildError::new_err(format!("invalid PTX version '{s}' (expected e.g. '7.8')"));
    let (a, b) = s.split_once('.').ok_or_else(bad)?;
    Ok(PtxVersion::new(
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    ))
}

fn check_ident(name: &str) -> PyResult<()> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(BuildError::new_err(format!(
            "invalid function name {name:?}: use letters, digits and '_', not starting with a digit"
        )))
    }
}

fn to_max_threads(obj: &Bound<'_, PyAny>) -> PyResult<[u32; 3]> {
    if obj.is_instance_of::<PyInt>() {
        return Ok([checked::arg::<u32>(obj, "max_threads")?, 1, 1]);
    }
    let items: Vec<Bound<'_, PyAny>> = obj.extract().map_err(|_| {
        ArgumentError::new_err("max_threads must be an int or a tuple of 1 to 3 ints")
    })?;
    let v = items
        .iter()
        .map(|x| checked::arg::<u32>(x, "max_threads"))
        .collect::<PyResult<Vec<u32>>>()?;
    match v.as_slice() {
        [x] => Ok([*x, 1, 1]),
        [x, y] => Ok([*x, *y, 1]),
        [x, y, z] => Ok([*x, *y, *z]),
        _ => Err(ArgumentError::new_err(
            "max_threads must be an int or a tuple of 1 to 3 ints",
        )),
    }
}

pub(crate) fn module_from(m: zh::Module) -> HirModule {
    HirModule {
        inner: Arc::new(ModShared {
            state: Mutex::new(ModState::from_hir(m)),
        }),
    }
}

pub fn verify_error(py: Python<'_>, e: zh::VerifyError) -> PyErr {
    let err = VerifyError::new_err(e.to_string());
    let diags = PyList::empty(py);
    for d in &e.diagnostics {
        let item = PyDict::new(py);
        let filled = (|| -> PyResult<()> {
            item.set_item("function", &d.function)?;
            item.set_item("block", d.block.map(|b| b.to_string()))?;
            item.set_item("inst", d.inst.map(|i| i.to_string()))?;
            item.set_item("inst_text", &d.inst_text)?;
            item.set_item(
                "loc",
                d.loc.as_ref().map(|l| (l.file.clone(), l.line, l.col)),
            )?;
            item.set_item("message", &d.message)?;
            item.set_item("text", d.to_string())?;
            diags.append(item)
        })();
        if filled.is_err() {
            break;
        }
    }
    // Best effort: the message already holds every diagnostic.
    let _ = err.value(py).setattr("diagnostics", diags);
    err
}

fn parse_error(py: Python<'_>, e: zh::ParseError) -> PyErr {
    let err = ParseError::new_err(e.to_string());
    let v = err.value(py);
    let _ = v.setattr("file", e.loc.file.clone());
    let _ = v.setattr("line", e.loc.line);
    let _ = v.setattr("col", e.loc.col);
    let _ = v.setattr("message", e.message.clone());
    err
}

/// Parses `.zir` text into a `Module` (not verified). `filename` is used in
/// error locations.
#[pyfunction]
#[pyo3(signature = (text, filename=None))]
pub fn parse_zir(py: Python<'_>, text: Text, filename: Option<Text>) -> PyResult<HirModule> {
    guard(
        || match zh::parse_module_named(&text, filename.as_deref()) {
            Ok(m) => Ok(module_from(m)),
            Err(e) => Err(parse_error(py, e)),
        },
    )
}

#[derive(Default)]
struct FnOpts {
    critical_path: Flag,
    no_alloc: Flag,
    inline_always: Flag,
    no_bounds_check: Flag,
    opt_level: Option<String>,
}

impl HirModule {
    #[allow(clippy::too_many_arguments)]
    fn declare(
        &self,
        py: Python<'_>,
        name: &str,
        kind: FunctionKind,
        params: &Bound<'_, PyAny>,
        returns: &Bound<'_, PyAny>,
        opts: FnOpts,
    ) -> PyResult<FunctionBuilder> {
        check_ident(name)?;
        let params = to_types(params)?;
        let returns = to_types(returns)?;
        let opt_level = match &opts.opt_level {
            Some(s) => enum_name(
                "opt level",
                s,
                OptLevel::ALL,
                OptLevel::from_name,
                OptLevel::name,
            )?,
            None => OptLevel::default(),
        };
        let loc = caller_loc(py);
        guard(|| {
            let mut st = lock(&self.inner.state)?;
            if st.decls.iter().any(|d| d.name == name) {
                return Err(BuildError::new_err(format!(
                    "module '{}' already has a function @{name}",
                    st.name
                )));
            }
            let mut b = zh::FunctionBuilder::new(name, kind, &params, &returns);
            let c = b.constraints_mut();
            c.critical_path = opts.critical_path.0;
            c.no_alloc = opts.no_alloc.0;
            c.inline_always = opts.inline_always.0;
            c.no_bounds_check = opts.no_bounds_check.0;
            c.opt_level = opt_level;
            if st.record_locations {
                b.set_function_loc(loc);
            }
            st.decls.push(Decl {
                name: name.to_string(),
                params,
                returns: returns.clone(),
                func: None,
            });
            Ok(FunctionBuilder {
                sh: Arc::new(FnShared {
                    name: name.to_string(),
                    returns,
                    record_locations: st.record_locations,
                    module: self.inner.clone(),
                    state: Mutex::new(FnState {
                        b: Some(b),
                        scopes: Vec::new(),
                        next_scope: 0,
                        loc_override: None,
                    }),
                }),
            })
        })
    }
}

impl HirModule {
    pub fn hir(&self) -> PyResult<zh::Module> {
        lock(&self.inner.state)?.snapshot()
    }
}

/// The `module` argument of the compilers and the interpreter: a
/// `zyntax.hir.Module`, as its HIR.
#[cfg(any(feature = "llvm", feature = "interp"))]
pub(crate) fn module_arg(module: &Bound<'_, PyAny>) -> PyResult<zh::Module> {
    checked::instance::<HirModule>(module, "module", "zyntax.hir.Module")?
        .get()
        .hir()
}

// ====================================================================== builder

struct FnState {
    /// `None` once finished or abandoned.
    b: Option<zh::FunctionBuilder>,
    /// Ids of the open structured scopes, innermost last.
    scopes: Vec<u64>,
    next_scope: u64,
    loc_override: Option<Loc>,
}

pub struct FnShared {
    name: String,
    returns: Vec<Type>,
    record_locations: bool,
    module: Arc<ModShared>,
    state: Mutex<FnState>,
}

/// An operand as given from Python: a value of this function or a literal
/// that becomes a constant of the type the context asks for.
#[derive(Clone, Debug)]
enum Opnd {
    V(ValueId),
    Int(i128),
    Float(f64),
    Bool(bool),
}

impl Opnd {
    fn describe(&self) -> String {
        match self {
            Opnd::V(v) => v.to_string(),
            Opnd::Int(i) => i.to_string(),
            Opnd::Float(f) => f.to_string(),
            Opnd::Bool(b) => b.to_string(),
        }
    }
}

fn int_fits(s: ScalarType, v: i128) -> bool {
    let bits = s.bits();
    if s.is_signed() {
        let lim = 1i128 << (bits - 1);
        (-lim..lim).contains(&v)
    } else {
        (0..(1i128 << bits)).contains(&v)
    }
}

/// Materializes an operand as a value of type `ty` (literals become constants).
fn mat(fb: &mut zh::FunctionBuilder, o: &Opnd, ty: &Type) -> zh::BuildResult<ValueId> {
    let name = fb.name().to_string();
    match (o, ty.as_scalar()) {
        (Opnd::V(v), _) => Ok(*v),
        (Opnd::Bool(b), Some(ScalarType::Bool)) => fb.bconst(*b),
        (Opnd::Int(i), Some(s)) if s.is_int() => {
            if !int_fits(s, *i) {
                return berr(&name, format!("constant {i} does not fit in {s}"));
            }
            // u64 values above i64::MAX keep their bits.
            fb.iconst(ty.clone(), *i as i64)
        }
        (Opnd::Int(i), Some(s)) if s.is_float() => fb.fconst(ty.clone(), *i as f64),
        (Opnd::Float(f), Some(s)) if s.is_float() => fb.fconst(ty.clone(), *f),
        (Opnd::Bool(b), Some(s)) if s.is_int() => fb.iconst(ty.clone(), i64::from(*b)),
        (o, _) => berr(
            &name,
            format!(
                "cannot use the Python literal {} where a {ty} value is expected",
                o.describe()
            ),
        ),
    }
}

fn mat_all(
    fb: &mut zh::FunctionBuilder,
    ops: &[Opnd],
    tys: &[Type],
) -> zh::BuildResult<Vec<ValueId>> {
    let name = fb.name().to_string();
    let mut out = Vec::with_capacity(ops.len());
    for (n, o) in ops.iter().enumerate() {
        match (o, tys.get(n)) {
            (o, Some(t)) => out.push(mat(fb, o, t)?),
            (Opnd::V(v), None) => out.push(*v),
            (o, None) => {
                return berr(
                    &name,
                    format!("too many arguments: no type for literal {}", o.describe()),
                )
            }
        }
    }
    Ok(out)
}

fn ty_of(fb: &zh::FunctionBuilder, v: ValueId) -> zh::BuildResult<Type> {
    fb.value_type(v).cloned()
}

impl FnShared {
    /// Converts a Python object into an operand, with its type if it is a value.
    fn opnd(self: &Arc<Self>, obj: &Bound<'_, PyAny>) -> PyResult<(Opnd, Option<Type>)> {
        if let Ok(v) = obj.cast::<PyValue>() {
            let v = v.get();
            if !Arc::ptr_eq(&v.owner, self) {
                return Err(BuildError::new_err(format!(
                    "value {} belongs to function @{}, not @{}",
                    v.id, v.owner.name, self.name
                )));
            }
            return Ok((Opnd::V(v.id), Some(v.ty.clone())));
        }
        if let Ok(b) = obj.cast::<PyBool>() {
            return Ok((Opnd::Bool(b.is_true()), None));
        }
        if obj.cast::<PyInt>().is_ok() {
            let i: i128 = obj
                .extract()
                .map_err(|_| BuildError::new_err(format!("integer literal {obj} is too large")))?;
            return Ok((Opnd::Int(i), None));
        }
        if obj.cast::<PyFloat>().is_ok() {
            return Ok((Opnd::Float(obj.extract()?), None));
        }
        // numpy scalars and other numbers: integers via __index__, then floats.
        if obj.hasattr("__index__")? {
            if let Ok(i) = obj.extract::<i128>() {
                return Ok((Opnd::Int(i), None));
            }
        }
        if obj.hasattr("__float__")? {
            if let Ok(f) = obj.extract::<f64>() {
                return Ok((Opnd::Float(f), None));
            }
        }
        Err(ArgumentError::new_err(format!(
            "expected a zyntax.hir.Value or a Python number, got {}",
            type_name(obj)
        )))
    }

    /// An operand that must already be a value (its type cannot be inferred).
    pub(crate) fn value(
        self: &Arc<Self>,
        obj: &Bound<'_, PyAny>,
        what: &str,
    ) -> PyResult<(ValueId, Type)> {
        match self.opnd(obj)? {
            (Opnd::V(v), Some(t)) => Ok((v, t)),
            _ => Err(ArgumentError::new_err(format!(
                "{what} must be a zyntax.hir.Value (its type cannot be inferred from a literal)"
            ))),
        }
    }

    fn opnds(self: &Arc<Self>, objs: &Bound<'_, PyTuple>) -> PyResult<Vec<Opnd>> {
        objs.iter().map(|o| self.opnd(&o).map(|x| x.0)).collect()
    }

    /// Runs `f` on the state with the caller's location set on the builder.
    fn with_state<R>(
        self: &Arc<Self>,
        py: Python<'_>,
        f: impl FnOnce(&mut FnState) -> PyResult<R>,
    ) -> PyResult<R> {
        let loc = if self.record_locations {
            caller_loc(py)
        } else {
            None
        };
        guard(|| {
            let mut st = lock(&self.state)?;
            let loc = st.loc_override.clone().or(loc);
            match st.b.as_mut() {
                Some(b) => b.set_loc(loc),
                None => {
                    return Err(BuildError::new_err(format!(
                        "the builder of @{} is closed (the function was finished or abandoned)",
                        self.name
                    )))
                }
            }
            f(&mut st)
        })
    }

    /// Runs `f` on the Rust builder taken out of the state, with the lock
    /// released, so `f` may call back into Python (`zyntax.tiling` drives the
    /// Rust tiler this way); a callback that emits through this builder runs
    /// under [`FnShared::lent_back`]. The builder is back when this returns.
    pub(crate) fn lend<R>(
        self: &Arc<Self>,
        py: Python<'_>,
        f: impl FnOnce(&mut zh::FunctionBuilder) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut fb = self.with_state(py, |st| {
            st.b.take()
                .ok_or_else(|| InternalError::new_err("builder vanished"))
        })?;
        let r = f(&mut fb);
        lock(&self.state)?.b = Some(fb);
        r
    }

    /// Inside [`FnShared::lend`]: the builder `fb` is this function's again
    /// for the time of `f` (a Python callback emitting through it).
    pub(crate) fn lent_back<R>(
        self: &Arc<Self>,
        fb: &mut zh::FunctionBuilder,
        f: impl FnOnce() -> PyResult<R>,
    ) -> PyResult<R> {
        let real = std::mem::replace(fb, zh::FunctionBuilder::kernel("lent", &[]));
        lock(&self.state)?.b = Some(real);
        let r = f();
        match lock(&self.state)?.b.take() {
            Some(real) => *fb = real,
            None => {
                return Err(BuildError::new_err(format!(
                    "the builder of @{} was closed by a callback of the tiler",
                    self.name
                )))
            }
        }
        r
    }

    fn run<R>(
        self: &Arc<Self>,
        py: Python<'_>,
        f: impl FnOnce(&mut zh::FunctionBuilder) -> zh::BuildResult<R>,
    ) -> PyResult<R> {
        self.with_state(py, |st| match st.b.as_mut() {
            Some(b) => f(b).map_err(build_err),
            None => Err(InternalError::new_err("builder vanished")),
        })
    }

    /// Runs `f` and wraps the value it returns.
    fn run1(
        self: &Arc<Self>,
        py: Python<'_>,
        f: impl FnOnce(&mut zh::FunctionBuilder) -> zh::BuildResult<ValueId>,
    ) -> PyResult<PyValue> {
        let (id, ty) = self.run(py, |b| {
            let v = f(b)?;
            Ok((v, ty_of(b, v)?))
        })?;
        Ok(self.wrap(id, ty))
    }

    fn run_n(
        self: &Arc<Self>,
        py: Python<'_>,
        f: impl FnOnce(&mut zh::FunctionBuilder) -> zh::BuildResult<Vec<ValueId>>,
    ) -> PyResult<Vec<PyValue>> {
        let vals = self.run(py, |b| {
            let vs = f(b)?;
            vs.into_iter()
                .map(|v| ty_of(b, v).map(|t| (v, t)))
                .collect::<zh::BuildResult<Vec<_>>>()
        })?;
        Ok(vals.into_iter().map(|(v, t)| self.wrap(v, t)).collect())
    }

    pub(crate) fn wrap(self: &Arc<Self>, id: ValueId, ty: Type) -> PyValue {
        PyValue {
            owner: self.clone(),
            id,
            ty,
        }
    }

    fn binary(
        self: &Arc<Self>,
        py: Python<'_>,
        op: BinOp,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (oa, ta) = self.opnd(a)?;
        let (ob, tb) = self.opnd(b)?;
        let ty = ta.or(tb).ok_or_else(|| {
            ArgumentError::new_err(format!(
                "`{}` needs at least one zyntax.hir.Value operand to infer the type",
                op.name()
            ))
        })?;
        self.run1(py, |fb| {
            let a = mat(fb, &oa, &ty)?;
            let b = mat(fb, &ob, &ty)?;
            fb.binary(op, a, b)
        })
    }

    fn cmp(
        self: &Arc<Self>,
        py: Python<'_>,
        op: CmpOp,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (oa, ta) = self.opnd(a)?;
        let (ob, tb) = self.opnd(b)?;
        let ty = ta.or(tb).ok_or_else(|| {
            ArgumentError::new_err(format!(
                "`cmp.{}` needs at least one zyntax.hir.Value operand to infer the type",
                op.name()
            ))
        })?;
        self.run1(py, |fb| {
            let a = mat(fb, &oa, &ty)?;
            let b = mat(fb, &ob, &ty)?;
            fb.cmp(op, a, b)
        })
    }

    fn unary(
        self: &Arc<Self>,
        py: Python<'_>,
        op: UnOp,
        a: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (a, _) = self.value(a, &format!("the operand of `{}`", op.name()))?;
        self.run1(py, |fb| fb.unary(op, a))
    }

    fn open_scope(st: &mut FnState) -> u64 {
        let id = st.next_scope;
        st.next_scope += 1;
        st.scopes.push(id);
        id
    }

    fn close_scope(&self, st: &mut FnState, id: u64, what: &str) -> PyResult<()> {
        match st.scopes.last() {
            Some(top) if *top == id => {
                st.scopes.pop();
                Ok(())
            }
            _ => Err(BuildError::new_err(format!(
                "in @{}: {what} closed out of order (structured scopes must nest)",
                self.name
            ))),
        }
    }

    /// After an exception inside a scope: drop it (and anything opened inside it).
    fn unwind_scope(&self, id: u64) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(pos) = st.scopes.iter().position(|s| *s == id) {
                st.scopes.truncate(pos);
            }
        }
    }

    fn finish(&self, prune: bool) -> PyResult<()> {
        guard(|| {
            let mut st = lock(&self.state)?;
            if !st.scopes.is_empty() {
                return Err(BuildError::new_err(format!(
                    "cannot finish @{}: {} structured scope(s) still open",
                    self.name,
                    st.scopes.len()
                )));
            }
            let Some(b) = st.b.take() else {
                return Err(BuildError::new_err(format!(
                    "@{} is already finished",
                    self.name
                )));
            };
            let mut f = b.finish().map_err(build_err)?;
            if prune {
                emit::prune_unreachable(&mut f);
            }
            let mut ms = lock(&self.module.state)?;
            match ms
                .decls
                .iter_mut()
                .find(|d| d.name == self.name && d.func.is_none())
            {
                Some(d) => {
                    d.func = Some(f);
                    Ok(())
                }
                None => Err(InternalError::new_err(format!(
                    "declaration of @{} vanished from its module",
                    self.name
                ))),
            }
        })
    }

    fn abandon(&self) {
        let had = match self.state.lock() {
            Ok(mut st) => st.b.take().is_some(),
            Err(_) => false,
        };
        if had {
            if let Ok(mut ms) = self.module.state.lock() {
                ms.decls
                    .retain(|d| !(d.name == self.name && d.func.is_none()));
            }
        }
    }
}

fn to_dim(obj: &Bound<'_, PyAny>) -> PyResult<Dim> {
    if let Ok(s) = obj.cast::<PyString>() {
        let s = s.to_cow()?;
        return enum_name("dimension", &s, Dim::ALL, Dim::from_name, Dim::name);
    }
    match obj.extract::<u32>() {
        Ok(0) => Ok(Dim::X),
        Ok(1) => Ok(Dim::Y),
        Ok(2) => Ok(Dim::Z),
        _ => Err(BuildError::new_err(format!(
            "unknown dimension {obj} (expected 'x', 'y', 'z' or 0, 1, 2)"
        ))),
    }
}

fn to_scope(s: &str) -> PyResult<Scope> {
    enum_name("scope", s, Scope::ALL, Scope::from_name, Scope::name)
}

fn u32_ty() -> Type {
    Type::U32
}

/// Builds one function. Every instruction method appends to the current block
/// and records the calling Python file:line as the instruction's location.
///
/// Operands are `Value`s of this function or Python numbers, which become
/// constants of the type the other operands (or the instruction) imply.
#[pyclass(frozen, module = "zyntax.hir")]
pub struct FunctionBuilder {
    sh: Arc<FnShared>,
}

fn block_param_types(fb: &zh::FunctionBuilder, b: BlockId) -> zh::BuildResult<Vec<Type>> {
    fb.block_params(b)?
        .into_iter()
        .map(|v| ty_of(fb, v))
        .collect()
}

impl FunctionBuilder {
    /// The function this builder builds (for `tiling.rs`).
    pub(crate) fn shared(&self) -> &Arc<FnShared> {
        &self.sh
    }

    fn mask(&self, mask: Option<&Bound<'_, PyAny>>) -> PyResult<Opnd> {
        match mask {
            None => Ok(Opnd::Int(i128::from(FULL_MASK))),
            Some(m) => Ok(self.sh.opnd(m)?.0),
        }
    }

    fn block_id(&self, block: &Bound<'_, PyBlock>) -> PyResult<BlockId> {
        let b = block.get();
        if !Arc::ptr_eq(&b.owner, &self.sh) {
            return Err(BuildError::new_err(format!(
                "{} belongs to @{}, not @{}",
                b.id, b.owner.name, self.sh.name
            )));
        }
        Ok(b.id)
    }

    fn opnd_seq(&self, seq: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Opnd>> {
        let Some(seq) = seq else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in seq.try_iter()? {
            out.push(self.sh.opnd(&item?)?.0);
        }
        Ok(out)
    }

    /// A bit op: the first operand (the second for `bfi`) is a Value giving the
    /// type; the others are u32 except `bfi`'s inserted value, of that type.
    fn bits_op(&self, py: Python<'_>, op: BitOp, args: &[&Bound<'_, PyAny>]) -> PyResult<PyValue> {
        let (_, t0) = self
            .sh
            .value(args[0], &format!("the first operand of `{op}`"))?;
        let mut ops = Vec::new();
        for a in args {
            ops.push(self.sh.opnd(a)?.0);
        }
        self.sh.run1(py, |fb| {
            let mut vals = Vec::new();
            for (i, o) in ops.iter().enumerate() {
                let ty = match (op, i) {
                    (BitOp::Bfe, 0) | (BitOp::Bfi, 0 | 1) => t0.clone(),
                    _ => u32_ty(),
                };
                vals.push(mat(fb, o, &ty)?);
            }
            fb.bits(op, &vals)
        })
    }

    fn red_op(
        &self,
        py: Python<'_>,
        op: AtomicOp,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        scope: &str,
    ) -> PyResult<()> {
        let s = to_scope(scope)?;
        let (p, pt) = self.sh.value(ptr, "the pointer of a reduction")?;
        let (ov, _) = self.sh.opnd(value)?;
        let et = pt.pointee().cloned().unwrap_or(pt);
        self.sh.run(py, |fb| {
            let v = mat(fb, &ov, &et)?;
            fb.red(op, s, p, v)
        })
    }

    fn atomic_op(
        &self,
        py: Python<'_>,
        op: AtomicOp,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        scope: &str,
    ) -> PyResult<PyValue> {
        let s = to_scope(scope)?;
        let (p, pt) = self.sh.value(ptr, "the pointer of an atomic")?;
        let (ov, _) = self.sh.opnd(value)?;
        let et = pt.pointee().cloned().unwrap_or(pt);
        self.sh.run1(py, |fb| {
            let v = mat(fb, &ov, &et)?;
            fb.atomic(op, s, p, v)
        })
    }

    fn shfl_op(
        &self,
        py: Python<'_>,
        mode: ShflMode,
        value: &Bound<'_, PyAny>,
        lane: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        width: u32,
    ) -> PyResult<PyValue> {
        let (v, _) = self.sh.value(value, "the value of a shuffle")?;
        let (ol, _) = self.sh.opnd(lane)?;
        let m = self.mask(mask)?;
        self.sh.run1(py, |fb| {
            let m = mat(fb, &m, &u32_ty())?;
            let l = mat(fb, &ol, &u32_ty())?;
            fb.shfl(mode, m, v, l, width)
        })
    }

    fn vote_op(
        &self,
        py: Python<'_>,
        mode: VoteMode,
        pred: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let (op, _) = self.sh.opnd(pred)?;
        let m = self.mask(mask)?;
        self.sh.run1(py, |fb| {
            let m = mat(fb, &m, &u32_ty())?;
            let p = mat(fb, &op, &Type::BOOL)?;
            fb.vote(mode, m, p)
        })
    }

    fn match_op(
        &self,
        py: Python<'_>,
        mode: MatchMode,
        value: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyValue>> {
        let (v, _) = self.sh.value(value, "the value of a match")?;
        let m = self.mask(mask)?;
        self.sh.run_n(py, |fb| {
            let m = mat(fb, &m, &u32_ty())?;
            fb.match_(mode, m, v)
        })
    }

    fn loop_spec(
        &self,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        step: Option<&Bound<'_, PyAny>>,
        ty: Option<&Bound<'_, PyAny>>,
        carry: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<LoopSpec> {
        let (o_start, t1) = self.sh.opnd(start)?;
        let (o_stop, t2) = self.sh.opnd(stop)?;
        let (o_step, t3) = match step {
            Some(s) => self.sh.opnd(s)?,
            None => (Opnd::Int(1), None),
        };
        match o_step {
            Opnd::Int(i) if i <= 0 => {
                return Err(BuildError::new_err(format!(
                    "for_range needs a positive step, got {i}"
                )))
            }
            Opnd::Float(_) | Opnd::Bool(_) => {
                return Err(ArgumentError::new_err("for_range step must be an integer"))
            }
            _ => {}
        }
        let ty = match ty {
            Some(t) => to_type(t)?,
            None => t1.or(t2).or(t3).unwrap_or(Type::I32),
        };
        let mut carried = Vec::new();
        if let Some(c) = carry {
            for item in c.try_iter()? {
                carried.push(self.sh.value(&item?, "a loop-carried value")?.0);
            }
        }
        Ok(LoopSpec {
            owner: self.sh.clone(),
            start: o_start,
            stop: o_stop,
            step: o_step,
            ty,
            carried,
            st: Mutex::new(LoopState::default()),
        })
    }
}

// ====================================================================== values and blocks

/// An SSA value of a function under construction. Arithmetic operators
/// (`+ - * / // % & | ^ << >>`, unary `-` and `~`) and `< <= > >=` emit
/// instructions into the owning builder's current block; `==` compares
/// identity (use `b.eq` for the instruction).
#[pyclass(frozen, name = "Value", module = "zyntax.hir")]
pub struct PyValue {
    owner: Arc<FnShared>,
    id: ValueId,
    ty: Type,
}

/// A basic block of a function under construction.
#[pyclass(frozen, name = "Block", module = "zyntax.hir")]
pub struct PyBlock {
    owner: Arc<FnShared>,
    id: BlockId,
}

// ====================================================================== structured scopes

fn is_exc(exc_type: Option<&Bound<'_, PyAny>>) -> bool {
    exc_type.is_some_and(|t| !t.is_none())
}

#[derive(Default)]
struct IfScopeState {
    frame: Option<IfFrame>,
    scope: Option<u64>,
    used: bool,
}

/// Context manager of `FunctionBuilder.if_`.
#[pyclass(frozen, module = "zyntax.hir")]
pub struct IfScope {
    owner: Arc<FnShared>,
    cond: ValueId,
    st: Mutex<IfScopeState>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
enum Phase {
    #[default]
    New,
    Entered,
    InThen,
    ThenDone,
    InElse,
    Done,
}

#[derive(Default)]
struct IfElseState {
    phase: Phase,
    frame: Option<IfFrame>,
    scope: Option<u64>,
    pending: Option<Vec<Opnd>>,
    results: Vec<ValueId>,
}

/// Context manager of `FunctionBuilder.if_else`; iterate it (or use `.then`
/// and `.else_`) for the two branch scopes.
#[pyclass(frozen, module = "zyntax.hir")]
pub struct IfElse {
    owner: Arc<FnShared>,
    cond: ValueId,
    result_types: Vec<Type>,
    st: Mutex<IfElseState>,
}

/// One branch of an `if_else`, a context manager.
#[pyclass(frozen, module = "zyntax.hir")]
pub struct IfBranch {
    parent: Py<IfElse>,
    is_else: bool,
}

impl IfElse {
    fn materialize_yield(
        &self,
        fb: &mut zh::FunctionBuilder,
        pending: Option<Vec<Opnd>>,
        which: &str,
    ) -> zh::BuildResult<Vec<ValueId>> {
        let ops = pending.unwrap_or_default();
        if !fb.is_terminated() && ops.len() != self.result_types.len() {
            return berr(
                fb.name(),
                format!(
                    "the {which} branch of if_else must yield {} value(s) with yield_(...), got {}",
                    self.result_types.len(),
                    ops.len()
                ),
            );
        }
        mat_all(fb, &ops, &self.result_types)
    }

    fn enter_branch(&self, py: Python<'_>, is_else: bool) -> PyResult<()> {
        let mut me = lock(&self.st)?;
        match (is_else, me.phase) {
            (false, Phase::Entered) => {
                let cond = self.cond;
                let tys = self.result_types.clone();
                let frame = self.owner.run(py, |b| b.begin_if(cond, &tys))?;
                me.frame = Some(frame);
                me.phase = Phase::InThen;
                Ok(())
            }
            (true, Phase::ThenDone) => {
                me.phase = Phase::InElse;
                Ok(())
            }
            (false, _) => Err(BuildError::new_err(
                "enter the then-branch once, directly inside `with b.if_else(...)`",
            )),
            (true, _) => Err(BuildError::new_err(
                "enter the else-branch once, right after the then-branch",
            )),
        }
    }

    fn exit_branch(&self, py: Python<'_>, is_else: bool, exc: bool) -> PyResult<()> {
        let mut me = lock(&self.st)?;
        if exc {
            me.phase = Phase::Done;
            return Ok(());
        }
        let pending = me.pending.take();
        match (is_else, me.phase) {
            (false, Phase::InThen) => {
                let mut frame = me
                    .frame
                    .take()
                    .ok_or_else(|| InternalError::new_err("if_else lost its frame"))?;
                self.owner.run(py, |b| {
                    let vals = self.materialize_yield(b, pending, "then")?;
                    b.begin_else(&mut frame, &vals)
                })?;
                me.frame = Some(frame);
                me.phase = Phase::ThenDone;
                Ok(())
            }
            (true, Phase::InElse) => {
                let frame = me
                    .frame
                    .take()
                    .ok_or_else(|| InternalError::new_err("if_else lost its frame"))?;
                let res = self.owner.run(py, |b| {
                    let vals = self.materialize_yield(b, pending, "else")?;
                    b.end_if(frame, &vals)
                })?;
                me.results = res;
                me.phase = Phase::Done;
                Ok(())
            }
            _ => Err(BuildError::new_err("if_else branches exited out of order")),
        }
    }
}

#[derive(Default)]
struct LoopState {
    frame: Option<ForFrame>,
    scope: Option<u64>,
    used: bool,
    next: Option<Vec<Opnd>>,
    results: Option<Vec<ValueId>>,
}

struct LoopSpec {
    owner: Arc<FnShared>,
    start: Opnd,
    stop: Opnd,
    step: Opnd,
    ty: Type,
    carried: Vec<ValueId>,
    st: Mutex<LoopState>,
}

impl LoopSpec {
    fn enter(&self, py: Python<'_>) -> PyResult<(PyValue, Vec<PyValue>)> {
        let mut me = lock(&self.st)?;
        if me.used {
            return Err(BuildError::new_err("a loop scope can be entered only once"));
        }
        me.used = true;
        let (frame, id, types) = self.owner.with_state(py, |st| {
            let b =
                st.b.as_mut()
                    .ok_or_else(|| InternalError::new_err("no builder"))?;
            let r = (|| {
                let start = mat(b, &self.start, &self.ty)?;
                let stop = mat(b, &self.stop, &self.ty)?;
                let step = mat(b, &self.step, &self.ty)?;
                let f = b.begin_for(start, stop, step, &self.carried)?;
                let mut types = vec![ty_of(b, f.iv)?];
                for c in &f.carried {
                    types.push(ty_of(b, *c)?);
                }
                Ok((f, types))
            })()
            .map_err(build_err)?;
            Ok((r.0, FnShared::open_scope(st), r.1))
        })?;
        let iv = self.owner.wrap(frame.iv, types[0].clone());
        let carried = frame
            .carried
            .iter()
            .zip(types.iter().skip(1))
            .map(|(v, t)| self.owner.wrap(*v, t.clone()))
            .collect();
        me.frame = Some(frame);
        me.scope = Some(id);
        Ok((iv, carried))
    }

    fn exit(&self, py: Python<'_>, exc: bool) -> PyResult<()> {
        let mut me = lock(&self.st)?;
        let (Some(frame), Some(id)) = (me.frame.take(), me.scope.take()) else {
            return Ok(());
        };
        if exc {
            self.owner.unwind_scope(id);
            return Ok(());
        }
        let next = me.next.take();
        let res = self.owner.with_state(py, |st| {
            self.owner.close_scope(st, id, "loop")?;
            let b =
                st.b.as_mut()
                    .ok_or_else(|| InternalError::new_err("no builder"))?;
            (|| {
                let next = match next {
                    Some(ops) => {
                        let tys = frame
                            .carried
                            .iter()
                            .map(|v| ty_of(b, *v))
                            .collect::<zh::BuildResult<Vec<_>>>()?;
                        mat_all(b, &ops, &tys)?
                    }
                    // Unchanged carried values by default.
                    None => frame.carried.clone(),
                };
                b.end_for(frame, &next)
            })()
            .map_err(build_err)
        })?;
        me.results = Some(res);
        Ok(())
    }
}

/// Context manager of `FunctionBuilder.for_range`; entering gives the induction variable.
#[pyclass(frozen, module = "zyntax.hir")]
pub struct ForRange {
    inner: LoopSpec,
}

/// Context manager of `FunctionBuilder.loop` (a counted loop with carried values).
#[pyclass(frozen, module = "zyntax.hir")]
pub struct Loop {
    inner: LoopSpec,
}

impl FunctionBuilder {
    /// A void function whose current block is open (and no scope is) gets its
    /// `return`; anything else is left for `finish` to judge.
    fn implicit_return(&self, py: Python<'_>) -> PyResult<()> {
        let open = {
            let st = lock(&self.sh.state)?;
            st.b.is_some() && st.scopes.is_empty()
        };
        if open && self.sh.returns.is_empty() && !self.sh.run(py, |fb| Ok(fb.is_terminated()))? {
            self.sh.run(py, |fb| fb.ret(&[]))?;
        }
        Ok(())
    }

    /// One `mbarrier` op: the barrier, then u32 operands (u64 for `test_wait`'s
    /// state token); Python ints become constants of that type.
    fn mbar(
        &self,
        py: Python<'_>,
        op: MbarrierOp,
        bar: &Bound<'_, PyAny>,
        rest: &[&Bound<'_, PyAny>],
    ) -> PyResult<Option<PyValue>> {
        let (b, _) = self
            .sh
            .value(bar, &format!("the barrier of `mbarrier_{op}`"))?;
        let ty = if op == MbarrierOp::TestWait {
            Type::U64
        } else {
            Type::U32
        };
        let ops: Vec<Opnd> = rest
            .iter()
            .map(|o| self.sh.opnd(o).map(|x| x.0))
            .collect::<PyResult<_>>()?;
        let r = self.sh.run(py, |fb| {
            let mut args = vec![b];
            for o in &ops {
                args.push(mat(fb, o, &ty)?);
            }
            let r = fb.mbarrier(op, &args)?;
            r.map(|v| ty_of(fb, v).map(|t| (v, t))).transpose()
        })?;
        Ok(r.map(|(v, t)| self.sh.wrap(v, t)))
    }

    /// [`Self::mbar`] for the ops with a result.
    fn mbar1(
        &self,
        py: Python<'_>,
        op: MbarrierOp,
        bar: &Bound<'_, PyAny>,
        rest: &[&Bound<'_, PyAny>],
    ) -> PyResult<PyValue> {
        self.mbar(py, op, bar, rest)?
            .ok_or_else(|| InternalError::new_err(format!("mbarrier.{op} gave no result")))
    }

    /// The approximate-math family (issue 12 item 3).
    fn approx(&self, py: Python<'_>, op: zh::ApproxOp, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        let (a, _) = self.sh.value(a, &format!("the operand of `{op}_approx`"))?;
        self.sh.run1(py, |fb| fb.approx(op, a))
    }
}
