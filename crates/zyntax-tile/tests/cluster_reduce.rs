//! Reductions over a cluster (`lower/reduce.rs`, step 4): with a schedule of
//! `cluster` > 1 outside the warp-specialised pipeline every CTA of a
//! cluster holds a slice of a row and `sum`/`max` combine the cluster's
//! CTAs through distributed shared memory. On the interpreter (clusters
//! co-scheduled), against f64 sums of random rows with a masked tail; every
//! CTA stores the row's result, so each must have received all of it.

mod common;
use common::*;
use zyntax_hir::{Arch, BinOp, Type};
use zyntax_tile::{Schedule, TileBuilder, TileError, TileKernel};

/// Row `pid / c` of `x`, columns `(pid % c) * w ..` in CTA `pid`: its sum
/// and max over the cluster stored at `[row, pid % c]` of `s` and `m`.
fn program(c: u32, w: u32, warps: u32) -> Result<TileKernel, TileError> {
    let s = Schedule::block(&[1, w])
        .warps(warps)
        .cluster(c)
        .arch(Arch::Sm90);
    let mut t = TileBuilder::new("cluster_rows", s);
    let x = t.view_param("x", Type::F32, 2);
    let sv = t.view_param("s", Type::F32, 2);
    let mv = t.view_param("m", Type::F32, 2);
    let (pid, cc, cw) = (t.program_id(0), t.index(c), t.index(w));
    let row = t.scalar_binary(BinOp::Div, pid, cc);
    let rank = t.scalar_binary(BinOp::Rem, pid, cc);
    let c0 = t.scalar_mul(rank, cw);
    let v = t.load_or(x, &[row, c0], &[1, w], f64::NEG_INFINITY);
    let mx = t.max(v, 1);
    let zero = t.load(x, &[row, c0], &[1, w]); // masked elements 0
    let sum = t.sum(zero, 1);
    t.store(sv, &[row, rank], sum);
    t.store(mv, &[row, rank], mx);
    t.finish()
}

#[test]
fn cluster_rows_sum_and_max() {
    // Rows over 2, 4 and 8 CTAs, with one warp and with several along
    // the row (step 3 and not).
    for (c, w, warps, n) in [
        (4u32, 64u32, 2u32, 200u32),
        (2, 512, 4, 1000),
        (8, 32, 1, 250),
    ] {
        let rows = 3u32;
        let k = program(c, w, warps).unwrap();
        assert_eq!(k.launch.cluster, c);
        let mut rng = Rng::new();
        let xs = rng.vec((rows * n) as usize);
        let nan = bytes(&vec![f32::NAN; (rows * c) as usize]);
        let mut bufs = vec![bytes(&xs), nan.clone(), nan];
        let args = [
            row_major(0, &[rows, n]),
            row_major(1, &[rows, c]),
            row_major(2, &[rows, c]),
        ];
        run(&k, [rows * c, 1, 1], &args, &mut bufs);
        let (mut want_s, mut want_m) = (Vec::new(), Vec::new());
        for r in xs.chunks(n as usize) {
            let s: f64 = r.iter().map(|&v| f64::from(v)).sum();
            let m = r
                .iter()
                .fold(f64::NEG_INFINITY, |a, &v| a.max(f64::from(v)));
            want_s.extend(std::iter::repeat_n(s, c as usize));
            want_m.extend(std::iter::repeat_n(m, c as usize));
        }
        assert_close(&floats(&bufs[1]), &want_s, 1e-5, "cluster sum");
        assert_close(&floats(&bufs[2]), &want_m, 0.0, "cluster max");
    }
}
