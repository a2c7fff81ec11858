//! The Python `Module`: functions, kernels, globals, verification, printing,
//! JSON and compilation entry points.

use super::*;

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

    /// Names of the kernels in the module's code for `arch`: a kernel
    /// declared with its own `arch=` is compiled for that arch only.
    fn kernels_for(&self, arch: Text) -> PyResult<Vec<String>> {
        let arch = parse_arch(&arch)?;
        Ok(self
            .hir()?
            .kernels()
            .filter(|f| {
                f.kind
                    .kernel_info()
                    .and_then(|k| k.arch)
                    .is_none_or(|a| a == arch)
            })
            .map(|f| f.name.clone())
            .collect())
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

    /// The module as `.zir` text; with `located=True` each instruction's
    /// source location follows it as a `; line:col` comment (the parser
    /// ignores comments, so the text reads back to the same module).
    #[pyo3(signature = (*, located=Flag(false)), text_signature = "($self, *, located=False)")]
    fn to_zir(&self, located: Flag) -> PyResult<String> {
        let m = self.hir()?;
        guard(|| {
            Ok(if located.0 {
                zh::print_module_located(&m)
            } else {
                zh::print_module(&m)
            })
        })
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
        self.to_zir(Flag(false))
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
