//! The whole module: every function lowered in turn, its slot wrapper and
//! kernel block runner, and the LLVM pass pipeline the plans ask for.

use super::*;

/// What the lowering produced for one function.
#[derive(Clone, Debug)]
pub struct LoweredFn {
    pub name: String,
    /// Bounds checks emitted, and accesses left unchecked (pointer of unknown origin).
    pub checks: usize,
    pub unchecked: usize,
    pub has_slots: bool,
    pub has_block_runner: bool,
}

/// Lower the whole module (host functions, and kernels/device functions the CPU can run).
/// `cpu_kernels` names the kernels to lower; others are skipped.
pub fn lower_module(
    mi: &ModuleInfo<'_>,
    plans: &[FunctionPlan],
    triple: &str,
    datalayout: &str,
    cpu_kernels: &BTreeSet<String>,
) -> LResult<(String, Vec<LoweredFn>)> {
    let m = mi.m;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "; zyntax host lowering of module `{}`",
        m.name.replace('\n', " ")
    );
    let _ = writeln!(out, "target datalayout = \"{datalayout}\"");
    let _ = writeln!(out, "target triple = \"{triple}\"");
    let mut meta = Vec::new();
    let mut decls = BTreeSet::new();
    let mut lowered = Vec::new();
    let default_plans: Vec<FunctionPlan> = m.functions.iter().map(FunctionPlan::defaults).collect();
    // Device functions are lowered only when some CPU kernel may reach them.
    let mut needed: BTreeSet<String> = m
        .functions
        .iter()
        .filter(|f| !f.kind.is_gpu())
        .map(|f| f.name.clone())
        .collect();
    let mut work: Vec<String> = needed
        .iter()
        .cloned()
        .chain(cpu_kernels.iter().cloned())
        .collect();
    needed.extend(cpu_kernels.iter().cloned());
    while let Some(n) = work.pop() {
        if let Some(f) = m.function(&n) {
            for c in zyntax_opt::analysis::callees(f) {
                if needed.insert(c.clone()) {
                    work.push(c);
                }
            }
        }
    }
    for (fid, f) in m.functions.iter().enumerate() {
        if !needed.contains(&f.name) {
            continue;
        }
        let plan = plans
            .iter()
            .find(|p| p.name == f.name)
            .unwrap_or(&default_plans[fid]);
        let mut prefetch = BTreeMap::new();
        for s in &plan.prefetch {
            prefetch.insert(s.load, (s.addr, s.distance));
        }
        let mut fl = new_fl(
            mi,
            f,
            fid,
            plan,
            prefetch.clone(),
            &mut meta,
            &mut decls,
            false,
        );
        let text = fl.lower_fn()?;
        let (checks, unchecked) = (fl.checks, fl.unchecked);
        let split = fl.fission.take().filter(|_| cpu_kernels.contains(&f.name));
        let coro = f.is_kernel()
            && cpu_kernels.contains(&f.name)
            && regions::has_suspend(f)
            && split.is_none();
        // A barrier-free kernel also gets its vectorizable variant (see
        // `regions::fast_runner`).
        let fast = f.is_kernel()
            && cpu_kernels.contains(&f.name)
            && (!regions::has_suspend(f) || split.is_some())
            && super::super::mode::choose(f, &mi.forced).vector;
        // Interchanged loops with affine values run rows of threads through
        // the fast variant too (`fission::affine_row`).
        let affine = split.as_ref().is_some_and(|p| !p.affine.is_empty());
        if fast || affine {
            let mut fl = new_fl(mi, f, fid, plan, prefetch, &mut meta, &mut decls, true);
            out.push_str(&fl.lower_fn()?);
        }
        if split.is_some() {
            decls.extend(fission::RUNNER_DECLS.iter().map(|d| d.to_string()));
        }
        if coro {
            out.push_str(&regions::to_coroutine(&text, &f.name));
            decls.extend(
                regions::DECLS
                    .iter()
                    .chain(&regions::RUNNER_DECLS)
                    .map(|d| d.to_string()),
            );
        } else {
            out.push_str(&text);
        }
        let sig = signature(f)?;
        let slots_ok = f
            .param_types()
            .iter()
            .chain(f.returns.iter())
            .all(|t| t.is_ptr() || matches!(t, Type::Scalar(_)));
        let mut lf = LoweredFn {
            name: f.name.clone(),
            checks,
            unchecked,
            has_slots: false,
            has_block_runner: false,
        };
        if slots_ok && !f.kind.is_gpu() {
            out.push_str(&slots_wrapper(f, &sig, &target_attrs(mi)));
            lf.has_slots = true;
        }
        if slots_ok && f.is_kernel() && cpu_kernels.contains(&f.name) {
            let mut pre = String::new();
            let parts = call_args(f, &sig, &mut pre);
            let attrs = target_attrs(mi);
            out.push_str(&if let Some(plan) = &split {
                let runner = |suffix: &str, md: Option<usize>, aff: Option<usize>| {
                    fission::block_runner(
                        f, plan, &sig.ret, &attrs, &pre, &parts, fid, suffix, md, aff,
                    )
                };
                // One vectorize hint per region loop and per affine row loop.
                // `ZYNTAX_CPU_VF=N` (compile time, for measurements): the
                // region and row loops' vectorization factor, where LLVM's
                // cost model picks one (4 lanes on AVX-512 with an i64 index).
                let vf = std::env::var("ZYNTAX_CPU_VF")
                    .ok()
                    .and_then(|v| v.parse::<u32>().ok())
                    .filter(|v| v.is_power_of_two() && *v <= 64)
                    .map(|v| format!(", !{{!\"llvm.loop.vectorize.width\", i32 {v}}}"))
                    .unwrap_or_default();
                let mut hints = |count: usize| {
                    let id = meta.len() + 10;
                    for k in 0..count {
                        meta.push(format!("!{} = distinct !{{!{}, !1{vf}}}", id + k, id + k));
                    }
                    id
                };
                let aff = affine.then(|| hints(plan.affine.len()));
                if fast || affine {
                    let id = fast.then(|| hints(plan.live.len() + 1));
                    decls.extend(regions::FAST_DECLS.iter().map(|d| d.to_string()));
                    runner("zx_checked", None, None) + &runner("zx_block", id, aff)
                } else {
                    runner("zx_block", None, None)
                }
            } else if coro {
                regions::coro_block_runner(f, &target_attrs(mi), &pre, &parts, fid)
            } else if fast {
                let id = meta.len() + 10;
                meta.push(format!("!{id} = distinct !{{!{id}, !1}}"));
                decls.extend(regions::FAST_DECLS.iter().map(|d| d.to_string()));
                regions::block_runner(f, &sig, &attrs, &pre, &parts, "zx_checked")
                    + &regions::fast_runner(f, &sig, &attrs, &pre, &parts, fid, id)
            } else {
                regions::block_runner(f, &sig, &target_attrs(mi), &pre, &parts, "zx_block")
            });
            lf.has_block_runner = true;
        }
        lowered.push(lf);
    }
    for d in &decls {
        let _ = writeln!(out, "{d}");
    }
    let _ = writeln!(out, "!0 = !{{!\"branch_weights\", i32 1, i32 1048575}}");
    let _ = writeln!(out, "!1 = !{{!\"llvm.loop.vectorize.enable\", i1 true}}");
    let _ = writeln!(out, "!2 = !{{!\"llvm.loop.unroll.disable\"}}");
    for md in meta {
        let _ = writeln!(out, "{md}");
    }
    Ok((out, lowered))
}

