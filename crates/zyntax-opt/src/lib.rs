//! # zyntax-opt
//!
//! HIR passes driven by each function's [`Constraints`]: the critical-path
//! optimizer. It knows nothing of LLVM or CUDA: it proves constraints, rewrites
//! HIR (inlining, dead-code elimination) and hands each backend a
//! target-neutral [`FunctionPlan`] (attributes, loop hints, prefetch streams,
//! whether to emit bounds checks) that the backend turns into its own terms.
//! Every decision is recorded in a [`Report`] with the reason for it.
//! [`nest`] lowers parallel loop nests for front-ends, [`nest_stage`] stages
//! their reductions through shared memory; [`fusion`] plans the
//! fusion of a sequence of kernel launches.
//!
//! | constraint | what the optimizer does |
//! |---|---|
//! | `no_alloc` | proves that no allocation is reachable ([`no_alloc`]); otherwise a [`ConstraintError`] lists every site. Nothing is deleted to make the proof pass: the proof runs before any rewriting. |
//! | `inline_always` | the function is inlined into every caller in the module ([`inline`]); a recursive or kernel `inline_always` function is an error. |
//! | `no_bounds_check` | the plan drops bounds checks on memory accesses of this function. |
//! | `critical_path` | hot/nounwind/no-stack-protector attributes, aligned hot loops, vectorization hints, software prefetch of streaming loads, small callees inlined, `O3` raised to `Olatency`. `O0` with `critical_path` is an error. |
//! | `opt_level` | see [`OptLevel`] and [`level_summary`]. |

pub mod analysis;
pub mod dce;
pub mod fusion;
pub mod inline;
pub mod nest;
pub mod nest_stage;
pub mod nest_tile;
pub mod no_alloc;

use serde::Serialize;
use std::fmt;
use zyntax_hir::{Constraints, Function, FunctionKind, Module, Op, OptLevel};

pub use analysis::{Origin, StreamingLoad};
pub use no_alloc::{AllocSite, STACK_LIMIT};

/// Callees up to this many instructions are inlined into critical-path callers.
pub const SMALL_CALLEE: usize = 48;
/// Inlining stops growing a function beyond this many instructions.
pub const MAX_INLINED_SIZE: usize = 20_000;

/// One thing the optimizer did (or decided not to do) to a function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Action {
    /// Pass or stage: `no_alloc`, `inline`, `dce`, `attributes`, `pipeline`, `loops`, `prefetch`, `bounds`, ...
    pub pass: String,
    pub what: String,
    pub why: String,
}

/// What the optimizer did to one function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionReport {
    pub name: String,
    pub kind: String,
    pub constraints: Vec<String>,
    pub opt_level: String,
    pub actions: Vec<Action>,
}

/// The optimizer's report for a module (`zyntax compile --report`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub module: String,
    pub functions: Vec<FunctionReport>,
    /// Module-wide notes from the backend (e.g. LLVM's reasons for not
    /// vectorizing a loop that critical_path asked to vectorize).
    pub notes: Vec<String>,
}

impl Report {
    /// Record an action for `function` (creating its entry if needed).
    pub fn add(
        &mut self,
        function: &str,
        pass: &str,
        what: impl Into<String>,
        why: impl Into<String>,
    ) {
        if let Some(fr) = self.functions.iter_mut().find(|f| f.name == function) {
            fr.actions.push(Action {
                pass: pass.into(),
                what: what.into(),
                why: why.into(),
            });
        }
    }

    pub fn function(&self, name: &str) -> Option<&FunctionReport> {
        self.functions.iter().find(|f| f.name == name)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "optimization report for module `{}`", self.module)?;
        for fr in &self.functions {
            let flags = if fr.constraints.is_empty() {
                "none".to_string()
            } else {
                fr.constraints.join(", ")
            };
            writeln!(
                f,
                "@{} ({}, {}; constraints: {flags})",
                fr.name, fr.kind, fr.opt_level
            )?;
            for a in &fr.actions {
                writeln!(f, "  [{}] {} — {}", a.pass, a.what, a.why)?;
            }
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

/// A constraint that cannot be met.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConstraintViolation {
    pub function: String,
    pub constraint: String,
    pub reason: String,
    /// For `no_alloc`: every allocation site found.
    pub sites: Vec<AllocSite>,
}

impl fmt::Display for ConstraintViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "@{}: constraint `{}` cannot be met: {}",
            self.function, self.constraint, self.reason
        )?;
        for s in &self.sites {
            write!(f, "\n    {s}")?;
        }
        Ok(())
    }
}

