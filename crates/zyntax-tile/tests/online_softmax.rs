//! FlashAttention-2's loop on the interpreter (one head: `o = softmax(q k^T *
//! scale, causal) v`, keys in blocks with a running maximum and sum) against
//! f64, and what layout inference makes of it: the scores stay in the
//! `mma.sync` accumulator layout through the mask (made again from `iota` in
//! that layout, not converted), the row max and sum (quad shuffles on the
//! accumulator), the running max and sum (carried in that layout: their
//! `full` initial values take their yields' layout) and the rescale of the
//! accumulator (a broadcast of the converted `[bm, 1]` factor at most), so
//! the loop body converts no `[bm, bn]` tile through shared memory.

mod common;
use common::*;
use half::f16;
use zyntax_hir::{BinOp, CmpOp, Type, UnOp};
use zyntax_tile::ir::Op;
use zyntax_tile::{Layout, Schedule, TileBuilder, TileKernel, TileProgram};

/// Views `q [S, D]`, `kt [D, S]` (k transposed: strides only), `v [S, D]`,
/// `o [S, D]` (f32); scalar `scale`.
/// With `kt_unit`, `kt` is declared unit-stride along D (its dim 0): the
/// loaded `[D, bn]` tile runs along K and is staged transposed for the dot.
fn flash(bm: u32, bn: u32, d: u32, warps: u32, kt_unit: bool) -> TileKernel {
    let mut t = TileBuilder::new("flash", Schedule::block(&[bm, bn]).warps(warps));
    let q = t.view_param("q", Type::F16, 2);
    let kt = if kt_unit {
        t.view_param_unit_stride("kt", Type::F16, 2, 0)
    } else {
        t.view_param("kt", Type::F16, 2)
    };
    let v = t.view_param("v", Type::F16, 2);
    let o = t.view_param("o", Type::F32, 2);
    let scale = t.scalar_param("scale", Type::F32);
    let (cbm, zero) = (t.index(bm), t.index(0));
    let pid = t.program_id(0);
    let m0 = t.scalar_mul(pid, cbm);
    let s_len = t.dim(kt, 1);
    // Causal: keys up to the block's last row.
    let end = t.scalar_add(m0, cbm);
    let hi = t.scalar_binary(BinOp::Min, end, s_len);
    let qt = t.load(q, &[m0, zero], &[bm, d]);
    let neg_inf = t.full(&[bm, 1], Type::F32, f64::NEG_INFINITY);
    let l0 = t.full(&[bm, 1], Type::F32, 0.0);
    let acc0 = t.full(&[bm, d], Type::F32, 0.0);
    let cbn = t.index(bn);
    let inits = [acc0.into(), neg_inf.into(), l0.into()];
    let out = t.for_range(zero, hi, cbn, &inits, |t, n0, c| {
        let (acc, m, l) = (c[0].tile(), c[1].tile(), c[2].tile());
        let kb = t.load(kt, &[zero, n0], &[d, bn]);
        let z = t.full(&[bm, bn], Type::F32, 0.0);
        let s = t.dot(qt, kb, z);
        let sc = t.splat(&[bm, bn], scale);
        let s = t.mul(s, sc);
        // visible: n0 + j <= m0 + i and n0 + j < S
        let (i, j) = (t.iota(&[bm, bn], 0), t.iota(&[bm, bn], 1));
        let (m0t, n0t, st) = (
            t.splat(&[bm, bn], m0),
            t.splat(&[bm, bn], n0),
            t.splat(&[bm, bn], s_len),
        );
        let (row, col) = (t.add(i, m0t), t.add(j, n0t));
        let causal = t.cmp(CmpOp::Le, col, row);
        let inside = t.cmp(CmpOp::Lt, col, st);
        let ninf = t.full(&[bm, bn], Type::F32, f64::NEG_INFINITY);
        let s = t.where_(inside, s, ninf);
        let s = t.where_(causal, s, ninf);
        let row_max = t.max(s, 1);
        let m_new = t.maximum(m, row_max);
        let mb = t.broadcast(m_new, &[bm, bn]);
        let sm = t.sub(s, mb);
        let p = t.exp(sm);
        let dm = t.sub(m, m_new);
        let alpha = t.exp(dm);
        let la = t.mul(l, alpha);
        let ps = t.sum(p, 1);
        let l_new = t.add(la, ps);
        let vb = t.load(v, &[n0, zero], &[bn, d]);
        let ab = t.broadcast(alpha, &[bm, d]);
        let scaled = t.mul(acc, ab);
        let p16 = t.cast(p, Type::F16);
        let acc = t.dot(p16, vb, scaled);
        vec![acc.into(), m_new.into(), l_new.into()]
    });
    let (acc, l) = (out[0].tile(), out[2].tile());
    let lb = t.broadcast(l, &[bm, d]);
    let y = t.div(acc, lb);
    t.store(o, &[m0, zero], y);
    t.finish().unwrap()
}

