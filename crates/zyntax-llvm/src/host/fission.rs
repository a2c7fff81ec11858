//! Kernels with barriers on the CPU without coroutines: region fission.
//!
//! A `barrier` splits a kernel into regions: region 0 runs from the kernel's
//! entry, region `b` from just after barrier `b`, each up to the next barrier
//! or a return. The block runner ([`block_runner`]) runs a region as a loop
//! over the block's threads (z, y, x; x innermost), then the next region —
//! the one every still-running thread stopped at — as another loop, and so
//! on: loop fission at `barrier`. The kernel is lowered once as a function
//! that starts at the region its context names (a `switch` at entry) and
//! returns at a barrier, recording which; it is `alwaysinline`, and the
//! runner calls it once per region with a constant region number, so after
//! inlining each thread loop holds only its region's code (no indirect calls,
//! no frames, no resumes).
//!
//! Values live across a barrier are kept in per-thread arrays (struct of
//! arrays, one per value, `n` threads each, allocated once per block):
//! a value `v` is saved at barrier `b` when its definition reaches `b` and `b`
//! reaches a use of `v` ([`Plan::live`], over blocks, an over-approximation:
//! saving a value that is not needed costs a store, never correctness).
//! Inside the lowered function such a value goes through a local `alloca`
//! (stored at its definition and at a region's start, loaded at each use)
//! that LLVM's SROA turns back into SSA registers; only the barrier's save
//! and the region's restore touch the per-thread arrays.
//!
//! Threads that returned no longer take part in later regions; the running
//! threads must all stop at the same barrier, else the launch fails with
//! [`super::regions::ERR_BARRIER`], as with coroutines and the interpreter.
//!
//! Kernels with warp collectives (suspend per warp) or an `alloca` (whose
//! memory must outlive a region) keep the coroutine lowering of
//! [`super::regions`]; so does every kernel when `ZYNTAX_CPU_BARRIERS=coro`
//! (for comparisons).

use super::lower::{gname, vty, CTX_BDIM, CTX_BYTES};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use zyntax_hir::{BlockId, Function, InstId, Op, Type, ValueId};

/// Context fields the region runner adds after the thread context.
pub const CTX_REGION: u64 = CTX_BYTES as u64;
/// State after a region: 0 returned, `barrier inst + 1` waiting there.
pub const CTX_STATE: u64 = CTX_BYTES as u64 + 4;
/// Linear thread index within the block.
pub const CTX_T: u64 = CTX_BYTES as u64 + 8;
/// Threads in the block.
pub const CTX_N: u64 = CTX_BYTES as u64 + 12;
/// Base of the per-thread arrays of live values.
pub const CTX_LIVE: u64 = CTX_BYTES as u64 + 16;
pub const FISSION_CTX_BYTES: u64 = CTX_BYTES as u64 + 24;
/// After the fast variant's flag pointer (`regions::CTX_FLAGS`): the row's
/// uniform parts of the affine values of a virtual barrier (one `i64` slot
/// each, [`AFFINE_MAX`] at most; see [`Plan::affine`]).
pub const CTX_AFFINE: u64 = FISSION_CTX_BYTES + 8;
/// Most values rebuilt from the thread index at one virtual barrier.
pub const AFFINE_MAX: usize = 16;
/// Region bit: resume at a virtual barrier with its affine values rebuilt
/// (`zx.resumeA<i>`) rather than restored from the per-thread arrays.
pub const AFFINE_REGION: u32 = 0x2000_0000;

/// The per-thread storage of one value live across a barrier.
#[derive(Clone, Debug)]
pub struct Slot {
    /// LLVM type of the value.
    pub ty: String,
    /// Bytes per thread.
    pub size: u64,
    /// Start of its array, in units of the block's thread count (bytes × n).
    pub off: u64,
    /// For a pointer: its bounds-check offset (an `i64`) gets an array too.
    pub off_slot: Option<u64>,
}

/// How a kernel is split at its barriers.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub slots: BTreeMap<ValueId, Slot>,
    /// Per barrier: the values saved there and restored after it.
    pub live: BTreeMap<InstId, Vec<ValueId>>,
    /// Bytes of per-thread storage per thread.
    pub bytes: u64,
    /// Per virtual barrier (an interchanged loop's header): the saved
    /// integer values that step by a constant from thread `x` to `x + 1`
    /// (`interchange::x_stride`: the loop's index, the thread index, uniform
    /// values), with that step. When every thread of a row waits there and
    /// each such value is `u + x * step` with `u` the row's first thread's
    /// (the runner checks it), the row runs the region with the values
    /// rebuilt that way: the index of the iteration is then visibly
    /// thread-contiguous and LLVM's vectorizer makes the row SIMD lanes
    /// (a restored index would be a gather).
    pub affine: BTreeMap<InstId, Vec<(ValueId, i64)>>,
    /// Iterations a thread runs of an interchanged loop before it stops at
    /// the loop's header (see [`iterations`]); 1: every iteration.
    pub iters: u32,
    /// Headers of the interchanged loops (`mode::Mode::headers`).
    pub headers: Vec<BlockId>,
}

