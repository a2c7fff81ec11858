//! The warp-specialised tile GEMM (`lower/pipeline_ws.rs`) with an
//! element-wise epilogue between its K loop and its store: a scale, a bias
//! row (broadcast over M) or column (over N), a residual tile read from a
//! tensor, relu or GELU (tanh form), the cast to the output dtype. The
//! consumers apply it to the wgmma accumulator in registers; the bias and
//! residual are loaded in the accumulator's layout (`infer/remat.rs`), so
//! the kernel needs no shared-memory scratch and stays warp-specialised.
//! Run on the interpreter against an f64 reference of the rounded inputs,
//! the output poisoned (NaN) first, with tails in M, N and K; and through
//! ptxas with `--features compute`.

mod common;
use common::*;
use half::bf16;
use zyntax_hir::tensormap::{Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc};
use zyntax_hir::{ApproxOp, Arch, ScalarType, Type, UnOp};
use zyntax_interp::tma::InterpTensorMap;
use zyntax_interp::{Arg, Interpreter};
use zyntax_tile::{Schedule, TileBuilder, TileId, TileKernel, TileResult};

#[derive(Copy, Clone, Debug, PartialEq)]
enum Act {
    None,
    Relu,
    Gelu,
    /// GELU on `tanh.approx.f32` (`MapOp::Approx`), as `kernels/gemm_tile.py`
    /// runs it into bf16 outputs.
    GeluApprox,
}

/// What the epilogue applies, in this order: `scale`, the bias row, the
/// bias column, the residual, the activation; then the cast to `out`.
#[derive(Clone, Debug)]
struct Epi {
    scale: Option<f64>,
    row_bias: bool,
    col_bias: bool,
    residual: bool,
    act: Act,
    out: Type,
}

const GELU_C: f64 = 0.797_884_560_802_865_4;

fn gemm(schedule: Schedule, e: &Epi) -> TileResult<TileKernel> {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm_epi", schedule);
    let a = t.view_param_aligned("a", Type::BF16, 2, 1, 16);
    let b = t.view_param_aligned("b", Type::BF16, 2, 1, 16);
    let c = t.view_param_aligned("c", e.out.clone(), 2, 1, 16);
    // [1, N] bf16, [M, 1] f32, [M, N] bf16
    let row = t.view_param_aligned("row", Type::BF16, 2, 1, 4);
    let col = t.view_param("col", Type::F32, 2);
    let res = t.view_param_aligned("res", Type::BF16, 2, 1, 16);
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
    let mut acc = acc[0].tile();
    let full = |t: &mut TileBuilder, v: f64| t.full(&[bm, bn], Type::F32, v);
    if let Some(s) = e.scale {
        let s = full(&mut t, s);
        acc = t.mul(acc, s);
    }
    if e.row_bias {
        let r = t.load(row, &[zero, n0], &[1, bn]);
        let r = t.cast(r, Type::F32);
        let r = t.broadcast(r, &[bm, bn]);
        acc = t.add(acc, r);
    }
    if e.col_bias {
        let r = t.load(col, &[m0, zero], &[bm, 1]);
        let r = t.broadcast(r, &[bm, bn]);
        acc = t.add(acc, r);
    }
    if e.residual {
        let r = t.load(res, &[m0, n0], &[bm, bn]);
        let r = t.cast(r, Type::F32);
        acc = t.add(acc, r);
    }
    acc = match e.act {
        Act::None => acc,
        Act::Relu => {
            let z = full(&mut t, 0.0);
            t.maximum(acc, z)
        }
        Act::Gelu => gelu(&mut t, acc, [bm, bn]),
        Act::GeluApprox => gelu_approx(&mut t, acc, [bm, bn]),
    };
    let out = t.cast(acc, e.out.clone());
    t.store(c, &[m0, n0], out);
    t.finish()
}

/// `x * (1 + tanh(c (x + 0.044715 x^3))) / 2`, as `kernels/gemm_tile.py`.
fn gelu(t: &mut TileBuilder, x: TileId, shape: [u32; 2]) -> TileId {
    let x2 = t.mul(x, x);
    let x3 = t.mul(x2, x);
    let k = t.full(&shape, Type::F32, 0.044715);
    let inner = t.fma(x3, k, x);
    let c = t.full(&shape, Type::F32, GELU_C);
    let inner = t.mul(inner, c);
    let th = t.unary(UnOp::Tanh, inner);
    let one = t.full(&shape, Type::F32, 1.0);
    let th = t.add(th, one);
    let half = t.full(&shape, Type::F32, 0.5);
    let xh = t.mul(x, half);
    t.mul(xh, th)
}

