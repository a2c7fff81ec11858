//! One kernel per GPU primitive: FileCheck-style substring checks on the PTX,
//! and ptxas -Werror on every arch the primitive is available on.

mod common;

use common::*;
use zyntax_hir::*;

fn gptr(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

/// out[i] = a * x[i] + y[i] for i < n, the usual saxpy.
fn saxpy() -> Module {
    let mut b = FunctionBuilder::kernel(
        "saxpy",
        &[
            Type::F32,
            gptr(Type::F32),
            gptr(Type::F32),
            gptr(Type::F32),
            Type::U32,
        ],
    );
    let (a, x, y, out, n) = (b.param(0), b.param(1), b.param(2), b.param(3), b.param(4));
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let bdim = b.block_dim(Dim::X).unwrap();
    let base = b.mul(bid, bdim).unwrap();
    let i = b.add(base, tid).unwrap();
    let inb = b.cmp(CmpOp::Lt, i, n).unwrap();
    let frame = b.begin_if(inb, &[]).unwrap();
    let px = b.ptr_add(x, i).unwrap();
    let py = b.ptr_add(y, i).unwrap();
    let vx = b.load(px).unwrap();
    let vy = b.load(py).unwrap();
    let r = b.fma(a, vx, vy).unwrap();
    let po = b.ptr_add(out, i).unwrap();
    b.store(po, r).unwrap();
    b.end_if(frame, &[]).unwrap();
    b.ret(&[]).unwrap();
    module("saxpy", vec![b.finish().unwrap()])
}

#[test]
fn saxpy_all_archs() {
    for (arch, ptx) in check_archs(&saxpy(), Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                &format!(".target {}", arch.name()),
                ".visible .entry saxpy(",
                "%tid.x",
                "ld.global.f32",
                "fma.rn.f32",
                "st.global.f32",
            ],
        );
    }
}

fn kernel(name: &str, params: &[Type]) -> FunctionBuilder {
    FunctionBuilder::kernel(name, params)
}

fn finish(b: FunctionBuilder) -> Module {
    let name = b.name().to_string();
    let mut b = b;
    b.ret(&[]).unwrap();
    module(&name, vec![b.finish().unwrap()])
}

/// Warp sum with shfl.down, written by lane 0.
#[test]
fn shfl_down_reduction() {
    let mut b = kernel("warp_sum", &[gptr(Type::F32), gptr(Type::F32)]);
    let (inp, out) = (b.param(0), b.param(1));
    let tid = b.thread_idx(Dim::X).unwrap();
    let p = b.ptr_add(inp, tid).unwrap();
    let mut v = b.load(p).unwrap();
    let mask = b.iconst(Type::U32, -1).unwrap();
    for delta in [16, 8, 4, 2, 1] {
        let d = b.iconst(Type::U32, delta).unwrap();
        let o = b.shfl(ShflMode::Down, mask, v, d, 32).unwrap();
        v = b.add(v, o).unwrap();
    }
    let lane = b.lane_id().unwrap();
    let zero = b.iconst(Type::U32, 0).unwrap();
    let first = b.cmp(CmpOp::Eq, lane, zero).unwrap();
    let f = b.begin_if(first, &[]).unwrap();
    b.store(out, v).unwrap();
    b.end_if(f, &[]).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        // width 32, clamp 31: c = 0x1f
        assert_in_order(&ptx, &["shfl.sync.down.b32", "31, -1;", "%laneid"]);
    }
}

