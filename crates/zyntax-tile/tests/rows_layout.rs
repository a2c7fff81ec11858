//! A row softmax of 2-byte data (the row kernels of `zyntax.kernels`): the
//! bf16 rows load 8 elements per thread (16-byte vectors) where f32's
//! coalesced layout has 4, and the row statistics broadcast back onto the
//! rows in the rows' own layout, so the program converts nothing through
//! shared memory; checked against f64 on the interpreter with tails.

mod common;
use common::*;
use half::bf16;
use zyntax_hir::{Type, UnOp};
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
