//! Tiles of lower rank than their view (the view's leading dims indexed by
//! the origin, as attention reads one (batch, head) of a `[B, H, S, D]`
//! tensor): 2-D tiles of rank-4 views, scalar and vector paths, tails in the
//! last two dims, leading coordinates past the view's extent (nothing read or
//! written), and the rank checks.

mod common;
use common::*;
use zyntax_hir::Type;
use zyntax_tile::{Schedule, TileBuilder, TileError, TileKernel};

/// out[b, h, :, :] = 2 * in[b, h, :, :] + 1, one [BM, BN] tile per instance;
/// program axis 1 is the (b, h) pair, `heads` a scalar.
fn kernel(schedule: Schedule, aligned: bool) -> TileKernel {
    let (bm, bn) = (schedule.block[0], schedule.block[1]);
    let mut t = TileBuilder::new("lead", schedule);
    let (input, out) = if aligned {
        (
            t.view_param_aligned("in", Type::F32, 4, 3, 16),
            t.view_param_aligned("out", Type::F32, 4, 3, 16),
        )
    } else {
        (
            t.view_param("in", Type::F32, 4),
            t.view_param("out", Type::F32, 4),
        )
    };
    let heads = t.scalar_param("heads", Type::U32);
    let (p0, bh) = (t.program_id(0), t.program_id(1));
    let b = t.scalar_binary(zyntax_hir::BinOp::Div, bh, heads);
    let h = t.scalar_binary(zyntax_hir::BinOp::Rem, bh, heads);
    let (cbm, zero) = (t.index(bm), t.index(0));
    let m0 = t.scalar_mul(p0, cbm);
    let x = t.load(input, &[b, h, m0, zero], &[bm, bn]);
    let two = t.full(&[bm, bn], Type::F32, 2.0);
    let one = t.full(&[bm, bn], Type::F32, 1.0);
    let y = t.fma(x, two, one);
    t.store(out, &[b, h, m0, zero], y);
    t.finish().unwrap()
}

#[test]
fn two_dim_tiles_of_four_dim_views() {
    let mut rng = Rng::new();
    for aligned in [false, true] {
        for warps in [1, 4] {
            let schedule = Schedule::block(&[16, 16]).warps(warps);
            let k = kernel(schedule.clone(), aligned);
            // [B, H, S, D] with S and D tails; heads 3 so b and h both vary.
            for (bsz, heads, s, d) in [(2u32, 3u32, 17u32, 13u32), (1, 2, 33, 16)] {
                let n = (bsz * heads * s * d) as usize;
                let data = rng.vec(n);
                let mut bufs = vec![bytes(&data), bytes(&vec![f32::NAN; n + 40])];
                let shape = [bsz, heads, s, d];
                // Launch one extra (b, h) pair: its leading coordinate is past
                // the view, so it must neither read nor write.
                let grid = [s.div_ceil(16), bsz * heads + heads, 1];
                run(
                    &k,
                    grid,
                    &[
                        row_major(0, &shape),
                        row_major(1, &shape),
                        TArg::Int(heads.into()),
                    ],
                    &mut bufs,
                );
                let got = floats(&bufs[1]);
                for (i, (g, x)) in got[..n].iter().zip(&data).enumerate() {
                    assert_eq!(*g, 2.0 * x + 1.0, "element {i} of {shape:?} warps {warps}");
                }
                assert!(got[n..].iter().all(|v| v.is_nan()), "wrote past the view");
            }
        }
    }
}

#[test]
fn a_tile_of_higher_rank_than_its_view_is_refused() {
    let mut t = TileBuilder::new("bad", Schedule::block(&[16, 16]));
    let v = t.view_param("v", Type::F32, 1);
    let zero = t.index(0);
    t.load(v, &[zero], &[16, 16]);
    match t.finish() {
        Err(TileError::ShapeMismatch { op, operand, .. }) => {
            assert_eq!((op, operand), ("load", "shape"));
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    let mut t = TileBuilder::new("bad", Schedule::block(&[16, 16]));
    t.view_param("v", Type::F32, 5);
    assert!(matches!(
        t.finish(),
        Err(TileError::BadAxis {
            op: "view_param",
            ..
        })
    ));
}