/// How many iterations of an interchanged loop a thread runs before it
/// stops at the loop's header (a virtual barrier): `ZYNTAX_CPU_ITERS=K` (a
/// power of two up to 64, compile time), else `default` (8: threads one
/// after another, and rows of SIMD lanes by default, `mode::ROW_ITERS`).
/// Stopping every iteration paid
/// the save, the restore, the state and the runner's pass over the block's
/// states per element; every K-th iteration, the thread keeps its values in
/// registers for K iterations. Cache lines still serve consecutive threads:
/// a thread's K iterations touch K lines (one per iteration, a grid's
/// stride apart, often the same cache set) that the next thread reads again
/// while they are in L1. Legal for the reason the interchange is: between
/// barriers the threads of a block may interleave in any way.
pub fn iterations(default: u32) -> u32 {
    std::env::var("ZYNTAX_CPU_ITERS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|k| k.is_power_of_two() && *k <= 64)
        .unwrap_or(default)
}

/// Whether region fission is off for every kernel (`ZYNTAX_CPU_BARRIERS=coro`).
fn forced_off() -> bool {
    std::env::var("ZYNTAX_CPU_BARRIERS").is_ok_and(|v| v == "coro")
}

/// Whether kernel `f` is split at its barriers rather than lowered as a
/// coroutine (what [`plan`] decides, short of the types of its live values;
/// for the report).
/// `headers`: its interchanged loops (`mode::Mode::headers`).
pub fn applies(f: &Function, headers: &[BlockId]) -> bool {
    f.is_kernel()
        && !forced_off()
        && !super::warp::has_collective(f)
        && (f.insts_in_order().any(|(_, i)| {
            f.insts
                .get(i.index())
                .is_some_and(|d| matches!(d.op, Op::Barrier))
        }) || !headers.is_empty())
        && !f.insts_in_order().any(|(_, i)| {
            f.insts
                .get(i.index())
                .is_some_and(|d| matches!(d.op, Op::Alloca { .. }))
        })
}

/// Whether hoisting is off (`ZYNTAX_CPU_HOIST=0` at compile time, for comparisons).
fn hoist_off() -> bool {
    std::env::var("ZYNTAX_CPU_HOIST").is_ok_and(|v| v == "0")
}

/// The instructions of `f`'s entry block that a split kernel computes before
/// its region dispatch, so that every region has them and no barrier saves
/// them: integer and bool values that depend only on the thread's context
/// (`thread_idx`, `block_idx`, `block_dim`, `grid_dim`), the kernel's
/// parameters and constants, through arithmetic without traps (no division)
/// — the thread index, a row's base offset, a grid-stride step. Saved, each
/// cost a store at every barrier and a load in every region after it (and,
/// in an interchanged row, a load and a compare in each pass's row check);
/// recomputed, a load from the context and an instruction or two, which the
/// fast variant's vectorizer turns into a broadcast or a lane index.
pub fn hoisted(f: &Function) -> BTreeSet<InstId> {
    let mut out = BTreeSet::new();
    let Some(entry) = f.entry() else {
        return out;
    };
    if hoist_off() {
        return out;
    }
    let plain = |t: &Type| matches!(t, Type::Scalar(s) if s.is_int() || s.is_bool());
    let mut avail: BTreeSet<ValueId> = f.block(entry).params.iter().copied().collect();
    // Integer and bool constants are literals wherever they are defined.
    for (_, i) in f.insts_in_order() {
        if let Some(d) = f.insts.get(i.index()) {
            if matches!(d.op, Op::Const(_)) && d.results.iter().all(|r| plain(f.value_type(*r))) {
                avail.extend(d.results.iter().copied());
            }
        }
    }
    for &i in &f.block(entry).insts {
        let Some(d) = f.insts.get(i.index()) else {
            continue;
        };
        let pure = match &d.op {
            Op::ThreadIdx(_) | Op::BlockIdx(_) | Op::BlockDim(_) | Op::GridDim(_) => true,
            Op::Binary(op) => !matches!(op, zyntax_hir::BinOp::Div | zyntax_hir::BinOp::Rem),
            Op::Cmp(_) | Op::Select | Op::Cast => true,
            _ => false,
        };
        let [r] = d.results.as_slice() else { continue };
        if pure
            && plain(f.value_type(*r))
            && d.args
                .iter()
                .all(|a| avail.contains(a) && plain(f.value_type(*a)))
        {
            avail.insert(*r);
            out.insert(i);
        }
    }
    out
}

/// The exits of loops that hold a `barrier` (a tree reduction's `while s >
/// 0: ...; barrier`): virtual barriers of region fission, so that the
/// region after the loop's barrier holds one step of the loop and not also
/// the code after the loop. A tree step is then a region without a loop of
/// its own, which LLVM vectorizes over the threads (the step before, with
/// the row walk after the loop in the same region, ran thread by thread,
/// every thread computing the loop's exit test and the post-loop values);
/// the code after the loop runs as its own region. Order between two
/// barriers is free, and a thread that leaves the loop early stops at the
/// exit instead of running on to the next barrier: the same results and
/// the same divergent-barrier errors. Off by default: on the device's
/// Xeon (session 13 B1) layernorm and softmax were 15-35% slower with it
/// (every tree step a vector pass over all the block's threads, most of
/// them masked off, and one more region per tree); `ZYNTAX_CPU_LOOPEXIT=1`
/// (compile time) turns it on, for comparisons.
pub fn barrier_loop_exits(f: &Function) -> BTreeSet<BlockId> {
    let mut out = BTreeSet::new();
    if !std::env::var("ZYNTAX_CPU_LOOPEXIT").is_ok_and(|v| v == "1") {
        return out;
    }
    for l in zyntax_opt::analysis::loops(f) {
        if super::interchange::holds(f, &l, |op| matches!(op, Op::Barrier)) {
            out.extend(super::interchange::exit_blocks(f, &l));
        }
    }
    out
}

/// A program point: block and index of the instruction in it (-1: the
/// block's parameters, before its first instruction).
type Point = (BlockId, i64);

/// The fission plan of kernel `f`, or `None` when it keeps the coroutine
/// lowering (no barrier, a warp collective, an `alloca`, or a value live
/// across a barrier whose type has no per-thread storage). `literal` says
/// which values the lowering writes as literals (constants: never stored).
pub fn plan(
    f: &Function,
    literal: &dyn Fn(ValueId) -> bool,
    mode: &super::mode::Mode,
) -> Option<Plan> {
    let (affine, iters) = (mode.affine, mode.iters);
    if !f.is_kernel() || forced_off() || super::warp::has_collective(f) {
        return None;
    }
    let mut barriers: Vec<(InstId, Point)> = Vec::new();
    let mut def: BTreeMap<ValueId, Point> = BTreeMap::new();
    let mut uses: BTreeMap<ValueId, Vec<Point>> = BTreeMap::new();
    let mut succ: BTreeMap<BlockId, Vec<BlockId>> = BTreeMap::new();
    let entry = f.entry()?;
    // Computed before the region dispatch: available in every region.
    let hoist = hoisted(f);
    // Loops interchanged with the thread loop: a virtual barrier at the
    // start of each header, after its parameters (`host/interchange.rs`).
    let headers = mode.headers.clone();
    let mut virtuals: BTreeSet<BlockId> = headers.iter().copied().collect();
    // With SIMD-lane rows, the loops' exits too (`interchange::exits`).
    if affine {
        virtuals.extend(super::interchange::exits(f, &headers));
    }
    // Rows as SIMD lanes only at the interchanged loops' points.
    let interchanged = virtuals.clone();
    virtuals.extend(barrier_loop_exits(f));
    for &b in &f.layout {
        if virtuals.contains(&b) {
            barriers.push((super::interchange::point(b), (b, -1)));
        }
        let bd = f.block(b);
        if b != entry {
            for p in &bd.params {
                def.insert(*p, (b, -1));
            }
        }
        for (k, &i) in bd.insts.iter().enumerate() {
            let d = f.insts.get(i.index())?;
            let at = (b, k as i64);
            match d.op {
                Op::Barrier => barriers.push((i, at)),
                Op::Alloca { .. } => return None,
                _ => {}
            }
            // A shared array's address is computed in the entry block
            // (available in every region): never saved; nor is a hoisted value.
            if !matches!(d.op, Op::SharedAlloc { .. }) && !hoist.contains(&i) {
                for r in &d.results {
                    def.insert(*r, at);
                }
            }
            let targets = d.targets.iter().flat_map(|t| t.args.iter());
            for a in d.args.iter().chain(targets) {
                uses.entry(*a).or_default().push(at);
            }
            succ.entry(b)
                .or_default()
                .extend(d.targets.iter().map(|t| t.block));
        }
    }
    if barriers.is_empty() {
        return None;
    }
    // Blocks reached from barrier block `bb` through at least one edge
    // without going on through block `stop` (a value's definition: a path
    // through it defines the value anew, so the old one is dead there).
    let reach_avoiding = |bb: BlockId, stop: BlockId| {
        let mut seen = BTreeSet::new();
        let mut work: Vec<BlockId> = succ.get(&bb).cloned().unwrap_or_default();
        while let Some(x) = work.pop() {
            if seen.insert(x) && x != stop {
                work.extend(succ.get(&x).cloned().unwrap_or_default());
            }
        }
        seen
    };
    let mut p = Plan {
        iters,
        headers: headers.clone(),
        ..Plan::default()
    };
    for (i, (bb, kb)) in &barriers {
        // A value is saved at the barrier when a path from the barrier reaches
        // one of its uses without passing its definition (liveness in SSA).
        let mut cache: BTreeMap<BlockId, BTreeSet<BlockId>> = BTreeMap::new();
        let mut live = Vec::new();
        for (v, (bd, kd)) in &def {
            if literal(*v) || (bd == bb && kd > kb) {
                continue;
            }
            let Some(us) = uses.get(v) else { continue };
            let here = us.iter().any(|(ub, uk)| ub == bb && uk > kb);
            let mut later = || {
                let seen = cache.entry(*bd).or_insert_with(|| reach_avoiding(*bb, *bd));
                us.iter().any(|(ub, _)| ub != bd && seen.contains(ub))
            };
            if here || later() {
                live.push(*v);
            }
        }
        p.live.insert(*i, live);
    }
    // One array per value saved anywhere, 16-byte aligned starts.
    let mut off = 0u64;
    let saved: BTreeSet<ValueId> = p.live.values().flatten().copied().collect();
    for v in saved {
        let t = f.value_type(v);
        let (Some(ty), Some(size)) = (vty(t), t.size_bytes()) else {
            return None;
        };
        if matches!(t, Type::Frag(_) | Type::TensorMap) {
            return None;
        }
        let size = size.max(1);
        let mut s = Slot {
            ty,
            size,
            off,
            off_slot: None,
        };
        off += size.div_ceil(16) * 16;
        if t.is_ptr() {
            s.off_slot = Some(off);
            off += 16;
        }
        p.slots.insert(v, s);
    }
    p.bytes = off;
    // `affine`: `HostOptions::affine_rows` (else every value is restored).
    let stride = super::interchange::x_stride(f);
    for (i, live) in &p.live {
        if !affine
            || !super::interchange::is_virtual(*i)
            || !interchanged.contains(&BlockId(i.0 & !super::interchange::VIRTUAL))
        {
            continue;
        }
        let aff: Vec<(ValueId, i64)> = live
            .iter()
            .filter(|v| matches!(p.slots.get(v).map(|s| s.ty.as_str()), Some("i32" | "i64")))
            .filter_map(|v| Some((*v, stride.get(v.index()).copied().flatten()?)))
            // The step as a literal of the value's type.
            .filter(|(v, c)| {
                p.slots.get(v).is_some_and(|s| s.ty == "i64") || i32::try_from(*c).is_ok()
            })
            .take(AFFINE_MAX)
            .collect();
        if !aff.is_empty() {
            p.affine.insert(*i, aff);
        }
    }
    Some(p)
}

impl Plan {
    /// Entry text of the lowered kernel: the per-thread pointers of every
    /// slot and the local `alloca`s standing for saved values.
    pub fn entry(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "  %zx.state = getelementptr i8, ptr %ctx, i64 {CTX_STATE}\n  \
             %zx.tp = getelementptr i8, ptr %ctx, i64 {CTX_T}\n  %zx.t = load i32, ptr %zx.tp, align 4\n  \
             %zx.t64 = zext i32 %zx.t to i64\n  %zx.np = getelementptr i8, ptr %ctx, i64 {CTX_N}\n  \
             %zx.n = load i32, ptr %zx.np, align 4\n  %zx.n64 = zext i32 %zx.n to i64\n  \
             %zx.livep = getelementptr i8, ptr %ctx, i64 {CTX_LIVE}\n  %zx.live = load ptr, ptr %zx.livep, align 8\n  \
             %zx.vk = alloca i32, align 4\n  store i32 0, ptr %zx.vk, align 4"
        );
        let slot = |out: &mut String, name: &str, off: u64, size: u64| {
            let _ = writeln!(
                out,
                "  {name}.s1 = mul i64 %zx.n64, {off}\n  {name}.s2 = mul i64 %zx.t64, {size}\n  \
                 {name}.s3 = add i64 {name}.s1, {name}.s2\n  {name}.s = getelementptr i8, ptr %zx.live, i64 {name}.s3"
            );
        };
        for (v, s) in &self.slots {
            let n = format!("%v{}", v.0);
            let _ = writeln!(out, "  {n}.a = alloca {}", s.ty);
            slot(&mut out, &n, s.off, s.size);
            if let Some(o) = s.off_slot {
                let n = format!("%o{}", v.0);
                let _ = writeln!(out, "  {n}.a = alloca i64");
                slot(&mut out, &n, o, 8);
            }
        }
        out
    }

    /// The branch ending the entry: to the region the context names.
    pub fn dispatch(&self, entry: BlockId) -> String {
        let affine = self.affine.keys().map(|i| {
            format!(
                "i32 {}, label %zx.resumeA{}",
                (i.0 + 1) | AFFINE_REGION,
                i.0
            )
        });
        let cases: Vec<String> = self
            .live
            .keys()
            .map(|i| format!("i32 {}, label %zx.resume{}", i.0 + 1, i.0))
            .chain(affine)
            .collect();
        format!(
            "  %zx.regp = getelementptr i8, ptr %ctx, i64 {CTX_REGION}\n  \
             %zx.region = load i32, ptr %zx.regp, align 4\n  \
             switch i32 %zx.region, label %b{} [ {} ]\n",
            entry.0,
            cases.join("\n    ")
        )
    }

    /// The restore at virtual barrier `i` of a row whose affine values
    /// (see [`Plan::affine`]) are rebuilt: `u + x * step`, `u` from the
    /// runner's context, `x` the thread's index; the others restored as
    /// [`Plan::copy`] does.
    pub fn rebuild(&self, i: InstId, tmp: &mut dyn FnMut() -> String) -> Vec<String> {
        let aff = self.affine.get(&i).cloned().unwrap_or_default();
        let skip: BTreeSet<ValueId> = aff.iter().map(|(v, _)| *v).collect();
        let mut out = self.copy_but(i, false, &skip, tmp);
        let tx = tmp();
        out.push(format!("{tx} = load i32, ptr %ctx, align 4"));
        for (k, (v, step)) in aff.iter().enumerate() {
            let Some(s) = self.slots.get(v) else { continue };
            let ty = &s.ty;
            let (p, u, x, m, r) = (tmp(), tmp(), tmp(), tmp(), tmp());
            out.push(format!(
                "{p} = getelementptr i8, ptr %ctx, i64 {}",
                CTX_AFFINE + 8 * k as u64
            ));
            out.push(format!("{u} = load {ty}, ptr {p}, align 8"));
            if ty == "i64" {
                out.push(format!("{x} = zext i32 {tx} to i64"));
            } else {
                out.push(format!("{x} = add i32 {tx}, 0"));
            }
            out.push(format!("{m} = mul {ty} {x}, {step}"));
            out.push(format!("{r} = add {ty} {u}, {m}"));
            out.push(format!("store {ty} {r}, ptr %v{}.a", v.0));
        }
        out
    }

    /// The fast variant's saves (`lower::fast_exit`): every value saved at
    /// any barrier, copied to its per-thread array at the thread's one exit,
    /// whichever barrier it stopped at (or none). Saves at each barrier
    /// would be stores on some of the paths through the region — masked
    /// vector stores in a SIMD row, microcoded and slow on AMD's cores; these
    /// are plain ones. Storing a value that is not live, or not even defined
    /// on the thread's path (no `freeze`: it would hide the index from
    /// LLVM's scalar evolution, where the store goes), is harmless: a
    /// thread's array entry is read only when the thread resumes at a barrier
    /// where the value was live, and that barrier's exit wrote it.
    pub fn save_all(&self) -> String {
        let mut out = String::new();
        for (v, s) in &self.slots {
            let mut one = |ty: &str, n: String| {
                let _ = writeln!(
                    out,
                    "  {n}.ld = load {ty}, ptr {n}.a, align 1\n  store {ty} {n}.ld, ptr {n}.s, align 1"
                );
            };
            one(&s.ty, format!("%v{}", v.0));
            if s.off_slot.is_some() {
                one("i64", format!("%o{}", v.0));
            }
        }
        out
    }

    /// Copy the saved values of barrier `i` between their local `alloca`s
    /// and the thread's arrays (`save`: to the arrays; else back). `tmp`
    /// names temporaries.
    pub fn copy(&self, i: InstId, save: bool, tmp: &mut dyn FnMut() -> String) -> Vec<String> {
        self.copy_but(i, save, &BTreeSet::new(), tmp)
    }

    fn copy_but(
        &self,
        i: InstId,
        save: bool,
        skip: &BTreeSet<ValueId>,
        tmp: &mut dyn FnMut() -> String,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for v in self.live.get(&i).into_iter().flatten() {
            if skip.contains(v) {
                continue;
            }
            let Some(s) = self.slots.get(v) else { continue };
            let mut one = |ty: &str, name: String| {
                let (from, to) = if save {
                    (format!("{name}.a"), format!("{name}.s"))
                } else {
                    (format!("{name}.s"), format!("{name}.a"))
                };
                let x = tmp();
                out.push(format!("{x} = load {ty}, ptr {from}, align 1"));
                out.push(format!("store {ty} {x}, ptr {to}, align 1"));
            };
            one(&s.ty, format!("%v{}", v.0));
            if s.off_slot.is_some() {
                one("i64", format!("%o{}", v.0));
            }
        }
        out
    }
}

