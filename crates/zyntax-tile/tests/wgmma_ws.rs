//! The plain tile GEMM with a warp-specialised schedule on sm_90a
//! (`lower/pipeline_ws.rs`): a producer warpgroup loading the stages with
//! TMA through mbarrier full/empty rings, consumer warpgroups on wgmma,
//! optionally persistent over the program's grid in grouped order. Run on
//! the interpreter (which implements TMA with its swizzle and zero fill,
//! mbarriers with transaction counts, wgmma and setmaxnreg) against an f64
//! reference of the rounded inputs, c poisoned (NaN) first: tails in M, N
//! and K, the ring wrapping within and across program instances, 4 and 8
//! consumer warps, a transposed `a` or `b`. The same kernels go through
//! ptxas in `wgmma_ptx.rs`-style checks below when it is installed.

mod common;
use common::*;
use half::bf16;
use zyntax_hir::tensormap::{Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc};
use zyntax_hir::{Arch, ScalarType, Type};
use zyntax_interp::tma::InterpTensorMap;
use zyntax_interp::{Arg, Interpreter};
use zyntax_tile::{Schedule, TileBuilder, TileKernel, TileResult};

/// Which operand is stored transposed (unit stride along M for `a`, along
/// K for `b`).
#[derive(Copy, Clone, Debug, PartialEq)]
enum Trans {
    None,
    A,
    B,
    /// Both (the swapped small-M form of a `[K, N]` weight: `a` is `B^T`).
    Ab,
}

impl Trans {
    /// Whether `a` and whether `b` is stored transposed.
    fn operands(self) -> [bool; 2] {
        [
            matches!(self, Trans::A | Trans::Ab),
            matches!(self, Trans::B | Trans::Ab),
        ]
    }
}