/// popc, clz, brev and bfind on 32- and 64-bit integers: PTX's bit instructions.
#[test]
fn bit_ops() {
    for t in [Type::U32, Type::I64] {
        let mut b = kernel("bits", &[gptr(t.clone()), gptr(t.clone())]);
        let (inp, out) = (b.param(0), b.param(1));
        let tid = b.thread_idx(Dim::X).unwrap();
        let x = b.ptr_add(inp, tid).unwrap();
        let x = b.load(x).unwrap();
        for (n, op) in [UnOp::Popc, UnOp::Clz, UnOp::Brev, UnOp::Bfind]
            .into_iter()
            .enumerate()
        {
            let r = b.unary(op, x).unwrap();
            let four = b.iconst(Type::U32, 4).unwrap();
            let i = b.mul(tid, four).unwrap();
            let k = b.iconst(Type::U32, n as i64).unwrap();
            let i = b.add(i, k).unwrap();
            let p = b.ptr_add(out, i).unwrap();
            b.store(p, r).unwrap();
        }
        let w = t.size_bytes().unwrap() * 8;
        for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
            // bfind is `width - 1 - clz`, sharing the clz of `clz`.
            for needle in ["popc.b", "clz.b", "brev.b"] {
                assert_in_order(&ptx, &[&format!("{needle}{w}")]);
            }
            assert_in_order(&ptx, &[&format!("clz.b{w}"), &format!("sub.s{w}")]);
        }
    }
}

#[test]
fn shfl_modes_and_widths() {
    let mut b = kernel("shfl_all", &[gptr(Type::U32), gptr(Type::F64)]);
    let (pi, pd) = (b.param(0), b.param(1));
    let x = b.load(pi).unwrap();
    let y = b.load(pd).unwrap();
    let mask = b.iconst(Type::U32, 0xffff).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let a = b.shfl(ShflMode::Idx, mask, x, one, 32).unwrap();
    let c = b.shfl(ShflMode::Up, mask, a, one, 16).unwrap();
    let e = b.shfl(ShflMode::Xor, mask, c, one, 8).unwrap();
    let f64v = b.shfl(ShflMode::Down, mask, y, one, 4).unwrap();
    b.store(pi, e).unwrap();
    b.store(pd, f64v).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        // c operand = ((32 - width) << 8) | clamp
        assert_in_order(&ptx, &["shfl.sync.idx.b32", "1, 31, 65535;"]);
        assert_in_order(&ptx, &["shfl.sync.up.b32", "1, 4096, 65535;"]);
        assert_in_order(&ptx, &["shfl.sync.bfly.b32", "1, 6175, 65535;"]);
        // A 64-bit value moves as two 32-bit shuffles.
        assert_in_order(
            &ptx,
            &[
                "shfl.sync.down.b32",
                "7199, 65535;",
                "shfl.sync.down.b32",
                "7199, 65535;",
            ],
        );
    }
}

fn atomic_kernel(space: AddrSpace, scope: Scope, op: AtomicOp, t: Type) -> Module {
    let name = format!(
        "atomic_{}_{}_{}_{}",
        space.name(),
        scope.name(),
        op.name(),
        t
    );
    let mut b = kernel(&name, &[gptr(t.clone()), gptr(t.clone())]);
    let (p, out) = (b.param(0), b.param(1));
    let target = match space {
        AddrSpace::Global => p,
        AddrSpace::Generic => b
            .ptr_cast(p, Type::ptr(AddrSpace::Generic, t.clone()))
            .unwrap(),
        AddrSpace::Shared => b.shared_alloc(t.clone(), 32).unwrap(),
        _ => unreachable!(),
    };
    let v = b.load(out).unwrap();
    let old = b.atomic(op, scope, target, v).unwrap();
    b.store(out, old).unwrap();
    finish(b)
}

#[test]
fn atomic_scopes_are_explicit_in_ptx() {
    for (scope, s) in [
        (Scope::Block, "cta"),
        (Scope::Device, "gpu"),
        (Scope::System, "sys"),
    ] {
        let m = atomic_kernel(AddrSpace::Global, scope, AtomicOp::Add, Type::U32);
        for (_, ptx) in check_archs(&m, Arch::Sm70) {
            assert_in_order(&ptx, &[&format!("atom.{s}.global.add.u32")]);
        }
        let m = atomic_kernel(AddrSpace::Generic, scope, AtomicOp::Max, Type::I64);
        for (_, ptx) in check_archs(&m, Arch::Sm70) {
            assert_in_order(&ptx, &[&format!("atom.{s}.max.s64")]);
        }
        let m = atomic_kernel(AddrSpace::Global, scope, AtomicOp::Min, Type::U32);
        for (_, ptx) in check_archs(&m, Arch::Sm70) {
            assert_in_order(&ptx, &[&format!("atom.{s}.global.min.u32")]);
        }
    }
}

