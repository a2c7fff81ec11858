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
}

/// Whether region fission is off for every kernel (`ZYNTAX_CPU_BARRIERS=coro`).
fn forced_off() -> bool {
    std::env::var("ZYNTAX_CPU_BARRIERS").is_ok_and(|v| v == "coro")
}

/// Whether kernel `f` is split at its barriers rather than lowered as a
/// coroutine (what [`plan`] decides, short of the types of its live values;
/// for the report).
pub fn applies(f: &Function) -> bool {
    f.is_kernel()
        && !forced_off()
        && !super::warp::has_collective(f)
        && (f.insts_in_order().any(|(_, i)| {
            f.insts
                .get(i.index())
                .is_some_and(|d| matches!(d.op, Op::Barrier))
        }) || !super::interchange::headers(f).is_empty())
        && !f.insts_in_order().any(|(_, i)| {
            f.insts
                .get(i.index())
                .is_some_and(|d| matches!(d.op, Op::Alloca { .. }))
        })
}

/// A program point: block and index of the instruction in it (-1: the
/// block's parameters, before its first instruction).
type Point = (BlockId, i64);

/// The fission plan of kernel `f`, or `None` when it keeps the coroutine
/// lowering (no barrier, a warp collective, an `alloca`, or a value live
/// across a barrier whose type has no per-thread storage). `literal` says
/// which values the lowering writes as literals (constants: never stored).
pub fn plan(f: &Function, literal: &dyn Fn(ValueId) -> bool) -> Option<Plan> {
    if !f.is_kernel() || forced_off() || super::warp::has_collective(f) {
        return None;
    }
    let mut barriers: Vec<(InstId, Point)> = Vec::new();
    let mut def: BTreeMap<ValueId, Point> = BTreeMap::new();
    let mut uses: BTreeMap<ValueId, Vec<Point>> = BTreeMap::new();
    let mut succ: BTreeMap<BlockId, Vec<BlockId>> = BTreeMap::new();
    let entry = f.entry()?;
    // Loops interchanged with the thread loop: a virtual barrier at the
    // start of each header, after its parameters (`host/interchange.rs`).
    let virtuals: BTreeSet<BlockId> = super::interchange::headers(f).into_iter().collect();
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
            // (available in every region): never saved.
            if !matches!(d.op, Op::SharedAlloc { .. }) {
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
    let mut p = Plan::default();
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
             %zx.livep = getelementptr i8, ptr %ctx, i64 {CTX_LIVE}\n  %zx.live = load ptr, ptr %zx.livep, align 8"
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
        let cases: Vec<String> = self
            .live
            .keys()
            .map(|i| format!("i32 {}, label %zx.resume{}", i.0 + 1, i.0))
            .collect();
        format!(
            "  %zx.regp = getelementptr i8, ptr %ctx, i64 {CTX_REGION}\n  \
             %zx.region = load i32, ptr %zx.regp, align 4\n  \
             switch i32 %zx.region, label %b{} [ {} ]\n",
            entry.0,
            cases.join("\n    ")
        )
    }

    /// Copy the saved values of barrier `i` between their local `alloca`s
    /// and the thread's arrays (`save`: to the arrays; else back). `tmp`
    /// names temporaries.
    pub fn copy(&self, i: InstId, save: bool, tmp: &mut dyn FnMut() -> String) -> Vec<String> {
        let mut out = Vec::new();
        for v in self.live.get(&i).into_iter().flatten() {
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
        FISSION_CTX_BYTES + 8,
        plan.bytes
    );
    if fast.is_some() {
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
        let _ = writeln!(
            out,
            "{r}:\n  br label %{r}.lz\n\
             {r}.lz:\n  %{r}.tz = phi i32 [ 0, %{r} ], [ %{r}.tz1, %{r}.lz.next ]\n  store i32 %{r}.tz, ptr %c.z\n  br label %{r}.ly\n\
             {r}.ly:\n  %{r}.ty = phi i32 [ 0, %{r}.lz ], [ %{r}.ty1, %{r}.ly.next ]\n  store i32 %{r}.ty, ptr %c.y\n  \
             %{r}.yz0 = mul i32 %{r}.tz, %by\n  %{r}.yz1 = add i32 %{r}.yz0, %{r}.ty\n  %{r}.yb = mul i32 %{r}.yz1, %bx\n  br label %{r}.lx\n\
             {r}.lx:\n  %{r}.tx = phi i32 [ 0, %{r}.ly ], [ %{r}.tx1, %{r}.lx.next ]\n  store i32 %{r}.tx, ptr %c\n  \
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
    // Which barrier the running threads stopped at (0: all returned); all the same.
    let _ = writeln!(
        out,
        "scan.l:\n  %u = phi i32 [ 0, %{from} ], [ %u1, %scan.next ]\n  \
         %cur = phi i32 [ 0, %{from} ], [ %cur1, %scan.next ]\n  %u64 = zext i32 %u to i64\n  \
         %su.p = getelementptr i32, ptr %sts, i64 %u64\n  %su = load i32, ptr %su.p\n  \
         %su.run = icmp ne i32 %su, 0\n  %cur.set = icmp ne i32 %cur, 0\n  %su.other = icmp ne i32 %su, %cur\n  \
         %su.b0 = and i1 %su.run, %cur.set\n  %su.bad = and i1 %su.b0, %su.other\n  \
         br i1 %su.bad, label %diverge, label %scan.next\n\
         scan.next:\n  %cur1 = select i1 %su.run, i32 %su, i32 %cur\n  %u1 = add i32 %u, 1\n  \
         %u.more = icmp ult i32 %u1, %n\n  br i1 %u.more, label %scan.l, label %scanned"
    );
    let cases: Vec<String> = regions
        .iter()
        .filter(|s| **s != 0)
        .map(|s| format!("i32 {s}, label %r{s}"))
        .collect();
    let _ = writeln!(
        out,
        "scanned:\n  switch i32 %cur1, label %finish [ {} ]",
        cases.join("\n    ")
    );
    let _ = writeln!(
        out,
        "diverge:\n  %dinst = sub i32 %cur, 1\n  %dinst64 = zext i32 %dinst to i64\n  \
         %dother = sub i32 %su, 1\n  %dother64 = zext i32 %dother to i64"
    );
    for (k, v) in [
        super::regions::ERR_BARRIER.to_string(),
        "-1".into(),
        "%u64".into(),
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

/// Declarations the region runner needs.
pub const RUNNER_DECLS: [&str; 4] = [
    "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
    "declare ptr @malloc(i64)",
    "declare ptr @calloc(i64, i64)",
    "declare void @free(ptr)",
];