/// Constraints that cannot be met, all of them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub struct ConstraintError {
    pub violations: Vec<ConstraintViolation>,
}

impl fmt::Display for ConstraintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} constraint violation(s)", self.violations.len())?;
        for v in &self.violations {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

/// Backend-neutral instructions for lowering one function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionPlan {
    pub name: String,
    /// Effective level (critical_path raises the default O3 to Olatency).
    pub opt_level: OptLevel,
    /// Mark hot (placement, no outlining).
    pub hot: bool,
    /// Drop the stack protector.
    pub no_stack_protector: bool,
    /// Align the function entry and innermost loop headers to this many bytes.
    pub align: Option<u32>,
    /// Ask the vectorizer to vectorize every loop (it still checks legality).
    pub vectorize_loops: bool,
    /// Forbid unrolling (size levels).
    pub no_unroll: bool,
    /// Optimize for size.
    pub optimize_size: bool,
    /// Do not optimize at all.
    pub optnone: bool,
    /// Backend hint to inline this function into callers (inline_always).
    pub always_inline: bool,
    /// Loads to prefetch ahead of.
    pub prefetch: Vec<StreamingLoad>,
    /// Emit bounds checks on memory accesses (false with `no_bounds_check`).
    pub bounds_checks: bool,
}

impl FunctionPlan {
    pub fn defaults(f: &Function) -> FunctionPlan {
        FunctionPlan {
            name: f.name.clone(),
            opt_level: f.constraints.opt_level,
            hot: false,
            no_stack_protector: false,
            align: None,
            vectorize_loops: false,
            no_unroll: false,
            optimize_size: false,
            optnone: false,
            always_inline: f.constraints.inline_always,
            prefetch: Vec::new(),
            bounds_checks: !f.constraints.no_bounds_check,
        }
    }
}

/// A module after optimization, with a plan per function and the report.
#[derive(Clone, Debug)]
pub struct Optimized {
    pub module: Module,
    pub plans: Vec<FunctionPlan>,
    pub report: Report,
}

impl Optimized {
    pub fn plan(&self, name: &str) -> Option<&FunctionPlan> {
        self.plans.iter().find(|p| p.name == name)
    }
}

/// What each optimization level changes (documented in `docs/cpu.md`).
pub fn level_summary(level: OptLevel) -> &'static str {
    match level {
        OptLevel::O0 => "no HIR rewriting except required inlining; backend marks the function optnone (no LLVM optimization)",
        OptLevel::O1 => "HIR dead-code elimination; LLVM default<O1> (on the GPU the short kernel pipeline, zyntax_llvm::KERNEL_PIPELINE)",
        OptLevel::O2 => "HIR dead-code elimination; LLVM default<O2> (vectorizers on)",
        OptLevel::O3 => "HIR dead-code elimination; LLVM default<O3> (aggressive inlining, unrolling, vectorization)",
        OptLevel::Os => "HIR dead-code elimination; LLVM default<Os>, optsize attribute, no unrolling, no prefetch",
        OptLevel::Olatency => "O3 plus the latency pipeline: small callees inlined in HIR, hot/nounwind/no stack protector, 64-byte aligned entry and innermost loops, vectorization hints, software prefetch of streaming loads, and a final sroa/gvn/instcombine/vectorize/tailcallelim/dce pass",
    }
}

fn kind_name(k: &FunctionKind) -> &'static str {
    k.keyword()
}

fn flag_list(c: &Constraints) -> Vec<String> {
    c.flag_names().iter().map(|s| s.to_string()).collect()
}