#[test]
fn shared_atomics_use_atom_shared() {
    for (op, t, needle) in [
        (AtomicOp::Add, Type::U32, "atom.shared.add.u32"),
        (AtomicOp::Add, Type::F32, "atom.shared.add.f32"),
        (AtomicOp::Max, Type::I32, "atom.shared.max.s32"),
        (AtomicOp::Min, Type::U64, "atom.shared.min.u64"),
        (AtomicOp::Inc, Type::U32, "atom.shared.inc.u32"),
        (AtomicOp::Dec, Type::U32, "atom.shared.dec.u32"),
        (AtomicOp::Exch, Type::F32, "atom.shared.exch.b32"),
    ] {
        let m = atomic_kernel(AddrSpace::Shared, Scope::Block, op, t);
        for (_, ptx) in check_archs(&m, Arch::Sm70) {
            assert_in_order(&ptx, &[needle]);
        }
    }
}

#[test]
fn atomic_sub_is_add_of_negation() {
    let m = atomic_kernel(AddrSpace::Global, Scope::Device, AtomicOp::Sub, Type::I32);
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(&ptx, &["neg.s32", "atom.gpu.global.add.u32"]);
    }
}

#[test]
fn atomic_cas_scoped() {
    for (scope, s) in [
        (Scope::Block, "cta"),
        (Scope::Device, "gpu"),
        (Scope::System, "sys"),
    ] {
        let mut b = kernel("cas", &[gptr(Type::U64), gptr(Type::U64)]);
        let (p, out) = (b.param(0), b.param(1));
        let e = b.load(out).unwrap();
        let one = b.iconst(Type::U64, 1).unwrap();
        let d = b.add(e, one).unwrap();
        let old = b.atomic_cas(scope, p, e, d).unwrap();
        b.store(out, old).unwrap();
        for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
            assert_in_order(&ptx, &[&format!("atom.{s}.global.cas.b64")]);
        }
    }
}

#[test]
fn half_atomics_gated() {
    let m = atomic_kernel(AddrSpace::Global, Scope::Device, AtomicOp::Add, Type::F16);
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(&ptx, &["atom.gpu.global.add.noftz.f16"]);
    }
    let m = atomic_kernel(AddrSpace::Global, Scope::Block, AtomicOp::Add, Type::BF16);
    for (_, ptx) in check_archs(&m, Arch::Sm90) {
        assert_in_order(&ptx, &["atom.cta.global.add.noftz.bf16"]);
    }
    let err = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm80)).unwrap_err();
    assert!(matches!(err, zyntax_llvm::CompileError::Verify(_)), "{err}");
}

#[test]
fn barriers_fences_warp_sync() {
    let mut b = kernel("sync", &[gptr(Type::U32)]);
    let p = b.param(0);
    b.barrier().unwrap();
    b.fence(Scope::Block).unwrap();
    b.fence(Scope::Device).unwrap();
    b.fence(Scope::System).unwrap();
    let mask = b.load(p).unwrap();
    b.warp_sync(mask).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                "bar.sync 	0;",
                "membar.cta;",
                "membar.gl;",
                "membar.sys;",
                "bar.warp.sync",
            ],
        );
    }
}

