//! The plain tile GEMM on sm_90: the compiler lowers its loop to the wgmma
//! pipeline (`lower/pipeline.rs`: cp.async into 128-byte-swizzled stages,
//! `wgmma.mma_async` from shared-memory descriptors) without the program
//! naming any of it. Run on the interpreter, which implements wgmma's
//! descriptors, swizzles and fragment layout, against an f64 reference of the
//! rounded inputs, with c poisoned (NaN) first: tails in M, N and K, several
//! stage counts (the ring wraps), 4 and 8 warps, one and two accumulator
//! repetitions, a transposed (K-major) `b`, and views without alignment
//! promises or with row strides that break 16-byte alignment (the
//! element-by-element path).

mod common;
use common::*;
use half::{bf16, f16};
use zyntax_hir::{Arch, Type};
use zyntax_tile::{DotPath, Layout, Schedule, TileBuilder, TileError, TileKernel, TileResult};

/// How the views are declared.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Views {
    /// Row-major, unit-stride and 16-byte aligned (cp.async where it can).
    Aligned,
    /// `b` is `[K, N]` with unit stride along K (a transposed matrix).
    BTransposed,
    /// `a` is `[M, K]` with unit stride along M (a transposed matrix).
    ATransposed,
    /// No promises: every chunk is copied element by element.
    Plain,
}