fn gemm(schedule: Schedule, trans: Trans) -> TileResult<TileKernel> {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    let a_unit = if trans.operands()[0] { 0 } else { 1 };
    let b_unit = if trans.operands()[1] { 0 } else { 1 };
    let a = t.view_param_aligned("a", Type::BF16, 2, a_unit, 16);
    let b = t.view_param_aligned("b", Type::BF16, 2, b_unit, 16);
    let c = t.view_param_aligned("c", Type::F32, 2, 1, 16);
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

fn ws(block: [u32; 2], warps: u32, stages: u32, persistent: bool) -> Schedule {
    Schedule::block(&block)
        .k(64)
        .warps(warps)
        .stages(stages)
        .arch(Arch::Sm90a)
        .warp_specialize(true)
        .persistent(persistent)
}

/// Random bf16 values: the bytes and the exact values.
fn rounded(rng: &mut Rng, n: u32) -> (Vec<u8>, Vec<f64>) {
    let h: Vec<bf16> = rng
        .vec(n as usize)
        .iter()
        .map(|&x| bf16::from_f32(x))
        .collect();
    (
        h.iter().flat_map(|x| x.to_le_bytes()).collect(),
        h.iter().map(|x| x.to_f64()).collect(),
    )
}

/// The tensor map the launch builds for parameter view `view` (extents and
/// strides in elements, as the kernel gets them) from the kernel's
/// [`zyntax_tile::TensorMapParam`].
fn map_of(
    kernel: &TileKernel,
    i: usize,
    buffer: usize,
    ext: &[u32],
    str: &[u32],
) -> InterpTensorMap {
    let m = &kernel.launch.tensor_maps[i];
    assert_eq!(
        str[m.inner_dim], 1,
        "the inner dim of a map has unit stride"
    );
    InterpTensorMap {
        buffer,
        offset: 0,
        desc: TensorMapDesc {
            dtype: ScalarType::BF16,
            dims: vec![ext[m.inner_dim].into(), ext[m.outer_dim].into()],
            strides: vec![u64::from(str[m.outer_dim]) * 2],
            box_dims: m.box_dims.to_vec(),
            elem_strides: vec![1, 1],
            swizzle: Swizzle::B128,
            interleave: Interleave::None,
            oob_fill: OobFill::Zero,
            l2_promotion: L2Promotion::None,
        },
    }
}

/// Runs `c = a @ b` for `m x n x k` on the interpreter and checks it; a
/// persistent kernel gets `ctas` CTAs.
fn check(schedule: Schedule, trans: Trans, (m, n, k): (u32, u32, u32), ctas: u32) {
    let mut rng = Rng::new();
    let kernel = gemm(schedule.clone(), trans).unwrap();
    let text = zyntax_hir::print_module(&kernel.module);
    assert!(
        text.contains("tma.load") && text.contains("mbarrier") && !text.contains("cp.async"),
        "{schedule:?}: not warp-specialised\n{text}"
    );
    assert_eq!(kernel.launch.tensor_maps.len(), 2);
    assert_eq!(
        kernel.launch.block[0],
        schedule.threads() * schedule.consumer_sets() + 128
    );
    assert_eq!(kernel.launch.persistent, schedule.persistent);
    // a: m x k (or k x m stored, read transposed); b: k x n (or n x k).
    // Rows are padded to 8 elements: TMA needs 16-byte row strides (the
    // launch refuses others); the extents keep their tails.
    let pad = |x: u32| x.div_ceil(8) * 8;
    let lda = if trans.operands()[0] { pad(m) } else { pad(k) };
    let ldb = if trans.operands()[1] { pad(k) } else { pad(n) };
    let a_rows = if trans.operands()[0] { k } else { m };
    let b_rows = if trans.operands()[1] { n } else { k };
    let (ab, a64) = rounded(&mut rng, a_rows * lda);
    let (bb, b64) = rounded(&mut rng, b_rows * ldb);
    let mut bufs = vec![ab, bb, bytes(&vec![f32::NAN; (m * n) as usize])];
    let a_str = if trans.operands()[0] {
        vec![1, lda]
    } else {
        vec![lda, 1]
    };
    let b_str = if trans.operands()[1] {
        vec![1, ldb]
    } else {
        vec![ldb, 1]
    };
    let mut args = Vec::new();
    for (buf, ext, str) in [
        (0usize, vec![m, k], a_str.clone()),
        (1, vec![k, n], b_str.clone()),
        (2, vec![m, n], vec![n, 1]),
    ] {
        args.push(Arg::Buffer(buf));
        args.extend(ext.iter().map(|&s| Arg::Int(s.into())));
        args.extend(str.iter().map(|&s| Arg::Int(s.into())));
    }
    let mut it = Interpreter::new(&kernel.module).unwrap();
    it.tensor_maps.push(map_of(&kernel, 0, 0, &[m, k], &a_str));
    it.tensor_maps.push(map_of(&kernel, 1, 1, &[k, n], &b_str));
    args.extend([Arg::TensorMap(0), Arg::TensorMap(1)]);
    let program_grid = schedule.grid(&[m.into(), n.into()]).unwrap();
    let c = kernel.launch.cluster;
    assert_eq!(c, schedule.cluster);
    if c > 1 {
        assert!(
            text.contains("tma.load.multicast") && text.contains("mapa"),
            "{schedule:?}: no multicast\n{text}"
        );
    }
    let grid = if schedule.persistent {
        args.extend([
            Arg::Int(program_grid[0].into()),
            Arg::Int(program_grid[1].into()),
        ]);
        // Whole clusters, no more than there are units of `c` instances.
        let [gx, gy] = [program_grid[0], program_grid[1]];
        let units = if schedule.cluster_n {
            gx * gy.div_ceil(c)
        } else {
            gx.div_ceil(c) * gy
        };
        [c * (ctas / c).min(units).max(1), 1, 1]
    } else {
        program_grid
    };
    if let Err(e) = it.launch(&kernel.name, grid, kernel.launch.block, 0, &args, &mut bufs) {
        panic!("{schedule:?}: {e}");
    }
    let (nu, ku) = (n as usize, k as usize);
    let (la, lb) = (lda as usize, ldb as usize);
    let a_at = |i: usize, kk: usize| {
        if trans.operands()[0] {
            a64[kk * la + i]
        } else {
            a64[i * la + kk]
        }
    };
    let b_at = |kk: usize, j: usize| {
        if trans.operands()[1] {
            b64[j * lb + kk]
        } else {
            b64[kk * lb + j]
        }
    };
    let want: Vec<f64> = (0..m as usize * nu)
        .map(|e| {
            let (i, j) = (e / nu, e % nu);
            (0..ku).map(|kk| a_at(i, kk) * b_at(kk, j)).sum()
        })
        .collect();
    let what = format!("{m}x{n}x{k} {trans:?} {schedule:?}");
    assert_close(&floats(&bufs[2]), &want, 1e-5, &what);
}

#[test]
fn ws_gemm_tails_and_ring_wrap() {
    // 4 K steps (the last a tail) through 2 stages (no wgmma group in
    // flight) and 3 (one in flight); tails in M and N.
    check(ws([64, 64], 4, 2, false), Trans::None, (72, 70, 200), 0);
    check(ws([64, 64], 4, 3, false), Trans::None, (64, 128, 256), 0);
}

#[test]
fn ws_gemm_two_consumer_warpgroups() {
    // 128x128 over 8 consumer warps: setmaxnreg moves registers.
    check(ws([128, 128], 8, 3, false), Trans::None, (130, 128, 128), 0);
}

#[test]
fn ws_gemm_persistent_grouped() {
    // 3x3 program instances on 2 CTAs: each walks several, the ring counter
    // running on across them (K of 3 steps over 2 stages keeps the parity
    // changing between instances).
    check(ws([64, 64], 4, 2, true), Trans::None, (150, 160, 150), 2);
    check(ws([64, 64], 4, 3, true), Trans::None, (130, 192, 64), 4);
    // No wgmma group in flight: each stage is handed back at once.
    let s = ws([64, 64], 4, 3, true).wgmma_in_flight(0);
    check(s, Trans::None, (150, 128, 320), 2);
}

#[test]
fn ws_gemm_pingpong() {
    // Two consumer sets take the instances of a CTA in turn: 3x3 instances
    // on 2 CTAs (5 and 4 each: both sets run several, set 0 one more), K of
    // 4 steps over 3 stages (the parity changes between instances), with
    // and without a wgmma group in flight; then one CTA per instance (set 1
    // idle) and a CTA of 4 instances on 128x128 tiles over 4 warps a set.
    let pp = |block, stages| ws(block, 4, stages, true).pingpong(true);
    check(pp([64, 64], 3), Trans::None, (150, 160, 200), 2);
    check(
        pp([64, 64], 3).wgmma_in_flight(1),
        Trans::None,
        (150, 160, 200),
        2,
    );
    check(pp([64, 64], 2), Trans::B, (100, 72, 192), 4);
    check(pp([128, 128], 4), Trans::None, (130, 200, 128), 1);
}

#[test]
fn ws_pingpong_needs_persistent() {
    let s = ws([128, 128], 4, 4, false).pingpong(true);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("pingpong"), "{e}");
}

