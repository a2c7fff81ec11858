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
