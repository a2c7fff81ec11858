//! `dot` on tensor cores (`mma.sync.m16n8k16`, f16 and bf16 operands, f32
//! accumulation) on the interpreter, which implements PTX's fragment layouts
//! and `ldmatrix`: GEMMs at odd and even sizes over 4 and 8 warps against an
//! f64 reference of the rounded inputs (c starts as NaN), and the schedule
//! checks of `dot_path`.

mod common;
use common::*;
use half::{bf16, f16};
use zyntax_hir::{Arch, Type};
use zyntax_tile::{DotPath, Layout, Schedule, TileBuilder, TileError, TileKernel, TileResult};

fn gemm(schedule: Schedule, elem: Type) -> TileResult<TileKernel> {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    // Views declared unit-stride and 16-byte aligned: operands load and the
    // accumulator stores (pairs of f32 from its fragments) as vectors.
    let a = t.view_param_aligned("a", elem.clone(), 2, 1, 16);
    let b = t.view_param_aligned("b", elem, 2, 1, 16);
    let c = t.view_param_aligned("c", Type::F32, 2, 1, 16);
    let (pm, pn) = (t.program_id(0), t.program_id(1));
    let (cbm, cbn, cbk, zero) = (t.index(bm), t.index(bn), t.index(bk), t.index(0));
    let (m0, n0) = (t.scalar_mul(pm, cbm), t.scalar_mul(pn, cbn));
    let k = t.dim(a, 1);
    let acc0 = t.full(&[bm, bn], Type::F32, 0.0);
    let acc = t.for_range(zero, k, cbk, &[acc0.into()], |t, k0, carried| {
        let a_tile = t.load(a, &[m0, k0], &[bm, bk]);
        let b_tile = t.load(b, &[k0, n0], &[bk, bn]);
        vec![t.dot(a_tile, b_tile, carried[0].tile()).into()]
    });
    t.store(c, &[m0, n0], acc[0].tile());
    t.finish()
}

/// Whether every `dot` of the kernel got the `mma.sync` layout, and nothing
/// is converted through shared memory.
fn on_tensor_cores(kernel: &TileKernel) -> bool {
    let mma = kernel
        .layouts
        .of
        .iter()
        .any(|l| matches!(l, Some(Layout::Mma(_))));
    let text = zyntax_hir::print_module(&kernel.module);
    mma && text.contains("mma.sync") && text.contains("ldmatrix") && text.contains("vec<f32, 2>")
}

/// Random values rounded to `elem` (f16 or bf16): the bytes and the exact values.
fn rounded(rng: &mut Rng, n: u32, elem: &Type) -> (Vec<u8>, Vec<f64>) {
    let v = rng.vec(n as usize);
    if *elem == Type::BF16 {
        let h: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
        (
            h.iter().flat_map(|x| x.to_le_bytes()).collect(),
            h.iter().map(|x| x.to_f64()).collect(),
        )
    } else {
        let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
        (
            h.iter().flat_map(|x| x.to_le_bytes()).collect(),
            h.iter().map(|x| x.to_f64()).collect(),
        )
    }
}

fn check(schedule: Schedule, elem: Type, (m, n, k): (u32, u32, u32), rng: &mut Rng) {
    let kernel = gemm(schedule.clone(), elem.clone()).unwrap();
    assert!(on_tensor_cores(&kernel), "{schedule:?}: not on mma.sync");
    let (ab, a64) = rounded(rng, m * k, &elem);
    let (bb, b64) = rounded(rng, k * n, &elem);
    let mut bufs = vec![ab, bb, bytes(&vec![f32::NAN; (m * n) as usize])];
    let args = [
        row_major(0, &[m, k]),
        row_major(1, &[k, n]),
        row_major(2, &[m, n]),
    ];
    run(
        &kernel,
        schedule.grid(&[m.into(), n.into()]).unwrap(),
        &args,
        &mut bufs,
    );
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let want: Vec<f64> = (0..mu * nu)
        .map(|e| {
            let (i, j) = (e / nu, e % nu);
            (0..ku).map(|kk| a64[i * ku + kk] * b64[kk * nu + j]).sum()
        })
        .collect();
    // Products of rounded inputs are exact in f32; only the f32 sums round.
    let what = format!("{elem} {m}x{n}x{k} {schedule:?}");
    assert_close(&floats(&bufs[2]), &want, 1e-5, &what);
}

#[test]
fn mma_gemm_at_odd_sizes() {
    let mut rng = Rng::new();
    for elem in [Type::BF16, Type::F16] {
        for warps in [4, 8] {
            // 16x16 tiles: 4 and 8 warps replicate along M; owners store.
            let s = Schedule::block(&[16, 16]).k(16).warps(warps);
            check(s, elem.clone(), (17, 33, 9), &mut rng);
            let s = Schedule::block(&[32, 64]).k(32).warps(warps);
            check(s, elem.clone(), (17, 33, 9), &mut rng);
        }
    }
}

