//! A GEMM as a tile program: `c = a @ b` (f32, FFMA path), lowered to HIR and
//! run on the reference interpreter against an f64 reference.
//!
//! ```text
//! cargo run -p zyntax-tile --example gemm -- 17 33 9
//! ```

use zyntax_hir::{Arch, Type};
use zyntax_interp::{Arg, Interpreter};
use zyntax_tile::{heuristic, GemmProblem, Schedule, TileBuilder, TileKernel, TileResult};

/// The tile program: each program instance computes one [BM, BN] tile of c.
pub fn gemm(schedule: Schedule) -> TileResult<TileKernel> {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    let a = t.view_param("a", Type::F32, 2); // [M, K]
    let b = t.view_param("b", Type::F32, 2); // [K, N]
    let c = t.view_param("c", Type::F32, 2); // [M, N]
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dims: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (m, n, k) = match dims[..] {
        [m, n, k] => (m, n, k),
        _ => (17, 33, 9),
    };
    let problem = GemmProblem {
        m: m.into(),
        n: n.into(),
        k: k.into(),
        operand_bytes: 4,
    };
    let schedule = heuristic(&problem, Arch::Sm80);
    schedule.validate_gemm(4)?;
    println!("schedule {schedule:?}");
    let kernel = gemm(schedule.clone())?;
    let hir = zyntax_hir::print_module(&kernel.module);
    println!(
        "HIR: {} lines, launch {:?}",
        hir.lines().count(),
        kernel.launch
    );

    // Inputs from a small LCG; c starts as NaN so a missed element shows.
    let mut state = 12345u32;
    let mut next = || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1 << 24) as f32 - 0.5
    };
    let av: Vec<f32> = (0..m * k).map(|_| next()).collect();
    let bv: Vec<f32> = (0..k * n).map(|_| next()).collect();
    let to_bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let mut buffers = vec![
        to_bytes(&av),
        to_bytes(&bv),
        to_bytes(&vec![f32::NAN; (m * n) as usize]),
    ];
    // Each view is (pointer, extents..., strides...).
    let view = |buf, rows: u32, cols: u32| {
        [
            Arg::Buffer(buf),
            Arg::Int(rows.into()),
            Arg::Int(cols.into()),
            Arg::Int(cols.into()),
            Arg::Int(1),
        ]
    };
    let args: Vec<Arg> = [view(0, m, k), view(1, k, n), view(2, m, n)].concat();
    let grid = schedule.grid(&[m.into(), n.into()])?;
    Interpreter::new(&kernel.module)?.launch(
        "gemm",
        grid,
        kernel.launch.block,
        0,
        &args,
        &mut buffers,
    )?;

    let mut worst = 0f64;
    for (idx, chunk) in buffers[2].chunks_exact(4).enumerate() {
        let got = f64::from(f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
        let (i, j) = (idx / n as usize, idx % n as usize);
        let want: f64 = (0..k as usize)
            .map(|kk| f64::from(av[i * k as usize + kk]) * f64::from(bv[kk * n as usize + j]))
            .sum();
        // A NaN (an element never written) counts as an infinite error.
        let err = (got - want).abs();
        worst = if err.is_nan() {
            f64::INFINITY
        } else {
            worst.max(err)
        };
    }
    println!("{m}x{n}x{k} on the interpreter: max |error| vs f64 = {worst:e}");
    if worst >= 1e-4 {
        return Err(format!("GEMM differs from the reference by {worst}").into());
    }
    Ok(())
}