#[test]
fn vote_and_match() {
    let mut b = kernel(
        "vote_match",
        &[gptr(Type::U32), gptr(Type::U64), gptr(Type::U32)],
    );
    let (p, q, out) = (b.param(0), b.param(1), b.param(2));
    let x = b.load(p).unwrap();
    let y = b.load(q).unwrap();
    let mask = b.iconst(Type::U32, -1).unwrap();
    let zero = b.iconst(Type::U32, 0).unwrap();
    let pred = b.cmp(CmpOp::Ne, x, zero).unwrap();
    let ballot = b.vote(VoteMode::Ballot, mask, pred).unwrap();
    let any = b.vote(VoteMode::Any, mask, pred).unwrap();
    let all = b.vote(VoteMode::All, mask, pred).unwrap();
    let m_any = b.match_(MatchMode::Any, mask, x).unwrap()[0];
    let m_all = b.match_(MatchMode::All, mask, y).unwrap();
    let s1 = b.select(any, ballot, m_any).unwrap();
    let s2 = b.select(all, s1, m_all[0]).unwrap();
    let s3 = b.select(m_all[1], s2, zero).unwrap();
    b.store(out, s3).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        assert_in_order(&ptx, &["vote.sync.ballot.b32"]);
        assert_in_order(&ptx, &["vote.sync.any.pred"]);
        assert_in_order(&ptx, &["vote.sync.all.pred"]);
        assert_in_order(&ptx, &["match.any.sync.b32"]);
        assert_in_order(&ptx, &["match.all.sync.b64"]);
    }
}

fn wmma_kernel(
    elem: ScalarType,
    acc: ScalarType,
    shape: MmaShape,
    la: Layout,
    lb: Layout,
    space: AddrSpace,
) -> Module {
    let name = format!(
        "wmma_{}_{}_{}_{}_{}_{}",
        elem,
        acc,
        shape.name(),
        la.name(),
        lb.name(),
        space.name()
    );
    let mut b = kernel(
        &name,
        &[
            gptr(Type::Scalar(elem)),
            gptr(Type::Scalar(elem)),
            gptr(Type::Scalar(acc)),
        ],
    );
    let (pa, pb, pc) = (b.param(0), b.param(1), b.param(2));
    let (pa, pb) = match space {
        AddrSpace::Global => (pa, pb),
        AddrSpace::Generic => (
            b.ptr_cast(pa, Type::ptr(AddrSpace::Generic, Type::Scalar(elem)))
                .unwrap(),
            b.ptr_cast(pb, Type::ptr(AddrSpace::Generic, Type::Scalar(elem)))
                .unwrap(),
        ),
        AddrSpace::Shared => {
            let s = b.shared_alloc(Type::Scalar(elem), 512).unwrap();
            let off = b.iconst(Type::U32, 256).unwrap();
            (s, b.ptr_add(s, off).unwrap())
        }
        _ => unreachable!(),
    };
    let ld = b.iconst(Type::U32, 16).unwrap();
    let fa = frag_type(FragKind::A, shape, elem, Some(la));
    let fb = frag_type(FragKind::B, shape, elem, Some(lb));
    let fc = frag_type(FragKind::Acc, shape, acc, None);
    let a = b.mma_load(fa, la, pa, ld).unwrap();
    let bb = b.mma_load(fb, lb, pb, ld).unwrap();
    let c = b.mma_load(fc, Layout::Row, pc, ld).unwrap();
    let d = b.mma(a, bb, c).unwrap();
    b.mma_store(Layout::Col, pc, d, ld).unwrap();
    finish(b)
}

#[test]
fn wmma_f16_m16n16k16() {
    let m = wmma_kernel(
        ScalarType::F16,
        ScalarType::F32,
        MmaShape::M16N16K16,
        Layout::Row,
        Layout::Col,
        AddrSpace::Global,
    );
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                "wmma.load.a.sync.aligned.row.m16n16k16.global.f16",
                "wmma.load.b.sync.aligned.col.m16n16k16.global.f16",
                "wmma.load.c.sync.aligned.row.m16n16k16.global.f32",
                "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32",
                "wmma.store.d.sync.aligned.col.m16n16k16.global.f32",
            ],
        );
    }
    let m = wmma_kernel(
        ScalarType::F16,
        ScalarType::F16,
        MmaShape::M32N8K16,
        Layout::Col,
        Layout::Row,
        AddrSpace::Shared,
    );
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                "wmma.load.a.sync.aligned.col.m32n8k16.shared.f16",
                "wmma.mma.sync.aligned.col.row.m32n8k16.f16.f16",
            ],
        );
    }
}

