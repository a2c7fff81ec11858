//! Element-wise ops, broadcast, where, cast, iota, reductions and a row
//! softmax on the interpreter, against references computed here on fresh
//! random inputs (outputs start as NaN).

mod common;
use common::*;
use zyntax_hir::{CmpOp, Type};
use zyntax_tile::{ReduceOp, Schedule, TileBuilder, Value};

/// out = where(x > bias, x * bias, x - bias) + f32(i32(4x)) + f32(col index),
/// with `bias` a [1, N] row broadcast down the rows.
#[test]
fn elementwise_broadcast_where_cast_and_iota() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[16, 32]).warps(2);
    let mut t = TileBuilder::new("ew", schedule.clone());
    let x = t.view_param("x", Type::F32, 2);
    let bias = t.view_param("bias", Type::F32, 2);
    let out = t.view_param("out", Type::F32, 2);
    let (p0, p1) = (t.program_id(0), t.program_id(1));
    let (c16, c32, zero) = (t.index(16), t.index(32), t.index(0));
    let origin = [t.scalar_mul(p0, c16), t.scalar_mul(p1, c32)];
    let xt = t.load(x, &origin, &[16, 32]);
    let brow = t.load(bias, &[zero, origin[1]], &[1, 32]);
    let b = t.broadcast(brow, &[16, 32]);
    let above = t.cmp(CmpOp::Gt, xt, b);
    let (prod, diff) = (t.mul(xt, b), t.sub(xt, b));
    let picked = t.where_(above, prod, diff);
    let four = t.full(&[16, 32], Type::F32, 4.0);
    let x4 = t.mul(xt, four);
    let truncated = t.cast(x4, Type::I32);
    let back = t.cast(truncated, Type::F32);
    let cols = t.iota(&[16, 32], 1);
    let cols_u = t.splat(&[16, 32], origin[1]);
    let col_index = t.add(cols, cols_u);
    let col_f = t.cast(col_index, Type::F32);
    let sum = t.add(picked, back);
    let y = t.add(sum, col_f);
    t.store(out, &origin, y);
    let kernel = t.finish().unwrap();
    for (rows, ncols) in [(17u32, 33u32), (1, 5), (40, 64)] {
        let n = (rows * ncols) as usize;
        let (xv, bv) = (rng.vec(n), rng.vec(ncols as usize));
        let mut bufs = vec![bytes(&xv), bytes(&bv), bytes(&vec![f32::NAN; n])];
        let args = [
            row_major(0, &[rows, ncols]),
            row_major(1, &[1, ncols]),
            row_major(2, &[rows, ncols]),
        ];
        run(
            &kernel,
            schedule.grid(&[rows.into(), ncols.into()]).unwrap(),
            &args,
            &mut bufs,
        );
        let got = floats(&bufs[2]);
        for i in 0..rows as usize {
            for j in 0..ncols as usize {
                let (xx, bb) = (xv[i * ncols as usize + j], bv[j]);
                let picked = if xx > bb { xx * bb } else { xx - bb };
                let want = picked + ((xx * 4.0) as i32) as f32 + j as f32;
                assert_eq!(
                    got[i * ncols as usize + j],
                    want,
                    "{rows}x{ncols} ({i},{j})"
                );
            }
        }
    }
}