/// `@"name.zx_block"(args, lens, err, ctx)` for a kernel split at its
/// barriers (see the module docs). `fid`: the kernel's index in the module.
///
/// `fast`: the first of one loop-metadata id per region — the runner then
/// calls the kernel's vectorizable variant (`name.zx_fast`, failures mark
/// flags, see `regions::fast_runner`), each region's x loop carries
/// `llvm.loop.vectorize.enable`, and a failure re-runs the block checked
/// (`name.zx_checked`, this runner without `fast`). `suffix` names it.
///
/// `affine`: the first of one loop-metadata id per virtual barrier with
/// affine values ([`Plan::affine`]): such a region checks each row of
/// threads first, and a row whose threads all wait there with their affine
/// values `u + x * step` runs through [`affine_row`] (SIMD lanes).
#[allow(clippy::too_many_arguments)]
pub fn block_runner(
    f: &Function,
    plan: &Plan,
    ret: &str,
    attrs: &str,
    pre: &str,
    parts: &[String],
    fid: usize,
    suffix: &str,
    fast: Option<usize>,
    affine: Option<usize>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "define void {}(ptr %args, ptr %lens, ptr noalias %err, ptr noalias %ctx) {attrs} {{",
        gname(&format!("{}.{suffix}", f.name))
    );
    let _ = writeln!(out, "entry:");
    out.push_str(pre);
    for (k, n) in ["bx", "by", "bz"].iter().enumerate() {
        let _ = writeln!(
            out,
            "  %{n}.p = getelementptr i8, ptr %ctx, i64 {}\n  %{n} = load i32, ptr %{n}.p",
            CTX_BDIM + 4 * k as u64
        );
    }
    let _ = writeln!(
        out,
        "  %bxy = mul i32 %bx, %by\n  %n = mul i32 %bxy, %bz\n  %n64 = zext i32 %n to i64\n  \
         %c = alloca [{} x i8], align 8\n  \
         call void @llvm.memcpy.p0.p0.i64(ptr %c, ptr %ctx, i64 {CTX_BYTES}, i1 false)\n  \
         %c.n = getelementptr i8, ptr %c, i64 {CTX_N}\n  store i32 %n, ptr %c.n\n  \
         %lb0 = mul i64 %n64, {}\n  %lb = add i64 %lb0, 16\n  %live = call ptr @malloc(i64 %lb)\n  \
         %c.live = getelementptr i8, ptr %c, i64 {CTX_LIVE}\n  store ptr %live, ptr %c.live\n  \
         %sb = mul i64 %n64, 4\n  %sts = call ptr @calloc(i64 %sb, i64 1)\n  \
         %c.y = getelementptr i8, ptr %c, i64 4\n  %c.z = getelementptr i8, ptr %c, i64 8\n  \
         %c.t = getelementptr i8, ptr %c, i64 {CTX_T}\n  %c.r = getelementptr i8, ptr %c, i64 {CTX_REGION}\n  \
         %c.s = getelementptr i8, ptr %c, i64 {CTX_STATE}\n  \
         %empty = icmp eq i32 %n, 0",
        CTX_AFFINE + 8 * AFFINE_MAX as u64,
        plan.bytes
    );
    if fast.is_some() || affine.is_some() {
        let _ = writeln!(
            out,
            "  %fl = alloca [1024 x i8], align 16\n  %bx64 = zext i32 %bx to i64\n  \
             call void @llvm.memset.p0.i64(ptr %fl, i8 0, i64 %bx64, i1 false)\n  \
             %c.fb = getelementptr i8, ptr %c, i64 {FISSION_CTX_BYTES}\n  store ptr %fl, ptr %c.fb"
        );
    }
    let _ = writeln!(out, "  br i1 %empty, label %finish, label %r0");
    let mut p = parts.to_vec();
    p.push("ptr %err".into());
    p.push("ptr %c".into());
    let callee = if fast.is_some() {
        format!("{}.zx_fast", f.name)
    } else {
        f.name.clone()
    };
    let call = format!("call {ret} {}({})", gname(&callee), p.join(", "));
    let fast_call = format!(
        "call {ret} {}({})",
        gname(&format!("{}.zx_fast", f.name)),
        p.join(", ")
    );
    // Where a failed fast row goes: the region runner's own check when all
    // regions run fast, else one of the affine rows' own.
    let fail = if fast.is_some() { "chk" } else { "vf" };
    let mut aff_k = 0;
    // After a region: with `fast`, the flags and the record (calls write it).
    let end = if fast.is_some() { "chk" } else { "scan" };
    // One thread loop per region: 0 from the entry, else after a barrier.
    let regions: Vec<u32> = std::iter::once(0)
        .chain(plan.live.keys().map(|i| i.0 + 1))
        .collect();
    for (k, s) in regions.iter().enumerate() {
        let r = format!("r{s}");
        let (check, md) = match fast {
            // A failing thread marks its flag and ends; the loop runs on.
            Some(id) => (
                format!("br label %{r}.ok"),
                format!(", !llvm.loop !{}", id + k),
            ),
            None => (
                format!(
                    "%{r}.e = load i64, ptr %err\n  %{r}.bad = icmp ne i64 %{r}.e, 0\n  \
                     br i1 %{r}.bad, label %finish, label %{r}.ok"
                ),
                String::new(),
            ),
        };
        let aff = match (affine, s.checked_sub(1).map(InstId)) {
            (Some(md), Some(i)) => plan.affine.get(&i).map(|a| (a, md + aff_k)),
            _ => None,
        };
        aff_k += usize::from(aff.is_some());
        let _ = writeln!(
            out,
            "{r}:\n  br label %{r}.lz\n\
             {r}.lz:\n  %{r}.tz = phi i32 [ 0, %{r} ], [ %{r}.tz1, %{r}.lz.next ]\n  store i32 %{r}.tz, ptr %c.z\n  br label %{r}.ly\n\
             {r}.ly:\n  %{r}.ty = phi i32 [ 0, %{r}.lz ], [ %{r}.ty1, %{r}.ly.next ]\n  store i32 %{r}.ty, ptr %c.y\n  \
             %{r}.yz0 = mul i32 %{r}.tz, %by\n  %{r}.yz1 = add i32 %{r}.yz0, %{r}.ty\n  %{r}.yb = mul i32 %{r}.yz1, %bx"
        );
        let from = match aff {
            Some((vals, md)) => {
                affine_row(&mut out, plan, &r, *s, vals, &fast_call, md, fail);
                format!("{r}.ck.d")
            }
            None => {
                let _ = writeln!(out, "  br label %{r}.lx");
                format!("{r}.ly")
            }
        };
        let _ = writeln!(
            out,
            "{r}.lx:\n  %{r}.tx = phi i32 [ 0, %{from} ], [ %{r}.tx1, %{r}.lx.next ]\n  store i32 %{r}.tx, ptr %c\n  \
             %{r}.t = add i32 %{r}.yb, %{r}.tx\n  %{r}.t64 = zext i32 %{r}.t to i64\n  \
             %{r}.sp = getelementptr i32, ptr %sts, i64 %{r}.t64"
        );
        if *s != 0 {
            // Threads that returned sit out the later regions.
            let _ = writeln!(
                out,
                "  %{r}.st = load i32, ptr %{r}.sp\n  %{r}.run = icmp eq i32 %{r}.st, {s}\n  \
                 br i1 %{r}.run, label %{r}.go, label %{r}.lx.next"
            );
        } else {
            let _ = writeln!(out, "  br label %{r}.go");
        }
        let _ = writeln!(
            out,
            "{r}.go:\n  store i32 %{r}.t, ptr %c.t\n  store i32 {s}, ptr %c.r\n  store i32 0, ptr %c.s\n  {call}\n  \
             {check}\n\
             {r}.ok:\n  %{r}.ns = load i32, ptr %c.s\n  store i32 %{r}.ns, ptr %{r}.sp\n  br label %{r}.lx.next\n\
             {r}.lx.next:\n  %{r}.tx1 = add nuw nsw i32 %{r}.tx, 1\n  %{r}.mx = icmp ult i32 %{r}.tx1, %bx\n  br i1 %{r}.mx, label %{r}.lx, label %{r}.ly.next{md}\n\
             {r}.ly.next:\n  %{r}.ty1 = add i32 %{r}.ty, 1\n  %{r}.my = icmp ult i32 %{r}.ty1, %by\n  br i1 %{r}.my, label %{r}.ly, label %{r}.lz.next\n\
             {r}.lz.next:\n  %{r}.tz1 = add i32 %{r}.tz, 1\n  %{r}.mz = icmp ult i32 %{r}.tz1, %bz\n  br i1 %{r}.mz, label %{r}.lz, label %{end}"
        );
    }
    if fast.is_some() {
        // Or the row flags; on a failure (or a record a callee wrote) stop,
        // and without a record run the block again checked for the details.
        let _ = writeln!(out, "chk:\n  br label %chk.l");
        super::regions::checked_rerun(&mut out, &f.name, fid, ("chk", "chk.l"), "scan", "finish");
    } else if aff_k > 0 {
        let _ = writeln!(out, "vf:\n  br label %vf.l");
        super::regions::checked_rerun(&mut out, &f.name, fid, ("vf", "vf.l"), "finish", "finish");
    }
    // Threads waiting at a virtual barrier (an interchanged loop's header,
    // `host/interchange.rs`) run first: the largest state, if it is one.
    let virtuals: Vec<String> = regions
        .iter()
        .filter(|s| **s > super::interchange::VIRTUAL)
        .map(|s| format!("i32 {s}, label %r{s}"))
        .collect();
    let from = if virtuals.is_empty() {
        let _ = writeln!(out, "scan:\n  br label %scan.l");
        "scan"
    } else {
        let _ = writeln!(
            out,
            "scan:\n  br label %vs.l\nvs.l:\n  %vu = phi i32 [ 0, %scan ], [ %vu1, %vs.l ]\n  \
             %vm = phi i32 [ 0, %scan ], [ %vm1, %vs.l ]\n  %vu64 = zext i32 %vu to i64\n  \
             %vp = getelementptr i32, ptr %sts, i64 %vu64\n  %vv = load i32, ptr %vp\n  \
             %vgt = icmp ugt i32 %vv, %vm\n  %vm1 = select i1 %vgt, i32 %vv, i32 %vm\n  \
             %vu1 = add i32 %vu, 1\n  %vmore = icmp ult i32 %vu1, %n\n  br i1 %vmore, label %vs.l, label %vs.done\n\
             vs.done:\n  switch i32 %vm1, label %scan.g [ {} ]\nscan.g:\n  br label %scan.l",
            virtuals.join("\n    ")
        );
        "scan.g"
    };
    // Which barrier the running threads stopped at (0: all returned); all
    // the same. Two reductions without an exit (a vector loop: after every
    // region, a thread-by-thread loop with an exit at the first divergent
    // thread cost a fifth of a layernorm row's time): the largest state and
    // the smallest running one (0 counted as the largest); they differ only
    // when running threads wait at different barriers, and only then a
    // second, scalar pass finds the first such thread for the error.
    let _ = writeln!(
        out,
        "scan.l:\n  %u = phi i32 [ 0, %{from} ], [ %u1, %scan.l ]\n  \
         %smax = phi i32 [ 0, %{from} ], [ %smax1, %scan.l ]\n  \
         %smin = phi i32 [ -1, %{from} ], [ %smin1, %scan.l ]\n  %u64 = zext i32 %u to i64\n  \
         %su.p = getelementptr i32, ptr %sts, i64 %u64\n  %su = load i32, ptr %su.p\n  \
         %smax1 = call i32 @llvm.umax.i32(i32 %smax, i32 %su)\n  %su.dec = add i32 %su, -1\n  \
         %su.key = call i32 @llvm.umin.i32(i32 %smin, i32 %su.dec)\n  %smin1 = add i32 %su.key, 0\n  \
         %u1 = add i32 %u, 1\n  %u.more = icmp ult i32 %u1, %n\n  br i1 %u.more, label %scan.l, label %scan.d\n\
         scan.d:\n  %smin.st = add i32 %smin1, 1\n  %s.running = icmp ne i32 %smax1, 0\n  \
         %s.other = icmp ne i32 %smin.st, %smax1\n  %s.bad = and i1 %s.running, %s.other\n  \
         br i1 %s.bad, label %ds.l, label %scanned\n\
         ds.l:\n  %du = phi i32 [ 0, %scan.d ], [ %du1, %ds.next ]\n  \
         %cur = phi i32 [ 0, %scan.d ], [ %cur1, %ds.next ]\n  %u64d = zext i32 %du to i64\n  \
         %dsu.p = getelementptr i32, ptr %sts, i64 %u64d\n  %su.d = load i32, ptr %dsu.p\n  \
         %su.run = icmp ne i32 %su.d, 0\n  %cur.set = icmp ne i32 %cur, 0\n  %su.other = icmp ne i32 %su.d, %cur\n  \
         %su.b0 = and i1 %su.run, %cur.set\n  %su.bad = and i1 %su.b0, %su.other\n  \
         br i1 %su.bad, label %diverge, label %ds.next\n\
         ds.next:\n  %cur1 = select i1 %su.run, i32 %su.d, i32 %cur\n  %du1 = add i32 %du, 1\n  \
         %du.more = icmp ult i32 %du1, %n\n  br i1 %du.more, label %ds.l, label %scanned"
    );
    let cases: Vec<String> = regions
        .iter()
        .filter(|s| **s != 0)
        .map(|s| format!("i32 {s}, label %r{s}"))
        .collect();
    let _ = writeln!(
        out,
        "scanned:\n  switch i32 %smax1, label %finish [ {} ]",
        cases.join("\n    ")
    );
    let _ = writeln!(
        out,
        "diverge:\n  %dinst = sub i32 %cur, 1\n  %dinst64 = zext i32 %dinst to i64\n  \
         %dother = sub i32 %su.d, 1\n  %dother64 = zext i32 %dother to i64"
    );
    for (k, v) in [
        super::regions::ERR_BARRIER.to_string(),
        "-1".into(),
        "%u64d".into(),
        "%dother64".into(),
        "%dinst64".into(),
        fid.to_string(),
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(
            out,
            "  %d.p{k} = getelementptr i64, ptr %err, i64 {k}\n  store i64 {v}, ptr %d.p{k}"
        );
    }
    let _ = writeln!(
        out,
        "  br label %finish\nfinish:\n  call void @free(ptr %live)\n  call void @free(ptr %sts)\n  ret void\n}}"
    );
    out
}

