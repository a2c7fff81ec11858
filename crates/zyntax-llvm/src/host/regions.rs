//! Block runners of CPU kernels, and kernels with warp collectives (or an
//! `alloca`) on the CPU as coroutines: every thread of a block is an LLVM
//! coroutine, and the block runner runs the block region by region. Kernels
//! whose only suspend points are barriers are split into region loops
//! instead ([`super::fission`]); barrier-free kernels get [`block_runner`]
//! (threads one after another) or [`fast_runner`] (threads as SIMD lanes).
//!
//! A `barrier` splits the kernel's code into regions. The kernel is lowered
//! as a switched-resume coroutine (`presplitcoroutine`): each barrier is an
//! `llvm.coro.suspend`, and LLVM's coroutine passes (part of every
//! `default<Ox>` pipeline) split the function at the suspends and move every
//! value live across a barrier into the coroutine's frame — the per-thread
//! storage of the region fission, computed by LLVM's own liveness instead of
//! ours. Before suspending, a thread writes `barrier inst + 1` into its
//! context (`CTX_STATE`); on returning it writes 0.
//!
//! The block runner ([`block_runner`] for kernels without barriers,
//! [`coro_block_runner`] for kernels with them) gives every thread its own
//! context (thread index, the block's shared buffer), starts every thread
//! (region 0, up to its first barrier), then repeats: the threads that are
//! still running must all wait at the same barrier (as in the interpreter,
//! threads that returned no longer take part); each is resumed in turn up to
//! its next barrier. Threads waiting at different barriers are a run-time
//! error ([`ERR_BARRIER`]) naming one of them, like the interpreter's
//! divergent-barrier trap. Any error destroys the suspended threads' frames.
//!
//! Barriers may therefore sit anywhere — in uniform loops and branches, or
//! under thread-dependent control flow as long as every running thread
//! reaches the same barrier instruction. A device function that reaches a
//! barrier or a collective is inlined into the kernel first
//! ([`inline_suspending`]); one that cannot be (recursive, or holding a
//! `shared_alloc`) keeps its kernel on the interpreter (see [`cpu_blockers`]).

use super::lower::{gname, Sig, CTX_BDIM, CTX_BYTES};
use super::warp;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use zyntax_hir::{Function, InstId, Module, Op, Type};

/// Byte offset of a coroutine thread's state in its context: 0 when it has
/// returned, `barrier inst + 1` while it waits at a barrier.
pub const CTX_STATE: u64 = CTX_BYTES as u64;
/// Size of one thread's context in the coroutine block runner.
pub const CORO_CTX_BYTES: u64 = CTX_BYTES as u64 + super::warp::BYTES;
/// Error code: the running threads of a block wait at different barriers.
pub const ERR_BARRIER: i64 = 16;