/// Reduces a [BM, BN] tile along `axis` with `op` and stores the kept-dim result.
fn reduce_case(
    rows: u32,
    cols: u32,
    block: [u32; 2],
    warps: u32,
    axis: usize,
    op: ReduceOp,
    rng: &mut Rng,
) {
    let schedule = Schedule::block(&block).warps(warps);
    let mut t = TileBuilder::new("red", schedule);
    let x = t.view_param("x", Type::F32, 2);
    let out = t.view_param("out", Type::F32, 2);
    let p0 = t.program_id(0);
    let zero = t.index(0);
    let step = t.index(block[1 - axis]);
    // Programs walk the kept dim; the reduced dim fits in one tile.
    let start = t.scalar_mul(p0, step);
    let origin = if axis == 1 {
        [start, zero]
    } else {
        [zero, start]
    };
    let other = match op {
        ReduceOp::Sum => 0.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let tile = t.load_or(x, &origin, &block, other);
    let r = t.reduce(tile, axis, op);
    t.store(out, &origin, r);
    let kernel = t.finish().unwrap();
    let data = rng.vec((rows * cols) as usize);
    let kept = if axis == 1 { rows } else { cols };
    let out_shape = if axis == 1 { [rows, 1] } else { [1, cols] };
    let mut bufs = vec![bytes(&data), bytes(&vec![f32::NAN; kept as usize])];
    let grid = [kept.div_ceil(block[1 - axis]), 1, 1];
    run(
        &kernel,
        grid,
        &[row_major(0, &[rows, cols]), row_major(1, &out_shape)],
        &mut bufs,
    );
    let want: Vec<f64> = (0..kept as usize)
        .map(|k| {
            let line = (0..if axis == 1 { cols } else { rows } as usize).map(|i| {
                let (r, c) = if axis == 1 { (k, i) } else { (i, k) };
                f64::from(data[r * cols as usize + c])
            });
            match op {
                ReduceOp::Sum => line.sum(),
                ReduceOp::Max => line.fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Min => line.fold(f64::INFINITY, f64::min),
            }
        })
        .collect();
    let what = format!("{op:?} axis {axis} of {rows}x{cols}, block {block:?}, {warps} warps");
    assert_close(&floats(&bufs[1]), &want, 1e-5, &what);
}

#[test]
fn row_reductions_of_odd_widths() {
    let mut rng = Rng::new();
    for (cols, block) in [(17, [16, 32]), (33, [8, 64]), (5, [32, 8]), (1, [4, 1])] {
        for warps in [1, 4, 8] {
            for op in [ReduceOp::Sum, ReduceOp::Max] {
                reduce_case(23, cols, block, warps, 1, op, &mut rng);
            }
        }
    }
}

#[test]
fn column_reductions_cross_warps() {
    let mut rng = Rng::new();
    for (rows, block) in [(17, [32, 16]), (33, [64, 8]), (63, [64, 64]), (3, [4, 32])] {
        for warps in [1, 2, 4, 8] {
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                reduce_case(rows, 19, block, warps, 0, op, &mut rng);
            }
        }
    }
}

/// Row softmax over [M, N] with one [BM, BN] tile of rows per program
/// (BN a power of two at least N; masked columns read -inf and vanish).
#[test]
fn row_softmax_matches_f64() {
    let mut rng = Rng::new();
    for (n, bn, warps) in [(17u32, 32u32, 1u32), (33, 64, 4), (64, 64, 2), (5, 8, 1)] {
        let bm = 4;
        let schedule = Schedule::block(&[bm, bn]).warps(warps);
        let mut t = TileBuilder::new("softmax", schedule);
        let x = t.view_param("x", Type::F32, 2);
        let out = t.view_param("out", Type::F32, 2);
        let p0 = t.program_id(0);
        let (cbm, zero) = (t.index(bm), t.index(0));
        let origin = [t.scalar_mul(p0, cbm), zero];
        let xt = t.load_or(x, &origin, &[bm, bn], f64::NEG_INFINITY);
        let row_max = t.max(xt, 1);
        let m = t.broadcast(row_max, &[bm, bn]);
        let shifted = t.sub(xt, m);
        let e = t.exp(shifted);
        let row_sum = t.sum(e, 1);
        let s = t.broadcast(row_sum, &[bm, bn]);
        let y = t.div(e, s);
        t.store(out, &origin, y);
        let kernel = t.finish().unwrap();
        let rows = 11u32;
        let data = rng.vec((rows * n) as usize);
        let mut bufs = vec![bytes(&data), bytes(&vec![f32::NAN; (rows * n) as usize])];
        run(
            &kernel,
            [rows.div_ceil(bm), 1, 1],
            &[row_major(0, &[rows, n]), row_major(1, &[rows, n])],
            &mut bufs,
        );
        let mut want = Vec::new();
        for r in data.chunks(n as usize) {
            let mx = r
                .iter()
                .fold(f64::NEG_INFINITY, |a, &b| a.max(f64::from(b)));
            let sum: f64 = r.iter().map(|&v| (f64::from(v) - mx).exp()).sum();
            want.extend(r.iter().map(|&v| (f64::from(v) - mx).exp() / sum));
        }
        assert_close(&floats(&bufs[1]), &want, 1e-5, &format!("softmax n={n}"));
    }
}

