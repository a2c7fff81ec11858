//! A row softmax of 2-byte data (the row kernels of `zyntax.kernels`): the
//! bf16 rows load 8 elements per thread (16-byte vectors) where f32's
//! coalesced layout has 4, and the row statistics broadcast back onto the
//! rows in the rows' own layout, so the program converts nothing through
//! shared memory; checked against f64 on the interpreter with tails.

mod common;
use common::*;
use half::bf16;
use zyntax_hir::{CmpOp, Type, UnOp};
use zyntax_tile::ir::Op;
use zyntax_tile::{Schedule, TileBuilder};

#[test]
fn bf16_row_softmax_converts_nothing() {
    let (r, w, n, rows) = (2u32, 1024u32, 1000u32, 3u32);
    let mut t = TileBuilder::new("rows", Schedule::block(&[r, w]).warps(4));
    let x = t.view_param_aligned("x", Type::BF16, 2, 1, 16);
    let y = t.view_param_aligned("y", Type::BF16, 2, 1, 16);
    let (pid, cr, zero) = (t.program_id(0), t.index(r), t.index(0));
    let r0 = t.scalar_mul(pid, cr);
    let v = t.load_or(x, &[r0, zero], &[r, w], f64::NEG_INFINITY);
    let v = t.cast(v, Type::F32);
    let mx = t.max(v, 1);
    let mb = t.broadcast(mx, &[r, w]);
    let d = t.sub(v, mb);
    let e = t.unary(UnOp::Exp, d);
    let s = t.sum(e, 1);
    let sb = t.broadcast(s, &[r, w]);
    let out = t.div(e, sb);
    let out = t.cast(out, Type::BF16);
    t.store(y, &[r0, zero], out);
    let k = t.finish().unwrap();
    let converts: Vec<_> = k
        .program
        .body
        .iter()
        .filter(|op| matches!(op, Op::ConvertLayout { .. }))
        .collect();
    assert!(converts.is_empty(), "{converts:?}");

    let mut rng = Rng::new();
    let xs: Vec<bf16> = (0..rows * n)
        .map(|_| bf16::from_f32(rng.next() * 4.0))
        .collect();
    let xb: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    let poison = bf16::from_f32(f32::NAN).to_le_bytes();
    let mut bufs = vec![xb, poison.repeat((rows * n) as usize)];
    let args = [row_major(0, &[rows, n]), row_major(1, &[rows, n])];
    run(&k, [rows.div_ceil(r), 1, 1], &args, &mut bufs);
    let got: Vec<f32> = bufs[1]
        .chunks(2)
        .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect();
    let mut want = vec![0.0; (rows * n) as usize];
    for (row, out) in want.chunks_mut(n as usize).enumerate() {
        let vals: Vec<f64> = (0..n as usize)
            .map(|j| f64::from(xs[row * n as usize + j].to_f32()))
            .collect();
        let mx = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let den: f64 = vals.iter().map(|v| (v - mx).exp()).sum();
        for (o, v) in out.iter_mut().zip(&vals) {
            *o = (v - mx).exp() / den;
        }
    }
    // Each output within bf16's rounding (2^-8 relative) of the f64 value.
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= 8e-3 * w.abs() + 1e-9,
            "element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn target_logit_mask_follows_the_rows() {
    // Cross-entropy's target logit of bf16 rows: `sum(where(cols == t, x, 0))`
    // with `t` a loaded `[R, 1]` column. The mask is made again in the rows'
    // layout (its broadcast of `t` from the converted column), so no
    // `[R, W]` tile is converted.
    let (r, w, n, rows) = (2u32, 1024u32, 1000u32, 3u32);
    let mut t = TileBuilder::new("target", Schedule::block(&[r, w]).warps(4));
    let x = t.view_param_aligned("x", Type::BF16, 2, 1, 16);
    let tg = t.view_param("t", Type::U32, 2);
    let o = t.view_param("o", Type::F32, 2);
    let (pid, cr, zero) = (t.program_id(0), t.index(r), t.index(0));
    let r0 = t.scalar_mul(pid, cr);
    let v = t.load(x, &[r0, zero], &[r, w]);
    let v = t.cast(v, Type::F32);
    let tt = t.load(tg, &[r0, zero], &[r, 1]);
    let tb = t.broadcast(tt, &[r, w]);
    let cols = t.iota(&[r, w], 1);
    let hit = t.cmp(CmpOp::Eq, cols, tb);
    let z = t.full(&[r, w], Type::F32, 0.0);
    let sel = t.where_(hit, v, z);
    let xt = t.sum(sel, 1);
    t.store(o, &[r0, zero], xt);
    let k = t.finish().unwrap();
    let wide: Vec<_> = k
        .program
        .body
        .iter()
        .filter_map(|op| match op {
            Op::ConvertLayout { out, .. } => Some(k.program.tile(*out).shape.clone()),
            _ => None,
        })
        .filter(|shape| shape[1] > 1)
        .collect();
    assert!(wide.is_empty(), "{wide:?}");

    let mut rng = Rng::new();
    let xs: Vec<bf16> = (0..rows * n)
        .map(|_| bf16::from_f32(rng.next() * 4.0))
        .collect();
    let ts: Vec<u32> = (0..rows).map(|i| (i * 337 + 5) % n).collect();
    let xb: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    let tb: Vec<u8> = ts.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut bufs = vec![xb, tb, bytes(&vec![f32::NAN; rows as usize])];
    let args = [
        row_major(0, &[rows, n]),
        row_major(1, &[rows, 1]),
        row_major(2, &[rows, 1]),
    ];
    run(&k, [rows.div_ceil(r), 1, 1], &args, &mut bufs);
    let want: Vec<f64> = (0..rows as usize)
        .map(|i| f64::from(xs[i * n as usize + ts[i] as usize].to_f32()))
        .collect();
    assert_close(&floats(&bufs[2]), &want, 0.0, "target logits");
}

