//! Writes PTX for the kernels that `tests/gpu/check_gpu.py` runs on a real GPU
//! and compares with numpy (semantic check of the lowering: shuffle operands,
//! atomics, votes, WMMA layouts, cp.async, integer/cast semantics, math).
//!
//! Usage: `cargo run -p zyntax-llvm --example gpu_kernels -- OUT_DIR [ARCH]`
//! (ARCH defaults to sm_80; the PTX JIT-compiles on any newer GPU).

use zyntax_hir::*;
use zyntax_llvm::{compile_ptx, Options};

fn g(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

fn gid(b: &mut FunctionBuilder) -> ValueId {
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let base = b.mul(bid, bd).unwrap();
    b.add(base, tid).unwrap()
}

fn at(b: &mut FunctionBuilder, p: ValueId, i: ValueId) -> ValueId {
    b.ptr_add(p, i).unwrap()
}

/// saxpy(a, x, y, out, n)
fn saxpy() -> Function {
    let mut b = FunctionBuilder::kernel(
        "saxpy",
        &[
            Type::F32,
            g(Type::F32),
            g(Type::F32),
            g(Type::F32),
            Type::U32,
        ],
    );
    let (a, x, y, o, n) = (b.param(0), b.param(1), b.param(2), b.param(3), b.param(4));
    let i = gid(&mut b);
    let inb = b.cmp(CmpOp::Lt, i, n).unwrap();
    let f = b.begin_if(inb, &[]).unwrap();
    let px = at(&mut b, x, i);
    let py = at(&mut b, y, i);
    let vx = b.load(px).unwrap();
    let vy = b.load(py).unwrap();
    let r = b.fma(a, vx, vy).unwrap();
    let po = at(&mut b, o, i);
    b.store(po, r).unwrap();
    b.end_if(f, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// shfl(in_u32, in_f64, out_idx, out_up, out_down, out_xor, out_f64): one block of 64 threads.
fn shfl() -> Function {
    let mut b = FunctionBuilder::kernel(
        "shfl",
        &[
            g(Type::U32),
            g(Type::F64),
            g(Type::U32),
            g(Type::U32),
            g(Type::U32),
            g(Type::U32),
            g(Type::F64),
        ],
    );
    let p: Vec<ValueId> = (0..7).map(|i| b.param(i)).collect();
    let t = b.thread_idx(Dim::X).unwrap();
    let pin = at(&mut b, p[0], t);
    let v = b.load(pin).unwrap();
    let pd = at(&mut b, p[1], t);
    let d = b.load(pd).unwrap();
    let mask = b.iconst(Type::U32, -1).unwrap();
    let c3 = b.iconst(Type::U32, 3).unwrap();
    let c1 = b.iconst(Type::U32, 1).unwrap();
    let c2 = b.iconst(Type::U32, 2).unwrap();
    let c5 = b.iconst(Type::U32, 5).unwrap();
    let r = [
        b.shfl(ShflMode::Idx, mask, v, c3, 8).unwrap(),
        b.shfl(ShflMode::Up, mask, v, c1, 16).unwrap(),
        b.shfl(ShflMode::Down, mask, v, c2, 32).unwrap(),
        b.shfl(ShflMode::Xor, mask, v, c5, 32).unwrap(),
    ];
    for (k, rv) in r.iter().enumerate() {
        let po = at(&mut b, p[2 + k], t);
        b.store(po, *rv).unwrap();
    }
    let rd = b.shfl(ShflMode::Down, mask, d, c1, 32).unwrap();
    let po = at(&mut b, p[6], t);
    b.store(po, rd).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// atomics(counters u32[8], fsum f32[1], mx i32[1], slots u64[n], olds u64[n], sh_out u32[1])
fn atomics() -> Function {
    let mut b = FunctionBuilder::kernel(
        "atomics",
        &[
            g(Type::U32),
            g(Type::F32),
            g(Type::I32),
            g(Type::U64),
            g(Type::U64),
            g(Type::U32),
        ],
    );
    let (cnt, fsum, mx, slots, olds, shout) = (
        b.param(0),
        b.param(1),
        b.param(2),
        b.param(3),
        b.param(4),
        b.param(5),
    );
    let i = gid(&mut b);
    let one = b.iconst(Type::U32, 1).unwrap();
    let idx: Vec<ValueId> = (0..6).map(|k| b.iconst(Type::U32, k).unwrap()).collect();
    let c0 = at(&mut b, cnt, idx[0]);
    b.atomic(AtomicOp::Add, Scope::Device, c0, one).unwrap();
    let c1 = at(&mut b, cnt, idx[1]);
    b.atomic(AtomicOp::Add, Scope::Block, c1, one).unwrap();
    let c2 = at(&mut b, cnt, idx[2]);
    b.atomic(AtomicOp::Add, Scope::System, c2, one).unwrap();
    let lim = b.iconst(Type::U32, 1000).unwrap();
    let c3 = at(&mut b, cnt, idx[3]);
    b.atomic(AtomicOp::Inc, Scope::Device, c3, lim).unwrap();
    let two = b.iconst(Type::U32, 2).unwrap();
    let c4 = at(&mut b, cnt, idx[4]);
    b.atomic(AtomicOp::Sub, Scope::Device, c4, two).unwrap();
    let m31 = b.iconst(Type::U32, 31).unwrap();
    let sh = b.binary(BinOp::And, i, m31).unwrap();
    let bit = b.binary(BinOp::Shl, one, sh).unwrap();
    let c5 = at(&mut b, cnt, idx[5]);
    b.atomic(AtomicOp::Or, Scope::Block, c5, bit).unwrap();
    let fone = b.fconst(Type::F32, 0.5).unwrap();
    b.atomic(AtomicOp::Add, Scope::Device, fsum, fone).unwrap();
    // mx = max over (i*37 % 1001) - 500
    let k37 = b.iconst(Type::U32, 37).unwrap();
    let k1001 = b.iconst(Type::U32, 1001).unwrap();
    let t = b.mul(i, k37).unwrap();
    let t = b.binary(BinOp::Rem, t, k1001).unwrap();
    let ti = b.cast(t, Type::I32).unwrap();
    let k500 = b.iconst(Type::I32, 500).unwrap();
    let val = b.sub(ti, k500).unwrap();
    let gmx = b
        .ptr_cast(mx, Type::ptr(AddrSpace::Generic, Type::I32))
        .unwrap();
    b.atomic(AtomicOp::Max, Scope::System, gmx, val).unwrap();
    // cas: slot[i] == i ? 2i : unchanged
    let ps = at(&mut b, slots, i);
    let e = b.cast(i, Type::U64).unwrap();
    let d = b.add(e, e).unwrap();
    let old = b.atomic_cas(Scope::Device, ps, e, d).unwrap();
    let po = at(&mut b, olds, i);
    b.store(po, old).unwrap();
    // shared counter per block, summed into sh_out
    let s = b.shared_alloc(Type::U32, 1).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let zero = b.iconst(Type::U32, 0).unwrap();
    let first = b.cmp(CmpOp::Eq, tid, zero).unwrap();
    let f = b.begin_if(first, &[]).unwrap();
    b.store(s, zero).unwrap();
    b.end_if(f, &[]).unwrap();
    b.barrier().unwrap();
    b.atomic(AtomicOp::Add, Scope::Block, s, one).unwrap();
    b.barrier().unwrap();
    let f = b.begin_if(first, &[]).unwrap();
    let total = b.load(s).unwrap();
    b.atomic(AtomicOp::Add, Scope::Device, shout, total)
        .unwrap();
    b.end_if(f, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// vote(in u32, ballot, any, all, many, mall_mask, mall_pred) per thread.
fn vote() -> Function {
    let mut b = FunctionBuilder::kernel("vote", &vec![g(Type::U32); 7]);
    let p: Vec<ValueId> = (0..7).map(|i| b.param(i)).collect();
    let i = gid(&mut b);
    let pin = at(&mut b, p[0], i);
    let v = b.load(pin).unwrap();
    let mask = b.iconst(Type::U32, -1).unwrap();
    let k = b.iconst(Type::U32, 100).unwrap();
    let pred = b.cmp(CmpOp::Gt, v, k).unwrap();
    let ballot = b.vote(VoteMode::Ballot, mask, pred).unwrap();
    let any = b.vote(VoteMode::Any, mask, pred).unwrap();
    let all = b.vote(VoteMode::All, mask, pred).unwrap();
    let many = b.match_(MatchMode::Any, mask, v).unwrap()[0];
    let mall = b.match_(MatchMode::All, mask, v).unwrap();
    let any = b.cast(any, Type::U32).unwrap();
    let all = b.cast(all, Type::U32).unwrap();
    let mp = b.cast(mall[1], Type::U32).unwrap();
    for (n, x) in [ballot, any, all, many, mall[0], mp]
        .into_iter()
        .enumerate()
    {
        let q = at(&mut b, p[n + 1], i);
        b.store(q, x).unwrap();
    }
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// D = A(row) * B(col) + C(row), stored row-major; one warp.
fn wmma(name: &str, elem: ScalarType, acc: ScalarType, shape: MmaShape) -> Function {
    let (m, n, k) = shape.dims();
    let _ = m;
    let mut b = FunctionBuilder::kernel(
        name,
        &[
            g(Type::Scalar(elem)),
            g(Type::Scalar(elem)),
            g(Type::Scalar(acc)),
            g(Type::Scalar(acc)),
        ],
    );
    let (pa, pb, pc, pd) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let lda = b.iconst(Type::U32, i64::from(k)).unwrap(); // A row-major M x K
    let ldb = b.iconst(Type::U32, i64::from(k)).unwrap(); // B col-major K x N: column stride K
    let ldc = b.iconst(Type::U32, i64::from(n)).unwrap(); // C row-major M x N
    let fa = frag_type(FragKind::A, shape, elem, Some(Layout::Row));
    let fb = frag_type(FragKind::B, shape, elem, Some(Layout::Col));
    let fc = frag_type(FragKind::Acc, shape, acc, None);
    let a = b.mma_load(fa, Layout::Row, pa, lda).unwrap();
    let bb = b.mma_load(fb, Layout::Col, pb, ldb).unwrap();
    let c = b.mma_load(fc, Layout::Row, pc, ldc).unwrap();
    let d = b.mma(a, bb, c).unwrap();
    b.mma_store(Layout::Row, pd, d, ldc).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// cp.async 16 bytes per thread into shared, then copy back out (reversed per block).
fn cp_async() -> Function {
    let mut b = FunctionBuilder::kernel("cp_async", &[g(Type::U32), g(Type::U32)]);
    let (src, dst) = (b.param(0), b.param(1));
    let sh = b.shared_alloc(Type::U32, 1024).unwrap();
    let t = b.thread_idx(Dim::X).unwrap();
    let four = b.iconst(Type::U32, 4).unwrap();
    let off = b.mul(t, four).unwrap();
    let ps = at(&mut b, sh, off);
    let pg = at(&mut b, src, off);
    b.cp_async(16, CacheHint::Cg, ps, pg).unwrap();
    b.cp_async_commit().unwrap();
    b.cp_async_wait(0).unwrap();
    b.barrier().unwrap();
    // dst[j] = sh[1023 - j] for j = t*4 .. t*4+3
    let last = b.iconst(Type::U32, 1023).unwrap();
    for q in 0..4 {
        let qv = b.iconst(Type::U32, q).unwrap();
        let j = b.add(off, qv).unwrap();
        let r = b.sub(last, j).unwrap();
        let pr = at(&mut b, sh, r);
        let v = b.load(pr).unwrap();
        let pd = at(&mut b, dst, j);
        b.store(pd, v).unwrap();
    }
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// intops(a i32, b i32, s u32, div, rem, shl, shr, ushr(u32), min, max)
fn intops() -> Function {
    let mut b = FunctionBuilder::kernel(
        "intops",
        &[
            g(Type::I32),
            g(Type::I32),
            g(Type::U32),
            g(Type::I32),
            g(Type::I32),
            g(Type::I32),
            g(Type::I32),
            g(Type::U32),
            g(Type::I32),
            g(Type::I32),
        ],
    );
    let p: Vec<ValueId> = (0..10).map(|i| b.param(i)).collect();
    let i = gid(&mut b);
    let pa = at(&mut b, p[0], i);
    let x = b.load(pa).unwrap();
    let pb = at(&mut b, p[1], i);
    let y = b.load(pb).unwrap();
    let ps = at(&mut b, p[2], i);
    let s = b.load(ps).unwrap();
    let si = b.cast(s, Type::I32).unwrap();
    let xu = b.cast(x, Type::U32).unwrap();
    let results = [
        b.binary(BinOp::Div, x, y).unwrap(),
        b.binary(BinOp::Rem, x, y).unwrap(),
        b.binary(BinOp::Shl, x, si).unwrap(),
        b.binary(BinOp::Shr, x, si).unwrap(),
        b.binary(BinOp::Shr, xu, s).unwrap(),
        b.binary(BinOp::Min, x, y).unwrap(),
        b.binary(BinOp::Max, x, y).unwrap(),
    ];
    for (n, r) in results.into_iter().enumerate() {
        let q = at(&mut b, p[3 + n], i);
        b.store(q, r).unwrap();
    }
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// casts(x f32, to_i32, to_u8, to_f16, to_i64->f32 roundtrip f32, h f16 -> bf16 -> f32)
fn casts() -> Function {
    let mut b = FunctionBuilder::kernel(
        "casts",
        &[
            g(Type::F32),
            g(Type::I32),
            g(Type::U8),
            g(Type::F16),
            g(Type::F32),
            g(Type::F32),
        ],
    );
    let p: Vec<ValueId> = (0..6).map(|i| b.param(i)).collect();
    let i = gid(&mut b);
    let px = at(&mut b, p[0], i);
    let x = b.load(px).unwrap();
    let a = b.cast(x, Type::I32).unwrap();
    let u = b.cast(x, Type::U8).unwrap();
    let h = b.cast(x, Type::F16).unwrap();
    let l = b.cast(a, Type::I64).unwrap();
    let lf = b.cast(l, Type::F32).unwrap();
    let bf = b.cast(h, Type::BF16).unwrap();
    let bff = b.cast(bf, Type::F32).unwrap();
    for (n, r) in [a, u, h, lf, bff].into_iter().enumerate() {
        let q = at(&mut b, p[1 + n], i);
        b.store(q, r).unwrap();
    }
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// math(x f32, y f64, exp, log, sin, cos, tanh, rsqrt, sqrt, sqrt64, exp64, abs)
fn math() -> Function {
    let mut params = vec![g(Type::F32), g(Type::F64)];
    params.extend((0..7).map(|_| g(Type::F32)));
    params.extend([g(Type::F64), g(Type::F64), g(Type::F32)]);
    let mut b = FunctionBuilder::kernel("math", &params);
    let p: Vec<ValueId> = (0..params.len()).map(|i| b.param(i)).collect();
    let i = gid(&mut b);
    let px = at(&mut b, p[0], i);
    let x = b.load(px).unwrap();
    let py = at(&mut b, p[1], i);
    let y = b.load(py).unwrap();
    let ax = b.unary(UnOp::Abs, x).unwrap();
    let one = b.fconst(Type::F32, 1.0).unwrap();
    let pos = b.add(ax, one).unwrap();
    let rs = [
        b.unary(UnOp::Exp, x).unwrap(),
        b.unary(UnOp::Log, pos).unwrap(),
        b.unary(UnOp::Sin, x).unwrap(),
        b.unary(UnOp::Cos, x).unwrap(),
        b.unary(UnOp::Tanh, x).unwrap(),
        b.unary(UnOp::Rsqrt, pos).unwrap(),
        b.unary(UnOp::Sqrt, pos).unwrap(),
    ];
    for (n, r) in rs.into_iter().enumerate() {
        let q = at(&mut b, p[2 + n], i);
        b.store(q, r).unwrap();
    }
    let ay = b.unary(UnOp::Abs, y).unwrap();
    let s64 = b.unary(UnOp::Sqrt, ay).unwrap();
    let e64 = b.unary(UnOp::Exp, y).unwrap();
    let q = at(&mut b, p[9], i);
    b.store(q, s64).unwrap();
    let q = at(&mut b, p[10], i);
    b.store(q, e64).unwrap();
    let q = at(&mut b, p[11], i);
    b.store(q, ax).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// Reverse each block's chunk through dynamic shared memory; then a loop sum.
fn dyn_rev() -> Function {
    let mut b = FunctionBuilder::kernel("dyn_rev", &[g(Type::F32), g(Type::F32), g(Type::F32)]);
    let (src, dst, sums) = (b.param(0), b.param(1), b.param(2));
    let sh = b.dyn_shared(Type::F32).unwrap();
    let t = b.thread_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let i = gid(&mut b);
    let ps = at(&mut b, src, i);
    let v = b.load(ps).unwrap();
    let pt = at(&mut b, sh, t);
    b.store(pt, v).unwrap();
    b.barrier().unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let last = b.sub(bd, one).unwrap();
    let r = b.sub(last, t).unwrap();
    let pr = at(&mut b, sh, r);
    let w = b.load(pr).unwrap();
    let pd = at(&mut b, dst, i);
    b.store(pd, w).unwrap();
    // sums[i] = sum_{j <= t} sh[j] (loop with a carried value)
    let zero = b.iconst(Type::U32, 0).unwrap();
    let fz = b.fconst(Type::F32, 0.0).unwrap();
    let stop = b.add(t, one).unwrap();
    let lp = b.begin_for(zero, stop, one, &[fz]).unwrap();
    let (j, acc) = (lp.iv, lp.carried[0]);
    let pj = at(&mut b, sh, j);
    let x = b.load(pj).unwrap();
    let acc2 = b.add(acc, x).unwrap();
    let out = b.end_for(lp, &[acc2]).unwrap();
    let pq = at(&mut b, sums, i);
    b.store(pq, out[0]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: gpu_kernels OUT_DIR [ARCH]");
        std::process::exit(2);
    };
    let arch = args
        .get(2)
        .and_then(|a| Arch::from_name(a))
        .unwrap_or(Arch::Sm80);
    std::fs::create_dir_all(dir).expect("create OUT_DIR");
    let mut m = Module::new("gpu_check");
    m.functions = vec![
        saxpy(),
        shfl(),
        atomics(),
        vote(),
        wmma(
            "wmma_f16_f32",
            ScalarType::F16,
            ScalarType::F32,
            MmaShape::M16N16K16,
        ),
        wmma(
            "wmma_f16_f16",
            ScalarType::F16,
            ScalarType::F16,
            MmaShape::M16N16K16,
        ),
        wmma(
            "wmma_f16_m32n8k16",
            ScalarType::F16,
            ScalarType::F32,
            MmaShape::M32N8K16,
        ),
        wmma(
            "wmma_bf16_f32",
            ScalarType::BF16,
            ScalarType::F32,
            MmaShape::M16N16K16,
        ),
        wmma(
            "wmma_bf16_m8n32k16",
            ScalarType::BF16,
            ScalarType::F32,
            MmaShape::M8N32K16,
        ),
        cp_async(),
        intops(),
        casts(),
        math(),
        dyn_rev(),
    ];
    match compile_ptx(&m, &Options::new(arch)) {
        Ok(out) => {
            let path = std::path::Path::new(dir).join("gpu_check.ptx");
            std::fs::write(&path, out.ptx).expect("write PTX");
            println!("{}", path.display());
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
