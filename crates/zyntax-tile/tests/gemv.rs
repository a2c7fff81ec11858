//! The gemv program of the library's small-M matmul (`kernels/gemv_tile.py`,
//! written here with the Rust builder): each instance multiplies its row of
//! `a` (a `[K, M]` view) by `[bk, bn]` slabs of `b` with FFMA over one K
//! split and stores the f32 partial sums. On the interpreter at odd sizes
//! (split K, row-major and transposed `b`, bf16 operands) against f64 sums
//! of the partials on fresh random inputs, partials poisoned first; with
//! `--features compute` its PTX for sm_90a passes `ptxas` and loads `b` as
//! 16-byte vectors.

mod common;
use common::*;
use half::bf16;
use zyntax_hir::{Arch, BinOp, Type};
use zyntax_tile::schedule::gemv_schedule;
use zyntax_tile::{GemmProblem, Schedule, TileBuilder, TileKernel};

/// `ws[z, m, n0..n0+bn] = sum over split z of a[m, k] * b[k, n0..]`; `b_unit`:
/// the unit-stride dim of b's `[K, N]` view.
fn gemv(schedule: Schedule, b_unit: usize) -> TileKernel {
    let (bn, bk) = (schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemv", schedule);
    let a = if std::env::var("GEMV_A").is_ok() {
        t.view_param_unit_stride("a", Type::BF16, 2, 0)
    } else {
        t.view_param_aligned("a", Type::BF16, 2, 0, 16)
    };
    let b = t.view_param_aligned("b", Type::BF16, 2, b_unit, 16);
    let ws = if std::env::var("GEMV_WS").is_ok() {
        t.view_param("ws", Type::F32, 3)
    } else {
        t.view_param_aligned("ws", Type::F32, 3, 2, 16)
    };
    let (kk, kps) = (
        t.scalar_param("k", Type::U32),
        t.scalar_param("kps", Type::U32),
    );
    let (m, pn, z) = (t.program_id(0), t.program_id(1), t.program_id(2));
    let (cbn, cbk) = (t.index(bn), t.index(bk));
    let n0 = t.scalar_mul(pn, cbn);
    let k_lo = t.scalar_mul(z, kps);
    let end = t.scalar_add(k_lo, kps);
    let k_hi = t.scalar_binary(BinOp::Min, end, kk);
    let acc0 = t.full(&[bk, bn], Type::F32, 0.0);
    let acc = t.for_range(k_lo, k_hi, cbk, &[acc0.into()], |t, k0, carried| {
        let x = t.load(a, &[k0, m], &[bk, 1]);
        let x = t.cast(x, Type::F32);
        let x = t.broadcast(x, &[bk, bn]);
        let y = t.load(b, &[k0, n0], &[bk, bn]);
        let y = t.cast(y, Type::F32);
        vec![t.fma(x, y, carried[0].tile()).into()]
    });
    let row = t.sum(acc[0].tile(), 0);
    t.store(ws, &[z, m, n0], row);
    t.finish().unwrap()
}

fn bf16s(rng: &mut Rng, n: usize) -> (Vec<u8>, Vec<f64>) {
    rounded16(rng, n, bf16::from_f32, bf16::to_le_bytes, |x| x.to_f64())
}

#[test]
fn gemv_splits_k_over_row_major_and_transposed_b() {
    let mut rng = Rng::new();
    // (m, n, k, bk, bn, warps, K per split)
    let cases = [
        (1u32, 40u32, 16u32, 16u32, 128u32, 4u32, 16u32),
        (1u32, 40u32, 300u32, 16u32, 128u32, 4u32, 64u32),
        (1, 40, 64, 32, 256, 4, 64),
        (3, 17, 1000, 32, 256, 4, 96),
        (2, 257, 33, 16, 128, 4, 32),
    ];
    for (m, n, k, bk, bn, warps, kps) in cases {
        let splits = k.div_ceil(kps);
        let (a_bytes, av) = bf16s(&mut rng, (m * k) as usize);
        let (b_bytes, bv) = bf16s(&mut rng, (k * n) as usize);
        for transposed in [false, true] {
            let schedule = Schedule::block(&[1, bn])
                .k(bk)
                .warps(warps)
                .arch(Arch::Sm80);
            // b's unit-stride dim: N for row-major b, K for the transposed weight
            let kernel = gemv(schedule, if transposed { 0 } else { 1 });
            // b's [K, N] view: row-major K x N, or the transpose of row-major N x K
            // (the same values, laid out as an nn.Linear weight).
            let (b_buf, b_strides) = if transposed {
                let mut t = vec![0u8; b_bytes.len()];
                for kk in 0..k as usize {
                    for nn in 0..n as usize {
                        let (src, dst) = (2 * (kk * n as usize + nn), 2 * (nn * k as usize + kk));
                        t[dst..dst + 2].copy_from_slice(&b_bytes[src..src + 2]);
                    }
                }
                (t, vec![1, k])
            } else {
                (b_bytes.clone(), vec![n, 1])
            };
            let mut bufs = vec![
                a_bytes.clone(),
                b_buf,
                bytes(&vec![f32::NAN; (splits * m * n) as usize]),
            ];
            let args = [
                TArg::View(0, vec![k, m], vec![1, k]),
                TArg::View(1, vec![k, n], b_strides),
                row_major(2, &[splits, m, n]),
                TArg::Int(k.into()),
                TArg::Int(kps.into()),
            ];
            run(&kernel, [m, n.div_ceil(bn), splits], &args, &mut bufs);
            let parts = floats(&bufs[2]);
            let (m, n, k) = (m as usize, n as usize, k as usize);
            let mut got = vec![0f32; m * n];
            let mut want = vec![0f64; m * n];
            for i in 0..m {
                for j in 0..n {
                    for z in 0..splits as usize {
                        got[i * n + j] += parts[(z * m + i) * n + j];
                    }
                    for kk in 0..k {
                        want[i * n + j] += av[i * k + kk] * bv[kk * n + j];
                    }
                }
            }
            let what = format!("{m}x{n}x{k} split {kps} transposed {transposed}");
            eprintln!(
                "{what}: got {:?}\nwant {:?}\nparts {:?}",
                &got[..8.min(got.len())],
                &want[..8.min(want.len())],
                &parts[..8.min(parts.len())]
            );
            assert_close(&got, &want, 1e-4, &what);
        }
    }
}

#[test]
fn gemv_schedule_builds_and_validates() {
    // N = 1024: split K; N = 4096: the unsplit slab where the crate has one
    for n in [1024, 4096] {
        let p = GemmProblem {
            m: 1,
            n,
            k: 4096,
            operand_bytes: 2,
        };
        let (s, splits) = gemv_schedule(&p, Arch::Sm90a, 132).unwrap();
        s.validate().unwrap();
        let unsplit = n == 4096 && zyntax_tile::schedule::GEMV_UNSPLIT_TILE.is_some();
        assert_eq!(splits == 1, unsplit, "N = {n}: {splits} splits");
        let kernel = gemv(s.clone(), 1);
        assert_eq!(kernel.launch.block[0], s.warps * 32);
    }
}

#[cfg(feature = "compute")]
#[test]
fn gemv_passes_ptxas_with_vector_loads() {
    use zyntax_llvm::{compile_ptx, Options, Ptxas};
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    for b_unit in [1, 0] {
        let s = Schedule::block(&[1, 128]).k(16).warps(4).arch(Arch::Sm90a);
        let kernel = gemv(s, b_unit);
        let out = compile_ptx(&kernel.module, &Options::new(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{e}"));
        ptxas
            .assemble(&out.ptx, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("b unit dim {b_unit}: {e}"));
        assert!(
            out.ptx.contains("ld.global.v4"),
            "b unit dim {b_unit}: b is not read as vectors"
        );
    }
}