#[test]
fn one_element_conversions_are_register_copies() {
    // A one-row program scaling a bf16 row by a loaded [1, 1] statistic:
    // the statistic is converted to the row's layout, and a one-element
    // tile holds its value in every register of every thread, so the
    // kernel passes no barrier (no trip through shared memory).
    let w = 2048u32;
    let mut t = TileBuilder::new("scale", Schedule::block(&[1, w]).warps(4));
    let x = t.view_param_aligned("x", Type::BF16, 2, 1, 16);
    let s = t.view_param("s", Type::F32, 2);
    let y = t.view_param("y", Type::F32, 2);
    let (row, zero) = (t.program_id(0), t.index(0));
    let v = t.load(x, &[row, zero], &[1, w]);
    let v = t.cast(v, Type::F32);
    let st = t.load(s, &[row, zero], &[1, 1]);
    let sb = t.broadcast(st, &[1, w]);
    let out = t.mul(v, sb);
    t.store(y, &[row, zero], out);
    let k = t.finish().unwrap();
    let hir = zyntax_hir::print_module(&k.module);
    assert!(!hir.contains("barrier"), "{hir}");

    let (rows, n) = (3u32, 2000u32);
    let mut rng = Rng::new();
    let xs: Vec<bf16> = (0..rows * n).map(|_| bf16::from_f32(rng.next())).collect();
    let ss: Vec<f32> = (0..rows).map(|i| 1.5 + i as f32).collect();
    let xb: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut bufs = vec![xb, bytes(&ss), bytes(&vec![f32::NAN; (rows * n) as usize])];
    let args = [
        row_major(0, &[rows, n]),
        row_major(1, &[rows, 1]),
        row_major(2, &[rows, n]),
    ];
    run(&k, [rows, 1, 1], &args, &mut bufs);
    let want: Vec<f64> = (0..(rows * n) as usize)
        .map(|i| f64::from(xs[i].to_f32()) * f64::from(ss[i / n as usize]))
        .collect();
    assert_close(&floats(&bufs[2]), &want, 0.0, "row times its statistic");
}
