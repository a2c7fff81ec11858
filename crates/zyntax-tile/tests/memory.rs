//! Loads and stores on the interpreter: tails masked at sizes 1, 17 and 33
//! with 16x16 tiles, strided and transposed views, several warp counts, and
//! atomic accumulation.

mod common;
use common::*;
use zyntax_hir::Type;
use zyntax_tile::{Schedule, TileBuilder, TileKernel};

/// out[i, j] = in[i, j] for one [BM, BN] tile per program instance.
fn copy_kernel(schedule: Schedule, input_unit_stride: Option<usize>) -> TileKernel {
    let (bm, bn) = (schedule.block[0], schedule.block[1]);
    let mut t = TileBuilder::new("copy", schedule);
    let input = match input_unit_stride {
        Some(d) => t.view_param_unit_stride("in", Type::F32, 2, d),
        None => t.view_param("in", Type::F32, 2),
    };
    let out = t.view_param("out", Type::F32, 2);
    let (p0, p1) = (t.program_id(0), t.program_id(1));
    let (cbm, cbn) = (t.index(bm), t.index(bn));
    let origin = [t.scalar_mul(p0, cbm), t.scalar_mul(p1, cbn)];
    let x = t.load(input, &origin, &[bm, bn]);
    t.store(out, &origin, x);
    t.finish().unwrap()
}

#[test]
fn copies_with_masked_tails_at_odd_sizes() {
    let mut rng = Rng::new();
    for warps in [1, 2, 4] {
        let schedule = Schedule::block(&[16, 16]).warps(warps);
        let kernel = copy_kernel(schedule.clone(), None);
        for rows in [1u32, 17, 33] {
            for cols in [1u32, 17, 33] {
                let n = (rows * cols) as usize;
                let data = rng.vec(n);
                // The output buffer has a NaN guard band past the view.
                let mut bufs = vec![bytes(&data), bytes(&vec![f32::NAN; n + 40])];
                let grid = schedule.grid(&[rows.into(), cols.into()]).unwrap();
                run(
                    &kernel,
                    grid,
                    &[row_major(0, &[rows, cols]), row_major(1, &[rows, cols])],
                    &mut bufs,
                );
                let got = floats(&bufs[1]);
                assert_eq!(&got[..n], &data[..], "{rows}x{cols} warps {warps}");
                assert!(got[n..].iter().all(|v| v.is_nan()), "wrote past the view");
            }
        }
    }
}

#[test]
fn transposed_and_strided_views_are_only_strides() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[16, 16]).warps(2);
    for unit in [None, Some(0)] {
        let kernel = copy_kernel(schedule.clone(), unit);
        for (rows, cols) in [(17u32, 33u32), (33, 1), (1, 17)] {
            // `src` is stored [cols, rows]; the view reads its transpose.
            let src = rng.vec((rows * cols) as usize);
            // The output is every other column of a [rows, 2 * cols] buffer.
            let total = (rows * 2 * cols) as usize;
            let mut bufs = vec![bytes(&src), bytes(&vec![f32::NAN; total])];
            let grid = schedule.grid(&[rows.into(), cols.into()]).unwrap();
            let args = [
                TArg::View(0, vec![rows, cols], vec![1, rows]),
                TArg::View(1, vec![rows, cols], vec![2 * cols, 2]),
            ];
            run(&kernel, grid, &args, &mut bufs);
            let got = floats(&bufs[1]);
            for i in 0..rows as usize {
                for j in 0..cols as usize {
                    let at = i * 2 * cols as usize;
                    assert_eq!(
                        got[at + 2 * j],
                        src[j * rows as usize + i],
                        "{rows}x{cols} ({i},{j})"
                    );
                    assert!(got[at + 2 * j + 1].is_nan(), "the gap column was written");
                }
            }
        }
    }
}

#[test]
fn a_transposed_load_plus_a_row_major_load_converts_layouts() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[16, 16]).warps(2);
    let mut t = TileBuilder::new("add_t", schedule.clone());
    let a = t.view_param_unit_stride("a", Type::F32, 2, 0);
    let b = t.view_param_unit_stride("b", Type::F32, 2, 1);
    let out = t.view_param("out", Type::F32, 2);
    let (p0, p1) = (t.program_id(0), t.program_id(1));
    let c16 = t.index(16);
    let origin = [t.scalar_mul(p0, c16), t.scalar_mul(p1, c16)];
    let x = t.load(a, &origin, &[16, 16]);
    let y = t.load(b, &origin, &[16, 16]);
    let s = t.add(x, y);
    t.store(out, &origin, s);
    let kernel = t.finish().unwrap();
    let converts = kernel
        .program
        .body
        .iter()
        .filter(|op| matches!(op, zyntax_tile::ir::Op::ConvertLayout { .. }))
        .count();
    assert_eq!(converts, 1, "one operand converted to the other's layout");
    assert!(kernel.launch.shared_bytes >= 16 * 16 * 4);
    let (rows, cols) = (33u32, 17u32);
    let n = (rows * cols) as usize;
    let (av, bv) = (rng.vec(n), rng.vec(n));
    let mut bufs = vec![bytes(&av), bytes(&bv), bytes(&vec![f32::NAN; n])];
    let args = [
        TArg::View(0, vec![rows, cols], vec![1, rows]),
        row_major(1, &[rows, cols]),
        row_major(2, &[rows, cols]),
    ];
    run(
        &kernel,
        schedule.grid(&[rows.into(), cols.into()]).unwrap(),
        &args,
        &mut bufs,
    );
    let got = floats(&bufs[2]);
    for i in 0..rows as usize {
        for j in 0..cols as usize {
            let want = av[j * rows as usize + i] + bv[i * cols as usize + j];
            assert_eq!(got[i * cols as usize + j], want, "({i},{j})");
        }
    }
}

#[test]
fn atomic_add_accumulates_column_sums_across_programs() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[16, 32]).warps(4);
    let mut t = TileBuilder::new("colsum", schedule.clone());
    let x = t.view_param("x", Type::F32, 2);
    let out = t.view_param("out", Type::F32, 2);
    let p0 = t.program_id(0);
    let c16 = t.index(16);
    let zero = t.index(0);
    let row0 = t.scalar_mul(p0, c16);
    let tile = t.load(x, &[row0, zero], &[16, 32]);
    let sums = t.sum(tile, 0);
    t.atomic_add(out, &[zero, zero], sums);
    let kernel = t.finish().unwrap();
    let (rows, cols) = (57u32, 29u32);
    let data = rng.vec((rows * cols) as usize);
    let start = rng.vec(cols as usize);
    let mut bufs = vec![bytes(&data), bytes(&start)];
    let grid = [rows.div_ceil(16), 1, 1];
    run(
        &kernel,
        grid,
        &[row_major(0, &[rows, cols]), row_major(1, &[1, cols])],
        &mut bufs,
    );
    let want: Vec<f64> = (0..cols as usize)
        .map(|j| {
            f64::from(start[j])
                + (0..rows as usize)
                    .map(|i| f64::from(data[i * cols as usize + j]))
                    .sum::<f64>()
        })
        .collect();
    assert_close(&floats(&bufs[1]), &want, 1e-5, "column sums");
}