fn rounded(rng: &mut Rng, n: usize) -> (Vec<u8>, Vec<f64>) {
    rounded16(rng, n, f16::from_f32, f16::to_le_bytes, f16::to_f64)
}

/// `(converts, shape)` of each `ConvertLayout` inside a loop body.
fn loop_converts(program: &TileProgram) -> Vec<Vec<u32>> {
    fn walk(p: &TileProgram, ops: &[Op], in_loop: bool, out: &mut Vec<Vec<u32>>) {
        for op in ops {
            match op {
                Op::ConvertLayout { out: t, .. } if in_loop => out.push(p.tile(*t).shape.clone()),
                Op::For { body, .. } => walk(p, body, true, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(program, &program.body, false, &mut out);
    out
}

#[test]
fn flash_attention_loop_against_f64() {
    let mut rng = Rng::new();
    // (bm, bn, d, warps): the warps split S and the accumulator alike
    // (2x2 and 2x2; 1x4 and 1x4), or differently (2x2 and 1x4: the [bm, 1]
    // rescale factor is converted, nothing bigger); with 16 rows or more per
    // warp, all warps along M (P and Q from registers: rows_only_dots_...).
    for (bm, bn, d, warps, s_len, kt_unit) in [
        (32, 32, 32, 4, 45u32, false),
        (32, 64, 64, 4, 70, true),
        (16, 32, 64, 4, 33, false),
        (32, 32, 64, 4, 50, true),
        (64, 64, 64, 8, 77, true),
        (64, 32, 64, 4, 70, true),
        (64, 64, 32, 4, 93, false),
        (128, 64, 64, 8, 150, true),
        (32, 16, 32, 1, 40, true),
        (64, 32, 128, 2, 70, true),
    ] {
        let k = flash(bm, bn, d, warps, kt_unit);
        assert!(
            k.layouts
                .of
                .iter()
                .any(|l| matches!(l, Some(Layout::Mma(_)))),
            "not on mma.sync"
        );
        let big: Vec<_> = loop_converts(&k.program)
            .into_iter()
            .filter(|s| s[1] > 1)
            .collect();
        assert!(
            big.is_empty(),
            "{bm}x{bn} d{d}: converted in the loop: {big:?}"
        );
        let n = (s_len * d) as usize;
        let inputs = (
            rounded(&mut rng, n),
            rounded(&mut rng, n),
            rounded(&mut rng, n),
        );
        let (got, want) = run_causal_attention(&k, bm, (s_len, d), inputs, 0.3);
        // p is rounded to f16 before the second dot: ~2^-11 relative per term.
        assert_close(&got, &want, 3e-3, &format!("{bm}x{bn} d{d}"));
    }
}

#[test]
fn unary_exp_of_mma_rows_needs_no_conversion() {
    // A row softmax of a dot result: reduce and broadcast on the Mma layout.
    let mut t = TileBuilder::new("rows", Schedule::block(&[32, 32]).warps(4));
    let a = t.view_param("a", Type::F16, 2);
    let b = t.view_param("b", Type::F16, 2);
    let c = t.view_param("c", Type::F32, 2);
    let zero = t.index(0);
    let (x, y) = (
        t.load(a, &[zero, zero], &[32, 32]),
        t.load(b, &[zero, zero], &[32, 32]),
    );
    let z = t.full(&[32, 32], Type::F32, 0.0);
    let s = t.dot(x, y, z);
    let mx = t.max(s, 1);
    let mb = t.broadcast(mx, &[32, 32]);
    let d = t.sub(s, mb);
    let e = t.unary(UnOp::Exp, d);
    let sum = t.sum(e, 1);
    let sb = t.broadcast(sum, &[32, 32]);
    let out = t.div(e, sb);
    t.store(c, &[zero, zero], out);
    let k = t.finish().unwrap();
    let converts = k
        .program
        .body
        .iter()
        .filter(|op| matches!(op, Op::ConvertLayout { .. }))
        .count();
    assert_eq!(converts, 0, "{:?}", k.program.body);
    let mut rng = Rng::new();
    let (ab, a64) = rounded(&mut rng, 32 * 32);
    let (bb, b64) = rounded(&mut rng, 32 * 32);
    let mut bufs = vec![ab, bb, bytes(&vec![f32::NAN; 32 * 32])];
    let args = [
        row_major(0, &[32, 32]),
        row_major(1, &[32, 32]),
        row_major(2, &[32, 32]),
    ];
    run(&k, [1, 1, 1], &args, &mut bufs);
    let mut want = vec![0.0; 32 * 32];
    for i in 0..32 {
        let s: Vec<f64> = (0..32)
            .map(|j| (0..32).map(|kk| a64[i * 32 + kk] * b64[kk * 32 + j]).sum())
            .collect();
        let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let den: f64 = s.iter().map(|x| (x - mx).exp()).sum();
        for j in 0..32 {
            want[i * 32 + j] = (s[j] - mx).exp() / den;
        }
    }
    assert_close(&floats(&bufs[2]), &want, 1e-5, "row softmax of a dot");
}

#[test]
fn a_k_major_b_is_staged_transposed() {
    // `kt` unit-stride along K: its fragments come from ldmatrix without
    // .trans (staged [N, K]); otherwise they are .trans loads (staged
    // [K, N]) like v's, which are .trans either way.
    let trans = |unit: bool| {
        let text = zyntax_hir::print_module(&flash(32, 32, 64, 4, unit).module);
        text.lines()
            .filter(|l| l.contains("ldmatrix") && l.contains("trans"))
            .count()
    };
    let (unit, strided) = (trans(true), trans(false));
    assert!(0 < unit && unit < strided, "{unit} {strided}");
}

#[test]
fn rows_only_dots_keep_p_and_q_in_registers() {
    // 16 rows per warp or more: both dots put every warp along M, the
    // scores' rows reduce within a warp (no cross-warp scratch), P's A
    // fragments come from its registers and Q's are loaded once before the
    // loop (its ldmatrix.x4 between the first two barriers; the only other
    // non-transposed x4 are K's B fragments, two 8-key pieces each), and
    // the kernel passes two barriers around Q's staging and two per dot in
    // the loop (K staged, V staged), no others.
    for (bm, bn, d, warps) in [(64, 32, 64, 4), (128, 64, 64, 8), (32, 16, 32, 2)] {
        let k = flash(bm, bn, d, warps, true);
        let dots: Vec<_> = k
            .layouts
            .of
            .iter()
            .filter_map(|l| match l {
                Some(Layout::Mma(m)) => Some(m.warps_per_cta),
                _ => None,
            })
            .collect();
        assert!(!dots.is_empty());
        assert!(dots.iter().all(|w| *w == [warps, 1]), "{dots:?}");
        let text = zyntax_hir::print_module(&k.module);
        let lines: Vec<&str> = text.lines().collect();
        let x4: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains("ldmatrix.x4") && !lines[i].contains("trans"))
            .collect();
        // Q's fragments: between the two barriers before the loop.
        let bars: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].trim() == "barrier")
            .collect();
        let q_frags = (bm / (16 * warps) * (d / 16)) as usize;
        let before = x4.iter().filter(|&&i| bars[0] < i && i < bars[1]).count();
        assert_eq!(before, q_frags, "{bm}x{bn} d{d}: Q's fragments");
        let k_pairs = ((d / 16) * (bn / 16)) as usize;
        assert_eq!(
            x4.len(),
            q_frags + k_pairs,
            "{bm}x{bn} d{d}: A staged in the loop"
        );
        assert_eq!(bars.len(), 6, "{bm}x{bn} d{d}: barriers");
    }
}