/// Load argument `k` of type `t` from the slot array `%args` (bool slots hold a byte).
fn load_slot(out: &mut String, k: usize, t: &Type, name: &str) {
    let _ = writeln!(out, "  %{name}.p = getelementptr i64, ptr %args, i64 {k}");
    if t.is_bool() {
        let _ = writeln!(out, "  %{name}.b = load i8, ptr %{name}.p");
        let _ = writeln!(out, "  %{name} = trunc i8 %{name}.b to i1");
    } else {
        let m = mty(t).unwrap_or_else(|| "i64".into());
        let _ = writeln!(out, "  %{name} = load {m}, ptr %{name}.p");
    }
}

fn call_args(f: &Function, sig: &Sig, out: &mut String) -> Vec<String> {
    let mut parts = Vec::new();
    for (k, t) in f.param_types().iter().enumerate() {
        load_slot(out, k, t, &format!("s{k}"));
        parts.push(format!("{} %s{k}", vty(t).unwrap_or_default()));
    }
    for k in &sig.ptr_params {
        let _ = writeln!(out, "  %l{k}.p = getelementptr i64, ptr %lens, i64 {k}");
        let _ = writeln!(out, "  %l{k} = load i64, ptr %l{k}.p");
        parts.push(format!("i64 %l{k}"));
    }
    parts
}