#[test]
fn ws_gemm_transposed_operands() {
    check(ws([64, 128], 4, 3, false), Trans::A, (64, 130, 128), 0);
    check(ws([64, 64], 4, 2, true), Trans::B, (100, 72, 192), 3);
}

#[test]
fn ws_gemm_narrow_kmajor_b_deep_ring() {
    // The swapped small-M form (`schedule::swapped_schedule`): weight rows
    // on the M side, a few tokens as a narrow N tile of a K-major `b`
    // (wgmma n8 / n16 / n32), rings deeper than the K loop and wrapping;
    // tails in every dim.
    check(ws([64, 8], 4, 12, false), Trans::B, (130, 3, 200), 0);
    check(ws([128, 16], 4, 5, false), Trans::B, (200, 17, 640), 0);
    check(ws([64, 32], 4, 16, false), Trans::B, (64, 32, 64), 0);
    // `a` stored k x m too (`B^T` of a row-major `[K, N]` weight).
    check(ws([128, 8], 4, 6, false), Trans::Ab, (130, 5, 448), 0);
}

/// The swapped small-M program of `kernels/gemm_tile.py` (`Spec.swap`):
/// `c^T = w x^T + bias` with the weight `w` (`[n, k]`) as `a`, the tokens
/// `x^T` (`[k, m]`, K-major) as a narrow `b`, `c^T` stored into a view
/// unit-stride along its rows (`c` row-major `[m, n]`) and the bias a
/// per-row (`[n, 1]`) broadcast, on the warp-specialised pipeline (not
/// persistent); tails in every dim, the ring deeper than the K loop.
#[test]
fn ws_swapped_epilogue_stores_c_transposed() {
    use zyntax_hir::BinOp;
    // (u32 extents, as the views take them)
    let cases = [
        ([64, 8], 12, (3u32, 130u32, 200u32)),
        ([128, 16], 4, (17, 200, 328)),
    ];
    for (block, stages, (m, n, k)) in cases {
        let s = ws(block, 4, stages, false);
        let (bw, bt) = (block[0], block[1]);
        let mut t = TileBuilder::new("swapped", s.clone());
        let w = t.view_param_aligned("w", Type::BF16, 2, 1, 16);
        let x = t.view_param_aligned("x", Type::BF16, 2, 0, 16);
        let c = t.view_param_aligned("c", Type::F32, 2, 0, 16);
        let bias = t.view_param("bias", Type::F32, 2);
        let (pm, pn) = (t.program_id(0), t.program_id(1));
        let (cbw, cbt, c64, zero) = (t.index(bw), t.index(bt), t.index(64), t.index(0));
        let (w0, t0) = (t.scalar_mul(pm, cbw), t.scalar_mul(pn, cbt));
        let kk = t.dim(w, 1);
        let acc0 = t.full(&[bw, bt], Type::F32, 0.0);
        let acc = t.for_range(zero, kk, c64, &[acc0.into()], |t, k0, carried| {
            let a = t.load(w, &[w0, k0], &[bw, 64]);
            let b = t.load(x, &[k0, t0], &[64, bt]);
            vec![t.dot(a, b, carried[0].tile()).into()]
        });
        let col = t.load(bias, &[w0, zero], &[bw, 1]);
        let col = t.broadcast(col, &[bw, bt]);
        let out = t.binary(BinOp::Add, acc[0].tile(), col);
        t.store(c, &[w0, t0], out);
        let kernel = t.finish().unwrap();
        assert_eq!(kernel.launch.tensor_maps.len(), 2);
        assert!(!kernel.launch.persistent);
        let mut rng = Rng::new();
        let ldk: u32 = k.div_ceil(8) * 8;
        let (wb, w64) = rounded(&mut rng, n * ldk);
        let (xb, x64) = rounded(&mut rng, m * ldk);
        let b32 = rng.vec(n as usize);
        let mut bufs = vec![
            wb,
            xb,
            bytes(&vec![f32::NAN; (m * n) as usize]),
            bytes(&b32),
        ];
        let args = [
            TArg::View(0, vec![n, k], vec![ldk, 1]),
            TArg::View(1, vec![k, m], vec![1, ldk]),
            TArg::View(2, vec![n, m], vec![1, n]),
            TArg::View(3, vec![n, 1], vec![1, 0]),
        ];
        let grid = s.grid(&[n.into(), m.into()]).unwrap();
        run(&kernel, grid, &args, &mut bufs);
        let (ku, lk) = (k as usize, ldk as usize);
        let want: Vec<f64> = (0..(m * n) as usize)
            .map(|e| {
                let (i, j) = (e / n as usize, e % n as usize); // c[i, j]: token i, weight row j
                let dot: f64 = (0..ku).map(|kk| x64[i * lk + kk] * w64[j * lk + kk]).sum();
                dot + f64::from(b32[j])
            })
            .collect();
        assert_close(
            &floats(&bufs[2]),
            &want,
            1e-5,
            &format!("{m}x{n}x{k} {s:?}"),
        );
    }
}