#[test]
fn wmma_bf16_needs_sm80() {
    let m = wmma_kernel(
        ScalarType::BF16,
        ScalarType::F32,
        MmaShape::M16N16K16,
        Layout::Row,
        Layout::Row,
        AddrSpace::Generic,
    );
    for (_, ptx) in check_archs(&m, Arch::Sm80) {
        assert_in_order(
            &ptx,
            &[
                "wmma.load.a.sync.aligned.row.m16n16k16.bf16",
                "wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32",
            ],
        );
    }
    let err = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm75)).unwrap_err();
    assert!(matches!(err, zyntax_llvm::CompileError::Verify(_)), "{err}");
}

#[test]
fn mma_fill_accumulator() {
    let mut b = kernel("fill", &[gptr(Type::F16)]);
    let p = b.param(0);
    let zero = b.fconst(Type::F16, 0.5).unwrap();
    let fc = frag_type(FragKind::Acc, MmaShape::M16N16K16, ScalarType::F16, None);
    let c = b.mma_fill(fc, zero).unwrap();
    let ld = b.iconst(Type::U32, 16).unwrap();
    b.mma_store(Layout::Row, p, c, ld).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        assert_in_order(
            &ptx,
            &["wmma.store.d.sync.aligned.row.m16n16k16.global.f16"],
        );
    }
}

#[test]
fn cp_async_variants() {
    let mut b = kernel("cp", &[gptr(Type::F32)]);
    let src = b.param(0);
    let s = b.shared_alloc(Type::F32, 64).unwrap();
    b.cp_async(16, CacheHint::Cg, s, src).unwrap();
    b.cp_async(16, CacheHint::Ca, s, src).unwrap();
    b.cp_async(8, CacheHint::Ca, s, src).unwrap();
    b.cp_async(4, CacheHint::Ca, s, src).unwrap();
    b.cp_async_commit().unwrap();
    b.cp_async_wait(0).unwrap();
    b.barrier().unwrap();
    let v = b.load(s).unwrap();
    b.store(src, v).unwrap();
    let m = finish(b);
    for (_, ptx) in check_archs(&m, Arch::Sm80) {
        assert_in_order(
            &ptx,
            &[
                "cp.async.cg.shared.global [",
                "], 16;",
                "cp.async.ca.shared.global [",
                "], 16;",
                "cp.async.ca.shared.global [",
                "], 8;",
                "cp.async.ca.shared.global [",
                "], 4;",
                "cp.async.commit_group;",
                "cp.async.wait_group 0;",
            ],
        );
    }
    assert!(zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm75)).is_err());
}

#[test]
fn kernel_annotations() {
    let mut b = kernel("bounded", &[gptr(Type::U32)]);
    if let Some(k) = b.kernel_info_mut() {
        k.max_threads = Some([128, 2, 1]);
        k.min_blocks = Some(4);
        k.max_registers = Some(64);
    }
    let p = b.param(0);
    let t = b.thread_idx(Dim::X).unwrap();
    b.store(p, t).unwrap();
    let m = finish(b);
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                ".visible .entry bounded(",
                ".maxntid 128, 2, 1",
                ".minnctapersm 4",
                ".maxnreg 64",
                "{",
            ],
        );
    }
    let ir = zyntax_llvm::emit_llvm(&m, &zyntax_llvm::Options::new(Arch::Sm80)).unwrap();
    assert!(ir.contains("define ptx_kernel void @bounded"), "{ir}");
    assert!(ir.contains("!\"maxntidx\", i32 128"), "{ir}");
    assert!(ir.contains("!\"kernel\", i32 1"), "{ir}");
}

