//! Warp collectives (`shfl`, `vote`, `warp_sync`, `elect_sync`) in CPU kernels.
//!
//! A collective exchanges values between the lanes of a warp mid-region, so
//! it is a suspend point like a barrier, but per warp (see [`super::regions`]
//! for the coroutine lowering). Before suspending, a thread writes its
//! operands into its context after the state word — the collective's kind,
//! member mask, lane operand (or predicate), width and value (64 bits) — and
//! a state of `COLLECTIVE | (inst + 1)`. The block runner handles collectives
//! before barriers: it takes the first waiting collective, collects per warp
//! which lanes wait at it (the group) and their ballot, computes every
//! waiting thread's result into its context, and resumes those threads.
//!
//! The results follow the interpreter (`zyntax-interp/src/warp.rs`): a lane's
//! effective mask is its mask within the group; a shuffle whose source lane is
//! outside the width segment, out of range or not in the effective mask
//! returns the lane's own value; `vote` reduces the ballot over the effective
//! mask. A mask naming a lane of the block that is not waiting at the same
//! collective (it returned, or waits elsewhere) is an error
//! ([`ERR_COLLECTIVE`]), where the interpreter would wait for it forever.

use super::lower::vty;
use super::regions::CTX_STATE;
use std::fmt::Write as _;
use zyntax_hir::{
    Function, InstData, InstId, MatchMode, Op, ReduxOp, ScalarType, ShflMode, Type, VoteMode,
};

/// State bit marking a thread waiting at a warp collective (not a barrier).
pub const COLLECTIVE: u32 = 0x8000_0000;
/// Error code: a collective's mask names a lane that is not at it.
pub const ERR_COLLECTIVE: i64 = 32;
/// Offsets from the state word of a thread's collective operands and result.
const OFF_KIND: u64 = 4;
const OFF_MASK: u64 = 8;
const OFF_LANE: u64 = 12;
const OFF_WIDTH: u64 = 16;
const OFF_VAL: u64 = 24;
const OFF_RESULT: u64 = 32;
/// Bytes after the state word used by collectives.
pub const BYTES: u64 = 40;

/// Whether the instruction `d` of `f` is a collective the CPU runs natively:
/// `vote`, or `shfl` of a scalar of at most 64 bits with a valid width.
pub fn supported(f: &Function, d: &InstData) -> bool {
    let value = d.args.get(1).and_then(|v| f.values.get(v.index()));
    match &d.op {
        Op::Vote(_) | Op::WarpSync | Op::ElectSync => true,
        // redux: 32-bit integers; match.any: any scalar of at most 64 bits
        // (match.all has two results: not yet).
        Op::Redux(_) => value
            .and_then(|v| v.ty.as_scalar())
            .is_some_and(|s| matches!(s, ScalarType::U32 | ScalarType::I32)),
        Op::Match(MatchMode::Any) => value
            .and_then(|v| v.ty.as_scalar())
            .is_some_and(|s| s.size_bytes() <= 8),
        Op::Shfl { width, .. } => {
            width.is_power_of_two()
                && *width <= 32
                && value
                    .and_then(|v| v.ty.as_scalar())
                    .is_some_and(|s| s.size_bytes() <= 8)
        }
        _ => false,
    }
}

/// Whether the kernel `f` contains a collective lowered natively.
pub fn has_collective(f: &Function) -> bool {
    f.insts_in_order()
        .any(|(_, i)| f.insts.get(i.index()).is_some_and(|d| supported(f, d)))
}

fn kind(op: &Op) -> (u32, u32) {
    match op {
        Op::Shfl { mode, width } => (
            match mode {
                ShflMode::Idx => 0,
                ShflMode::Up => 1,
                ShflMode::Down => 2,
                ShflMode::Xor => 3,
            },
            *width,
        ),
        Op::Vote(VoteMode::Ballot) => (4, 32),
        Op::Vote(VoteMode::Any) => (5, 32),
        Op::Vote(VoteMode::All) => (6, 32),
        Op::WarpSync => (7, 32),
        Op::ElectSync => (8, 32),
        // Unsigned min/max; signed ones are the next kind (see `Suspend::new`).
        Op::Redux(r) => (
            match r {
                ReduxOp::Add => 9,
                ReduxOp::Min => 10,
                ReduxOp::Max => 12,
                ReduxOp::And => 14,
                ReduxOp::Or => 15,
                ReduxOp::Xor => 16,
            },
            32,
        ),
        _ => (17, 32), // match.any
    }
}

