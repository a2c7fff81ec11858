//! Vectorised global loads and stores on the interpreter: views declared
//! unit-stride and aligned (`view_param_aligned`) are accessed as vectors
//! where a whole vector is in bounds and aligned, element by element
//! elsewhere (tails, odd row strides, odd origins). The interpreter traps
//! out-of-bounds and misaligned accesses, so a wrong choice fails the run.

mod common;
use common::*;
use half::f16;
use zyntax_hir::Type;
use zyntax_tile::{Schedule, TileBuilder, TileKernel};

/// out[i, j] = in[i, j + shift] for one [BM, BN] tile per program instance,
/// both views unit-stride along dim 1 and 16-byte aligned.
fn shifted_copy(schedule: Schedule, elem: Type) -> TileKernel {
    let (bm, bn) = (schedule.block[0], schedule.block[1]);
    let mut t = TileBuilder::new("copy", schedule);
    let input = t.view_param_aligned("in", elem.clone(), 2, 1, 16);
    let out = t.view_param_aligned("out", elem, 2, 1, 16);
    let shift = t.scalar_param("shift", Type::U32);
    let (p0, p1) = (t.program_id(0), t.program_id(1));
    let (cbm, cbn) = (t.index(bm), t.index(bn));
    let origin = [t.scalar_mul(p0, cbm), t.scalar_mul(p1, cbn)];
    let from = [origin[0], t.scalar_add(origin[1], shift)];
    let x = t.load(input, &from, &[bm, bn]);
    t.store(out, &origin, x);
    t.finish().unwrap()
}

fn hir(kernel: &TileKernel) -> String {
    zyntax_hir::print_module(&kernel.module)
}

#[test]
fn f32_copies_use_vectors_and_keep_tails_and_odd_strides_exact() {
    let mut rng = Rng::new();
    // 64x64 over 4 warps: 4 consecutive f32 per thread; 16x16 over 4 warps: 2.
    for (block, vector) in [([64, 64], "vec<f32, 4>"), ([16, 16], "vec<f32, 2>")] {
        let schedule = Schedule::block(&block).warps(4);
        let kernel = shifted_copy(schedule.clone(), Type::F32);
        assert!(hir(&kernel).contains(vector), "{block:?}: no {vector}");
        for (rows, cols, shift) in [
            (64, 64, 0),
            (17, 33, 0),
            (33, 64, 1),
            (1, 17, 3),
            (65, 130, 2),
        ] {
            let out_cols = cols - shift;
            let data = rng.vec((rows * cols) as usize);
            let n = (rows * out_cols) as usize;
            let mut bufs = vec![bytes(&data), bytes(&vec![f32::NAN; n + 40])];
            let args = [
                row_major(0, &[rows, cols]),
                row_major(1, &[rows, out_cols]),
                TArg::Int(shift.into()),
            ];
            let grid = schedule.grid(&[rows.into(), out_cols.into()]).unwrap();
            run(&kernel, grid, &args, &mut bufs);
            let got = floats(&bufs[1]);
            for i in 0..rows as usize {
                for j in 0..out_cols as usize {
                    let want = data[i * cols as usize + j + shift as usize];
                    assert_eq!(
                        got[i * out_cols as usize + j],
                        want,
                        "{block:?} {rows}x{cols}+{shift} at ({i}, {j})"
                    );
                }
            }
            // The guard band past the view is untouched.
            assert!(got[n..].iter().all(|x| x.is_nan()));
        }
    }
}

#[test]
fn f16_copies_use_eight_wide_vectors() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[16, 128]).warps(2);
    let kernel = shifted_copy(schedule.clone(), Type::F16);
    assert!(hir(&kernel).contains("vec<f16, 8>"));
    for (rows, cols, shift) in [(16, 128, 0), (19, 200, 0), (5, 77, 5)] {
        let out_cols = cols - shift;
        let data: Vec<f16> = rng
            .vec((rows * cols) as usize)
            .into_iter()
            .map(f16::from_f32)
            .collect();
        let n = (rows * out_cols) as usize;
        let nan = f16::NAN.to_le_bytes();
        let mut bufs = vec![
            data.iter().flat_map(|x| x.to_le_bytes()).collect(),
            nan.repeat(n + 40),
        ];
        let args = [
            row_major(0, &[rows, cols]),
            row_major(1, &[rows, out_cols]),
            TArg::Int(shift.into()),
        ];
        run(
            &kernel,
            schedule.grid(&[rows.into(), out_cols.into()]).unwrap(),
            &args,
            &mut bufs,
        );
        let got: Vec<f16> = bufs[1]
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]))
            .collect();
        for i in 0..rows as usize {
            for j in 0..out_cols as usize {
                let want = data[i * cols as usize + j + shift as usize];
                assert_eq!(
                    got[i * out_cols as usize + j].to_bits(),
                    want.to_bits(),
                    "{rows}x{cols}+{shift} at ({i}, {j})"
                );
            }
        }
        assert!(got[n..].iter().all(|x| x.is_nan()));
    }
}

#[test]
fn views_without_the_declaration_stay_scalar() {
    let schedule = Schedule::block(&[64, 64]).warps(4);
    let mut t = TileBuilder::new("copy", schedule);
    let input = t.view_param_unit_stride("in", Type::F32, 2, 1);
    let out = t.view_param("out", Type::F32, 2);
    let zero = t.index(0);
    let x = t.load(input, &[zero, zero], &[64, 64]);
    t.store(out, &[zero, zero], x);
    let kernel = t.finish().unwrap();
    assert!(!hir(&kernel).contains("vec<"));
}