/// Which GPU ops a kernel uses that the CPU backend cannot run in parallel
/// over blocks (they need threads of a block to run together).
pub fn cpu_blockers(m: &Module, f: &Function) -> Vec<String> {
    let mut out = BTreeSet::new();
    let mut seen = vec![f.name.clone()];
    let mut work = vec![f.name.clone()];
    while let Some(n) = work.pop() {
        let Some(g) = m.function(&n) else { continue };
        for (_, i) in g.insts_in_order() {
            let Some(d) = g.insts.get(i.index()) else {
                continue;
            };
            match &d.op {
                // A kernel's own barriers split it into regions (see `regions`).
                Op::Barrier if n != f.name => {
                    out.insert("barrier in a device function".into());
                }
                // A kernel's own shuffles and votes suspend it per warp (see `warp`).
                Op::Shfl { .. }
                | Op::Vote(_)
                | Op::WarpSync
                | Op::ElectSync
                | Op::Redux(_)
                | Op::Match(_)
                    if n == f.name && warp::supported(g, d) => {}
                Op::WarpSync
                | Op::Shfl { .. }
                | Op::Vote(_)
                | Op::Match(_)
                | Op::MmaLoad { .. }
                | Op::MmaFill
                | Op::Mma
                | Op::MmaStore { .. }
                | Op::CpAsync { .. }
                | Op::CpAsyncCommit
                | Op::CpAsyncWait(_)
                | Op::Mbarrier(_)
                | Op::FenceProxyAsync
                | Op::FenceMbarrierInit
                | Op::MmaSync { .. }
                | Op::Ldmatrix { .. }
                | Op::Stmatrix { .. }
                | Op::WgmmaDesc(_)
                | Op::Wgmma(_)
                | Op::WgmmaFence
                | Op::WgmmaCommit
                | Op::WgmmaWait(_)
                | Op::Setmaxnreg { .. }
                | Op::ElectSync
                | Op::TmaLoad { .. }
                | Op::TmaStore
                | Op::TmaReduce(_)
                | Op::BulkCopyG2S
                | Op::BulkCopyS2G
                | Op::BulkCommitGroup
                | Op::BulkWaitGroup { .. }
                | Op::PrefetchTensormap
                | Op::NamedBarrier { .. }
                // No host lowering: the interpreter runs the packed conversions.
                | Op::CvtPack(_)
                | Op::CvtUnpack(_)
                | Op::BulkReduce(_)
                // Module globals live in a loaded GPU module (and the interpreter).
                | Op::GlobalAddr(_)
                // Warp reductions: not yet a native collective (shfl and vote are).
                | Op::Redux(_)
                | Op::WgmmaZero
                // Clusters, distributed shared memory, grid-wide sync and
                // programmatic dependent launch: blocks of a CPU launch run
                // independently, in any order.
                | Op::ClusterIdx(_)
                | Op::ClusterDim(_)
                | Op::ClusterBlockIdx(_)
                | Op::ClusterGridDim(_)
                | Op::ClusterCtaRank
                | Op::ClusterNctaRank
                | Op::IsExplicitCluster
                | Op::ClusterBarrier(_)
                | Op::Mapa
                | Op::MbarrierArriveCluster
                | Op::MbarrierArriveClusterRelaxed
                | Op::Griddep(_)
                | Op::GridSync => {
                    out.insert(d.op.mnemonic());
                }
                // Packed (vector) atomics: LLVM has no portable host form.
                Op::Atomic { .. } | Op::Red { .. }
                    if d
                        .args
                        .get(1)
                        .is_some_and(|v| g.has_value(*v) && !matches!(g.value_type(*v), Type::Scalar(_))) =>
                {
                    out.insert(format!("{} on a vector", d.op.mnemonic()));
                }
                Op::Call(c) if !seen.contains(c) => {
                    seen.push(c.clone());
                    work.push(c.clone());
                }
                _ => {}
            }
        }
    }
    out.into_iter().collect()
}

/// Most calls inlined into one kernel by [`inline_suspending`] (a bound on
/// code growth; a kernel past it keeps its calls and stays on the interpreter).
const MAX_SUSPEND_INLINES: usize = 64;