/// Bits of a scalar, for moving it through a 64-bit slot.
fn bits(s: ScalarType) -> u32 {
    if s == ScalarType::Bool {
        1
    } else {
        8 * s.size_bytes() as u32
    }
}

fn scalar(t: &Type) -> Result<(String, ScalarType), String> {
    match (t.as_scalar(), vty(t)) {
        (Some(s), Some(l)) if s.size_bytes() <= 8 => Ok((l, s)),
        _ => Err(format!(
            "type {t} cannot take part in a warp collective on the CPU"
        )),
    }
}

/// What a suspend point of a CPU kernel emits around `llvm.coro.suspend`.
pub struct Suspend {
    /// Instructions before the suspend (a collective's operands).
    pub before: Vec<String>,
    /// The thread's state while suspended.
    pub state: u32,
    /// Instructions after the resume (a collective's result).
    pub after: Vec<String>,
}

impl Suspend {
    /// The instructions up to the suspend; the thread resumes at `resume`.
    pub fn up_to_suspend(&self, i: InstId, resume: &str) -> Vec<String> {
        let mut lines = self.before.clone();
        lines.extend(super::regions::suspend(i, self.state, resume));
        lines
    }

    /// The suspend point `op` at `i` (a barrier or a collective), with its
    /// operands as (LLVM operand, type) and its result `r` of type `rty`.
    pub fn new(
        i: InstId,
        op: &Op,
        ops: &[(String, Type)],
        r: &str,
        rty: Option<&Type>,
    ) -> Result<Suspend, String> {
        if matches!(op, Op::Barrier) {
            return Ok(Suspend {
                before: Vec::new(),
                state: i.0 + 1,
                after: Vec::new(),
            });
        }
        let p = format!("%zx.w{}", i.0);
        let operand = |k: usize| {
            ops.get(k)
                .ok_or_else(|| format!("`{}` is missing operand {k}", op.mnemonic()))
        };
        let (mut kind, width) = kind(op);
        if let Op::Redux(ReduxOp::Min | ReduxOp::Max) = op {
            if ops.get(1).is_some_and(|(_, t)| *t == Type::I32) {
                kind += 1;
            }
        }
        let mut before = Vec::new();
        let slot = |out: &mut Vec<String>, name: &str, off: u64, ty: &str, val: &str| {
            out.push(format!(
                "{p}.{name}.p = getelementptr i8, ptr %zx.state, i64 {off}"
            ));
            out.push(format!("store {ty} {val}, ptr {p}.{name}.p"));
        };
        slot(&mut before, "k", OFF_KIND, "i32", &kind.to_string());
        if matches!(op, Op::ElectSync | Op::WarpSync) {
            // elect.sync: the whole warp; warp_sync: its mask. No lane
            // operand, no value; warp_sync has no result either.
            let mask = match op {
                Op::WarpSync => operand(0)?.0.clone(),
                _ => "-1".to_string(),
            };
            slot(&mut before, "m", OFF_MASK, "i32", &mask);
            slot(&mut before, "l", OFF_LANE, "i32", "0");
            slot(&mut before, "w", OFF_WIDTH, "i32", &width.to_string());
            let mut after = Vec::new();
            if let Op::ElectSync = op {
                after.push(format!(
                    "{p}.r.p = getelementptr i8, ptr %zx.state, i64 {OFF_RESULT}"
                ));
                after.push(format!("{p}.r = load i64, ptr {p}.r.p"));
                after.push(format!("{r} = trunc i64 {p}.r to i1"));
            }
            return Ok(Suspend {
                before,
                state: COLLECTIVE | (i.0 + 1),
                after,
            });
        }
        slot(&mut before, "m", OFF_MASK, "i32", &operand(0)?.0);
        // shfl: the lane operand (i32); vote: the predicate (i1); redux and
        // match: none.
        if matches!(op, Op::Redux(_) | Op::Match(_)) {
            slot(&mut before, "l", OFF_LANE, "i32", "0");
        } else {
            let (lane, lane_ty) = operand(if matches!(op, Op::Shfl { .. }) { 2 } else { 1 })?;
            let (lane_llty, lane_s) = scalar(lane_ty)?;
            let widen = if bits(lane_s) < 32 { "zext" } else { "trunc" };
            if bits(lane_s) == 32 {
                before.push(format!("{p}.l = add i32 {lane}, 0"));
            } else {
                before.push(format!("{p}.l = {widen} {lane_llty} {lane} to i32"));
            }
            slot(&mut before, "l", OFF_LANE, "i32", &format!("{p}.l"));
        }
        slot(&mut before, "w", OFF_WIDTH, "i32", &width.to_string());
        if matches!(op, Op::Shfl { .. } | Op::Redux(_) | Op::Match(_)) {
            let (v, vt) = operand(1)?;
            let (vllty, vs) = scalar(vt)?;
            let nb = bits(vs);
            let int = if vs.is_float() {
                before.push(format!("{p}.vb = bitcast {vllty} {v} to i{nb}"));
                format!("{p}.vb")
            } else {
                v.clone()
            };
            if nb < 64 {
                before.push(format!("{p}.v = zext i{nb} {int} to i64"));
            } else {
                before.push(format!("{p}.v = add i64 {int}, 0"));
            }
            slot(&mut before, "v", OFF_VAL, "i64", &format!("{p}.v"));
        }
        let (rllty, rs) = scalar(rty.ok_or_else(|| format!("`{}` has no result", op.mnemonic()))?)?;
        let nb = bits(rs);
        let mut after = vec![
            format!("{p}.r.p = getelementptr i8, ptr %zx.state, i64 {OFF_RESULT}"),
            format!("{p}.r = load i64, ptr {p}.r.p"),
        ];
        let int = if nb < 64 {
            after.push(format!("{p}.rt = trunc i64 {p}.r to i{nb}"));
            format!("{p}.rt")
        } else {
            format!("{p}.r")
        };
        if rs.is_float() {
            after.push(format!("{r} = bitcast i{nb} {int} to {rllty}"));
        } else {
            after.push(format!("{r} = add i{nb} {int}, 0"));
        }
        Ok(Suspend {
            before,
            state: COLLECTIVE | (i.0 + 1),
            after,
        })
    }
}

