//! The GEMM tile program on the interpreter at odd and even sizes, with
//! several schedules, a transposed operand and f16 operands, against an f64
//! reference on fresh random inputs (c starts as NaN).

mod common;
use common::*;
use half::f16;
use zyntax_hir::Type;
use zyntax_tile::{DotPath, Schedule, TileBuilder, TileKernel};

fn gemm(schedule: Schedule, elem: Type) -> TileKernel {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    let a = t.view_param("a", elem.clone(), 2);
    let b = t.view_param("b", elem, 2);
    let c = t.view_param("c", Type::F32, 2);
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
    t.finish().unwrap()
}

/// Runs c = a @ b with `a` stored transposed ([K, M] row-major) when
/// `a_transposed`, and checks against f64.
fn check(schedule: &Schedule, m: u32, n: u32, k: u32, a_transposed: bool, rng: &mut Rng) {
    let kernel = gemm(schedule.clone(), Type::F32);
    let (av, bv) = (rng.vec((m * k) as usize), rng.vec((k * n) as usize));
    let mut bufs = vec![
        bytes(&av),
        bytes(&bv),
        bytes(&vec![f32::NAN; (m * n) as usize]),
    ];
    let a_view = if a_transposed {
        TArg::View(0, vec![m, k], vec![1, m])
    } else {
        row_major(0, &[m, k])
    };
    let args = [a_view, row_major(1, &[k, n]), row_major(2, &[m, n])];
    run(
        &kernel,
        schedule.grid(&[m.into(), n.into()]).unwrap(),
        &args,
        &mut bufs,
    );
    let a_at = |i: usize, kk: usize| {
        if a_transposed {
            av[kk * m as usize + i]
        } else {
            av[i * k as usize + kk]
        }
    };
    let want: Vec<f64> = (0..(m * n) as usize)
        .map(|e| {
            let (i, j) = (e / n as usize, e % n as usize);
            (0..k as usize)
                .map(|kk| f64::from(a_at(i, kk)) * f64::from(bv[kk * n as usize + j]))
                .sum()
        })
        .collect();
    let what = format!("{m}x{n}x{k} {schedule:?} transposed a: {a_transposed}");
    assert_close(&floats(&bufs[2]), &want, 1e-5, &what);
}

#[test]
fn gemm_at_odd_sizes() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[16, 32]).k(8).warps(2);
    for (m, n, k) in [(17, 33, 9), (1, 1, 1), (5, 40, 17)] {
        check(&schedule, m, n, k, false, &mut rng);
    }
    // 8 warps on a 16x16 tile: the layout replicates, only owners store.
    let replicated = Schedule::block(&[16, 16]).k(8).warps(8);
    check(&replicated, 17, 33, 9, false, &mut rng);
}

#[test]
fn gemm_64_cubed_with_a_64x64_schedule() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[64, 64]).k(16).warps(4);
    schedule.validate_gemm(4).unwrap();
    check(&schedule, 64, 64, 64, false, &mut rng);
}

#[test]
fn gemm_with_a_transposed_operand() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[32, 16]).k(8).warps(1);
    check(&schedule, 33, 17, 20, true, &mut rng);
}

#[test]
fn gemm_with_f16_operands_accumulates_in_f32() {
    let mut rng = Rng::new();
    // FFMA explicitly (tests/mma.rs covers f16 on tensor cores).
    let schedule = Schedule::block(&[16, 16])
        .k(16)
        .warps(2)
        .dot_path(DotPath::Ffma);
    let kernel = gemm(schedule.clone(), Type::F16);
    let (m, n, k) = (19u32, 21u32, 35u32);
    let to_f16 = |v: &[f32]| -> (Vec<u8>, Vec<f64>) {
        let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
        (
            h.iter().flat_map(|x| x.to_le_bytes()).collect(),
            h.iter().map(|x| x.to_f64()).collect(),
        )
    };
    let (ab, a64) = to_f16(&rng.vec((m * k) as usize));
    let (bb, b64) = to_f16(&rng.vec((k * n) as usize));
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
    let want: Vec<f64> = (0..(m * n) as usize)
        .map(|e| {
            let (i, j) = (e / n as usize, e % n as usize);
            (0..k as usize)
                .map(|kk| a64[i * k as usize + kk] * b64[kk * n as usize + j])
                .sum()
        })
        .collect();
    assert_close(&floats(&bufs[2]), &want, 1e-5, "f16 gemm");
}