#[test]
fn shared_memory_static_and_dynamic() {
    let mut b = kernel("smem", &[gptr(Type::F32)]);
    let p = b.param(0);
    let s = b.shared_alloc(Type::F32, 256).unwrap();
    let d = b.dyn_shared(Type::F32).unwrap();
    let t = b.thread_idx(Dim::X).unwrap();
    let ps = b.ptr_add(s, t).unwrap();
    let pd = b.ptr_add(d, t).unwrap();
    let v = b.load(p).unwrap();
    b.store(ps, v).unwrap();
    b.barrier().unwrap();
    let w = b.load(ps).unwrap();
    b.store(pd, w).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[".extern .shared .align 16 .b8 __zyntax_dyn_shared[];"],
        );
        assert_in_order(
            &ptx,
            &[".shared .align 16 .b8 __zyntax_shared_smem_0[1024];"],
        );
        assert_in_order(
            &ptx,
            &[
                "st.shared.f32",
                "bar.sync",
                "ld.shared.f32",
                "st.shared.f32",
            ],
        );
    }
}

#[test]
fn special_registers() {
    let mut b = kernel("sregs", &[gptr(Type::U32)]);
    let p = b.param(0);
    let mut acc = b.lane_id().unwrap();
    for d in [Dim::X, Dim::Y, Dim::Z] {
        for v in [
            b.thread_idx(d),
            b.block_idx(d),
            b.block_dim(d),
            b.grid_dim(d),
        ] {
            acc = b.add(acc, v.unwrap()).unwrap();
        }
    }
    b.store(p, acc).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        for r in [
            "%laneid",
            "%tid.x",
            "%tid.y",
            "%tid.z",
            "%ctaid.x",
            "%ctaid.z",
            "%ntid.y",
            "%nctaid.x",
            "%nctaid.z",
        ] {
            assert_in_order(&ptx, &[r]);
        }
    }
}

/// `constant` pointers are read-only global memory: `ld.global.nc`.
#[test]
fn constant_pointers_load_through_the_read_only_path() {
    let mut b = kernel(
        "ro",
        &[Type::ptr(AddrSpace::Constant, Type::F32), gptr(Type::F32)],
    );
    let (c, o) = (b.param(0), b.param(1));
    let t = b.thread_idx(Dim::X).unwrap();
    let pc = b.ptr_add(c, t).unwrap();
    let v = b.load(pc).unwrap();
    let gen = b
        .ptr_cast(pc, Type::ptr(AddrSpace::Generic, Type::F32))
        .unwrap();
    let w = b.load(gen).unwrap();
    let s = b.add(v, w).unwrap();
    let po = b.ptr_add(o, t).unwrap();
    b.store(po, s).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        assert_in_order(&ptx, &["ld.global.nc.f32"]);
        assert_not(&ptx, "ld.const");
    }
}

/// A kernel pinned to an arch appears only in that arch's PTX.
#[test]
fn kernel_arch_pin_selects_kernels() {
    let mut a = kernel("everywhere", &[gptr(Type::U32)]);
    let p = a.param(0);
    let t = a.thread_idx(Dim::X).unwrap();
    a.store(p, t).unwrap();
    let mut h = kernel("hopper_only", &[gptr(Type::U32)]);
    if let Some(k) = h.kernel_info_mut() {
        k.arch = Some(Arch::Sm90);
    }
    let p = h.param(0);
    let t = h.thread_idx(Dim::Y).unwrap();
    h.store(p, t).unwrap();
    a.ret(&[]).unwrap();
    h.ret(&[]).unwrap();
    let m = module("pinned", vec![a.finish().unwrap(), h.finish().unwrap()]);
    let p80 = compile_checked(&m, Arch::Sm80);
    assert!(
        p80.contains(".entry everywhere(") && !p80.contains("hopper_only"),
        "{p80}"
    );
    let out = compile(&m, Arch::Sm90);
    assert!(out.ptx.contains(".entry hopper_only("), "{}", out.ptx);
    assert_eq!(
        out.kernels,
        vec!["everywhere".to_string(), "hopper_only".to_string()]
    );
}