/// Inline into every kernel of `m` each call of a device function that
/// reaches a barrier or a warp collective (through further calls too), so
/// that the kernel itself holds the suspend points the coroutine lowering
/// needs: only a kernel is a coroutine, a callee's suspend would have to
/// suspend its caller. Front-ends put collectives in helpers (`@zyntax.func`
/// warp sums, block reductions), which would otherwise keep the kernel on the
/// interpreter. Recursive callees and callees holding a `shared_alloc` (on the
/// GPU one array for all call sites, an inlined copy would get its own) are
/// left alone. Returns (kernel, callee) of every call inlined.
pub fn inline_suspending(m: &mut Module) -> Vec<(String, String)> {
    let suspends = |g: &Function| {
        g.insts_in_order().any(|(_, i)| {
            g.insts.get(i.index()).is_some_and(|d| {
                matches!(
                    d.op,
                    Op::Barrier
                        | Op::Shfl { .. }
                        | Op::Vote(_)
                        | Op::WarpSync
                        | Op::ElectSync
                        | Op::Redux(_)
                        | Op::Match(_)
                )
            })
        })
    };
    let has_shared = |g: &Function| {
        g.insts_in_order().any(|(_, i)| {
            g.insts
                .get(i.index())
                .is_some_and(|d| matches!(d.op, Op::SharedAlloc { .. }))
        })
    };
    // Device functions reaching a suspend point, to a fixed point over calls.
    let mut reach: BTreeSet<String> = m
        .functions
        .iter()
        .filter(|g| !g.is_kernel() && suspends(g))
        .map(|g| g.name.clone())
        .collect();
    loop {
        let more: Vec<String> = m
            .functions
            .iter()
            .filter(|g| !g.is_kernel() && !reach.contains(&g.name))
            .filter(|g| {
                g.insts_in_order().any(|(_, i)| {
                    matches!(g.insts.get(i.index()).map(|d| &d.op), Some(Op::Call(c)) if reach.contains(c))
                })
            })
            .map(|g| g.name.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        reach.extend(more);
    }
    let inlinable: BTreeSet<String> = reach
        .into_iter()
        .filter(|n| {
            m.function(n)
                .is_some_and(|g| !has_shared(g) && !zyntax_opt::analysis::is_recursive(m, n))
        })
        .collect();
    let mut done = Vec::new();
    if inlinable.is_empty() {
        return done;
    }
    let source = m.clone();
    for f in m.functions.iter_mut().filter(|f| f.is_kernel()) {
        let mut count = 0;
        loop {
            let site =
                f.insts_in_order()
                    .find_map(|(b, i)| match f.insts.get(i.index()).map(|d| &d.op) {
                        Some(Op::Call(c)) if inlinable.contains(c) => Some((b, i, c.clone())),
                        _ => None,
                    });
            let Some((b, i, c)) = site else { break };
            let Some(callee) = source.function(&c) else {
                break;
            };
            if count == MAX_SUSPEND_INLINES || !zyntax_opt::inline::inline_call(f, b, i, callee) {
                break;
            }
            count += 1;
            done.push((f.name.clone(), c));
        }
        if count > 0 {
            f.canonicalize();
        }
    }
    done
}

/// Whether `f` itself contains a suspend point — a `barrier` or a warp
/// collective the CPU runs (it is lowered as a coroutine).
pub fn has_suspend(f: &Function) -> bool {
    warp::has_collective(f)
        || f.insts_in_order().any(|(_, i)| {
            f.insts
                .get(i.index())
                .is_some_and(|d| matches!(d.op, Op::Barrier))
        })
}

/// The declarations the coroutine lowering needs.
pub const DECLS: [&str; 9] = [
    "declare token @llvm.coro.id(i32, ptr readnone, ptr nocapture readonly, ptr)",
    "declare i64 @llvm.coro.size.i64()",
    "declare ptr @llvm.coro.begin(token, ptr writeonly)",
    "declare i8 @llvm.coro.suspend(token, i1)",
    "declare ptr @llvm.coro.free(token, ptr nocapture readonly)",
    "declare i1 @llvm.coro.end(ptr, i1, token)",
    "declare ptr @malloc(i64)",
    "declare ptr @calloc(i64, i64)",
    "declare void @free(ptr)",
];

/// The instructions of a suspend point at `i`: record `state` (see
/// [`warp::Suspend`]) in the thread's context and suspend; the thread resumes
/// at `resume` (a new LLVM block the caller opens).
pub fn suspend(i: InstId, state: u32, resume: &str) -> [String; 3] {
    let s = format!("%zx.s{}", i.0);
    [
        format!("store i32 {state}, ptr %zx.state, align 4"),
        format!("{s} = call i8 @llvm.coro.suspend(token none, i1 false)"),
        format!(
            "switch i8 {s}, label %zx.coro.suspend [ i8 0, label %{resume}\n    i8 1, label %zx.coro.cleanup ]"
        ),
    ]
}

/// Turn the lowered text of a kernel with barriers into a coroutine: it
/// returns its handle, allocates its frame on entry, and every `ret void`
/// (return or error) ends the coroutine with state 0.
pub fn to_coroutine(text: &str, name: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1024);
    let head = format!("define void {}(", gname(name));
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(&head) {
            let rest = rest.strip_suffix(" {").unwrap_or(rest);
            let _ = writeln!(
                out,
                "define ptr {}({rest} presplitcoroutine {{",
                gname(name)
            );
        } else if line == "zx.entry:" {
            let _ = writeln!(out, "{line}");
            out.push_str(
                "  %zx.id = call token @llvm.coro.id(i32 0, ptr null, ptr null, ptr null)\n  \
                 %zx.size = call i64 @llvm.coro.size.i64()\n  \
                 %zx.mem0 = call ptr @malloc(i64 %zx.size)\n  \
                 %zx.hdl = call noalias ptr @llvm.coro.begin(token %zx.id, ptr %zx.mem0)\n",
            );
            let _ = writeln!(
                out,
                "  %zx.state = getelementptr i8, ptr %ctx, i64 {CTX_STATE}"
            );
        } else if line == "  ret void" {
            out.push_str("  br label %zx.coro.done\n");
        } else if line == "}" {
            out.push_str(
                "zx.coro.done:\n  store i32 0, ptr %zx.state, align 4\n  br label %zx.coro.cleanup\n\
                 zx.coro.cleanup:\n  %zx.mem = call ptr @llvm.coro.free(token %zx.id, ptr %zx.hdl)\n  \
                 call void @free(ptr %zx.mem)\n  br label %zx.coro.suspend\n\
                 zx.coro.suspend:\n  %zx.unused = call i1 @llvm.coro.end(ptr %zx.hdl, i1 false, token none)\n  \
                 ret ptr %zx.hdl\n}\n",
            );
        } else {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// Emit the loads of the block's dimensions, `%n` threads, and the
/// per-thread index computation `%tx`, `%ty`, `%tz` from `%t` (text pieces
/// shared by both runners).
fn dims(out: &mut String) {
    for (k, n) in ["bx", "by", "bz"].iter().enumerate() {
        let _ = writeln!(
            out,
            "  %{n}.p = getelementptr i8, ptr %ctx, i64 {}",
            CTX_BDIM + 4 * k as u64
        );
        let _ = writeln!(out, "  %{n} = load i32, ptr %{n}.p");
    }
    let _ = writeln!(out, "  %bxy = mul i32 %bx, %by\n  %n = mul i32 %bxy, %bz");
}

fn thread_index(out: &mut String, c: &str) {
    let _ = writeln!(out, "  %tx = urem i32 %t, %bx\n  %q = udiv i32 %t, %bx\n  %ty = urem i32 %q, %by\n  %tz = udiv i32 %t, %bxy");
    let _ = writeln!(
        out,
        "  %ty.p = getelementptr i8, ptr {c}, i64 4\n  %tz.p = getelementptr i8, ptr {c}, i64 8"
    );
    let _ = writeln!(
        out,
        "  store i32 %tx, ptr {c}\n  store i32 %ty, ptr %ty.p\n  store i32 %tz, ptr %tz.p"
    );
}

/// `@"name.zx_block"(args, lens, err, ctx)` for a kernel without barriers:
/// every thread of the block in turn, stopping at the first error.
/// `parts` are the kernel's call arguments loaded by the caller's text `pre`.
///
/// The threads run as three nested counted loops (z, y, x; x innermost), so
/// a thread index is a loop counter rather than a division of a linear index,
/// and LLVM, which inlines the kernel here, sees the innermost loop as a
/// plain loop over `thread_idx.x`. `%err` and `%ctx` are `noalias`: they are
/// the launch's error record and the worker's own context, never a kernel
/// argument, so the kernel's stores cannot change them and LLVM keeps
/// `block_idx`, `block_dim` and the thread index in registers.
/// `suffix` names it: `zx_block`, or `zx_checked` beside [`fast_runner`].
pub fn block_runner(
    f: &Function,
    sig: &Sig,
    attrs: &str,
    pre: &str,
    parts: &[String],
    suffix: &str,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "define void {}(ptr %args, ptr %lens, ptr noalias %err, ptr noalias %ctx) {attrs} {{",
        gname(&format!("{}.{suffix}", f.name))
    );
    let _ = writeln!(out, "entry:");
    out.push_str(pre);
    dims(&mut out);
    let _ = writeln!(
        out,
        "  %ty.p = getelementptr i8, ptr %ctx, i64 4\n  %tz.p = getelementptr i8, ptr %ctx, i64 8\n  \
         %empty = icmp eq i32 %n, 0\n  br i1 %empty, label %done, label %lz"
    );
    let _ = writeln!(
        out,
        "lz:\n  %tz = phi i32 [ 0, %entry ], [ %tz1, %lz.next ]\n  store i32 %tz, ptr %tz.p\n  br label %ly"
    );
    let _ = writeln!(
        out,
        "ly:\n  %ty = phi i32 [ 0, %lz ], [ %ty1, %ly.next ]\n  store i32 %ty, ptr %ty.p\n  br label %lx"
    );
    let _ = writeln!(
        out,
        "lx:\n  %tx = phi i32 [ 0, %ly ], [ %tx1, %lx.next ]\n  store i32 %tx, ptr %ctx"
    );
    let mut p = parts.to_vec();
    p.push("ptr %err".into());
    p.push("ptr %ctx".into());
    let _ = writeln!(
        out,
        "  call {} {}({})",
        sig.ret,
        gname(&f.name),
        p.join(", ")
    );
    let _ = writeln!(
        out,
        "  %e = load i64, ptr %err\n  %bad = icmp ne i64 %e, 0\n  br i1 %bad, label %done, label %lx.next\n\
         lx.next:\n  %tx1 = add i32 %tx, 1\n  %mx = icmp ult i32 %tx1, %bx\n  br i1 %mx, label %lx, label %ly.next\n\
         ly.next:\n  %ty1 = add i32 %ty, 1\n  %my = icmp ult i32 %ty1, %by\n  br i1 %my, label %ly, label %lz.next\n\
         lz.next:\n  %tz1 = add i32 %tz, 1\n  %mz = icmp ult i32 %tz1, %bz\n  br i1 %mz, label %lz, label %done"
    );
    let _ = writeln!(out, "done:\n  ret void\n}}");
    out
}

/// `@"name.zx_block"` for a kernel with barriers (see the module docs).
/// `fid` is the kernel's index in the module, for the error record.
pub fn coro_block_runner(
    f: &Function,
    attrs: &str,
    pre: &str,
    parts: &[String],
    fid: usize,
) -> String {
    let cb = CORO_CTX_BYTES;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "define void {}(ptr %args, ptr %lens, ptr %err, ptr %ctx) {attrs} {{",
        gname(&format!("{}.zx_block", f.name))
    );
    let _ = writeln!(out, "entry:");
    out.push_str(pre);
    dims(&mut out);
    let _ = writeln!(
        out,
        "  %n64 = zext i32 %n to i64\n  %ctxs = call ptr @calloc(i64 %n64, i64 {cb})\n  \
         %hs = call ptr @calloc(i64 %n64, i64 8)\n  %w.nw0 = add i64 %n64, 31\n  \
         %w.nw64 = lshr i64 %w.nw0, 5\n  %w.group = call ptr @calloc(i64 %w.nw64, i64 4)\n  \
         %w.ballot = call ptr @calloc(i64 %w.nw64, i64 4)\n  %empty = icmp eq i32 %n, 0\n  \
         br i1 %empty, label %finish, label %start"
    );
    // Region 0: every thread up to its first barrier.
    let _ = writeln!(
        out,
        "start:\n  %t = phi i32 [ 0, %entry ], [ %t1, %start.next ]\n  %t64 = zext i32 %t to i64\n  \
         %off = mul i64 %t64, {cb}\n  %c = getelementptr i8, ptr %ctxs, i64 %off\n  \
         call void @llvm.memcpy.p0.p0.i64(ptr %c, ptr %ctx, i64 {CTX_BYTES}, i1 false)"
    );
    thread_index(&mut out, "%c");
    let mut p = parts.to_vec();
    p.push("ptr %err".into());
    p.push("ptr %c".into());
    let _ = writeln!(
        out,
        "  %h = call ptr {}({})\n  %hp = getelementptr ptr, ptr %hs, i64 %t64\n  store ptr %h, ptr %hp",
        gname(&f.name),
        p.join(", ")
    );
    let _ = writeln!(out, "  %e = load i64, ptr %err\n  %bad = icmp ne i64 %e, 0\n  br i1 %bad, label %abort, label %start.next");
    let _ = writeln!(out, "start.next:\n  %t1 = add i32 %t, 1\n  %more = icmp ult i32 %t1, %n\n  br i1 %more, label %start, label %phase");
    // Which barrier the running threads wait at (0: all returned).
    let st = |out: &mut String, t: &str, s: &str| {
        let _ = writeln!(
            out,
            "  %{s}.t64 = zext i32 {t} to i64\n  %{s}.o = mul i64 %{s}.t64, {cb}\n  \
             %{s}.o2 = add i64 %{s}.o, {CTX_BYTES}\n  %{s}.p = getelementptr i8, ptr %ctxs, i64 %{s}.o2\n  \
             %{s} = load i32, ptr %{s}.p\n  %{s}.hp = getelementptr ptr, ptr %hs, i64 %{s}.t64"
        );
    };
    // Warp collectives first (per warp), then barriers (the whole block).
    let _ = writeln!(out, "phase:\n  br label %w.scan");
    warp::runner_step(&mut out, cb, fid);
    let _ = writeln!(
        out,
        "scan:\n  %u = phi i32 [ 0, %w.scan.next ], [ %u1, %scan.next ]\n  %cur = phi i32 [ 0, %w.scan.next ], [ %cur1, %scan.next ]"
    );
    st(&mut out, "%u", "su");
    let _ = writeln!(
        out,
        "  %su.run = icmp ne i32 %su, 0\n  %cur.none = icmp eq i32 %cur, 0\n  \
         %su.same = icmp eq i32 %su, %cur\n  %su.ok0 = or i1 %cur.none, %su.same\n  \
         %su.ok1 = xor i1 %su.run, true\n  %su.ok = or i1 %su.ok0, %su.ok1\n  \
         br i1 %su.ok, label %scan.next, label %diverge"
    );
    let _ = writeln!(
        out,
        "scan.next:\n  %cur1 = select i1 %su.run, i32 %su, i32 %cur\n  %u1 = add i32 %u, 1\n  \
         %u.more = icmp ult i32 %u1, %n\n  br i1 %u.more, label %scan, label %scanned"
    );
    let _ = writeln!(
        out,
        "scanned:\n  %alldone = icmp eq i32 %cur1, 0\n  br i1 %alldone, label %finish, label %resume"
    );
    // The next region: resume every waiting thread up to its next barrier.
    let _ = writeln!(
        out,
        "resume:\n  %r = phi i32 [ 0, %scanned ], [ %r1, %resume.next ]"
    );
    st(&mut out, "%r", "sr");
    let _ = writeln!(
        out,
        "  %sr.run = icmp ne i32 %sr, 0\n  br i1 %sr.run, label %resume.go, label %resume.next\n\
         resume.go:\n  %rh = load ptr, ptr %sr.hp\n  call void @llvm.coro.resume(ptr %rh)\n  \
         %re = load i64, ptr %err\n  %rbad = icmp ne i64 %re, 0\n  br i1 %rbad, label %abort, label %resume.next"
    );
    let _ = writeln!(
        out,
        "resume.next:\n  %r1 = add i32 %r, 1\n  %r.more = icmp ult i32 %r1, %n\n  br i1 %r.more, label %resume, label %phase"
    );
    // Threads at different barriers: report the first waiting thread's barrier.
    let _ = writeln!(
        out,
        "diverge:\n  %dinst = sub i32 %cur, 1\n  %dinst64 = zext i32 %dinst to i64\n  \
         %dother = sub i32 %su, 1\n  %dother64 = zext i32 %dother to i64\n  %dt64 = zext i32 %u to i64"
    );
    for (k, v) in [
        ERR_BARRIER.to_string(),
        "-1".into(),
        "%dt64".into(),
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
    let _ = writeln!(out, "  br label %abort");
    // After an error: free the frames of the threads still suspended.
    let _ = writeln!(
        out,
        "abort:\n  br label %kill\nkill:\n  %k = phi i32 [ 0, %abort ], [ %k1, %kill.next ]"
    );
    st(&mut out, "%k", "sk");
    let _ = writeln!(
        out,
        "  %sk.run = icmp ne i32 %sk, 0\n  br i1 %sk.run, label %kill.go, label %kill.next\n\
         kill.go:\n  %kh = load ptr, ptr %sk.hp\n  call void @llvm.coro.destroy(ptr %kh)\n  br label %kill.next\n\
         kill.next:\n  %k1 = add i32 %k, 1\n  %k.more = icmp ult i32 %k1, %n\n  br i1 %k.more, label %kill, label %finish"
    );
    let _ = writeln!(
        out,
        "finish:\n  call void @free(ptr %ctxs)\n  call void @free(ptr %hs)\n  \
         call void @free(ptr %w.group)\n  call void @free(ptr %w.ballot)\n  ret void\n}}"
    );
    out
}

/// Declarations the coroutine block runner needs.
pub const RUNNER_DECLS: [&str; 9] = [
    warp::RUNNER_DECLS[0],
    warp::RUNNER_DECLS[1],
    warp::RUNNER_DECLS[2],
    warp::RUNNER_DECLS[3],
    warp::RUNNER_DECLS[4],
    warp::RUNNER_DECLS[5],
    "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
    "declare void @llvm.coro.resume(ptr)",
    "declare void @llvm.coro.destroy(ptr)",
];

/// Byte offset, in the fast runner's context, of the pointer to the row's
/// per-thread failure flags (after the region runner's fields).
pub const CTX_FLAGS: u64 = super::fission::FISSION_CTX_BYTES;
const FAST_CTX_BYTES: u64 = CTX_FLAGS + 8;

/// Declarations the fast runner needs.
pub const FAST_DECLS: [&str; 2] = [
    "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
    "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
];

/// `@"name.zx_block"` for a kernel without barriers: threads as SIMD lanes.
///
/// The innermost loop (over `thread_idx.x`) calls the kernel's variant
/// `name.zx_fast`, in which a failed check does not write the shared error
/// record (stores to one address from every lane keep LLVM's loop vectorizer
/// away) but ends the thread with a code that its exit writes into the
/// thread's byte in a row of flags (0 when it did not fail); the
/// loop carries `llvm.loop.vectorize.enable`, has one exit, and its context
/// is a local copy, so LLVM turns it into vector code with masked loads and
/// stores for the threads' branches. After each row the flags are or-ed: on a
/// failure the block runs again checked (`name.zx_checked`, thread by thread,
/// stopping at the first failure) to fill the error record; a failure that
/// does not happen again (the first run changed the kernel's inputs) still
/// fails the launch, with the code only (the lowest set in the row's flags). `md`: the id of the loop metadata.
pub fn fast_runner(
    f: &Function,
    sig: &Sig,
    attrs: &str,
    pre: &str,
    parts: &[String],
    fid: usize,
    md: usize,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "define void {}(ptr %args, ptr %lens, ptr %err, ptr noalias %ctx) {attrs} {{",
        gname(&format!("{}.zx_block", f.name))
    );
    let _ = writeln!(out, "entry:");
    out.push_str(pre);
    dims(&mut out);
    let _ = writeln!(
        out,
        "  %c = alloca [{FAST_CTX_BYTES} x i8], align 8\n  \
         call void @llvm.memcpy.p0.p0.i64(ptr %c, ptr %ctx, i64 {CTX_BYTES}, i1 false)\n  \
         %fl = alloca [1024 x i8], align 16\n  %bx64 = zext i32 %bx to i64\n  \
         call void @llvm.memset.p0.i64(ptr %fl, i8 0, i64 %bx64, i1 false)\n  \
         %c.fb = getelementptr i8, ptr %c, i64 {CTX_FLAGS}\n  store ptr %fl, ptr %c.fb\n  \
         %ty.p = getelementptr i8, ptr %c, i64 4\n  %tz.p = getelementptr i8, ptr %c, i64 8\n  \
         %empty = icmp eq i32 %n, 0\n  br i1 %empty, label %done, label %lz"
    );
    let _ = writeln!(
        out,
        "lz:\n  %tz = phi i32 [ 0, %entry ], [ %tz1, %lz.next ]\n  store i32 %tz, ptr %tz.p\n  br label %ly\n\
         ly:\n  %ty = phi i32 [ 0, %lz ], [ %ty1, %ly.next ]\n  store i32 %ty, ptr %ty.p\n  br label %lx\n\
         lx:\n  %tx = phi i32 [ 0, %ly ], [ %tx1, %lx ]\n  store i32 %tx, ptr %c"
    );
    let mut p = parts.to_vec();
    p.push("ptr %err".into());
    p.push("ptr %c".into());
    let _ = writeln!(
        out,
        "  call {} {}({})",
        sig.ret,
        gname(&format!("{}.zx_fast", f.name)),
        p.join(", ")
    );
    let _ = writeln!(
        out,
        "  %tx1 = add nuw nsw i32 %tx, 1\n  %mx = icmp ult i32 %tx1, %bx\n  br i1 %mx, label %lx, label %fs, !llvm.loop !{md}"
    );
    checked_rerun(&mut out, &f.name, fid, ("lx", "fs"), "ly.next", "done");
    let _ = writeln!(
        out,
        "ly.next:\n  %ty1 = add i32 %ty, 1\n  %my = icmp ult i32 %ty1, %by\n  br i1 %my, label %ly, label %lz.next\n\
         lz.next:\n  %tz1 = add i32 %tz, 1\n  %mz = icmp ult i32 %tz1, %bz\n  br i1 %mz, label %lz, label %done"
    );
    let _ = writeln!(out, "done:\n  ret void\n}}");
    out
}