/// A row of threads at virtual barrier `s - 1` (region `r`), entered with
/// its base `%{r}.yb`: check that every thread of the row waits there and
/// that each affine value is `u + x * step`, `u` the row's first thread's
/// (`%{r}.ck.d` goes on to the thread-by-thread loop `%{r}.lx` otherwise);
/// then run the row through the fast variant (`call`, the region with
/// [`AFFINE_REGION`], the `u`s in the context) as one loop carrying the
/// vectorize hint `md`, or its flags, and go to `fail` on a failure, else
/// check the row again: the row runs iteration after iteration while its
/// threads step together (between barriers the threads of a block may run
/// in any interleaving, so a row may finish its loop before the next row
/// starts, as a thread did before the interchange), its values in L1, and
/// the runner's pass over the block's states is paid once per row's loop
/// rather than per iteration. The first row check that fails (a thread left
/// the loop) runs that iteration thread by thread.
#[allow(clippy::too_many_arguments)]
fn affine_row(
    out: &mut String,
    plan: &Plan,
    r: &str,
    s: u32,
    vals: &[(ValueId, i64)],
    call: &str,
    md: usize,
    fail: &str,
) {
    let _ = writeln!(
        out,
        "  br label %{r}.ck0\n{r}.ck0:\n  %{r}.yb64 = zext i32 %{r}.yb to i64"
    );
    let slot = |k: usize| plan.slots.get(&vals[k].0);
    for k in 0..vals.len() {
        let Some(sl) = slot(k) else { continue };
        let _ = writeln!(
            out,
            "  %{r}.a{k}.base = mul i64 %n64, {}\n  %{r}.a{k}.o = mul i64 %{r}.yb64, {}\n  \
             %{r}.a{k}.o2 = add i64 %{r}.a{k}.base, %{r}.a{k}.o\n  %{r}.a{k}.p = getelementptr i8, ptr %live, i64 %{r}.a{k}.o2\n  \
             %{r}.u{k} = load {}, ptr %{r}.a{k}.p, align 1",
            sl.off, sl.size, sl.ty
        );
    }
    let _ = writeln!(
        out,
        "  br label %{r}.ck\n{r}.ck:\n  %{r}.cx = phi i32 [ 0, %{r}.ck0 ], [ %{r}.cx1, %{r}.ck ]\n  \
         %{r}.cok = phi i1 [ true, %{r}.ck0 ], [ %{r}.cok{}, %{r}.ck ]\n  \
         %{r}.ct = add i32 %{r}.yb, %{r}.cx\n  %{r}.ct64 = zext i32 %{r}.ct to i64\n  \
         %{r}.csp = getelementptr i32, ptr %sts, i64 %{r}.ct64\n  %{r}.cst = load i32, ptr %{r}.csp\n  \
         %{r}.cq = icmp eq i32 %{r}.cst, {s}\n  %{r}.cok0 = and i1 %{r}.cok, %{r}.cq",
        vals.len()
    );
    for (k, (_, step)) in vals.iter().enumerate() {
        let Some(sl) = slot(k) else {
            let _ = writeln!(out, "  %{r}.cok{} = and i1 %{r}.cok{k}, false", k + 1);
            continue;
        };
        let ty = &sl.ty;
        let widen = if ty == "i64" {
            format!("zext i32 %{r}.cx to i64")
        } else {
            format!("add i32 %{r}.cx, 0")
        };
        let _ = writeln!(
            out,
            "  %{r}.c{k}.o = mul i64 %{r}.ct64, {}\n  %{r}.c{k}.o2 = add i64 %{r}.a{k}.base, %{r}.c{k}.o\n  \
             %{r}.c{k}.p = getelementptr i8, ptr %live, i64 %{r}.c{k}.o2\n  %{r}.c{k}.w = load {ty}, ptr %{r}.c{k}.p, align 1\n  \
             %{r}.c{k}.x = {widen}\n  %{r}.c{k}.m = mul {ty} %{r}.c{k}.x, {step}\n  \
             %{r}.c{k}.e = add {ty} %{r}.u{k}, %{r}.c{k}.m\n  %{r}.c{k}.q = icmp eq {ty} %{r}.c{k}.w, %{r}.c{k}.e\n  \
             %{r}.cok{} = and i1 %{r}.cok{k}, %{r}.c{k}.q",
            sl.size,
            k + 1
        );
    }
    let n = vals.len();
    let _ = writeln!(
        out,
        "  %{r}.cx1 = add nuw i32 %{r}.cx, 1\n  %{r}.cm = icmp ult i32 %{r}.cx1, %bx\n  \
         br i1 %{r}.cm, label %{r}.ck, label %{r}.ck.d\n\
         {r}.ck.d:\n  br i1 %{r}.cok{n}, label %{r}.f0, label %{r}.lx\n{r}.f0:"
    );
    for k in 0..vals.len() {
        let Some(sl) = slot(k) else { continue };
        let _ = writeln!(
            out,
            "  %{r}.f{k}.p = getelementptr i8, ptr %c, i64 {}\n  store {} %{r}.u{k}, ptr %{r}.f{k}.p, align 8",
            CTX_AFFINE + 8 * k as u64,
            sl.ty
        );
    }
    let _ = writeln!(
        out,
        "  br label %{r}.fx\n\
         {r}.fx:\n  %{r}.fxx = phi i32 [ 0, %{r}.f0 ], [ %{r}.fxx1, %{r}.fx ]\n  store i32 %{r}.fxx, ptr %c\n  \
         %{r}.ft = add i32 %{r}.yb, %{r}.fxx\n  store i32 %{r}.ft, ptr %c.t\n  store i32 {}, ptr %c.r\n  \
         store i32 0, ptr %c.s\n  {call}\n  %{r}.fns = load i32, ptr %c.s\n  %{r}.ft64 = zext i32 %{r}.ft to i64\n  \
         %{r}.fsp = getelementptr i32, ptr %sts, i64 %{r}.ft64\n  store i32 %{r}.fns, ptr %{r}.fsp\n  \
         %{r}.fxx1 = add nuw nsw i32 %{r}.fxx, 1\n  %{r}.fm = icmp ult i32 %{r}.fxx1, %bx\n  \
         br i1 %{r}.fm, label %{r}.fx, label %{r}.fo, !llvm.loop !{md}\n\
         {r}.fo:\n  %{r}.foi = phi i32 [ 0, %{r}.fx ], [ %{r}.foi1, %{r}.fo ]\n  \
         %{r}.foa = phi i8 [ 0, %{r}.fx ], [ %{r}.foa1, %{r}.fo ]\n  %{r}.fop = getelementptr i8, ptr %fl, i32 %{r}.foi\n  \
         %{r}.fov = load i8, ptr %{r}.fop\n  %{r}.foa1 = or i8 %{r}.foa, %{r}.fov\n  %{r}.foi1 = add i32 %{r}.foi, 1\n  \
         %{r}.fom = icmp ult i32 %{r}.foi1, %bx\n  br i1 %{r}.fom, label %{r}.fo, label %{r}.fo.d\n\
         {r}.fo.d:\n  %{r}.fe = load i64, ptr %err\n  %{r}.feb = icmp ne i64 %{r}.fe, 0\n  \
         %{r}.ffb = icmp ne i8 %{r}.foa1, 0\n  %{r}.fbad = or i1 %{r}.feb, %{r}.ffb\n  \
         br i1 %{r}.fbad, label %{fail}, label %{r}.ck0",
        s | AFFINE_REGION
    );
}

/// Declarations the region runner needs.
pub const RUNNER_DECLS: [&str; 6] = [
    "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
    "declare i32 @llvm.umax.i32(i32, i32)",
    "declare i32 @llvm.umin.i32(i32, i32)",
    "declare ptr @malloc(i64)",
    "declare ptr @calloc(i64, i64)",
    "declare void @free(ptr)",
];
