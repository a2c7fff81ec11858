//! The CI workloads: a 1M-element saxpy and a 64x64x64 MMA-tiled product,
//! checked for correctness, and (in release builds) for time.

mod common;

use common::*;
use half::f16;
use std::time::{Duration, Instant};
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};

/// C = A * B for n x n matrices (n a multiple of 16): one warp per 16x16 tile
/// of C, looping over k in steps of 16 with the accumulator carried.
pub fn mma_gemm() -> Module {
    let g = |t: Type| Type::ptr(AddrSpace::Global, t);
    let mut b = FunctionBuilder::kernel(
        "gemm",
        &[g(Type::F16), g(Type::F16), g(Type::F32), Type::U32],
    );
    let (pa, pb, pc, n) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let shape = MmaShape::M16N16K16;
    let fa = frag_type(FragKind::A, shape, ScalarType::F16, Some(Layout::Row));
    let fb = frag_type(FragKind::B, shape, ScalarType::F16, Some(Layout::Row));
    let fc = frag_type(FragKind::Acc, shape, ScalarType::F32, None);
    let c16 = b.iconst(Type::U32, 16).unwrap();
    let row = b.block_idx(Dim::Y).unwrap();
    let col = b.block_idx(Dim::X).unwrap();
    let r16 = b.mul(row, c16).unwrap();
    let arow = b.mul(r16, n).unwrap(); // row*16*n
    let bcol = b.mul(col, c16).unwrap(); // col*16
    let zero = b.fconst(Type::F32, 0.0).unwrap();
    let acc0 = b.mma_fill(fc, zero).unwrap();
    let k0 = b.iconst(Type::U32, 0).unwrap();
    let fr = b.begin_for(k0, n, c16, &[acc0]).unwrap();
    let k = fr.iv;
    let acc = fr.carried[0];
    let ao = b.add(arow, k).unwrap();
    let ap = b.ptr_add(pa, ao).unwrap();
    let a = b.mma_load(fa, Layout::Row, ap, n).unwrap();
    let kn = b.mul(k, n).unwrap();
    let bo = b.add(kn, bcol).unwrap();
    let bp = b.ptr_add(pb, bo).unwrap();
    let bf = b.mma_load(fb, Layout::Row, bp, n).unwrap();
    let acc2 = b.mma(a, bf, acc).unwrap();
    let out = b.end_for(fr, &[acc2]).unwrap();
    let co = b.add(arow, bcol).unwrap();
    let cp = b.ptr_add(pc, co).unwrap();
    b.mma_store(Layout::Row, cp, out[0], n).unwrap();
    b.ret(&[]).unwrap();
    let mut m = Module::new("mma_gemm");
    m.targets = vec![Arch::from_name("sm_80").unwrap()];
    m.functions.push(b.finish().unwrap());
    m
}

fn limit() -> Duration {
    // Debug builds are only checked for correctness.
    if cfg!(debug_assertions) {
        Duration::from_secs(600)
    } else {
        Duration::from_secs(3)
    }
}

#[test]
fn saxpy_one_million() {
    let m = example("saxpy");
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(31);
    let n = 1_000_000u32;
    let a = rng.f32(-2.0, 2.0);
    let x: Vec<f32> = (0..n).map(|_| rng.f32(-1.0, 1.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.f32(-1.0, 1.0)).collect();
    let mut bufs = vec![f32_bytes(&x), f32_bytes(&y)];
    let args = [
        Arg::Int(n.into()),
        Arg::Float(a.into()),
        Arg::Buffer(0),
        Arg::Buffer(1),
    ];
    let t = Instant::now();
    it.launch(
        "saxpy",
        [n.div_ceil(256), 1, 1],
        [256, 1, 1],
        0,
        &args,
        &mut bufs,
    )
    .unwrap();
    let dt = t.elapsed();
    let got = bytes_f32(&bufs[1]);
    for i in (0..n as usize).step_by(997) {
        assert_eq!(got[i], a.mul_add(x[i], y[i]));
    }
    assert!(dt < limit(), "saxpy 1M took {dt:?}");
    eprintln!("saxpy 1M: {dt:?}");
}

#[test]
fn mma_gemm_64() {
    let m = mma_gemm();
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(32);
    let n = 64usize;
    let a: Vec<f16> = (0..n * n)
        .map(|_| f16::from_f32(rng.f32(-1.0, 1.0)))
        .collect();
    let b: Vec<f16> = (0..n * n)
        .map(|_| f16::from_f32(rng.f32(-1.0, 1.0)))
        .collect();
    let mut bufs = vec![f16_bytes(&a), f16_bytes(&b), vec![0u8; n * n * 4]];
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(n as i128),
    ];
    let t = Instant::now();
    let tiles = (n / 16) as u32;
    it.launch("gemm", [tiles, tiles, 1], [32, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    let dt = t.elapsed();
    let c = bytes_f32(&bufs[2]);
    for i in 0..n {
        for j in 0..n {
            // Per k-tile: f64 sum rounded once to f32 (the accumulator).
            let mut acc = 0f32;
            for kt in (0..n).step_by(16) {
                let mut s = f64::from(acc);
                for k in kt..kt + 16 {
                    s += a[i * n + k].to_f64() * b[k * n + j].to_f64();
                }
                acc = s as f32;
            }
            assert_eq!(c[i * n + j], acc, "({i},{j})");
            let exact: f64 = (0..n)
                .map(|k| a[i * n + k].to_f64() * b[k * n + j].to_f64())
                .sum();
            assert!((f64::from(c[i * n + j]) - exact).abs() < 1e-4);
        }
    }
    assert!(dt < limit(), "mma gemm took {dt:?}");
    eprintln!("mma gemm 64: {dt:?}");
}