/// The check after threads ran fast (without checks), shared by the fast
/// runner and region fission: or the per-thread fault flags (`%fl`, `%bx`
/// bytes) in a loop at block `at` (entered from block `from`); with no
/// failure and no record go on to `ok`. On a failure, a record a callee
/// wrote (`%err`) stands; else the block runs again checked
/// (`{name}.zx_checked`, stopping at the first failure) to fill the record,
/// and a failure that does not happen again (the first run changed the
/// kernel's inputs) still fails the launch, with the code only (the lowest
/// set in the flags). Both end at `exit`.
pub fn checked_rerun(
    out: &mut String,
    name: &str,
    fid: usize,
    (from, at): (&str, &str),
    ok: &str,
    exit: &str,
) {
    let _ = writeln!(
        out,
        "{at}:\n  %fi = phi i32 [ 0, %{from} ], [ %fi1, %{at} ]\n  %fa = phi i8 [ 0, %{from} ], [ %fa1, %{at} ]\n  \
         %fp = getelementptr i8, ptr %fl, i32 %fi\n  %fv = load i8, ptr %fp\n  %fa1 = or i8 %fa, %fv\n  \
         %fi1 = add i32 %fi, 1\n  %fm = icmp ult i32 %fi1, %bx\n  br i1 %fm, label %{at}, label %{at}.done\n\
         {at}.done:\n  %e = load i64, ptr %err\n  %eb = icmp ne i64 %e, 0\n  %fb = icmp ne i8 %fa1, 0\n  \
         %bad = or i1 %eb, %fb\n  br i1 %bad, label %{at}.slow, label %{ok}\n\
         {at}.slow:\n  br i1 %eb, label %{exit}, label %{at}.rerun\n\
         {at}.rerun:\n  call void {}(ptr %args, ptr %lens, ptr %err, ptr %ctx)\n  \
         %e1 = load i64, ptr %err\n  %e1z = icmp eq i64 %e1, 0\n  br i1 %e1z, label %{at}.generic, label %{exit}\n\
         {at}.generic:\n  %fneg = sub i8 0, %fa1\n  %flow = and i8 %fa1, %fneg\n  %code = zext i8 %flow to i64",
        gname(&format!("{name}.zx_checked"))
    );
    for (k, v) in ["%code", "-1", "-1", "-1", "-1", &fid.to_string()]
        .iter()
        .enumerate()
    {
        let _ = writeln!(
            out,
            "  %g.p{k} = getelementptr i64, ptr %err, i64 {k}\n  store i64 {v}, ptr %g.p{k}"
        );
    }
    let _ = writeln!(out, "  br label %{exit}");
}