#[test]
fn ws_narrow_n_needs_kmajor_b() {
    // An N-major `b` stages boxes of 64 columns: a 16-wide tile is refused.
    let e = gemm(
        ws([64, 16], 4, 4, false).dot_path(zyntax_tile::DotPath::Wgmma),
        Trans::None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("multiple of 64"), "{e}");
}

#[test]
fn ws_falls_back_without_alignment_promises() {
    // Views that promise nothing keep the cp.async pipeline (no tensor maps).
    let s = ws([64, 64], 4, 2, false);
    let mut t = TileBuilder::new("gemm", s);
    let a = t.view_param("a", Type::BF16, 2);
    let b = t.view_param("b", Type::BF16, 2);
    let c = t.view_param("c", Type::F32, 2);
    let (pm, pn) = (t.program_id(0), t.program_id(1));
    let (c64, zero) = (t.index(64), t.index(0));
    let (m0, n0) = (t.scalar_mul(pm, c64), t.scalar_mul(pn, c64));
    let k = t.dim(a, 1);
    let acc0 = t.full(&[64, 64], Type::F32, 0.0);
    let acc = t.for_range(zero, k, c64, &[acc0.into()], |t, k0, carried| {
        let x = t.load(a, &[m0, k0], &[64, 64]);
        let y = t.load(b, &[k0, n0], &[64, 64]);
        vec![t.dot(x, y, carried[0].tile()).into()]
    });
    t.store(c, &[m0, n0], acc[0].tile());
    let kernel = t.finish().unwrap();
    assert!(kernel.launch.tensor_maps.is_empty());
    assert_eq!(kernel.launch.block[0], 128);
    assert!(zyntax_hir::print_module(&kernel.module).contains("wgmma"));
}