/// `Options::llvm_ir` off: no IR printed, the same PTX.
#[test]
fn options_without_llvm_ir_give_the_same_ptx() {
    use zyntax_llvm::{compile_ptx, emit_llvm, Options};
    let m = saxpy();
    let with = compile_ptx(&m, &Options::new(Arch::Sm80)).unwrap();
    let without = compile_ptx(&m, &Options::new(Arch::Sm80).with_llvm_ir(false)).unwrap();
    assert!(with.llvm_ir.contains("define") && without.llvm_ir.is_empty());
    assert_eq!(with.ptx, without.ptx);
    // emit_llvm always prints it
    let ir = emit_llvm(&m, &Options::new(Arch::Sm80).with_llvm_ir(false)).unwrap();
    assert_eq!(ir, with.llvm_ir);
}

/// Options: PTX version override and its checks; timings are filled in.
#[test]
fn options_ptx_version_and_timings() {
    use zyntax_llvm::{compile_ptx, CompileError, Options};
    let m = saxpy();
    let out = compile_ptx(
        &m,
        &Options::new(Arch::Sm80).with_ptx_version(PtxVersion::new(8, 3)),
    )
    .unwrap();
    assert!(out.ptx.contains(".version 8.3"));
    ptxas().assemble(&out.ptx, Arch::Sm80).unwrap();
    assert!(out.timings.total() > std::time::Duration::ZERO);
    assert_eq!(out.timings.stages().len(), 6);
    let err = compile_ptx(
        &m,
        &Options::new(Arch::Sm90).with_ptx_version(PtxVersion::new(7, 0)),
    )
    .unwrap_err();
    assert!(
        matches!(err, CompileError::Verify(_) | CompileError::Unsupported(_)),
        "{err}"
    );
    assert!(!err.is_internal());
    let err = compile_ptx(
        &m,
        &Options::new(Arch::Sm80).with_ptx_version(PtxVersion::new(9, 0)),
    )
    .unwrap_err();
    assert!(!err.is_internal(), "{err}");
    // O0 keeps the direct lowering visible in the IR.
    let ir =
        zyntax_llvm::emit_llvm(&m, &Options::new(Arch::Sm80).with_opt_level(OptLevel::O0)).unwrap();
    assert!(ir.contains("call float @llvm.fma.f32"), "{ir}");
    assert!(ir.contains("@llvm.nvvm.read.ptx.sreg.tid.x"), "{ir}");
}

/// Division by zero traps; signed MIN / -1 is guarded.
#[test]
fn integer_division_is_guarded() {
    let mut b = kernel("divs", &[gptr(Type::I32), gptr(Type::I32)]);
    let (p, q) = (b.param(0), b.param(1));
    let x = b.load(p).unwrap();
    let y = b.load(q).unwrap();
    let d = b.binary(BinOp::Div, x, y).unwrap();
    b.store(p, d).unwrap();
    for (_, ptx) in check_archs(&finish(b), Arch::Sm70) {
        assert_in_order(&ptx, &["setp.eq.s32", "trap;"]);
        assert_in_order(&ptx, &["div.s32"]);
    }
}

// ------------------------------------------------------------------ Hopper barriers (issue 13)

/// One mbarrier driven through every op: sm_80 forms, then the sm_90
/// transaction-count forms and the async-proxy fences; `ptxas -Werror` on each arch.
fn mbarrier_kernel(tx: bool) -> Module {
    let mut b = kernel("mbar", &[gptr(Type::U32)]);
    let out = b.param(0);
    let bar = b.shared_alloc(Type::U64, 1).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    b.mbarrier(MbarrierOp::Init, &[bar, one]).unwrap();
    if tx {
        b.fence_mbarrier_init().unwrap();
    }
    b.barrier().unwrap();
    let st = if tx {
        let bytes = b.iconst(Type::U32, 128).unwrap();
        let st = b
            .mbarrier(MbarrierOp::ArriveExpectTx, &[bar, bytes])
            .unwrap()
            .unwrap();
        b.mbarrier(MbarrierOp::CompleteTx, &[bar, bytes]).unwrap();
        b.fence_proxy_async().unwrap();
        let zero = b.iconst(Type::U32, 0).unwrap();
        let hint = b.iconst(Type::U32, 1000).unwrap();
        let done = b
            .mbarrier(MbarrierOp::TryWaitParity, &[bar, zero, hint])
            .unwrap()
            .unwrap();
        let v = b.cast(done, Type::U32).unwrap();
        b.store(out, v).unwrap();
        st
    } else {
        b.mbarrier(MbarrierOp::Arrive, &[bar]).unwrap().unwrap()
    };
    let done = b
        .mbarrier(MbarrierOp::TestWait, &[bar, st])
        .unwrap()
        .unwrap();
    let v = b.cast(done, Type::U32).unwrap();
    b.store(out, v).unwrap();
    b.barrier().unwrap();
    b.mbarrier(MbarrierOp::Inval, &[bar]).unwrap();
    finish(b)
}