/// `x / 2 * (1 + tanh(c x (1 + 0.044715 x^2)))` with `tanh.approx`.
fn gelu_approx(t: &mut TileBuilder, x: TileId, shape: [u32; 2]) -> TileId {
    let full = |t: &mut TileBuilder, v: f64| t.full(&shape, Type::F32, v);
    let (k, c, half) = (full(t, 0.044715 * GELU_C), full(t, GELU_C), full(t, 0.5));
    let x2 = t.mul(x, x);
    let inner = t.fma(x2, k, c);
    let v = t.mul(inner, x);
    let th = t.approx(ApproxOp::Tanh, v);
    let h = t.mul(x, half);
    t.fma(h, th, h)
}

fn gelu64(x: f64) -> f64 {
    0.5 * x * (1.0 + (GELU_C * (x + 0.044715 * x * x * x)).tanh())
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

/// The interpreter's map of tensor map `i` over buffer `buffer`, a
/// row-major `ext` matrix of `dtype` whose rows are padded to 16 bytes.
fn map_of(
    kernel: &TileKernel,
    i: usize,
    buffer: usize,
    ext: [u32; 2],
    dtype: ScalarType,
) -> InterpTensorMap {
    let m = &kernel.launch.tensor_maps[i];
    assert_eq!((m.inner_dim, m.outer_dim), (1, 0));
    let bytes = dtype.size_bytes() as u32;
    InterpTensorMap {
        buffer,
        offset: 0,
        desc: TensorMapDesc {
            dtype,
            dims: vec![ext[1].into(), ext[0].into()],
            strides: vec![u64::from(pad16(ext[1], bytes) * bytes)],
            box_dims: m.box_dims.to_vec(),
            elem_strides: vec![1, 1],
            swizzle: Swizzle::B128,
            interleave: Interleave::None,
            oob_fill: OobFill::Zero,
            l2_promotion: L2Promotion::None,
        },
    }
}

/// `x` elements of `bytes` rounded up to a multiple of 16 bytes (TMA's
/// row strides).
fn pad16(x: u32, bytes: u32) -> u32 {
    (x * bytes).div_ceil(16) * 16 / bytes
}

/// Runs the epilogue GEMM for `m x n x k` on the interpreter and checks it.
/// With a TMA store (a third tensor map) the output's rows are padded to 16
/// bytes, and the padding must stay poisoned (TMA clips the box at N).
fn check(schedule: Schedule, e: &Epi, (m, n, k): (u32, u32, u32), ctas: u32) {
    let mut rng = Rng::new();
    let kernel = gemm(schedule.clone(), e).unwrap();
    let text = zyntax_hir::print_module(&kernel.module);
    let what = format!("{m}x{n}x{k} {e:?} {schedule:?}");
    assert!(
        text.contains("tma.load") && !text.contains("cp.async"),
        "{what}: not warp-specialised"
    );
    assert_eq!(kernel.launch.shared_bytes, 0, "{what}: scratch");
    let tma_store = schedule.tma_store;
    assert_eq!(kernel.launch.tensor_maps.len(), 2 + usize::from(tma_store));
    assert_eq!(text.contains("tma.store"), tma_store, "{what}: store path");
    // Rows padded to 8 elements (TMA's 16-byte row strides).
    let pad = |x: u32| x.div_ceil(8) * 8;
    let (ab, a64) = rounded(&mut rng, m * pad(k));
    let (bb, b64) = rounded(&mut rng, k * pad(n));
    let (rowb, row64) = rounded(&mut rng, n);
    let col = rng.vec(m as usize);
    let (resb, res64) = rounded(&mut rng, m * n);
    let out_bytes = e.out.size_bytes().unwrap() as usize;
    let ldc = if tma_store {
        pad16(n, out_bytes as u32)
    } else {
        n
    };
    let poison = vec![0xFFu8; (m * ldc) as usize * out_bytes]; // NaN in f32 and bf16
    let mut bufs = vec![ab, bb, poison, rowb, bytes(&col), resb];
    let views: [(u32, u32, u32); 6] = [
        (m, k, pad(k)),
        (k, n, pad(n)),
        (m, n, ldc),
        (1, n, n),
        (m, 1, 1),
        (m, n, n),
    ];
    let mut args = Vec::new();
    for (buf, &(r, c, ld)) in views.iter().enumerate() {
        args.push(Arg::Buffer(buf));
        args.extend([r, c, ld, 1].map(|x| Arg::Int(x.into())));
    }
    let mut it = Interpreter::new(&kernel.module).unwrap();
    it.tensor_maps
        .push(map_of(&kernel, 0, 0, [m, k], ScalarType::BF16));
    it.tensor_maps
        .push(map_of(&kernel, 1, 1, [k, n], ScalarType::BF16));
    args.extend([Arg::TensorMap(0), Arg::TensorMap(1)]);
    if tma_store {
        let out = e.out.as_scalar().unwrap();
        it.tensor_maps.push(map_of(&kernel, 2, 2, [m, n], out));
        args.push(Arg::TensorMap(2));
    }
    let pg = schedule.grid(&[m.into(), n.into()]).unwrap();
    let grid = if schedule.persistent {
        args.extend([Arg::Int(pg[0].into()), Arg::Int(pg[1].into())]);
        [ctas.min(pg[0] * pg[1]), 1, 1]
    } else {
        pg
    };
    if let Err(err) = it.launch(&kernel.name, grid, kernel.launch.block, 0, &args, &mut bufs) {
        panic!("{what}: {err}");
    }
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let (la, lb) = (pad(k) as usize, pad(n) as usize);
    let want: Vec<f64> = (0..mu * nu)
        .map(|i| {
            let (r, c) = (i / nu, i % nu);
            let mut x: f64 = (0..ku).map(|kk| a64[r * la + kk] * b64[kk * lb + c]).sum();
            x *= e.scale.unwrap_or(1.0);
            if e.row_bias {
                x += row64[c];
            }
            if e.col_bias {
                x += f64::from(col[r]);
            }
            if e.residual {
                x += res64[i];
            }
            match e.act {
                Act::None => x,
                Act::Relu => x.max(0.0),
                Act::Gelu | Act::GeluApprox => gelu64(x),
            }
        })
        .collect();
    let all: Vec<f32> = if e.out == Type::BF16 {
        bufs[2]
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect()
    } else {
        floats(&bufs[2])
    };
    let ld = ldc as usize;
    let got: Vec<f32> = (0..mu * nu).map(|i| all[i / nu * ld + i % nu]).collect();
    let padding = (0..mu * ld).filter(|i| i % ld >= nu);
    assert!(
        padding.clone().all(|i| all[i].is_nan()),
        "{what}: a store past N"
    );
    // bf16 keeps 8 bits; tanh runs on ex2.approx.
    let tol = if e.out == Type::BF16 { 1e-2 } else { 1e-4 };
    assert_close(&got, &want, tol, &what);
}

fn epi(act: Act) -> Epi {
    Epi {
        scale: None,
        row_bias: true,
        col_bias: false,
        residual: false,
        act,
        out: Type::F32,
    }
}

/// [`epi`] into bf16.
fn bf16_epi(act: Act) -> Epi {
    Epi {
        out: Type::BF16,
        ..epi(act)
    }
}

#[test]
fn ws_epilogue_bias_row_each_activation() {
    for act in [Act::None, Act::Relu, Act::Gelu] {
        check(ws([64, 64], 4, 2, false), &epi(act), (72, 70, 200), 0);
    }
}

#[test]
fn ws_epilogue_bf16_out_persistent_two_warpgroups() {
    // bias + GELU into bf16, 8 consumer warps (setmaxnreg), persistent over
    // 2x2 instances on 3 CTAs, tails in M and N.
    let e = Epi {
        out: Type::BF16,
        ..epi(Act::Gelu)
    };
    check(ws([128, 128], 8, 3, true), &e, (130, 200, 128), 3);
}

#[test]
fn ws_epilogue_column_bias_scale_residual() {
    let e = Epi {
        scale: Some(0.25),
        row_bias: false,
        col_bias: true,
        residual: true,
        act: Act::Relu,
        out: Type::F32,
    };
    check(ws([64, 64], 4, 3, true), &e, (100, 72, 192), 2);
    // Everything at once, ping-pong consumer sets.
    let all = Epi {
        row_bias: true,
        act: Act::Gelu,
        out: Type::BF16,
        ..e
    };
    check(
        ws([64, 64], 4, 3, true).pingpong(true),
        &all,
        (150, 160, 200),
        2,
    );
}

#[test]
fn ws_tma_store_one_box_per_set() {
    // 64x64 bf16: one 64-column box; not persistent, then persistent with
    // ping-pong sets (each its own buffer and barrier); tails in M, N, K.
    let e = Epi {
        out: Type::BF16,
        ..epi(Act::Gelu)
    };
    check(
        ws([64, 64], 4, 2, false).tma_store(true),
        &e,
        (72, 70, 200),
        0,
    );
    check(
        ws([64, 64], 4, 3, true).pingpong(true).tma_store(true),
        &e,
        (150, 130, 200),
        2,
    );
}

#[test]
fn ws_tma_store_reuses_buffers() {
    // f32 out: 32-column boxes, 4 per 128x128 tile; 6 stages of 32 KiB
    // leave room for 2 box buffers of 16 KiB, so boxes 2 and 3 wait for the
    // stores of 0 and 1; persistent over 3 CTAs.
    let e = Epi {
        residual: true,
        ..epi(Act::Relu)
    };
    let s = ws([128, 128], 4, 6, true).tma_store(true);
    check(s.clone(), &e, (150, 250, 128), 3);
    // Ping-pong, the sets' buffers and barriers apart: 5 stages leave 2
    // buffers a set, 6 stages one.
    check(s.clone().stages(5).pingpong(true), &e, (150, 250, 128), 2);
    check(s.pingpong(true), &e, (150, 250, 128), 2);
}

#[test]
fn ws_tma_store_two_warpgroups_bf16() {
    // 128x256 over 8 consumer warps, bias + GELU (on tanh.approx) into
    // bf16: 4 boxes of 64 columns, 4 stages leave 2 box buffers of 16 KiB.
    let s = ws([128, 256], 8, 4, true).tma_store(true);
    check(s, &bf16_epi(Act::GeluApprox), (130, 300, 128), 2);
}

#[test]
fn ws_tma_store_parts_per_warpgroup() {
    // cuBLAS's layer tile, 256x128 over two consumer warpgroups, bias into
    // bf16: each warpgroup stores its own 64-row blocks (rows 64 wg + 128 r)
    // as [64, 64] boxes at its own barrier; 4 stages leave one 256-row box
    // buffer, so the group's parts cycle through 2 part buffers (the store
    // of the part before waited for, before each barrier). Tails in M, N, K.
    let e = bf16_epi(Act::None);
    let s = ws([256, 128], 8, 4, true).tma_store(true);
    let kernel = gemm(s.clone(), &e).unwrap();
    assert_eq!(kernel.launch.tensor_maps[2].box_dims, [64, 64]);
    let text = zyntax_hir::print_module(&kernel.module);
    for id in [3, 4] {
        assert!(
            text.contains(&format!("bar.sync {id}, 128")),
            "barrier {id}"
        );
    }
    check(s, &e, (300, 200, 136), 2);
    // One consumer warpgroup (ping-pong sets): its two 64-row blocks of
    // 128x128, f32 out (4 boxes of 32 columns), 2 box buffers: 4 part buffers.
    let s = ws([128, 128], 4, 6, true)
        .pingpong(true)
        .stages(5)
        .tma_store(true);
    let kernel = gemm(s.clone(), &epi(Act::Relu)).unwrap();
    assert_eq!(kernel.launch.tensor_maps[2].box_dims, [32, 64]);
    check(s, &epi(Act::Relu), (150, 250, 128), 2);
}

#[test]
fn ws_tma_store_needs_warp_specialize() {
    let s = Schedule::block(&[64, 64])
        .k(64)
        .arch(Arch::Sm90a)
        .tma_store(true);
    let err = gemm(s, &epi(Act::None)).unwrap_err().to_string();
    assert!(err.contains("tma_store"), "{err}");
}

/// With `--features compute`: the epilogue kernels pass ptxas without
/// spills and without serialised wgmmas (C7514).
#[cfg(feature = "compute")]
#[test]
fn ws_epilogue_passes_ptxas() {
    use zyntax_llvm::{compile_ptx, Options, Ptxas};
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    let gelu_bf16 = Epi {
        out: Type::BF16,
        ..epi(Act::Gelu)
    };
    let res = Epi {
        residual: true,
        ..gelu_bf16.clone()
    };
    for (s, e) in [
        (ws([128, 256], 8, 4, true).wgmma_in_flight(1), &gelu_bf16),
        (
            ws([128, 128], 4, 6, true).pingpong(true).wgmma_in_flight(1),
            &gelu_bf16,
        ),
        (
            ws([128, 128], 4, 6, true).pingpong(true).wgmma_in_flight(1),
            &res,
        ),
    ] {
        let kernel = gemm(s.clone(), e).unwrap();
        assert_eq!(kernel.launch.tensor_maps.len(), 2, "{s:?}");
        let ptx = compile_ptx(&kernel.module, &Options::new(Arch::Sm90a))
            .unwrap_or_else(|err| panic!("{s:?}: {err}"))
            .ptx;
        let out = ptxas
            .assemble(&ptx, Arch::Sm90a)
            .unwrap_or_else(|err| panic!("{s:?}: {err}"));
        // 168 registers at compile time, 128 of them the accumulator: bias,
        // GELU and a residual together spill a few registers (20 bytes on
        // 128x128 a set, about 50 on 128x256); op by op they spilled ~2 KB.
        let spilled: u32 = out
            .log
            .split(" bytes spill stores")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(spilled <= 64, "{s:?} {e:?}: spills\n{}", out.log);
        assert!(!out.log.contains("C7514"), "{s:?}: {}", out.log);
    }
}

/// With `--features compute`: the TMA-store epilogues (`store_tma.rs`)
/// pass ptxas, spill no more than the register stores, and keep the
/// wgmmas unserialised.
#[cfg(feature = "compute")]
#[test]
fn ws_tma_store_passes_ptxas() {
    use zyntax_llvm::{compile_ptx, Options, Ptxas};
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    let gelu_bf16 = Epi {
        out: Type::BF16,
        ..epi(Act::Gelu)
    };
    let plain = Epi {
        row_bias: false,
        ..epi(Act::None)
    };
    let pp = |stages| {
        ws([128, 128], 4, stages, true)
            .pingpong(true)
            .wgmma_in_flight(1)
            .tma_store(true)
    };
    let coop = ws([128, 256], 8, 4, true)
        .wgmma_in_flight(1)
        .tma_store(true);
    let approx = Epi {
        act: Act::GeluApprox,
        ..gelu_bf16.clone()
    };
    // cuBLAS's layer tile (the QKV projection's), stored in 64-row parts
    // per warpgroup.
    let layer = ws([256, 128], 8, 4, true)
        .wgmma_in_flight(1)
        .tma_store(true);
    let bias_bf16 = bf16_epi(Act::None);
    for (s, e) in [
        (coop.clone(), &gelu_bf16),
        (coop, &plain),
        (pp(5), &gelu_bf16),
        (pp(6), &approx),
        (layer.clone(), &bias_bf16),
        (layer, &approx),
    ] {
        let kernel = gemm(s.clone(), e).unwrap();
        assert_eq!(kernel.launch.tensor_maps.len(), 3, "{s:?}");
        let ptx = compile_ptx(&kernel.module, &Options::new(Arch::Sm90a))
            .unwrap_or_else(|err| panic!("{s:?}: {err}"))
            .ptx;
        assert!(
            ptx.contains("cp.async.bulk.tensor.2d.global.shared"),
            "{s:?}"
        );
        let out = ptxas
            .assemble(&ptx, Arch::Sm90a)
            .unwrap_or_else(|err| panic!("{s:?}: {err}"));
        let spilled: u32 = out
            .log
            .split(" bytes spill stores")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(spilled <= 64, "{s:?} {e:?}: spills\n{}", out.log);
        assert!(!out.log.contains("C7514"), "{s:?}: {}", out.log);
    }
}