/// Run the critical-path optimizer over a (verified) module.
///
/// Order matters: constraint proofs run on the module as written, so nothing
/// the rewriting removes can hide a violation.
pub fn optimize(m: &Module) -> Result<Optimized, ConstraintError> {
    let mut report = Report {
        module: m.name.clone(),
        functions: m
            .functions
            .iter()
            .map(|f| FunctionReport {
                name: f.name.clone(),
                kind: kind_name(&f.kind).to_string(),
                constraints: flag_list(&f.constraints),
                opt_level: f.constraints.opt_level.name().to_string(),
                actions: Vec::new(),
            })
            .collect(),
        notes: Vec::new(),
    };

    // 1. Constraint proofs.
    let mut violations = Vec::new();
    for f in &m.functions {
        let c = &f.constraints;
        if c.no_alloc {
            let sites = no_alloc::allocation_sites(m, f);
            if sites.is_empty() {
                let bytes = no_alloc::frame_bytes(f);
                report.add(
                    &f.name,
                    "no_alloc",
                    format!("proved allocation-free ({bytes} bytes of fixed stack in its own frame)"),
                    "every reachable alloca is constant-sized and within budget, every callee is defined, no recursion",
                );
            } else {
                violations.push(ConstraintViolation {
                    function: f.name.clone(),
                    constraint: "no_alloc".into(),
                    reason: format!("{} allocation site(s) reachable", sites.len()),
                    sites,
                });
            }
        }
        if c.inline_always {
            if f.is_kernel() {
                violations.push(ConstraintViolation {
                    function: f.name.clone(),
                    constraint: "inline_always".into(),
                    reason:
                        "a kernel entry point is launched, never called, so it cannot be inlined"
                            .into(),
                    sites: Vec::new(),
                });
            } else if let Some(cycle) = analysis::find_cycle_from(m, &f.name) {
                violations.push(ConstraintViolation {
                    function: f.name.clone(),
                    constraint: "inline_always".into(),
                    reason: format!(
                        "the function is recursive ({}), so it cannot be inlined into every caller",
                        cycle
                            .iter()
                            .map(|n| format!("@{n}"))
                            .collect::<Vec<_>>()
                            .join(" -> ")
                    ),
                    sites: Vec::new(),
                });
            }
        }
        if c.critical_path && c.opt_level == OptLevel::O0 {
            violations.push(ConstraintViolation {
                function: f.name.clone(),
                constraint: "critical_path".into(),
                reason: "opt_level O0 forbids the optimization critical_path asks for; use O3, Olatency or Os".into(),
                sites: Vec::new(),
            });
        }
    }
    if !violations.is_empty() {
        return Err(ConstraintError { violations });
    }

    // 2. Rewriting: inlining then DCE.
    let mut out = m.clone();
    for idx in 0..out.functions.len() {
        let mut f = out.functions[idx].clone();
        let level = effective_level(&f);
        let latency = level == OptLevel::Olatency;
        for _round in 0..8 {
            let mut changed = false;
            let sites: Vec<_> = f
                .insts_in_order()
                .filter_map(|(b, i)| match f.insts.get(i.index()).map(|d| &d.op) {
                    Some(Op::Call(name)) => Some((b, i, name.clone())),
                    _ => None,
                })
                .collect();
            for (b, i, name) in sites {
                let Some(callee) = m.function(&name) else {
                    continue;
                };
                if callee.name == f.name || analysis::is_recursive(m, &name) {
                    continue;
                }
                let n = inline::size(callee);
                let why = if callee.constraints.inline_always {
                    Some("callee is inline_always".to_string())
                } else if latency && n <= SMALL_CALLEE {
                    Some(format!(
                        "small callee ({n} instructions <= {SMALL_CALLEE}) on a latency-critical path: removes call overhead"
                    ))
                } else {
                    None
                };
                let Some(why) = why else { continue };
                if inline::size(&f) + n > MAX_INLINED_SIZE {
                    report.add(
                        &f.name,
                        "inline",
                        format!("did not inline @{name}"),
                        "function would exceed the inlining size limit",
                    );
                    continue;
                }
                if inline::inline_call(&mut f, b, i, callee) {
                    report.add(
                        &f.name,
                        "inline",
                        format!("inlined call to @{name} ({n} instructions)"),
                        why,
                    );
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if level != OptLevel::O0 {
            let removed = dce::dce(&mut f);
            if removed > 0 {
                report.add(
                    &f.name,
                    "dce",
                    format!("removed {removed} dead instruction(s)"),
                    "results unused and no side effects",
                );
            }
        }
        f.canonicalize();
        out.functions[idx] = f;
    }

    // 3. Plans.
    let mut plans = Vec::new();
    for f in &out.functions {
        plans.push(plan_function(f, &mut report));
    }
    Ok(Optimized {
        module: out,
        plans,
        report,
    })
}

/// `opt_level` after `critical_path` raised the default.
pub fn effective_level(f: &Function) -> OptLevel {
    let c = &f.constraints;
    if c.critical_path && c.opt_level == OptLevel::O3 {
        OptLevel::Olatency
    } else {
        c.opt_level
    }
}

fn plan_function(f: &Function, report: &mut Report) -> FunctionPlan {
    let mut p = FunctionPlan::defaults(f);
    let c = &f.constraints;
    p.opt_level = effective_level(f);
    let name = f.name.as_str();
    if p.opt_level != c.opt_level {
        report.add(
            name,
            "pipeline",
            format!("opt_level {} raised to {}", c.opt_level, p.opt_level),
            "critical_path asks for the latency pipeline",
        );
    }
    report.add(
        name,
        "pipeline",
        format!("level {}", p.opt_level),
        level_summary(p.opt_level),
    );
    match p.opt_level {
        OptLevel::O0 => p.optnone = true,
        OptLevel::Os => {
            p.optimize_size = true;
            p.no_unroll = true;
        }
        _ => {}
    }
    if c.critical_path || p.opt_level == OptLevel::Olatency {
        p.hot = true;
        p.no_stack_protector = true;
        p.align = Some(64);
        p.vectorize_loops = p.opt_level != OptLevel::Os;
        report.add(
            name,
            "attributes",
            "hot, nounwind, no stack protector, entry and innermost loop headers aligned to 64 bytes",
            "critical_path: keep the call path short and the hot code cache-line aligned",
        );
        let loops = analysis::loops(f);
        if p.vectorize_loops && !loops.is_empty() {
            report.add(name, "loops", format!("vectorization requested on {} loop(s) (llvm.loop.vectorize.enable)", loops.len()), "critical_path: lower per-call latency of loops; the vectorizer still proves legality");
        }
        if p.opt_level != OptLevel::Os {
            // A prefetch call inside a loop stops LLVM's vectorizer, so only loops
            // that stay scalar anyway (a float accumulator in strict IEEE order)
            // get one; vectorizable streams rely on the hardware prefetcher.
            let (scalar, vector): (Vec<_>, Vec<_>) = analysis::streaming_loads(f)
                .into_iter()
                .partition(|s| analysis::carries_float(f, s.header));
            for s in &vector {
                report.add(
                    name,
                    "prefetch",
                    format!("no software prefetch for load {}", s.load),
                    format!(
                        "loop {} is vectorizable and a prefetch call would block the vectorizer",
                        s.header
                    ),
                );
            }
            p.prefetch = scalar;
            for s in &p.prefetch {
                report.add(
                    name,
                    "prefetch",
                    format!(
                        "software prefetch {} elements ahead for load {}",
                        s.distance, s.load
                    ),
                    format!(
                        "streaming load over the induction variable of loop {}",
                        s.header
                    ),
                );
            }
        }
    }
    if c.inline_always {
        report.add(
            name,
            "inline",
            "marked always-inline for the backend",
            "inline_always (also inlined in HIR into every caller in this module)",
        );
    }
    if p.bounds_checks {
        report.add(name, "bounds", "bounds checks on every access through a pointer of known origin; integer division checked", "no_bounds_check not set: an out-of-bounds access raises an error instead of crashing");
    } else {
        report.add(name, "bounds", "bounds checks dropped", "no_bounds_check");
    }
    p
}
