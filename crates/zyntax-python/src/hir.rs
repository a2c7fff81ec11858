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

mod emit;
mod generated;
mod ssa;
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

fn module_from(m: zh::Module) -> HirModule {
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

#[pymethods]
impl HirModule {
    #[new]
    #[pyo3(signature = (name, *, targets=None, ptx_version=None, record_locations=Flag(true)),
        text_signature = "(name, *, targets=None, ptx_version=None, record_locations=True)")]
    fn new(
        name: Text,
        targets: Option<TextList>,
        ptx_version: Option<Text>,
        record_locations: Flag,
    ) -> PyResult<Self> {
        let record_locations = record_locations.0;
        let targets = targets
            .unwrap_or_default()
            .0
            .iter()
            .map(|s| parse_arch(s))
            .collect::<PyResult<Vec<_>>>()?;
        let ptx_version = ptx_version.as_deref().map(parse_ptx).transpose()?;
        Ok(HirModule {
            inner: Arc::new(ModShared {
                state: Mutex::new(ModState {
                    name: name.to_string(),
                    targets,
                    ptx_version,
                    decls: Vec::new(),
                    globals: Vec::new(),
                    record_locations,
                }),
            }),
        })
    }

    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(lock(&self.inner.state)?.name.clone())
    }

    /// Archs every kernel must compile for, e.g. `["sm_80", "sm_90"]`.
    #[getter]
    fn targets(&self) -> PyResult<Vec<&'static str>> {
        Ok(lock(&self.inner.state)?
            .targets
            .iter()
            .map(|a| a.name())
            .collect())
    }
    #[setter]
    fn set_targets(&self, targets: TextList) -> PyResult<()> {
        let t = targets
            .0
            .iter()
            .map(|s| parse_arch(s))
            .collect::<PyResult<Vec<_>>>()?;
        lock(&self.inner.state)?.targets = t;
        Ok(())
    }

    /// Declares a module-level variable: `count` elements of `elem` (a
    /// numeric scalar or vector type) in `space` `"constant"` (`__constant__`)
    /// or `"global"` (`__device__`), initialized from `init` (one number per
    /// scalar lane, vectors flattened) or zero-filled. Kernels take its
    /// address with `FunctionBuilder.global_addr(name)`; a loaded module reads
    /// and writes it with `read_global` / `write_global`.
    #[pyo3(signature = (name, elem, count=Checked(1), space=Text::from("constant"), init=None),
        text_signature = "($self, name, elem, count=1, space='constant', init=None)")]
    fn global_var(
        &self,
        name: Text,
        elem: &Bound<'_, PyAny>,
        count: Checked<u64>,
        space: Text,
        init: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let elem = to_type(elem)?;
        let space = match space.as_str() {
            "constant" => zh::AddrSpace::Constant,
            "global" => zh::AddrSpace::Global,
            other => {
                return Err(ArgumentError::new_err(format!(
                    "argument 'space': expected \"constant\" or \"global\", got {other:?}"
                )))
            }
        };
        let lane = elem.elem_scalar().filter(|s| !s.is_bool()).ok_or_else(|| {
            ArgumentError::new_err(format!(
                "argument 'elem': a global holds numeric scalars or vectors, got {elem}"
            ))
        })?;
        let mut values = Vec::new();
        if let Some(init) = init {
            for (k, x) in init.try_iter()?.enumerate() {
                let x = x?;
                let bad = |what: &str| {
                    ArgumentError::new_err(format!(
                        "argument 'init'[{k}]: expected {what} for {lane}, got {}",
                        x.repr().map(|r| r.to_string()).unwrap_or_default()
                    ))
                };
                values.push(if lane.is_float() {
                    zh::ConstValue::float(x.extract::<f64>().map_err(|_| bad("a number"))?)
                } else {
                    let v = x.extract::<i128>().map_err(|_| bad("an integer"))?;
                    let b = lane.bits();
                    let (lo, hi) = if lane.is_signed() {
                        (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
                    } else {
                        (0, (1i128 << b) - 1)
                    };
                    if v < lo || v > hi {
                        return Err(bad(&format!("an integer in {lo}..={hi}")));
                    }
                    // Two's-complement bits, as `.zir` constants hold them.
                    zh::ConstValue::Int(zh::normalize_int(lane, v as i64))
                });
            }
        }
        let g = zh::GlobalVar {
            name: name.to_string(),
            space,
            elem,
            count: count.0,
            init: values,
        };
        if !g.init.is_empty() && g.init.len() as u64 != g.lanes() {
            return Err(ArgumentError::new_err(format!(
                "argument 'init': {} values, but {} x {} has {} lanes",
                g.init.len(),
                g.count,
                g.elem,
                g.lanes()
            )));
        }
        let mut ms = lock(&self.inner.state)?;
        if ms.globals.iter().any(|o| o.name == g.name) {
            return Err(BuildError::new_err(format!(
                "global @{} is already declared",
                g.name
            )));
        }
        ms.globals.push(g);
        Ok(())
    }

    /// Names of the module's globals, in declaration order.
    #[getter]
    fn globals(&self) -> PyResult<Vec<String>> {
        Ok(lock(&self.inner.state)?
            .globals
            .iter()
            .map(|g| g.name.clone())
            .collect())
    }

    /// PTX ISA version to emit, e.g. `"7.8"` (`None`: per-arch default).
    #[getter]
    fn ptx_version(&self) -> PyResult<Option<String>> {
        Ok(lock(&self.inner.state)?.ptx_version.map(|p| p.to_string()))
    }
    #[setter]
    fn set_ptx_version(&self, v: Option<Text>) -> PyResult<()> {
        let p = v.as_deref().map(parse_ptx).transpose()?;
        lock(&self.inner.state)?.ptx_version = p;
        Ok(())
    }

    /// Names of the functions, in declaration order (including ones still being built).
    #[getter]
    fn functions(&self) -> PyResult<Vec<String>> {
        Ok(lock(&self.inner.state)?
            .decls
            .iter()
            .map(|d| d.name.clone())
            .collect())
    }

    /// Names of the kernel entry points.
    #[getter]
    fn kernels(&self) -> PyResult<Vec<String>> {
        Ok(self.hir()?.kernels().map(|f| f.name.clone()).collect())
    }

    /// Declares a kernel entry point and returns its builder.
    #[pyo3(signature = (name, params, *, max_threads=None, min_blocks=None,
        max_registers=None, shared_bytes=Checked(0), arch=None, critical_path=Flag(false),
        no_alloc=Flag(false), inline_always=Flag(false), no_bounds_check=Flag(false), opt_level=None,
        cluster=None, exact_threads=None),
        text_signature = "($self, name, params, *, max_threads=None, min_blocks=None, \
        max_registers=None, shared_bytes=0, arch=None, critical_path=False, no_alloc=False, \
        inline_always=False, no_bounds_check=False, opt_level=None, cluster=None, \
        exact_threads=None)")]
    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &self,
        py: Python<'_>,
        name: Text,
        params: &Bound<'_, PyAny>,
        max_threads: Option<&Bound<'_, PyAny>>,
        min_blocks: Option<Checked<u32>>,
        max_registers: Option<Checked<u32>>,
        shared_bytes: Checked<u32>,
        arch: Option<Text>,
        critical_path: Flag,
        no_alloc: Flag,
        inline_always: Flag,
        no_bounds_check: Flag,
        opt_level: Option<Text>,
        cluster: Option<&Bound<'_, PyAny>>,
        exact_threads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<FunctionBuilder> {
        let info = KernelInfo {
            max_threads: max_threads.map(to_max_threads).transpose()?,
            min_blocks: min_blocks.map(|c| c.0),
            max_registers: max_registers.map(|c| c.0),
            shared_bytes: shared_bytes.0,
            arch: arch.as_deref().map(parse_arch).transpose()?,
            exact_threads: exact_threads.map(to_max_threads).transpose()?,
            cluster: cluster
                .map(|c| checked::dim3(c, "cluster", 1))
                .transpose()?,
        };
        let no_returns = PyTuple::empty(py);
        self.declare(
            py,
            &name,
            FunctionKind::Kernel(info),
            params,
            no_returns.as_any(),
            FnOpts {
                critical_path,
                no_alloc,
                inline_always,
                no_bounds_check,
                opt_level: opt_level.map(|t| t.0),
            },
        )
    }

    /// Declares a device function (callable from GPU code) and returns its builder.
    #[pyo3(signature = (name, params, returns=None, *, critical_path=Flag(false),
        no_alloc=Flag(false), inline_always=Flag(false), no_bounds_check=Flag(false), opt_level=None),
        text_signature = "($self, name, params, returns=None, *, critical_path=False, \
        no_alloc=False, inline_always=False, no_bounds_check=False, opt_level=None)")]
    #[allow(clippy::too_many_arguments)]
    fn device_function(
        &self,
        py: Python<'_>,
        name: Text,
        params: &Bound<'_, PyAny>,
        returns: Option<&Bound<'_, PyAny>>,
        critical_path: Flag,
        no_alloc: Flag,
        inline_always: Flag,
        no_bounds_check: Flag,
        opt_level: Option<Text>,
    ) -> PyResult<FunctionBuilder> {
        let empty = PyTuple::empty(py);
        self.declare(
            py,
            &name,
            FunctionKind::Device,
            params,
            returns.unwrap_or(empty.as_any()),
            FnOpts {
                critical_path,
                no_alloc,
                inline_always,
                no_bounds_check,
                opt_level: opt_level.map(|t| t.0),
            },
        )
    }

    /// Declares a host (CPU) function and returns its builder.
    #[pyo3(signature = (name, params, returns=None, *, critical_path=Flag(false),
        no_alloc=Flag(false), inline_always=Flag(false), no_bounds_check=Flag(false), opt_level=None),
        text_signature = "($self, name, params, returns=None, *, critical_path=False, \
        no_alloc=False, inline_always=False, no_bounds_check=False, opt_level=None)")]
    #[allow(clippy::too_many_arguments)]
    fn host_function(
        &self,
        py: Python<'_>,
        name: Text,
        params: &Bound<'_, PyAny>,
        returns: Option<&Bound<'_, PyAny>>,
        critical_path: Flag,
        no_alloc: Flag,
        inline_always: Flag,
        no_bounds_check: Flag,
        opt_level: Option<Text>,
    ) -> PyResult<FunctionBuilder> {
        let empty = PyTuple::empty(py);
        self.declare(
            py,
            &name,
            FunctionKind::Host,
            params,
            returns.unwrap_or(empty.as_any()),
            FnOpts {
                critical_path,
                no_alloc,
                inline_always,
                no_bounds_check,
                opt_level: opt_level.map(|t| t.0),
            },
        )
    }

    /// `(param_types, return_types)` of a function of this module.
    fn signature(&self, name: Text) -> PyResult<(Vec<PyHirType>, Vec<PyHirType>)> {
        let st = lock(&self.inner.state)?;
        match st.decls.iter().find(|d| d.name == *name) {
            Some(d) => Ok((
                d.params.iter().cloned().map(PyHirType).collect(),
                d.returns.iter().cloned().map(PyHirType).collect(),
            )),
            None => Err(BuildError::new_err(format!(
                "module '{}' has no function @{name}",
                st.name
            ))),
        }
    }

    /// Whether function `name` is a kernel, a device or a host function.
    fn kind(&self, name: Text) -> PyResult<&'static str> {
        let m = self.hir()?;
        m.function(&name).map(|f| f.kind.keyword()).ok_or_else(|| {
            BuildError::new_err(format!("module '{}' has no function @{name}", m.name))
        })
    }

    /// Runs the verifier; raises `VerifyError` (with a `diagnostics` list) on failure.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        let m = self.hir()?;
        guard(|| zh::verify_module(&m).map_err(|e| verify_error(py, e)))
    }

    /// The module as `.zir` text.
    fn to_zir(&self) -> PyResult<String> {
        let m = self.hir()?;
        guard(|| Ok(zh::print_module(&m)))
    }

    /// One function as `.zir` text.
    fn function_zir(&self, name: Text) -> PyResult<String> {
        let m = self.hir()?;
        guard(|| match m.function(&name) {
            Some(f) => Ok(zh::print_function(f)),
            None => Err(BuildError::new_err(format!(
                "module '{}' has no function @{name}",
                m.name
            ))),
        })
    }

    /// The module as JSON (serde); `Module.from_json` reads it back.
    fn to_json(&self) -> PyResult<String> {
        let m = self.hir()?;
        guard(|| {
            m.to_json()
                .map_err(|e| InternalError::new_err(format!("cannot serialize module: {e}")))
        })
    }

    /// Reads a module from `to_json()` output (not verified).
    #[staticmethod]
    fn from_json(text: Text) -> PyResult<HirModule> {
        guard(|| {
            zh::Module::from_json(&text)
                .map(module_from)
                .map_err(|e| ParseError::new_err(format!("invalid module JSON: {e}")))
        })
    }

    /// A deep copy (open builders are not copied; the copy must be complete).
    fn copy(&self) -> PyResult<HirModule> {
        Ok(module_from(self.hir()?))
    }

    /// Renumbers values and blocks of every function top to bottom (as `.zir` reads).
    fn canonicalize(&self) -> PyResult<()> {
        guard(|| {
            let mut st = lock(&self.inner.state)?;
            for d in &mut st.decls {
                if let Some(f) = &mut d.func {
                    f.canonicalize();
                }
            }
            Ok(())
        })
    }

    fn __str__(&self) -> PyResult<String> {
        self.to_zir()
    }
    fn __repr__(&self) -> PyResult<String> {
        let st = lock(&self.inner.state)?;
        Ok(format!(
            "<zyntax.hir.Module '{}' with {} function(s)>",
            st.name,
            st.decls.len()
        ))
    }
    /// Structural equality (source locations are ignored).
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(other) = other.cast::<HirModule>() else {
            return Ok(false);
        };
        Ok(self.hir()? == other.get().hir()?)
    }
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, (String,))> {
        let f = py.get_type::<HirModule>().getattr("from_json")?.unbind();
        Ok((f, (self.to_json()?,)))
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
    fn value(self: &Arc<Self>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(ValueId, Type)> {
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

    fn wrap(self: &Arc<Self>, id: ValueId, ty: Type) -> PyValue {
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
    /// automatic Python locations.
    #[pyo3(signature = (file, line=Checked(1), col=Checked(1)),
        text_signature = "($self, file, line=1, col=1)")]
    fn set_location(
        &self,
        file: Option<Text>,
        line: Checked<u32>,
        col: Checked<u32>,
    ) -> PyResult<()> {
        let mut st = lock(&self.sh.state)?;
        st.loc_override = file.map(|f| Loc {
            file: Some(f.0),
            line: line.0,
            col: col.0,
        });
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

    // ------------------------------------------------------------ GPU indices

    // ------------------------------------------------------------ synchronization

    /// Memory fence at `scope` (`"block"`, `"device"`, `"system"`).
    #[pyo3(signature = (scope=Text::from("device")),
        text_signature = "($self, scope='device')")]
    fn fence(&self, py: Python<'_>, scope: Text) -> PyResult<()> {
        let s = to_scope(&scope)?;
        self.sh.run(py, |fb| fb.fence(s))
    }
    /// Synchronizes the lanes in `mask`.
    #[pyo3(signature = (mask=None))]
    fn warp_sync(&self, py: Python<'_>, mask: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let m = self.mask(mask)?;
        self.sh.run(py, |fb| {
            let m = mat(fb, &m, &u32_ty())?;
            fb.warp_sync(m)
        })
    }

    // ------------------------------------------------------------ atomics

    /// Atomic read-modify-write (`op` in add, sub, min, max, and, or, xor, exch,
    /// inc, dec) at `scope`; returns the old value.
    #[pyo3(signature = (op, ptr, value, scope=Text::from("device")),
        text_signature = "($self, op, ptr, value, scope='device')")]
    fn atomic(
        &self,
        py: Python<'_>,
        op: Text,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<PyValue> {
        let op = enum_name(
            "atomic op",
            &op,
            AtomicOp::ALL,
            AtomicOp::from_name,
            AtomicOp::name,
        )?;
        self.atomic_op(py, op, ptr, value, &scope)
    }
    /// Compare-and-swap: stores `desired` if `*ptr == expected`; returns the old value.
    #[pyo3(signature = (ptr, expected, desired, scope=Text::from("device")),
        text_signature = "($self, ptr, expected, desired, scope='device')")]
    fn atomic_cas(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        expected: &Bound<'_, PyAny>,
        desired: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<PyValue> {
        let s = to_scope(&scope)?;
        let (p, pt) = self.sh.value(ptr, "the pointer of `atomic_cas`")?;
        let (oe, _) = self.sh.opnd(expected)?;
        let (od, _) = self.sh.opnd(desired)?;
        let et = pt.pointee().cloned().unwrap_or(pt);
        self.sh.run1(py, |fb| {
            let e = mat(fb, &oe, &et)?;
            let d = mat(fb, &od, &et)?;
            fb.atomic_cas(s, p, e, d)
        })
    }

    // ------------------------------------------------------------ warp collectives

    /// Warp shuffle; `mode` in idx, up, down, xor. `lane` is the source lane,
    /// delta or lane mask.
    #[pyo3(signature = (mode, value, lane, *, mask=None, width=Checked(32)),
        text_signature = "($self, mode, value, lane, *, mask=None, width=32)")]
    fn shfl(
        &self,
        py: Python<'_>,
        mode: Text,
        value: &Bound<'_, PyAny>,
        lane: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        width: Checked<u32>,
    ) -> PyResult<PyValue> {
        let m = enum_name(
            "shuffle mode",
            &mode,
            ShflMode::ALL,
            ShflMode::from_name,
            ShflMode::name,
        )?;
        self.shfl_op(py, m, value, lane, mask, width.0)
    }

    /// Warp vote; `mode` in ballot (u32 mask), any, all (bool).
    #[pyo3(signature = (mode, pred, *, mask=None))]
    fn vote(
        &self,
        py: Python<'_>,
        mode: Text,
        pred: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let m = enum_name(
            "vote mode",
            &mode,
            VoteMode::ALL,
            VoteMode::from_name,
            VoteMode::name,
        )?;
        self.vote_op(py, m, pred, mask)
    }

    /// Mask of the lanes in `mask` whose `value` equals this lane's.
    #[pyo3(signature = (value, *, mask=None))]
    fn match_any(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let mut v = self.match_op(py, MatchMode::Any, value, mask)?;
        v.pop()
            .ok_or_else(|| InternalError::new_err("match.any gave no result"))
    }
    /// `(mask, all_equal)`: whether all lanes in `mask` hold the same `value`.
    #[pyo3(signature = (value, *, mask=None))]
    fn match_all(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(PyValue, PyValue)> {
        let mut v = self.match_op(py, MatchMode::All, value, mask)?;
        match (v.pop(), v.pop()) {
            (Some(pred), Some(m)) => Ok((m, pred)),
            _ => Err(InternalError::new_err(
                "match.all gave fewer than 2 results",
            )),
        }
    }

    // ------------------------------------------------------------ tensor cores

    /// Loads an A/B/accumulator fragment of type `frag` from `ptr` with leading
    /// dimension `ldm` (elements) in `layout` (`"row"`/`"col"`).
    #[pyo3(signature = (frag, ptr, ldm, layout=None))]
    fn mma_load(
        &self,
        py: Python<'_>,
        frag: &Bound<'_, PyAny>,
        ptr: &Bound<'_, PyAny>,
        ldm: &Bound<'_, PyAny>,
        layout: Option<Text>,
    ) -> PyResult<PyValue> {
        let Type::Frag(ft) = to_type(frag)? else {
            return Err(ArgumentError::new_err(
                "mma_load needs a fragment type (zyntax.hir.frag(...))",
            ));
        };
        // A/B fragments carry their layout; accumulators take it here.
        let layout = match (layout, ft.layout) {
            (Some(l), _) => parse_layout(&l)?,
            (None, Some(l)) => l,
            (None, None) => {
                return Err(BuildError::new_err(
                    "mma_load of an accumulator needs layout='row' or 'col'",
                ))
            }
        };
        let (p, _) = self.sh.value(ptr, "the pointer of `mma_load`")?;
        let (ol, _) = self.sh.opnd(ldm)?;
        self.sh.run1(py, |fb| {
            let l = mat(fb, &ol, &u32_ty())?;
            fb.mma_load(ft, layout, p, l)
        })
    }

    /// An accumulator fragment of type `frag` with every element set to `value`.
    fn mma_fill(
        &self,
        py: Python<'_>,
        frag: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let Type::Frag(ft) = to_type(frag)? else {
            return Err(ArgumentError::new_err(
                "mma_fill needs a fragment type (zyntax.hir.frag(...))",
            ));
        };
        let (ov, _) = self.sh.opnd(value)?;
        let et = Type::Scalar(ft.elem);
        self.sh.run1(py, |fb| {
            let v = mat(fb, &ov, &et)?;
            fb.mma_fill(ft, v)
        })
    }

    /// `D = A * B + C` on fragments; D has C's type.
    fn mma(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        c: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (a, _) = self.sh.value(a, "fragment a of `mma`")?;
        let (b, _) = self.sh.value(b, "fragment b of `mma`")?;
        let (c, _) = self.sh.value(c, "fragment c of `mma`")?;
        self.sh.run1(py, |fb| fb.mma(a, b, c))
    }

    /// Stores an accumulator fragment to `ptr` with leading dimension `ldm`.
    #[pyo3(signature = (ptr, frag, ldm, layout=Text::from("row")),
        text_signature = "($self, ptr, frag, ldm, layout='row')")]
    fn mma_store(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        frag: &Bound<'_, PyAny>,
        ldm: &Bound<'_, PyAny>,
        layout: Text,
    ) -> PyResult<()> {
        let layout = parse_layout(&layout)?;
        let (p, _) = self.sh.value(ptr, "the pointer of `mma_store`")?;
        let (f, _) = self.sh.value(frag, "the fragment of `mma_store`")?;
        let (ol, _) = self.sh.opnd(ldm)?;
        self.sh.run(py, |fb| {
            let l = mat(fb, &ol, &u32_ty())?;
            fb.mma_store(layout, p, f, l)
        })
    }

    // ------------------------------------------------------------ async copy

    /// Asynchronous global→shared copy of `bytes` (4, 8 or 16) with cache hint
    /// `cache` (`"ca"` or `"cg"`, 16 bytes only).
    #[pyo3(signature = (dst, src, bytes=Checked(16), cache=Text::from("cg")),
        text_signature = "($self, dst, src, bytes=16, cache='cg')")]
    fn cp_async(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        bytes: Checked<u32>,
        cache: Text,
    ) -> PyResult<()> {
        let c = enum_name(
            "cache hint",
            &cache,
            CacheHint::ALL,
            CacheHint::from_name,
            CacheHint::name,
        )?;
        let (d, _) = self.sh.value(dst, "the destination of `cp_async`")?;
        let (s, _) = self.sh.value(src, "the source of `cp_async`")?;
        self.sh.run(py, |fb| fb.cp_async(bytes.0, c, d, s))
    }
    /// Waits until at most `pending` committed groups are still in flight.
    #[pyo3(signature = (pending=Checked(0)), text_signature = "($self, pending=0)")]
    fn cp_async_wait(&self, py: Python<'_>, pending: Checked<u32>) -> PyResult<()> {
        self.sh.run(py, |fb| fb.cp_async_wait(pending.0))
    }

    // ------------------------------------------------------------ Hopper barriers (issue 13)
    // A barrier is a `ptr<shared, u64>` (e.g. `shared_alloc(u64, 1)`); counts are u32.

    /// Initializes the barrier for `count` arrivals per phase (phase 0).
    fn mbarrier_init(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.mbar(py, MbarrierOp::Init, bar, &[count]).map(|_| ())
    }
    /// Arrives once; returns the u64 state token for `mbarrier_test_wait`.
    fn mbarrier_arrive(&self, py: Python<'_>, bar: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.mbar1(py, MbarrierOp::Arrive, bar, &[])
    }
    /// Adds `tx` bytes to the phase's expected transactions, then arrives; returns the state token (sm_90).
    fn mbarrier_arrive_expect_tx(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        tx: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        self.mbar1(py, MbarrierOp::ArriveExpectTx, bar, &[tx])
    }
    /// Marks `tx` bytes of the phase's transactions complete (sm_90).
    fn mbarrier_complete_tx(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        tx: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.mbar(py, MbarrierOp::CompleteTx, bar, &[tx])
            .map(|_| ())
    }
    /// Whether the phase `state` (from an arrive) came from has completed; never blocks.
    fn mbarrier_test_wait(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        state: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        self.mbar1(py, MbarrierOp::TestWait, bar, &[state])
    }
    /// Whether the phase of parity `parity` (0 or 1) has completed; may first
    /// suspend the thread for up to `hint` ns (sm_90). Call it in a loop.
    #[pyo3(signature = (bar, parity, hint=None))]
    fn mbarrier_try_wait_parity(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        parity: &Bound<'_, PyAny>,
        hint: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let zero = 0u32.into_pyobject(py)?.into_any();
        let hint = hint.unwrap_or(&zero);
        self.mbar1(py, MbarrierOp::TryWaitParity, bar, &[parity, hint])
    }
    /// Invalidates the barrier so its shared memory can be reused.
    fn mbarrier_inval(&self, py: Python<'_>, bar: &Bound<'_, PyAny>) -> PyResult<()> {
        self.mbar(py, MbarrierOp::Inval, bar, &[]).map(|_| ())
    }

    // ------------------------------------------------------------ TMA (issue 13 item 2)
    // A tensor map is a `hir.tensormap` kernel parameter; coordinates are
    // element coordinates, innermost first (ints become i32 constants).

    /// Copies the tensor map's box at `coords` into shared `dst`; the copy
    /// completes its bytes on mbarrier `bar` (sm_90). With `multicast` (a u16
    /// CTA mask), into the same offset of every CTA of the cluster it names (sm_90a).
    #[pyo3(signature = (dst, tmap, coords, bar, *, multicast=None))]
    fn tma_load(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        tmap: &Bound<'_, PyAny>,
        coords: &Bound<'_, PyAny>,
        bar: &Bound<'_, PyAny>,
        multicast: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (dst, _) = self.sh.value(dst, "the destination of `tma_load`")?;
        let (tmap, _) = self.sh.value(tmap, "the tensor map of `tma_load`")?;
        let (bar, _) = self.sh.value(bar, "the barrier of `tma_load`")?;
        let coords = self.opnd_seq(Some(coords))?;
        let mask = multicast.map(|m| self.sh.opnd(m)).transpose()?;
        self.sh.run(py, |fb| {
            let cs = mat_all(fb, &coords, &vec![Type::I32; coords.len()])?;
            let mask = mask.map(|(m, _)| mat(fb, &m, &Type::U16)).transpose()?;
            fb.tma_load(dst, tmap, bar, &cs, mask)
        })
    }
    /// Copies the box in shared `src` to the tensor at `coords` (in-bounds
    /// elements only). A bulk-group op: `bulk_commit_group`, then `bulk_wait_group`.
    fn tma_store(
        &self,
        py: Python<'_>,
        tmap: &Bound<'_, PyAny>,
        coords: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (tmap, _) = self.sh.value(tmap, "the tensor map of `tma_store`")?;
        let (src, _) = self.sh.value(src, "the source of `tma_store`")?;
        let coords = self.opnd_seq(Some(coords))?;
        self.sh.run(py, |fb| {
            let cs = mat_all(fb, &coords, &vec![Type::I32; coords.len()])?;
            fb.tma_store(tmap, src, &cs)
        })
    }
    /// Combines the box in shared `src` into the tensor at `coords` with `op`
    /// (`"add"`, `"min"` or `"max"`, on the tensor map's element type). A bulk-group op.
    fn tma_reduce(
        &self,
        py: Python<'_>,
        op: Text,
        tmap: &Bound<'_, PyAny>,
        coords: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let op = zh::BulkRedOp::from_name(&op).ok_or_else(|| {
            BuildError::new_err(format!(
                "unknown TMA reduction '{}' (expected one of: add, min, max)",
                &*op
            ))
        })?;
        let (tmap, _) = self.sh.value(tmap, "the tensor map of `tma_reduce`")?;
        let (src, _) = self.sh.value(src, "the source of `tma_reduce`")?;
        let coords = self.opnd_seq(Some(coords))?;
        self.sh.run(py, |fb| {
            let cs = mat_all(fb, &coords, &vec![Type::I32; coords.len()])?;
            fb.tma_reduce(op, tmap, src, &cs)
        })
    }
    /// Copies `nbytes` (a multiple of 16) from global `src` to shared `dst`;
    /// the copy completes its bytes on mbarrier `bar` (sm_90).
    fn bulk_copy_g2s(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        nbytes: &Bound<'_, PyAny>,
        bar: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (dst, _) = self.sh.value(dst, "the destination of `bulk_copy_g2s`")?;
        let (src, _) = self.sh.value(src, "the source of `bulk_copy_g2s`")?;
        let (bar, _) = self.sh.value(bar, "the barrier of `bulk_copy_g2s`")?;
        let (n, _) = self.sh.opnd(nbytes)?;
        self.sh.run(py, |fb| {
            let n = mat(fb, &n, &Type::U32)?;
            fb.bulk_copy_g2s(dst, src, n, bar)
        })
    }
    /// Copies `nbytes` (a multiple of 16) from shared `src` to global `dst`. A bulk-group op.
    fn bulk_copy_s2g(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        nbytes: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (dst, _) = self.sh.value(dst, "the destination of `bulk_copy_s2g`")?;
        let (src, _) = self.sh.value(src, "the source of `bulk_copy_s2g`")?;
        let (n, _) = self.sh.opnd(nbytes)?;
        self.sh.run(py, |fb| {
            let n = mat(fb, &n, &Type::U32)?;
            fb.bulk_copy_s2g(dst, src, n)
        })
    }
    /// Waits until at most `n` of this thread's committed bulk groups are
    /// incomplete (`read=True`: until they no longer read their shared source).
    #[pyo3(signature = (n=Checked(0), *, read=Flag(false)), text_signature = "($self, n=0, *, read=False)")]
    fn bulk_wait_group(&self, py: Python<'_>, n: Checked<u32>, read: Flag) -> PyResult<()> {
        self.sh.run(py, |fb| fb.bulk_wait_group(n.0, read.0))
    }
    /// Combines `nbytes` (a multiple of 16) of shared `src` element-wise into
    /// global `dst` with `op` (`"add"`, `"min"`, `"max"`, in the pointers'
    /// element type). A bulk-group op.
    fn bulk_reduce(
        &self,
        py: Python<'_>,
        op: Text,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        nbytes: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let op = zh::BulkRedOp::from_name(&op).ok_or_else(|| {
            BuildError::new_err(format!(
                "unknown bulk reduction '{}' (expected one of: add, min, max)",
                &*op
            ))
        })?;
        let (dst, _) = self.sh.value(dst, "the destination of `bulk_reduce`")?;
        let (src, _) = self.sh.value(src, "the source of `bulk_reduce`")?;
        let (n, _) = self.sh.opnd(nbytes)?;
        self.sh.run(py, |fb| {
            let n = mat(fb, &n, &Type::U32)?;
            fb.bulk_reduce(op, dst, src, n)
        })
    }
    /// Prefetches the tensor map (speed only).
    fn prefetch_tensormap(&self, py: Python<'_>, tmap: &Bound<'_, PyAny>) -> PyResult<()> {
        let (tmap, _) = self
            .sh
            .value(tmap, "the tensor map of `prefetch_tensormap`")?;
        self.sh.run(py, |fb| fb.prefetch_tensormap(tmap))
    }

    // ------------------------------------------------------------ clusters (issue 13 item 4, h13-cluster)

    /// `barrier.cluster.arrive` (`relaxed=True`: without release ordering).
    #[pyo3(signature = (relaxed=Flag(false)), text_signature = "($self, relaxed=False)")]
    fn cluster_arrive(&self, py: Python<'_>, relaxed: Flag) -> PyResult<()> {
        let op = if relaxed.0 {
            zh::ClusterBarrierOp::ArriveRelaxed
        } else {
            zh::ClusterBarrierOp::Arrive
        };
        self.sh.run(py, |fb| fb.cluster_barrier(op))
    }
    /// `barrier.cluster.wait`: until every non-exited thread of the cluster has arrived.
    fn cluster_wait(&self, py: Python<'_>) -> PyResult<()> {
        self.sh
            .run(py, |fb| fb.cluster_barrier(zh::ClusterBarrierOp::Wait))
    }
    /// Cluster-wide barrier: `cluster_arrive()` then `cluster_wait()`.
    fn cluster_sync(&self, py: Python<'_>) -> PyResult<()> {
        self.cluster_arrive(py, Flag(false))?;
        self.cluster_wait(py)
    }
    /// `ptr` (a `ptr<shared, T>`) in the cluster's block of rank `rank`: a
    /// `ptr<shared_cluster, T>` to load, store and atomically update (DSMEM).
    fn mapa(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        rank: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (p, _) = self.sh.value(ptr, "the pointer of `mapa`")?;
        let (r, _) = self.sh.opnd(rank)?;
        self.sh.run1(py, |fb| {
            let r = mat(fb, &r, &Type::U32)?;
            fb.mapa(p, r)
        })
    }
    /// One arrival on a barrier `mapa` mapped to a block of the cluster: release at
    /// cluster scope, or (`relaxed=True`) ordering nothing for that block, for handing
    /// back a buffer this thread only read (no GPU-wide fence).
    #[pyo3(signature = (bar, relaxed=Flag(false)), text_signature = "($self, bar, relaxed=False)")]
    fn mbarrier_arrive_cluster(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        relaxed: Flag,
    ) -> PyResult<()> {
        let relaxed = relaxed.0;
        let (b, _) = self
            .sh
            .value(bar, "the barrier of `mbarrier_arrive_cluster`")?;
        self.sh.run(py, |fb| {
            if relaxed {
                fb.mbarrier_arrive_cluster_relaxed(b)
            } else {
                fb.mbarrier_arrive_cluster(b)
            }
        })
    }

    // ------------------------------------------------------------ warp MMA (issue 12)

    /// `D = A * B + C` over the warp (`mma.sync`) with per-lane register
    /// fragments in PTX's layouts; `elem` picks the input type and the shape.
    #[pyo3(signature = (a, b, c, *, elem=Text::from("f16")),
        text_signature = "($self, a, b, c, *, elem='f16')")]
    fn mma_sync(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        c: &Bound<'_, PyAny>,
        elem: Text,
    ) -> PyResult<PyValue> {
        let e = enum_name(
            "mma.sync input type",
            &elem,
            zh::MmaElem::ALL,
            zh::MmaElem::from_name,
            zh::MmaElem::name,
        )?;
        let (a, _) = self.sh.value(a, "fragment a of `mma_sync`")?;
        let (b, _) = self.sh.value(b, "fragment b of `mma_sync`")?;
        let (c, _) = self.sh.value(c, "fragment c of `mma_sync`")?;
        self.sh.run1(py, |fb| fb.mma_sync(e.shape(), e, a, b, c))
    }

    /// `num` (1, 2, 4) 8x8 b16 matrices from shared memory; lane `i*8 + r`
    /// gives the address of row `r` of matrix `i`.
    #[pyo3(signature = (ptr, num=Checked(4), *, trans=Flag(false)),
        text_signature = "($self, ptr, num=4, *, trans=False)")]
    fn ldmatrix(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        num: Checked<u32>,
        trans: Flag,
    ) -> PyResult<PyValue> {
        let (p, _) = self.sh.value(ptr, "the pointer of `ldmatrix`")?;
        self.sh.run1(py, |fb| fb.ldmatrix(num.0, trans.0, p))
    }

    /// Stores the matrices of `value` (`u32` or `vec<u32, n>`) to shared memory (sm_90).
    #[pyo3(signature = (ptr, value, *, trans=Flag(false)), text_signature = "($self, ptr, value, *, trans=False)")]
    fn stmatrix(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        trans: Flag,
    ) -> PyResult<()> {
        let (p, _) = self.sh.value(ptr, "the pointer of `stmatrix`")?;
        let (v, t) = self.sh.value(value, "the value of `stmatrix`")?;
        let num = match t {
            Type::Vector(_, n) => n,
            _ => 1,
        };
        self.sh.run(py, |fb| fb.stmatrix(num, trans.0, p, v))
    }

    // ------------------------------------------------------------ warpgroup MMA (issue 13)

    /// A u64 shared-memory matrix descriptor for `wgmma`: the start address of
    /// `smem_ptr` (a shared pointer), the leading and stride byte offsets
    /// (multiples of 16; ints or u32 values) and the swizzle
    /// (`"128B"`, `"64B"`, `"32B"`, `"none"`); base offset 0.
    #[pyo3(signature = (smem_ptr, *, leading_byte_offset, stride_byte_offset, swizzle=Text::from("128B")),
        text_signature = "($self, smem_ptr, *, leading_byte_offset, stride_byte_offset, swizzle='128B')")]
    fn wgmma_desc(
        &self,
        py: Python<'_>,
        smem_ptr: &Bound<'_, PyAny>,
        leading_byte_offset: &Bound<'_, PyAny>,
        stride_byte_offset: &Bound<'_, PyAny>,
        swizzle: Text,
    ) -> PyResult<PyValue> {
        let sw = enum_name(
            "swizzle",
            &swizzle,
            zh::Swizzle::ALL,
            zh::Swizzle::from_name,
            zh::Swizzle::name,
        )?;
        let (p, _) = self.sh.value(smem_ptr, "the pointer of `wgmma_desc`")?;
        let lbo = self.sh.opnd(leading_byte_offset)?.0;
        let sbo = self.sh.opnd(stride_byte_offset)?.0;
        self.sh.run1(py, |fb| {
            let l = mat(fb, &lbo, &Type::U32)?;
            let s = mat(fb, &sbo, &Type::U32)?;
            fb.wgmma_desc(sw, p, l, s)
        })
    }

    /// `D = (scale_d ? acc : 0) + A * B` over the warpgroup (`wgmma.mma_async`,
    /// m64nNk*, sm_90a). `acc` is `vec<f32|f16|i32, n/2>`; `a` a u64 descriptor
    /// (A in shared memory) or a `vec<u32, 4>` register fragment; `b_desc` a u64
    /// descriptor; `scale_d` 0/1 or a bool value; `scale_a`/`scale_b` 1 or -1.
    #[pyo3(signature = (acc, a, b_desc, *, n, a_type=Text::from("bf16"), b_type=None, scale_d=None, trans_a=Flag(false), trans_b=Flag(false), scale_a=Checked(1), scale_b=Checked(1)),
        text_signature = "($self, acc, a, b_desc, *, n, a_type='bf16', b_type=None, scale_d=1, trans_a=False, trans_b=False, scale_a=1, scale_b=1)")]
    #[allow(clippy::too_many_arguments)]
    fn wgmma(
        &self,
        py: Python<'_>,
        acc: &Bound<'_, PyAny>,
        a: &Bound<'_, PyAny>,
        b_desc: &Bound<'_, PyAny>,
        n: Checked<u32>,
        a_type: Text,
        b_type: Option<Text>,
        scale_d: Option<&Bound<'_, PyAny>>,
        trans_a: Flag,
        trans_b: Flag,
        scale_a: Checked<i32>,
        scale_b: Checked<i32>,
    ) -> PyResult<PyValue> {
        let elem = |t: &str| {
            enum_name(
                "wgmma input type",
                t,
                zh::MmaElem::ALL,
                zh::MmaElem::from_name,
                zh::MmaElem::name,
            )
        };
        let ea = elem(&a_type)?;
        let eb = match &b_type {
            Some(t) => elem(t)?,
            None => ea,
        };
        let neg = |x: i32, what: &str| match x {
            1 => Ok(false),
            -1 => Ok(true),
            _ => Err(BuildError::new_err(format!(
                "wgmma: {what} must be 1 or -1, got {x}"
            ))),
        };
        let form = zh::Wgmma {
            n: n.0,
            a: ea,
            b: eb,
            trans_a: trans_a.0,
            trans_b: trans_b.0,
            neg_a: neg(scale_a.0, "scale_a")?,
            neg_b: neg(scale_b.0, "scale_b")?,
        };
        let (c, _) = self.sh.value(acc, "the accumulator of `wgmma`")?;
        let (av, _) = self.sh.value(a, "operand a of `wgmma`")?;
        let (bv, _) = self.sh.value(b_desc, "the B descriptor of `wgmma`")?;
        let sd = match scale_d {
            None => Opnd::Bool(true),
            Some(o) => match self.sh.opnd(o)?.0 {
                Opnd::Int(0) => Opnd::Bool(false),
                Opnd::Int(1) => Opnd::Bool(true),
                other => other,
            },
        };
        self.sh.run1(py, |fb| {
            let s = mat(fb, &sd, &Type::BOOL)?;
            fb.wgmma(form, c, av, bv, s)
        })
    }

    /// An accumulator of zeros for `wgmma` of width `n`: `vec<dtype, n/2>`
    /// (`dtype` f32, f16 or i32).
    #[pyo3(signature = (n, *, dtype=None), text_signature = "($self, n, *, dtype=f32)")]
    fn wgmma_zero(
        &self,
        py: Python<'_>,
        n: Checked<u32>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let s = match dtype {
            Some(t) => to_type(t)?,
            None => Type::F32,
        };
        let Some(s) = s.as_scalar() else {
            return Err(BuildError::new_err(format!(
                "wgmma_zero: dtype must be a scalar type, got {s}"
            )));
        };
        if n.0 % 8 != 0 || !(8..=256).contains(&n.0) {
            return Err(BuildError::new_err(format!(
                "wgmma_zero: n must be 8..256 by 8, got {}",
                n.0
            )));
        }
        self.sh
            .run1(py, |fb| fb.wgmma_zero(Type::Vector(s, n.0 / 2)))
    }

    /// Waits until at most `n` committed wgmma groups are pending (0..7).
    fn wgmma_wait_group(&self, py: Python<'_>, n: Checked<u32>) -> PyResult<()> {
        self.sh.run(py, |fb| fb.wgmma_wait_group(n.0))
    }

    /// `setmaxnreg.inc` (`increase=True`) or `.dec` to `count` registers per
    /// thread (a multiple of 8 in 24..256; sm_90a).
    #[pyo3(signature = (count, *, increase), text_signature = "($self, count, *, increase)")]
    fn setmaxnreg(&self, py: Python<'_>, count: Checked<u32>, increase: Flag) -> PyResult<()> {
        self.sh.run(py, |fb| fb.setmaxnreg(count.0, increase.0))
    }

    /// True in exactly one lane of the warp, the lowest active one (`elect.sync`, sm_90).
    fn elect_sync(&self, py: Python<'_>) -> PyResult<PyValue> {
        self.sh.run1(py, |fb| fb.elect_sync())
    }

    /// A global load with a PTX cache operator (`ca`, `cg`, `cs`, `lu`, `cv`).
    #[pyo3(signature = (ptr, cache=Text::from("cs")),
        text_signature = "($self, ptr, cache='cs')")]
    fn load_cached(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        cache: Text,
    ) -> PyResult<PyValue> {
        let c = enum_name(
            "cache operator",
            &cache,
            zh::CacheOp::ALL,
            zh::CacheOp::from_name,
            zh::CacheOp::name,
        )?;
        let (p, _) = self.sh.value(ptr, "the pointer of `load_cached`")?;
        self.sh.run1(py, |fb| fb.load_cached(c, p))
    }
    /// A global store with a PTX cache operator (`wb`, `cg`, `cs`, `wt`).
    #[pyo3(signature = (ptr, value, cache=Text::from("cs")),
        text_signature = "($self, ptr, value, cache='cs')")]
    fn store_cached(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        cache: Text,
    ) -> PyResult<()> {
        let c = enum_name(
            "cache operator",
            &cache,
            zh::CacheOp::ALL,
            zh::CacheOp::from_name,
            zh::CacheOp::name,
        )?;
        let (p, _) = self.sh.value(ptr, "the pointer of `store_cached`")?;
        let (v, _) = self.sh.value(value, "the value of `store_cached`")?;
        self.sh.run(py, |fb| fb.store_cached(c, p, v))
    }
    /// `2**a` on f32, fast approximation (`ex2.approx.f32`).
    fn ex2_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Ex2, a)
    }
    /// `1/a` on f32, fast approximation (`rcp.approx.f32`).
    fn rcp_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Rcp, a)
    }
    /// `tanh(a)` on f32, fast approximation (`tanh.approx.f32`, sm_80+).
    fn tanh_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Tanh, a)
    }
    /// `2**a` on f32, fast approximation with subnormal operands and results
    /// flushed to zero (`ex2.approx.ftz.f32`: one MUFU.EX2, no range fix-up).
    fn ex2_ftz_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Ex2Ftz, a)
    }

    /// Pointer to the module global `name` (declared with
    /// `Module.global_var`): `ptr<constant|global, elem>`.
    fn global_addr(&self, py: Python<'_>, name: Text) -> PyResult<PyValue> {
        let name = name.trim_start_matches('@').to_string();
        let ty = {
            let ms = lock(&self.sh.module.state)?;
            ms.globals
                .iter()
                .find(|g| g.name == name)
                .map(zh::GlobalVar::ptr_type)
                .ok_or_else(|| {
                    BuildError::new_err(format!(
                        "unknown global @{name}: declare it with Module.global_var first"
                    ))
                })?
        };
        self.sh.run1(py, |fb| fb.global_addr(name, ty))
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
    /// are `Value`s, `results` the result types, `imm` the immediates the
    /// row's operand template names (`alloca`: `elem`, `count`; `shfl.*`:
    /// `width`; ...). The op comes from the instruction table; the verifier
    /// checks the types against the row's signature (hir/emit.rs).
    #[pyo3(signature = (mnemonic, args, results, imm=None))]
    fn inst(
        &self,
        py: Python<'_>,
        mnemonic: Text,
        args: &Bound<'_, PyAny>,
        results: &Bound<'_, PyAny>,
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

    // ------------------------------------------------------------ memory model (issue 12)

    /// Load with acquire semantics at `scope` (`ld.acquire`).
    #[pyo3(signature = (ptr, scope=Text::from("device")),
        text_signature = "($self, ptr, scope='device')")]
    fn load_acquire(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<PyValue> {
        let s = to_scope(&scope)?;
        let (p, _) = self.sh.value(ptr, "the pointer of `load_acquire`")?;
        self.sh.run1(py, |fb| fb.load_acquire(s, p))
    }
    /// Store with release semantics at `scope` (`st.release`).
    #[pyo3(signature = (ptr, value, scope=Text::from("device")),
        text_signature = "($self, ptr, value, scope='device')")]
    fn store_release(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<()> {
        let s = to_scope(&scope)?;
        let (p, pt) = self.sh.value(ptr, "the pointer of `store_release`")?;
        let (ov, _) = self.sh.opnd(value)?;
        let et = pt.pointee().cloned().unwrap_or(pt);
        self.sh.run(py, |fb| {
            let v = mat(fb, &ov, &et)?;
            fb.store_release(s, p, v)
        })
    }
    /// `redux.sync.<op>` (`op` in add, min, max, and, or, xor; sm_80): the
    /// reduction of a u32/i32 `value` over the lanes in `mask` (all 32 by default).
    #[pyo3(signature = (op, value, *, mask=None))]
    fn redux(
        &self,
        py: Python<'_>,
        op: Text,
        value: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let op = enum_name(
            "redux op",
            &op,
            ReduxOp::ALL,
            ReduxOp::from_name,
            ReduxOp::name,
        )?;
        let (v, _) = self.sh.value(value, "the value of `redux`")?;
        let m = self.mask(mask)?;
        self.sh.run1(py, |fb| {
            let m = mat(fb, &m, &u32_ty())?;
            fb.redux(op, m, v)
        })
    }
    /// Acquire-release fence at `scope` (`fence.acq_rel`).
    #[pyo3(signature = (scope=Text::from("device")),
        text_signature = "($self, scope='device')")]
    fn fence_acq_rel(&self, py: Python<'_>, scope: Text) -> PyResult<()> {
        let s = to_scope(&scope)?;
        self.sh.run(py, |fb| fb.fence_acq_rel(s))
    }

    // ------------------------------------------------------------ issue 12 (rest)

    /// `bar.sync id, count`: waits at named barrier `id` (1..15) until
    /// `count` threads (a multiple of 32; whole warps arrive) have arrived.
    fn named_barrier_sync(
        &self,
        py: Python<'_>,
        id: Checked<u32>,
        count: Checked<u32>,
    ) -> PyResult<()> {
        self.sh.run(py, |fb| fb.named_barrier(false, id.0, count.0))
    }
    /// `bar.arrive id, count`: arrives at named barrier `id` without waiting.
    fn named_barrier_arrive(
        &self,
        py: Python<'_>,
        id: Checked<u32>,
        count: Checked<u32>,
    ) -> PyResult<()> {
        self.sh.run(py, |fb| fb.named_barrier(true, id.0, count.0))
    }
    /// Two f32 rounded to nearest even into a pair (`fmt`: f16x2, bf16x2 →
    /// `vec<f16|bf16, 2>`; e4m3x2, e5m2x2 → `u16`, saturating); `lo` is lane 0.
    fn cvt_pack(
        &self,
        py: Python<'_>,
        fmt: Text,
        lo: &Bound<'_, PyAny>,
        hi: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let f = enum_name(
            "pair format",
            &fmt,
            zh::PackFmt::ALL,
            zh::PackFmt::from_name,
            zh::PackFmt::name,
        )?;
        let (lo, _) = self.sh.value(lo, "the low operand of `cvt_pack`")?;
        let (hi, _) = self.sh.value(hi, "the high operand of `cvt_pack`")?;
        self.sh.run1(py, |fb| fb.cvt_pack(f, lo, hi))
    }
    /// A packed fp8 pair (`u16`; `fmt` e4m3x2 or e5m2x2) widened to `vec<f16, 2>`.
    fn cvt_unpack(&self, py: Python<'_>, fmt: Text, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        let f = enum_name(
            "pair format",
            &fmt,
            zh::PackFmt::ALL,
            zh::PackFmt::from_name,
            zh::PackFmt::name,
        )?;
        let (a, _) = self.sh.value(a, "the operand of `cvt_unpack`")?;
        self.sh.run1(py, |fb| fb.cvt_unpack(f, a))
    }
}

fn block_param_types(fb: &zh::FunctionBuilder, b: BlockId) -> zh::BuildResult<Vec<Type>> {
    fb.block_params(b)?
        .into_iter()
        .map(|v| ty_of(fb, v))
        .collect()
}

impl FunctionBuilder {
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

/// A basic block of a function under construction.
#[pyclass(frozen, name = "Block", module = "zyntax.hir")]
pub struct PyBlock {
    owner: Arc<FnShared>,
    id: BlockId,
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

/// Context manager of `FunctionBuilder.loop` (a counted loop with carried values).
#[pyclass(frozen, module = "zyntax.hir")]
pub struct Loop {
    inner: LoopSpec,
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