/// With `--features compute`: the warp-specialised kernels compile to PTX
/// with TMA loads, mbarrier waits, `setmaxnreg` (two consumer warpgroups)
/// and wgmma, and pass `ptxas` (`$ZYNTAX_PTXAS`) without spilling.
#[cfg(feature = "compute")]
#[test]
fn ws_gemm_passes_ptxas() {
    use zyntax_llvm::{compile_ptx, Options, Ptxas};
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    for (block, warps, stages, persistent, trans) in [
        ([128, 128], 4, 6, true, Trans::None),
        ([128, 256], 8, 4, true, Trans::None),
        ([256, 128], 8, 4, true, Trans::None),
        ([128, 256], 8, 3, false, Trans::None),
        ([128, 128], 8, 4, true, Trans::A),
        ([128, 128], 4, 4, true, Trans::B),
        ([64, 64], 4, 2, false, Trans::None),
        // the swapped small-M form: 8 / 16 tokens, deep rings
        ([128, 16], 4, 12, false, Trans::B),
        ([64, 8], 4, 16, false, Trans::B),
        ([128, 16], 4, 12, false, Trans::Ab),
    ] {
        // The first: ping-pong (two sets of 4 consumer warps, setmaxnreg).
        let s = ws(block, warps, stages, persistent).pingpong(stages == 6);
        // One wgmma group in flight for the persistent ones.
        let s = s.wgmma_in_flight(u32::from(persistent));
        let kernel = gemm(s.clone(), trans).unwrap();
        let ptx = compile_ptx(&kernel.module, &Options::new(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{s:?}: {e}"))
            .ptx;
        let mut needles = vec![
            "cp.async.bulk.tensor.2d",
            "mbarrier.try_wait.parity",
            "mbarrier.arrive.expect_tx",
            "wgmma.mma_async",
        ];
        if warps * s.consumer_sets() >= 8 {
            needles.push("setmaxnreg.inc");
        }
        if s.pingpong {
            needles.push("bar.arrive");
        }
        for needle in needles {
            assert!(ptx.contains(needle), "{s:?}: missing `{needle}`");
        }
        if let Ok(dir) = std::env::var("WGMMA_PTX_DUMP") {
            let path = format!(
                "{dir}/gemm_ws_{}x{}_w{warps}_s{stages}_p{persistent}.ptx",
                block[0], block[1]
            );
            std::fs::write(path, &ptx).unwrap();
        }
        let out = ptxas
            .assemble(&ptx, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert!(
            !out.log.contains("bytes spill stores") || out.log.contains(" 0 bytes spill stores"),
            "{s:?}: spills\n{}",
            out.log
        );
        // No "wgmma serialized" (C7514): with a group in flight it would
        // wait for each wgmma in turn.
        assert!(!out.log.contains("C7514"), "{s:?}: {}", out.log);
    }
}

#[test]
fn ws_gemm_clusters() {
    // Clusters of 2 along M (b shared: with 64x64 tiles b's stage is one
    // box of 64 k-rows x 64 columns, so each CTA loads 32 of its k rows)
    // and along N (a shared), on
    // 2 and 4 CTAs: an odd number of instance rows (or columns) leaves the
    // last unit's second CTA past the grid; tails in M, N and K; the ring
    // wrapping across instances.
    let cl = |block, stages, n| ws(block, 4, stages, true).cluster(2).cluster_n(n);
    check(cl([64, 64], 2, false), Trans::None, (150, 160, 200), 4);
    check(cl([64, 64], 3, true), Trans::None, (130, 150, 150), 2);
    // b of 128 columns: two boxes, one per CTA; a wgmma group in flight.
    check(
        cl([64, 128], 3, false).wgmma_in_flight(1),
        Trans::None,
        (200, 130, 192),
        4,
    );
    // Transposed operands: b stored n x k (one box of bn rows, split), a
    // stored k x m (bm / 64 boxes).
    check(cl([64, 64], 2, false), Trans::B, (100, 72, 192), 2);
    check(cl([128, 64], 3, true), Trans::A, (130, 140, 128), 2);
    // Ping-pong consumer sets within each CTA of the cluster.
    check(
        cl([64, 64], 3, false).pingpong(true),
        Trans::None,
        (150, 160, 200),
        2,
    );
}

#[test]
fn ws_cluster_needs_persistent() {
    let s = ws([64, 64], 4, 2, false).cluster(2);
    let e = gemm(s, Trans::None).unwrap_err().to_string();
    assert!(e.contains("`cluster`"), "{e}");
}

/// With `--features compute`: cluster kernels (declared `.reqnctapercluster`)
/// with multicast TMA loads, remote relaxed arrivals and cluster barriers
/// pass `ptxas` without spills or serialised wgmmas.
#[cfg(feature = "compute")]
#[test]
fn ws_cluster_passes_ptxas() {
    use zyntax_llvm::{compile_ptx, Options, Ptxas};
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    for (block, warps, stages, pingpong, along_n) in [
        ([128, 256], 8, 4, false, false),
        ([128, 256], 8, 4, false, true),
        // cuBLAS's layer tile: two warpgroups of 128x128 (two m64 wgmmas
        // each); along N the CTAs split the one 256-row box of `a`
        ([256, 128], 8, 4, false, true),
        ([256, 128], 8, 4, false, false),
        ([128, 128], 4, 6, true, true),
    ] {
        let s = ws(block, warps, stages, true)
            .pingpong(pingpong)
            .wgmma_in_flight(1)
            .cluster(2)
            .cluster_n(along_n);
        let kernel = gemm(s.clone(), Trans::None).unwrap();
        assert_eq!(kernel.launch.cluster, 2);
        let ptx = compile_ptx(&kernel.module, &Options::new(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{s:?}: {e}"))
            .ptx;
        for needle in [
            ".reqnctapercluster 2, 1, 1",
            ".multicast::cluster",
            "mapa",
            "barrier.cluster.wait",
            "mbarrier.try_wait.parity",
        ] {
            assert!(ptx.contains(needle), "{s:?}: missing `{needle}`");
        }
        if let Ok(dir) = std::env::var("WGMMA_PTX_DUMP") {
            let path = format!(
                "{dir}/gemm_ws_cluster_{}x{}_n{along_n}.ptx",
                block[0], block[1]
            );
            std::fs::write(path, &ptx).unwrap();
        }
        let out = ptxas
            .assemble(&ptx, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert!(
            !out.log.contains("bytes spill stores") || out.log.contains(" 0 bytes spill stores"),
            "{s:?}: spills\n{}",
            out.log
        );
        assert!(!out.log.contains("C7514"), "{s:?}: {}", out.log);
    }
}