#[test]
fn mma_gemm_64_cubed() {
    let mut rng = Rng::new();
    for elem in [Type::BF16, Type::F16] {
        for warps in [4, 8] {
            let s = Schedule::block(&[64, 64]).k(32).warps(warps);
            check(s, elem.clone(), (64, 64, 64), &mut rng);
        }
    }
}

#[test]
fn mma_gemm_128x128x64_in_one_tile() {
    let mut rng = Rng::new();
    for elem in [Type::BF16, Type::F16] {
        for warps in [4, 8] {
            let s = Schedule::block(&[128, 128]).k(32).warps(warps);
            check(s, elem.clone(), (128, 128, 64), &mut rng);
        }
    }
}

#[test]
fn auto_keeps_ffma_where_mma_does_not_apply() {
    // f32 operands, sm_70, and a K step of 8 all stay on FFMA under `auto`.
    let cases = [
        (Schedule::block(&[32, 32]).k(16), Type::F32),
        (
            Schedule::block(&[32, 32]).k(16).arch(Arch::Sm70),
            Type::BF16,
        ),
        (Schedule::block(&[32, 32]).k(8), Type::F16),
    ];
    for (s, elem) in cases {
        let kernel = gemm(s.clone(), elem).unwrap();
        assert!(!on_tensor_cores(&kernel), "{s:?}");
    }
}

#[test]
fn mma_sync_demanded_where_it_does_not_apply_is_an_error() {
    let cases = [
        (Schedule::block(&[32, 32]).k(16), Type::F32, "f16 or bf16"),
        (
            Schedule::block(&[32, 32]).k(16).arch(Arch::Sm70),
            Type::BF16,
            "sm_80",
        ),
        (Schedule::block(&[32, 32]).k(8), Type::F16, "multiples"),
    ];
    for (s, elem, why) in cases {
        match gemm(s.dot_path(DotPath::MmaSync), elem) {
            Err(TileError::BadSchedule { field, message }) => {
                assert_eq!(field, "dot_path");
                assert!(message.contains(why), "{message}");
            }
            other => panic!("expected a dot_path error, got {other:?}"),
        }
    }
}

/// After a tensor-core `dot`, the accumulator feeds element-wise ops and a
/// row sum: `c = a @ b + bias`, `rows = sum(c, 1)`. The bias (a blocked
/// load) is converted to the accumulator's layout, and the row sum
/// converts the accumulator to a blocked layout first.
#[test]
fn mma_result_feeds_elementwise_ops_and_a_row_sum() {
    let mut rng = Rng::new();
    let (bm, bn, bk) = (32, 32, 16);
    let schedule = Schedule::block(&[bm, bn]).k(bk).warps(4);
    let mut t = TileBuilder::new("gemm_bias_rowsum", schedule.clone());
    let a = t.view_param("a", Type::BF16, 2);
    let b = t.view_param("b", Type::BF16, 2);
    let bias = t.view_param("bias", Type::F32, 2);
    let c = t.view_param("c", Type::F32, 2);
    let rows = t.view_param("rows", Type::F32, 2);
    let zero = t.index(0);
    let acc = t.full(&[bm, bn], Type::F32, 0.0);
    let at = t.load(a, &[zero, zero], &[bm, bk]);
    let bt = t.load(b, &[zero, zero], &[bk, bn]);
    let d = t.dot(at, bt, acc);
    let bias_t = t.load(bias, &[zero, zero], &[bm, bn]);
    let sum = t.add(d, bias_t);
    let row_sums = t.sum(sum, 1);
    t.store(c, &[zero, zero], sum);
    t.store(rows, &[zero, zero], row_sums);
    let kernel = t.finish().unwrap();
    assert!(kernel
        .layouts
        .of
        .iter()
        .any(|l| matches!(l, Some(Layout::Mma(_)))));

    let (m, n, k) = (29u32, 30u32, 11u32);
    let (ab, a64) = rounded(&mut rng, m * k, &Type::BF16);
    let (bb, b64) = rounded(&mut rng, k * n, &Type::BF16);
    let bias_v = rng.vec((m * n) as usize);
    let mut bufs = vec![
        ab,
        bb,
        bytes(&bias_v),
        bytes(&vec![f32::NAN; (m * n) as usize]),
        bytes(&vec![f32::NAN; m as usize]),
    ];
    let args = [
        row_major(0, &[m, k]),
        row_major(1, &[k, n]),
        row_major(2, &[m, n]),
        row_major(3, &[m, n]),
        row_major(4, &[m, 1]),
    ];
    run(&kernel, [1, 1, 1], &args, &mut bufs);
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let want: Vec<f64> = (0..mu * nu)
        .map(|e| {
            let (i, j) = (e / nu, e % nu);
            let dot: f64 = (0..ku).map(|kk| a64[i * ku + kk] * b64[kk * nu + j]).sum();
            dot + f64::from(bias_v[e])
        })
        .collect();
    let want_rows: Vec<f64> = (0..mu)
        .map(|i| want[i * nu..(i + 1) * nu].iter().sum())
        .collect();
    assert_close(&floats(&bufs[3]), &want, 1e-5, "a @ b + bias");
    assert_close(&floats(&bufs[4]), &want_rows, 1e-4, "row sums");
}