/// A loop carrying a tile and a scalar: out = Σ_k x[k-th row block] and the
/// trip count, splatted.
#[test]
fn for_loops_carry_tiles_and_scalars() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[8, 16]).warps(1);
    let mut t = TileBuilder::new("loop", schedule);
    let x = t.view_param("x", Type::F32, 2);
    let out = t.view_param("out", Type::F32, 2);
    let count_out = t.view_param("count", Type::F32, 2);
    let (zero, step) = (t.index(0), t.index(8));
    let rows = t.dim(x, 0);
    let acc0 = t.full(&[8, 16], Type::F32, 0.0);
    let one = t.constant(Type::F32, zyntax_tile::Const::Float(1.0));
    let count0 = t.constant(Type::F32, zyntax_tile::Const::Float(0.0));
    let results = t.for_range(
        zero,
        rows,
        step,
        &[acc0.into(), count0.into()],
        |t, row, carried| {
            let block = t.load(x, &[row, zero], &[8, 16]);
            let acc = t.add(carried[0].tile(), block);
            let count = t.scalar_binary(zyntax_hir::BinOp::Add, carried[1].scalar(), one);
            vec![Value::Tile(acc), Value::Scalar(count)]
        },
    );
    t.store(out, &[zero, zero], results[0].tile());
    let count_tile = t.splat(&[1, 1], results[1].scalar());
    t.store(count_out, &[zero, zero], count_tile);
    let kernel = t.finish().unwrap();
    let (nrows, ncols) = (29u32, 13u32);
    let data = rng.vec((nrows * ncols) as usize);
    let mut bufs = vec![
        bytes(&data),
        bytes(&vec![f32::NAN; 8 * 13]),
        bytes(&[f32::NAN]),
    ];
    let args = [
        row_major(0, &[nrows, ncols]),
        row_major(1, &[8, ncols]),
        row_major(2, &[1, 1]),
    ];
    run(&kernel, [1, 1, 1], &args, &mut bufs);
    let want: Vec<f64> = (0..8 * ncols as usize)
        .map(|e| {
            let (i, j) = (e / ncols as usize, e % ncols as usize);
            (0..nrows as usize)
                .filter(|r| r % 8 == i)
                .map(|r| f64::from(data[r * ncols as usize + j]))
                .sum()
        })
        .collect();
    assert_close(&floats(&bufs[1]), &want, 1e-5, "loop sum");
    assert_eq!(floats(&bufs[2]), [4.0], "trip count of 0..29 step 8");
}

/// Bool tiles in different layouts are converted through shared memory:
/// out = (a > 0 && b > 0) ? a : b, with `a` loaded transposed.
#[test]
fn bool_tiles_convert_layouts() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[16, 16]).warps(2);
    let mut t = TileBuilder::new("both", schedule.clone());
    let a = t.view_param_unit_stride("a", Type::F32, 2, 0);
    let b = t.view_param("b", Type::F32, 2);
    let out = t.view_param("out", Type::F32, 2);
    let zero = t.index(0);
    let at = t.load(a, &[zero, zero], &[16, 16]);
    let bt = t.load(b, &[zero, zero], &[16, 16]);
    let z = t.full(&[16, 16], Type::F32, 0.0);
    let (ca, zb) = (t.cmp(CmpOp::Gt, at, z), t.full(&[16, 16], Type::F32, 0.0));
    let cb = t.cmp(CmpOp::Gt, bt, zb);
    let both = t.binary(zyntax_hir::BinOp::And, ca, cb);
    let y = t.where_(both, at, bt);
    t.store(out, &[zero, zero], y);
    let kernel = t.finish().unwrap();
    let converted_bools = kernel
        .program
        .body
        .iter()
        .filter(|op| match op {
            zyntax_tile::ir::Op::ConvertLayout { tile, .. } => {
                kernel.program.tile(*tile).elem == Type::BOOL
            }
            _ => false,
        })
        .count();
    assert_eq!(converted_bools, 1);
    let (rows, cols) = (13u32, 16u32);
    let n = (rows * cols) as usize;
    let (av, bv) = (rng.vec(n), rng.vec(n));
    let mut bufs = vec![bytes(&av), bytes(&bv), bytes(&vec![f32::NAN; n])];
    let args = [
        TArg::View(0, vec![rows, cols], vec![1, rows]),
        row_major(1, &[rows, cols]),
        row_major(2, &[rows, cols]),
    ];
    run(&kernel, [1, 1, 1], &args, &mut bufs);
    let got = floats(&bufs[2]);
    for i in 0..rows as usize {
        for j in 0..cols as usize {
            let (x, y) = (av[j * rows as usize + i], bv[i * cols as usize + j]);
            let want = if x > 0.0 && y > 0.0 { x } else { y };
            assert_eq!(got[i * cols as usize + j], want, "({i},{j})");
        }
    }
}