fn gemm(schedule: Schedule, elem: Type, views: Views) -> TileResult<TileKernel> {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    let (a, b, c) = match views {
        Views::Aligned => (
            t.view_param_aligned("a", elem.clone(), 2, 1, 16),
            t.view_param_aligned("b", elem, 2, 1, 16),
            t.view_param_aligned("c", Type::F32, 2, 1, 16),
        ),
        Views::BTransposed => (
            t.view_param_aligned("a", elem.clone(), 2, 1, 16),
            t.view_param_aligned("b", elem, 2, 0, 16),
            t.view_param_aligned("c", Type::F32, 2, 1, 16),
        ),
        Views::ATransposed => (
            t.view_param_aligned("a", elem.clone(), 2, 0, 16),
            t.view_param_aligned("b", elem, 2, 1, 16),
            t.view_param_aligned("c", Type::F32, 2, 1, 16),
        ),
        Views::Plain => (
            t.view_param("a", elem.clone(), 2),
            t.view_param("b", elem, 2),
            t.view_param("c", Type::F32, 2),
        ),
    };
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

/// Whether the kernel runs its dot on the wgmma pipeline (with `cp.async`
/// copies unless no view promises alignment).
fn on_wgmma(kernel: &TileKernel, views: Views) -> bool {
    let wgmma_layout = kernel
        .layouts
        .of
        .iter()
        .any(|l| matches!(l, Some(Layout::Mma(m)) if m.is_wgmma()));
    let text = zyntax_hir::print_module(&kernel.module);
    wgmma_layout
        && text.contains("wgmma")
        && (views == Views::Plain || text.contains("cp.async.cg.16"))
        && kernel.module.targets == [Arch::Sm90a]
        && kernel.launch.dynamic_shared_bytes > 0
        // No static scratch: the staging is all in the pipeline's stages.
        && kernel.launch.shared_bytes == 0
}

/// Random values rounded to `elem`: the bytes and the exact values.
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

/// `a` is `m x k` with row stride `lda` (>= k), or (`ATransposed`) `k x m`
/// with row stride `lda` (>= m) read as its transpose; `b` is row-major
/// `k x n`, or `n x k` row-major read as its transpose.
fn check(schedule: Schedule, elem: Type, views: Views, (m, n, k, lda): (u32, u32, u32, u32)) {
    let mut rng = Rng::new();
    let kernel = gemm(schedule.clone(), elem.clone(), views).unwrap();
    assert!(
        on_wgmma(&kernel, views),
        "{schedule:?} {views:?}: not on the wgmma pipeline"
    );
    let a_t = views == Views::ATransposed;
    let a_rows = if a_t { k } else { m };
    let (ab, a64) = rounded(&mut rng, a_rows * lda, &elem);
    let (bb, b64) = rounded(&mut rng, k * n, &elem);
    let mut bufs = vec![ab, bb, bytes(&vec![f32::NAN; (m * n) as usize])];
    let b_arg = if views == Views::BTransposed {
        TArg::View(1, vec![k, n], vec![1, k])
    } else {
        row_major(1, &[k, n])
    };
    let a_strides = if a_t { vec![1, lda] } else { vec![lda, 1] };
    let args = [
        TArg::View(0, vec![m, k], a_strides),
        b_arg,
        row_major(2, &[m, n]),
    ];
    run(
        &kernel,
        schedule.grid(&[m.into(), n.into()]).unwrap(),
        &args,
        &mut bufs,
    );
    let (mu, nu, ku, ld) = (m as usize, n as usize, k as usize, lda as usize);
    let b_at = |kk: usize, j: usize| {
        if views == Views::BTransposed {
            b64[j * ku + kk]
        } else {
            b64[kk * nu + j]
        }
    };
    let want: Vec<f64> = (0..mu * nu)
        .map(|e| {
            let (i, j) = (e / nu, e % nu);
            let a_at = |kk: usize| {
                if a_t {
                    a64[kk * ld + i]
                } else {
                    a64[i * ld + kk]
                }
            };
            (0..ku).map(|kk| a_at(kk) * b_at(kk, j)).sum()
        })
        .collect();
    let what = format!("{elem} {m}x{n}x{k} lda {lda} {views:?} {schedule:?}");
    assert_close(&floats(&bufs[2]), &want, 1e-5, &what);
}

fn sm90(block: [u32; 2], warps: u32, stages: u32) -> Schedule {
    Schedule::block(&block)
        .k(64)
        .warps(warps)
        .stages(stages)
        .arch(Arch::Sm90a)
}

#[test]
fn wgmma_gemm_tails_one_k_step() {
    // 72x40x48 with 64x64 tiles: tails in M and N, K shorter than one step.
    for stages in [1, 2, 3] {
        check(
            sm90([64, 64], 4, stages),
            Type::BF16,
            Views::Aligned,
            (72, 40, 48, 48),
        );
    }
}

#[test]
fn wgmma_gemm_ring_wraps() {
    // 4 K steps (the last a tail) through 2 and 3 stages; f16 and bf16.
    check(
        sm90([64, 64], 4, 3),
        Type::F16,
        Views::Aligned,
        (70, 65, 200, 200),
    );
    check(
        sm90([64, 128], 4, 2),
        Type::BF16,
        Views::Aligned,
        (64, 130, 256, 256),
    );
}

#[test]
fn wgmma_gemm_warpgroups_and_repetitions() {
    // Two warpgroups (8 warps) on a 128-row tile; one warpgroup with two
    // repetitions (4 warps, 128 rows).
    check(
        sm90([128, 64], 8, 2),
        Type::BF16,
        Views::Aligned,
        (130, 70, 100, 104),
    );
    check(
        sm90([128, 64], 4, 2),
        Type::BF16,
        Views::Aligned,
        (129, 64, 72, 72),
    );
    // Four warpgroups (16 warps) on a 256x128 tile.
    check(
        sm90([256, 128], 16, 3),
        Type::BF16,
        Views::Aligned,
        (260, 130, 136, 136),
    );
}

#[test]
fn wgmma_gemm_transposed_operands() {
    check(
        sm90([64, 64], 4, 2),
        Type::BF16,
        Views::BTransposed,
        (72, 70, 130, 136),
    );
    // `a` M-major (trans_a): 64-row boxes, one per warpgroup and repetition.
    check(
        sm90([64, 64], 4, 3),
        Type::F16,
        Views::ATransposed,
        (72, 70, 130, 80),
    );
    check(
        sm90([128, 64], 4, 2),
        Type::BF16,
        Views::ATransposed,
        (130, 64, 100, 136),
    );
    check(
        sm90([128, 64], 8, 3),
        Type::BF16,
        Views::ATransposed,
        (129, 70, 72, 136),
    );
}

#[test]
fn wgmma_gemm_unaligned_and_plain_views() {
    // A row stride of 50 elements: most rows' chunks are not 16-byte aligned.
    check(
        sm90([64, 64], 4, 2),
        Type::BF16,
        Views::Aligned,
        (66, 64, 50, 50),
    );
    check(
        sm90([64, 64], 4, 2),
        Type::F16,
        Views::Plain,
        (65, 33, 70, 70),
    );
}

#[test]
fn wgmma_choice_and_errors() {
    // sm_80, f32 operands or a K step of 32 stay off the pipeline under auto.
    let off = |s: Schedule, elem: Type| {
        let k = gemm(s, elem, Views::Aligned).unwrap();
        assert!(!on_wgmma(&k, Views::Aligned));
    };
    off(sm90([64, 64], 4, 2).arch(Arch::Sm80), Type::BF16);
    off(sm90([64, 64], 4, 2), Type::F32);
    off(sm90([64, 64], 4, 2).k(32), Type::BF16);
    // Plain sm_90 has no wgmma (arch-specific PTX): auto takes mma.sync there.
    off(sm90([64, 64], 4, 2).arch(Arch::Sm90), Type::BF16);
    // dot_path: wgmma names why it cannot.
    for s in [
        sm90([64, 64], 4, 2).arch(Arch::Sm90),
        sm90([64, 64], 4, 2).k(32),
        sm90([64, 64], 2, 2),
        sm90([64, 32], 4, 2),
        sm90([64, 64], 4, 2).arch(Arch::Sm80),
        sm90([256, 256], 16, 8), // 512 KiB of stages
    ] {
        match gemm(
            s.clone().dot_path(DotPath::Wgmma),
            Type::BF16,
            Views::Aligned,
        ) {
            Err(TileError::BadSchedule { field, .. }) => assert_eq!(field, "dot_path", "{s:?}"),
            other => panic!("{s:?}: expected a dot_path error, got {other:?}"),
        }
    }
}

/// A loop whose body does more than load and `dot` (here `a` is doubled
/// first) is not a GEMM loop: under `auto` it stays on `mma.sync`, and
/// computes the right thing.
#[test]
fn wgmma_other_loops_stay_on_mma_sync() {
    let mut rng = Rng::new();
    let (m, n, k) = (70u32, 40u32, 130u32);
    let s = sm90([64, 64], 4, 3);
    let mut t = TileBuilder::new("gemm2", s.clone());
    let a = t.view_param_aligned("a", Type::BF16, 2, 1, 16);
    let b = t.view_param_aligned("b", Type::BF16, 2, 1, 16);
    let c = t.view_param_aligned("c", Type::F32, 2, 1, 16);
    let (pm, pn) = (t.program_id(0), t.program_id(1));
    let (c64, zero) = (t.index(64), t.index(0));
    let (m0, n0) = (t.scalar_mul(pm, c64), t.scalar_mul(pn, c64));
    let kdim = t.dim(a, 1);
    let acc0 = t.full(&[64, 64], Type::F32, 0.0);
    let acc = t.for_range(zero, kdim, c64, &[acc0.into()], |t, k0, carried| {
        let x = t.load(a, &[m0, k0], &[64, 64]);
        let two = t.full(&[64, 64], Type::BF16, 2.0);
        let x2 = t.mul(x, two);
        let y = t.load(b, &[k0, n0], &[64, 64]);
        vec![t.dot(x2, y, carried[0].tile()).into()]
    });
    t.store(c, &[m0, n0], acc[0].tile());
    let kernel = t.finish().unwrap();
    assert!(!on_wgmma(&kernel, Views::Aligned));
    assert!(zyntax_hir::print_module(&kernel.module).contains("mma.sync"));
    let (ab, a64) = rounded(&mut rng, m * k, &Type::BF16);
    let (bb, b64) = rounded(&mut rng, k * n, &Type::BF16);
    let mut bufs = vec![ab, bb, bytes(&vec![f32::NAN; (m * n) as usize])];
    let args = [
        row_major(0, &[m, k]),
        row_major(1, &[k, n]),
        row_major(2, &[m, n]),
    ];
    run(
        &kernel,
        s.grid(&[m.into(), n.into()]).unwrap(),
        &args,
        &mut bufs,
    );
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let want: Vec<f64> = (0..mu * nu)
        .map(|e| {
            let (i, j) = (e / nu, e % nu);
            (0..ku)
                .map(|kk| 2.0 * a64[i * ku + kk] * b64[kk * nu + j])
                .sum()
        })
        .collect();
    assert_close(&floats(&bufs[2]), &want, 1e-5, "doubled a on mma.sync");
}