#[test]
fn mbarrier_ops() {
    for (_, ptx) in check_archs(&mbarrier_kernel(false), Arch::Sm80) {
        assert_in_order(
            &ptx,
            &[
                "mbarrier.init.shared.b64 [",
                "mbarrier.arrive.shared.b64 ",
                "mbarrier.test_wait.shared.b64 ",
                "mbarrier.inval.shared.b64 [",
            ],
        );
    }
    let m = mbarrier_kernel(true);
    for (_, ptx) in check_archs(&m, Arch::Sm90) {
        assert_in_order(
            &ptx,
            &[
                "mbarrier.init.shared.b64 [",
                "fence.mbarrier_init.release.cluster;",
                "mbarrier.arrive.expect_tx.shared::cta.b64 ",
                "mbarrier.complete_tx.shared::cta.b64 [",
                "fence.proxy.async.shared::cta;",
                "mbarrier.try_wait.parity.shared::cta.b64 ",
                "mbarrier.test_wait.shared.b64 ",
                "mbarrier.inval.shared.b64 [",
            ],
        );
    }
    // Gated by name before LLVM: the tx forms need sm_90, mbarrier itself sm_80.
    let e = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm89))
        .unwrap_err()
        .to_string();
    assert!(e.contains("mbarrier transaction counts needs sm_90"), "{e}");
    let e = zyntax_llvm::compile_ptx(
        &mbarrier_kernel(false),
        &zyntax_llvm::Options::new(Arch::Sm75),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("mbarrier needs sm_80"), "{e}");
}

/// Launch bounds never leak between modules: `emit_llvm` of a kernel with
/// `max_threads(32, 1, 1)` used to leave LLVM's annotation cache holding them
/// for the next module at the same address, which then got `.maxntid 32`
/// and `max(tid.x, 100)` folded to 100 (about 1 in 10 attempts).
#[test]
fn launch_bounds_do_not_leak_between_modules() {
    use zyntax_llvm::{compile_ptx, emit_llvm, Options};
    let bounded = parse_module(
        "module \"a\"\nkernel @ka max_threads(32, 1, 1) {\nblock0(v0: ptr<global, u32>):\n    \
         v1: u32 = thread_idx.x\n    store v0, v1\n    return\n}\n",
    )
    .unwrap();
    let free = parse_module(
        "module \"b\"\nkernel @kb {\nblock0(v0: ptr<global, u32>):\n    v1: u32 = thread_idx.x\n    \
         v2: u32 = const 100\n    v3: bool = cmp.lt v1, v2\n    v4: u32 = select v3, v2, v1\n    \
         store v0, v4\n    return\n}\n",
    )
    .unwrap();
    let opts = Options::new(Arch::Sm80);
    let expected = compile_ptx(&free, &opts).unwrap().ptx;
    assert!(
        !expected.contains(".maxntid") && expected.contains("%tid.x"),
        "{expected}"
    );
    for _ in 0..200 {
        emit_llvm(&bounded, &opts).unwrap();
        assert_eq!(compile_ptx(&free, &opts).unwrap().ptx, expected);
    }
}