/// A 3-D tile: per-batch row sums of i32 data, [B, M, N] → [B, M, 1], over
/// 4 warps (integer shuffles, replication along the short dims).
#[test]
fn three_d_integer_row_sums() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[2, 8, 32]).warps(4);
    let mut t = TileBuilder::new("sums3", schedule);
    let x = t.view_param("x", Type::I32, 3);
    let out = t.view_param("out", Type::I32, 3);
    let p0 = t.program_id(0);
    let (two, zero) = (t.index(2), t.index(0));
    let origin = [t.scalar_mul(p0, two), zero, zero];
    let tile = t.load(x, &origin, &[2, 8, 32]);
    let s = t.sum(tile, 2);
    t.store(out, &origin, s);
    let kernel = t.finish().unwrap();
    let (b, m, n) = (5u32, 7u32, 19u32);
    let data: Vec<i32> = (0..b * m * n)
        .map(|_| (rng.next() * 1000.0) as i32)
        .collect();
    let to_bytes = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let mut bufs = vec![to_bytes(&data), to_bytes(&vec![i32::MIN; (b * m) as usize])];
    run(
        &kernel,
        [b.div_ceil(2), 1, 1],
        &[row_major(0, &[b, m, n]), row_major(1, &[b, m, 1])],
        &mut bufs,
    );
    let got: Vec<i32> = bufs[1]
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let want: Vec<i32> = data
        .chunks(n as usize)
        .map(|row| row.iter().sum())
        .collect();
    assert_eq!(got, want);
}

/// Scalar parameters: out = alpha * x + y over a 1-D view, with `alpha` an
/// f32 kernel parameter splatted into a tile.
#[test]
fn scalar_parameters_reach_the_tiles() {
    let mut rng = Rng::new();
    let schedule = Schedule::block(&[128]).warps(2);
    let mut t = TileBuilder::new("axpy", schedule.clone());
    let alpha = t.scalar_param("alpha", Type::F32);
    let x = t.view_param("x", Type::F32, 1);
    let y = t.view_param("y", Type::F32, 1);
    let p0 = t.program_id(0);
    let c128 = t.index(128);
    let origin = [t.scalar_mul(p0, c128)];
    let (xt, yt) = (t.load(x, &origin, &[128]), t.load(y, &origin, &[128]));
    let a = t.splat(&[128], alpha);
    let r = t.fma(a, xt, yt);
    t.store(y, &origin, r);
    let kernel = t.finish().unwrap();
    assert_eq!(
        kernel.launch.params[0],
        zyntax_tile::KernelParam::Scalar {
            name: "alpha".into(),
            ty: Type::F32
        }
    );
    let n = 300u32;
    let (xv, yv) = (rng.vec(n as usize), rng.vec(n as usize));
    let mut bufs = vec![bytes(&xv), bytes(&yv)];
    let args = [TArg::Float(1.5), row_major(0, &[n]), row_major(1, &[n])];
    run(
        &kernel,
        schedule.grid(&[n.into()]).unwrap(),
        &args,
        &mut bufs,
    );
    let want: Vec<f32> = xv
        .iter()
        .zip(&yv)
        .map(|(x, y)| 1.5f32.mul_add(*x, *y))
        .collect();
    assert_eq!(floats(&bufs[1]), want);
}