fn target_attrs(mi: &ModuleInfo<'_>) -> String {
    format!(
        "nounwind \"target-cpu\"=\"{}\" \"target-features\"=\"{}\"",
        mi.cpu, mi.features
    )
}

fn slots_wrapper(f: &Function, sig: &Sig, attrs: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "define void {}(ptr %args, ptr %lens, ptr %rets, ptr %err) {attrs} {{",
        gname(&format!("{}.zx_slots", f.name))
    );
    let _ = writeln!(out, "entry:");
    let mut parts = call_args(f, sig, &mut out);
    if sig.multi_ret {
        parts.push("ptr %rets".into());
    }
    parts.push("ptr %err".into());
    let call = format!("call {} {}({})", sig.ret, gname(&f.name), parts.join(", "));
    if f.returns.len() == 1 {
        let t = &f.returns[0];
        let _ = writeln!(out, "  %r = {call}");
        if t.is_bool() {
            let _ = writeln!(out, "  %rb = zext i1 %r to i8");
            let _ = writeln!(out, "  store i8 %rb, ptr %rets");
        } else {
            let _ = writeln!(out, "  store {} %r, ptr %rets", mty(t).unwrap_or_default());
        }
    } else {
        let _ = writeln!(out, "  {call}");
    }
    let _ = writeln!(out, "  ret void\n}}");
    out
}

/// Which HIR values feed which (used by tests and the report).
pub fn value_def_block(f: &Function, v: ValueId) -> Option<BlockId> {
    match f.values.get(v.index())?.def {
        ValueDef::Param(b, _) => Some(b),
        ValueDef::Result(i, _) => zyntax_opt::analysis::inst_blocks(f).get(&i).copied(),
    }
}

/// The effective LLVM pipeline for the module's plans: the strongest level wins
/// (per-function `optnone`/`optsize` attributes keep weaker levels weaker).
pub fn pipeline_for(plans: &[FunctionPlan]) -> (String, Option<&'static str>) {
    let rank = |l: OptLevel| match l {
        OptLevel::O0 => 0,
        OptLevel::Os => 1,
        OptLevel::O1 => 2,
        OptLevel::O2 => 3,
        OptLevel::O3 => 4,
        OptLevel::Olatency => 5,
    };
    let top = plans
        .iter()
        .map(|p| p.opt_level)
        .max_by_key(|l| rank(*l))
        .unwrap_or(OptLevel::O3);
    let base = match top {
        OptLevel::O0 => "default<O0>",
        OptLevel::Os => "default<Os>",
        OptLevel::O1 => "default<O1>",
        OptLevel::O2 => "default<O2>",
        OptLevel::O3 | OptLevel::Olatency => "default<O3>",
    };
    let latency = (top == OptLevel::Olatency).then_some(LATENCY_PIPELINE);
    (base.to_string(), latency)
}

/// Latency cleanup run after `default<O3>` for `Olatency` modules: scalar
/// replacement, redundancy elimination, vectorization with the loop hints, tail
/// calls and dead code, in the order that exposes the most for the next pass.
pub const LATENCY_PIPELINE: &str = "function(sroa,early-cse<memssa>,gvn,instcombine,loop-simplify,lcssa,loop-mssa(licm),loop-vectorize,slp-vectorizer,instcombine,simplifycfg,tailcallelim,adce)";

/// A function's lowering state; `fast`: the kernel's vectorizable variant.
#[allow(clippy::too_many_arguments)]
fn new_fl<'a>(
    mi: &'a ModuleInfo<'a>,
    f: &'a Function,
    fid: usize,
    plan: &'a FunctionPlan,
    prefetch: BTreeMap<InstId, (InstId, i64)>,
    meta: &'a mut Vec<String>,
    decls: &'a mut BTreeSet<String>,
    fast: bool,
) -> FnLower<'a> {
    FnLower {
        mi,
        f,
        fid,
        plan,
        origins: zyntax_opt::analysis::pointer_origins(f),
        offs: Vec::new(),
        ops: Vec::new(),
        entry_text: String::new(),
        blocks_text: Vec::new(),
        cur: String::new(),
        cur_label: String::new(),
        tmp: 0,
        incoming: BTreeMap::new(),
        fails: String::new(),
        meta,
        decls,
        prefetch,
        pos: BTreeMap::new(),
        lens_bytes: BTreeMap::new(),
        checks: 0,
        unchecked: 0,
        fission: None,
        base_ops: Vec::new(),
        fast,
    }
}