/// The block runner's collective step, entered at `w.scan` from its `phase`
/// block; goes to `scan` (the barrier step) when no thread waits at a
/// collective, back to `phase` after resuming the threads of one, and to
/// `abort` on an error. Needs `%ctxs`, `%hs`, `%n`, `%err` and the per-warp
/// arrays `%w.group`, `%w.ballot` of `%w.nw64` entries from the runner.
pub fn runner_step(out: &mut String, cb: u64, fid: usize) {
    let st = CTX_STATE;
    // Per-thread context field `off` (from the state word) of thread `t`.
    let field = |out: &mut String, t: &str, name: &str, off: u64, ty: &str| {
        let _ = writeln!(
            out,
            "  %{name}.t64 = zext i32 {t} to i64\n  %{name}.o = mul i64 %{name}.t64, {cb}\n  \
             %{name}.o2 = add i64 %{name}.o, {}\n  %{name}.p = getelementptr i8, ptr %ctxs, i64 %{name}.o2\n  \
             %{name} = load {ty}, ptr %{name}.p",
            st + off
        );
    };
    // Find the first thread waiting at a collective.
    let _ = writeln!(
        out,
        "w.scan:\n  %wa = phi i32 [ 0, %phase ], [ %wa1, %w.scan.next ]"
    );
    field(out, "%wa", "wsa", 0, "i32");
    let _ = writeln!(
        out,
        "  %wsa.c = and i32 %wsa, {COLLECTIVE}\n  %wsa.is = icmp ne i32 %wsa.c, 0\n  \
         br i1 %wsa.is, label %w.found, label %w.scan.next\n\
         w.scan.next:\n  %wa1 = add i32 %wa, 1\n  %wa.more = icmp ult i32 %wa1, %n\n  \
         br i1 %wa.more, label %w.scan, label %scan"
    );
    // The group and ballot of every warp at that collective.
    let _ = writeln!(
        out,
        "w.found:\n  %wc = add i32 %wsa, 0\n  %w.bytes = mul i64 %w.nw64, 4\n  \
         call void @llvm.memset.p0.i64(ptr %w.group, i8 0, i64 %w.bytes, i1 false)\n  \
         call void @llvm.memset.p0.i64(ptr %w.ballot, i8 0, i64 %w.bytes, i1 false)\n  br label %w.gather"
    );
    let _ = writeln!(
        out,
        "w.gather:\n  %wg = phi i32 [ 0, %w.found ], [ %wg1, %w.gather.next ]"
    );
    field(out, "%wg", "wsg", 0, "i32");
    let _ = writeln!(
        out,
        "  %wsg.at = icmp eq i32 %wsg, %wc\n  br i1 %wsg.at, label %w.gather.add, label %w.gather.next\n\
         w.gather.add:"
    );
    field(out, "%wg", "wpg", OFF_LANE, "i32");
    let _ = writeln!(
        out,
        "  %wg.w = lshr i32 %wg, 5\n  %wg.w64 = zext i32 %wg.w to i64\n  %wg.l = and i32 %wg, 31\n  \
         %wg.bit = shl i32 1, %wg.l\n  %wg.gp = getelementptr i32, ptr %w.group, i64 %wg.w64\n  \
         %wg.g = load i32, ptr %wg.gp\n  %wg.g1 = or i32 %wg.g, %wg.bit\n  store i32 %wg.g1, ptr %wg.gp\n  \
         %wg.pb = and i32 %wpg, 1\n  %wg.pbit = shl i32 %wg.pb, %wg.l\n  \
         %wg.bp = getelementptr i32, ptr %w.ballot, i64 %wg.w64\n  %wg.b = load i32, ptr %wg.bp\n  \
         %wg.b1 = or i32 %wg.b, %wg.pbit\n  store i32 %wg.b1, ptr %wg.bp\n  br label %w.gather.next\n\
         w.gather.next:\n  %wg1 = add i32 %wg, 1\n  %wg.more = icmp ult i32 %wg1, %n\n  \
         br i1 %wg.more, label %w.gather, label %w.compute.start\n\
         w.compute.start:\n  br label %w.compute"
    );
    // Every waiting thread's result.
    let _ = writeln!(
        out,
        "w.compute:\n  %wt = phi i32 [ 0, %w.compute.start ], [ %wt1, %w.compute.next ]"
    );
    field(out, "%wt", "wst", 0, "i32");
    let _ = writeln!(
        out,
        "  %wst.at = icmp eq i32 %wst, %wc\n  br i1 %wst.at, label %w.one, label %w.compute.next\nw.one:"
    );
    field(out, "%wt", "wk", OFF_KIND, "i32");
    field(out, "%wt", "wm", OFF_MASK, "i32");
    field(out, "%wt", "wb", OFF_LANE, "i32");
    field(out, "%wt", "ww", OFF_WIDTH, "i32");
    let _ = writeln!(
        out,
        "  %w.wi = lshr i32 %wt, 5\n  %w.wi64 = zext i32 %w.wi to i64\n  %w.l = and i32 %wt, 31\n  \
         %w.base = sub i32 %wt, %w.l\n  %w.gp = getelementptr i32, ptr %w.group, i64 %w.wi64\n  \
         %w.g = load i32, ptr %w.gp\n  %w.bp = getelementptr i32, ptr %w.ballot, i64 %w.wi64\n  \
         %w.bal = load i32, ptr %w.bp\n  %w.mm = and i32 %wm, %w.g"
    );
    // Lanes of this warp that exist in the block: a mask naming one that is
    // not in the group waits for a lane that never comes.
    let _ = writeln!(
        out,
        "  %w.rem = sub i32 %n, %w.base\n  %w.full = icmp uge i32 %w.rem, 32\n  \
         %w.rbit = shl i32 1, %w.rem\n  %w.rmask = sub i32 %w.rbit, 1\n  \
         %w.exist = select i1 %w.full, i32 -1, i32 %w.rmask\n  %w.named = and i32 %wm, %w.exist\n  \
         %w.absent = xor i32 %w.g, -1\n  %w.miss = and i32 %w.named, %w.absent\n  \
         %w.bad = icmp ne i32 %w.miss, 0\n  br i1 %w.bad, label %w.error, label %w.ok\nw.ok:"
    );
    // Shuffle source lane, as in the interpreter.
    let _ = writeln!(
        out,
        "  %w.b = and i32 %wb, 31\n  %w.s0 = sub i32 32, %ww\n  %w.seg = and i32 %w.s0, 31\n  \
         %w.nseg = xor i32 %w.seg, -1\n  %w.nseg31 = and i32 %w.nseg, 31\n  \
         %w.isup = icmp eq i32 %wk, 1\n  %w.cval = select i1 %w.isup, i32 0, i32 31\n  \
         %w.lo = and i32 %w.l, %w.seg\n  %w.hi = and i32 %w.cval, %w.nseg31\n  %w.max = or i32 %w.lo, %w.hi\n  \
         %w.jup = sub i32 %w.l, %w.b\n  %w.okup = icmp sge i32 %w.jup, %w.max\n  \
         %w.jdn = add i32 %w.l, %w.b\n  %w.okdn = icmp sle i32 %w.jdn, %w.max\n  \
         %w.jx = xor i32 %w.l, %w.b\n  %w.okx = icmp sle i32 %w.jx, %w.max\n  \
         %w.bi = and i32 %w.b, %w.nseg31\n  %w.ji = or i32 %w.lo, %w.bi\n  %w.oki = icmp sle i32 %w.ji, %w.max\n  \
         %w.k1 = icmp eq i32 %wk, 1\n  %w.k2 = icmp eq i32 %wk, 2\n  %w.k3 = icmp eq i32 %wk, 3\n  \
         %w.j12 = select i1 %w.k1, i32 %w.jup, i32 %w.jdn\n  %w.ok12 = select i1 %w.k1, i1 %w.okup, i1 %w.okdn\n  \
         %w.j123 = select i1 %w.k3, i32 %w.jx, i32 %w.j12\n  %w.ok123 = select i1 %w.k3, i1 %w.okx, i1 %w.ok12\n  \
         %w.shf = or i1 %w.k1, %w.k2\n  %w.shf3 = or i1 %w.shf, %w.k3\n  \
         %w.j = select i1 %w.shf3, i32 %w.j123, i32 %w.ji\n  %w.okj = select i1 %w.shf3, i1 %w.ok123, i1 %w.oki\n  \
         %w.ge0 = icmp sge i32 %w.j, 0\n  %w.lt32 = icmp slt i32 %w.j, 32\n  %w.inr = and i1 %w.ge0, %w.lt32\n  \
         %w.js = select i1 %w.inr, i32 %w.j, i32 0\n  %w.mmj = lshr i32 %w.mm, %w.js\n  \
         %w.mmj1 = trunc i32 %w.mmj to i1\n  %w.ok0 = and i1 %w.okj, %w.inr\n  %w.take = and i1 %w.ok0, %w.mmj1\n  \
         %w.srcl = add i32 %w.base, %w.js\n  %w.src = select i1 %w.take, i32 %w.srcl, i32 %wt"
    );
    field(out, "%w.src", "wv", OFF_VAL, "i64");
    // Votes over the ballot within the effective mask.
    let _ = writeln!(
        out,
        "  %w.bb = and i32 %w.bal, %w.mm\n  %w.any = icmp ne i32 %w.bb, 0\n  %w.all = icmp eq i32 %w.bb, %w.mm\n  \
         %w.bbl = zext i32 %w.bb to i64\n  %w.anyl = zext i1 %w.any to i64\n  %w.alll = zext i1 %w.all to i64\n  \
         %w.k4 = icmp eq i32 %wk, 4\n  %w.k5 = icmp eq i32 %wk, 5\n  \
         %w.v56 = select i1 %w.k5, i64 %w.anyl, i64 %w.alll\n  %w.vote = select i1 %w.k4, i64 %w.bbl, i64 %w.v56\n  \
         %w.lead = call i32 @llvm.cttz.i32(i32 %w.mm, i1 false)\n  %w.iselect = icmp eq i32 %w.l, %w.lead\n  \
         %w.electl = zext i1 %w.iselect to i64\n  %w.k8 = icmp eq i32 %wk, 8\n  \
         %w.vote8 = select i1 %w.k8, i64 %w.electl, i64 %w.vote\n  \
         %w.isshfl = icmp ult i32 %wk, 4\n  %w.res = select i1 %w.isshfl, i64 %wv, i64 %w.vote8\n  \
         %w.ro = add i64 %wst.o2, {OFF_RESULT}\n  %w.rp = getelementptr i8, ptr %ctxs, i64 %w.ro\n  \
         %w.isloop = icmp uge i32 %wk, 9\n  br i1 %w.isloop, label %w.lp.start, label %w.store"
    );
    // redux and match.any: a loop over the lanes of the effective mask.
    let _ = writeln!(
        out,
        "w.lp.start:\n  %w.own.o = add i64 %wst.o2, {OFF_VAL}\n  %w.own.p = getelementptr i8, ptr %ctxs, i64 %w.own.o\n  \
         %w.own = load i64, ptr %w.own.p\n  %w.i10 = icmp eq i32 %wk, 10\n  %w.i11 = icmp eq i32 %wk, 11\n  \
         %w.i13 = icmp eq i32 %wk, 13\n  %w.i14 = icmp eq i32 %wk, 14\n  %w.iall = or i1 %w.i10, %w.i14\n  \
         %w.in0 = select i1 %w.iall, i32 -1, i32 0\n  %w.in1 = select i1 %w.i11, i32 2147483647, i32 %w.in0\n  \
         %w.init = select i1 %w.i13, i32 -2147483648, i32 %w.in1\n  br label %w.lp\n\
         w.lp:\n  %w.q = phi i32 [ 0, %w.lp.start ], [ %w.q1, %w.lp.next ]\n  \
         %w.acc = phi i32 [ %w.init, %w.lp.start ], [ %w.acc2, %w.lp.next ]\n  \
         %w.qb = lshr i32 %w.mm, %w.q\n  %w.qb1 = trunc i32 %w.qb to i1\n  br i1 %w.qb1, label %w.lp.in, label %w.lp.next\n\
         w.lp.in:\n  %w.qt = add i32 %w.base, %w.q"
    );
    field(out, "%w.qt", "wjv", OFF_VAL, "i64");
    let _ = writeln!(
        out,
        "  %w.qv = trunc i64 %wjv to i32\n  %w.c9 = add i32 %w.acc, %w.qv\n  \
         %w.c10 = call i32 @llvm.umin.i32(i32 %w.acc, i32 %w.qv)\n  %w.c11 = call i32 @llvm.smin.i32(i32 %w.acc, i32 %w.qv)\n  \
         %w.c12 = call i32 @llvm.umax.i32(i32 %w.acc, i32 %w.qv)\n  %w.c13 = call i32 @llvm.smax.i32(i32 %w.acc, i32 %w.qv)\n  \
         %w.c14 = and i32 %w.acc, %w.qv\n  %w.c15 = or i32 %w.acc, %w.qv\n  %w.c16 = xor i32 %w.acc, %w.qv\n  \
         %w.eq = icmp eq i64 %wjv, %w.own\n  %w.qbit = shl i32 1, %w.q\n  %w.cm = or i32 %w.acc, %w.qbit\n  \
         %w.c17 = select i1 %w.eq, i32 %w.cm, i32 %w.acc\n  \
         switch i32 %wk, label %w.lp.m [ i32 9, label %w.lp.9 i32 10, label %w.lp.10 i32 11, label %w.lp.11 \
         i32 12, label %w.lp.12 i32 13, label %w.lp.13 i32 14, label %w.lp.14 i32 15, label %w.lp.15 i32 16, label %w.lp.16 ]"
    );
    for k in 9..=16 {
        let _ = writeln!(out, "w.lp.{k}:\n  br label %w.lp.next");
    }
    let _ = writeln!(
        out,
        "w.lp.m:\n  br label %w.lp.next\n\
         w.lp.next:\n  %w.acc2 = phi i32 [ %w.acc, %w.lp ], [ %w.c9, %w.lp.9 ], [ %w.c10, %w.lp.10 ], \
         [ %w.c11, %w.lp.11 ], [ %w.c12, %w.lp.12 ], [ %w.c13, %w.lp.13 ], [ %w.c14, %w.lp.14 ], \
         [ %w.c15, %w.lp.15 ], [ %w.c16, %w.lp.16 ], [ %w.c17, %w.lp.m ]\n  \
         %w.q1 = add i32 %w.q, 1\n  %w.qmore = icmp ult i32 %w.q1, 32\n  br i1 %w.qmore, label %w.lp, label %w.lp.done\n\
         w.lp.done:\n  %w.accl = zext i32 %w.acc2 to i64\n  br label %w.store\n\
         w.store:\n  %w.fin = phi i64 [ %w.res, %w.ok ], [ %w.accl, %w.lp.done ]\n  \
         store i64 %w.fin, ptr %w.rp\n  br label %w.compute.next"
    );
    let _ = writeln!(
        out,
        "w.compute.next:\n  %wt1 = add i32 %wt, 1\n  %wt.more = icmp ult i32 %wt1, %n\n  \
         br i1 %wt.more, label %w.compute, label %w.resume.start\nw.resume.start:\n  br label %w.resume"
    );
    // Resume the threads at the collective.
    let _ = writeln!(
        out,
        "w.resume:\n  %wr = phi i32 [ 0, %w.resume.start ], [ %wr1, %w.resume.next ]"
    );
    field(out, "%wr", "wsr", 0, "i32");
    let _ = writeln!(
        out,
        "  %wsr.at = icmp eq i32 %wsr, %wc\n  br i1 %wsr.at, label %w.resume.go, label %w.resume.next\n\
         w.resume.go:\n  %wr.hp = getelementptr ptr, ptr %hs, i64 %wsr.t64\n  %wr.h = load ptr, ptr %wr.hp\n  \
         call void @llvm.coro.resume(ptr %wr.h)\n  %wr.e = load i64, ptr %err\n  %wr.bad = icmp ne i64 %wr.e, 0\n  \
         br i1 %wr.bad, label %abort, label %w.resume.next\n\
         w.resume.next:\n  %wr1 = add i32 %wr, 1\n  %wr.more = icmp ult i32 %wr1, %n\n  \
         br i1 %wr.more, label %w.resume, label %phase"
    );
    // A lane named in the mask is not at the collective: report the first.
    let _ = writeln!(
        out,
        "w.error:\n  %w.first = call i32 @llvm.cttz.i32(i32 %w.miss, i1 true)\n  \
         %w.missing = add i32 %w.base, %w.first\n  %w.missing64 = zext i32 %w.missing to i64\n  \
         %w.inst = and i32 %wc, {}\n  %w.inst0 = sub i32 %w.inst, 1\n  %w.inst64 = zext i32 %w.inst0 to i64",
        !COLLECTIVE
    );
    for (k, v) in [
        ERR_COLLECTIVE.to_string(),
        "-1".into(),
        "%w.missing64".into(),
        "%wst.t64".into(),
        "%w.inst64".into(),
        fid.to_string(),
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(
            out,
            "  %we.p{k} = getelementptr i64, ptr %err, i64 {k}\n  store i64 {v}, ptr %we.p{k}"
        );
    }
    let _ = writeln!(out, "  br label %abort");
}

/// Declarations the collective step needs.
pub const RUNNER_DECLS: [&str; 6] = [
    "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
    "declare i32 @llvm.cttz.i32(i32, i1)",
    "declare i32 @llvm.umin.i32(i32, i32)",
    "declare i32 @llvm.smin.i32(i32, i32)",
    "declare i32 @llvm.umax.i32(i32, i32)",
    "declare i32 @llvm.smax.i32(i32, i32)",
];
