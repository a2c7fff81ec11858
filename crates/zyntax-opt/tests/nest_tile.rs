//! Nests lowered to tile programs (`zyntax_opt::nest_tile`), run on the
//! reference interpreter against an f64 evaluation of the nest description
//! itself on fresh pseudo-random inputs (outputs poisoned with NaN first),
//! and the recognition report's refusals.

use half::{bf16, f16};
use zyntax_hir::{BinOp, Type, UnOp};
#[path = "common/interp_launch.rs"]
mod interp_launch;
use interp_launch::interp_launch;
use zyntax_opt::nest_tile::{
    lower, recognize, tiling_report, Access, Affine, Buffer, Expr, Index, Loop, LoopKind,
    NestKernel, NestSpec, NestTileError, NestTileOptions, Recognition, RefusalKind,
};

struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        eprintln!("seed {s}");
        Rng(s)
    }
    /// Uniform in [-2, 2).
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    }
}

fn elem_bytes(t: &Type) -> usize {
    t.size_bytes().unwrap_or(4) as usize
}

/// Random values rounded to `elem`: the bytes and the exact values.
fn random(rng: &mut Rng, n: u64, elem: &Type) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::new();
    let mut vals = Vec::new();
    for _ in 0..n {
        let x = rng.next();
        let v = match elem {
            t if *t == Type::BF16 => {
                let h = bf16::from_f32(x);
                bytes.extend(h.to_le_bytes());
                h.to_f64()
            }
            t if *t == Type::F16 => {
                let h = f16::from_f32(x);
                bytes.extend(h.to_le_bytes());
                h.to_f64()
            }
            t if *t == Type::F64 => {
                bytes.extend(f64::from(x).to_le_bytes());
                f64::from(x)
            }
            _ => {
                bytes.extend(x.to_le_bytes());
                f64::from(x)
            }
        };
        vals.push(v);
    }
    (bytes, vals)
}

fn decode(bytes: &[u8], elem: &Type) -> Vec<f64> {
    let n = elem_bytes(elem);
    bytes
        .chunks_exact(n)
        .map(|c| match n {
            8 => f64::from_le_bytes(c.try_into().unwrap_or_default()),
            4 => f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ if *elem == Type::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            _ => f16::from_le_bytes([c[0], c[1]]).to_f64(),
        })
        .collect()
}

/// The nest evaluated directly, in f64.
fn reference(spec: &NestSpec, vals: &[Vec<f64>]) -> Vec<f64> {
    let out_buf = &spec.buffers[spec.output.buffer];
    let mut out = vals[spec.output.buffer].clone();
    let flat = |a: &Access, iv: &[u64]| -> usize {
        let buf = &spec.buffers[a.buffer];
        let mut e = 0i64;
        for (d, ix) in a.index.iter().enumerate() {
            let Index::Affine(af) = ix else { panic!() };
            let v = af.constant + af.terms.iter().map(|&(l, c)| c * iv[l] as i64).sum::<i64>();
            e = e * buf.shape[d] as i64 + v;
        }
        e as usize
    };
    fn eval(
        e: &Expr,
        iv: &[u64],
        red: f64,
        vals: &[Vec<f64>],
        flat: &dyn Fn(&Access, &[u64]) -> usize,
    ) -> f64 {
        match e {
            Expr::Const(c) => *c,
            Expr::Reduced => red,
            Expr::Load(a) => vals[a.buffer][flat(a, iv)],
            Expr::Unary(op, a) => {
                let x = eval(a, iv, red, vals, flat);
                match op {
                    UnOp::Exp => x.exp(),
                    UnOp::Tanh => x.tanh(),
                    UnOp::Neg => -x,
                    _ => unimplemented!(),
                }
            }
            Expr::Binary(op, a, b) => {
                let (x, y) = (eval(a, iv, red, vals, flat), eval(b, iv, red, vals, flat));
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::Max => x.max(y),
                    BinOp::Min => x.min(y),
                    _ => unimplemented!(),
                }
            }
        }
    }
    let kinds = |k: LoopKind| -> Vec<usize> {
        (0..spec.loops.len())
            .filter(|&l| spec.loops[l].kind == k)
            .collect()
    };
    let (par, red) = (kinds(LoopKind::Parallel), kinds(LoopKind::Reduction));
    let combos = |ls: &[usize]| -> Vec<Vec<(usize, u64)>> {
        let mut all = vec![vec![]];
        for &l in ls {
            all = all
                .into_iter()
                .flat_map(|c| {
                    (0..spec.loops[l].extent).map(move |v| {
                        let mut c = c.clone();
                        c.push((l, v));
                        c
                    })
                })
                .collect();
        }
        all
    };
    for p in combos(&par) {
        let mut iv = vec![0u64; spec.loops.len()];
        for &(l, v) in &p {
            iv[l] = v;
        }
        let result = if red.is_empty() {
            eval(&spec.value, &iv, 0.0, vals, &flat)
        } else {
            let mut sum = 0.0;
            for r in combos(&red) {
                for &(l, v) in &r {
                    iv[l] = v;
                }
                sum += eval(&spec.value, &iv, 0.0, vals, &flat);
            }
            match &spec.epilogue {
                Some(e) => eval(e, &iv, sum, vals, &flat),
                None => sum,
            }
        };
        out[flat(&spec.output, &iv)] = result;
    }
    assert_eq!(out.len() as u64, out_buf.shape.iter().product::<u64>());
    out
}

/// Lowers `spec`, runs it on fresh inputs (output poisoned) and compares
/// with the f64 reference; returns the lowered kernel.
fn check(spec: &NestSpec, options: &NestTileOptions, tol: f64) -> NestKernel {
    let nk = lower(spec, options).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
    let mut rng = Rng::new();
    let mut bufs = Vec::new();
    let mut vals = Vec::new();
    for (i, b) in spec.buffers.iter().enumerate() {
        let n: u64 = b.shape.iter().product();
        let (bytes, v) = random(&mut rng, n, &b.elem);
        if i == spec.output.buffer {
            // Poisoned, except where the nest reads the output (C += ...).
            let reads_output = format!("{:?}", spec.epilogue).contains(&format!("buffer: {i},"));
            if !reads_output {
                let nan = match elem_bytes(&b.elem) {
                    8 => f64::NAN.to_le_bytes().to_vec(),
                    4 => f32::NAN.to_le_bytes().to_vec(),
                    _ => vec![0xff, 0x7f],
                };
                bufs.push(nan.repeat(n as usize));
                vals.push(vec![f64::NAN; n as usize]);
                continue;
            }
        }
        bufs.push(bytes);
        vals.push(v);
    }
    let want = reference(spec, &vals);
    interp_launch(spec, &nk, &mut bufs).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
    let out = spec.output.buffer;
    let got = decode(&bufs[out], &spec.buffers[out].elem);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{}: element {i}: got {g}, want {w}",
            spec.name
        );
    }
    nk
}

/// `C[i,j] = Σ_k A[i,k] B[k,j]` (A stored as [K, M] when `transposed_a`).
fn matmul(m: u64, n: u64, k: u64, elem: Type, transposed_a: bool) -> NestSpec {
    let (i, j, kk) = (0, 1, 2);
    let (a_shape, a_at) = if transposed_a {
        (vec![k, m], Access::at(0, &[kk, i]))
    } else {
        (vec![m, k], Access::at(0, &[i, kk]))
    };
    NestSpec {
        name: format!("matmul_{m}x{n}x{k}"),
        loops: vec![
            Loop::parallel("i", m),
            Loop::parallel("j", n),
            Loop::reduction("k", k),
        ],
        buffers: vec![
            Buffer::new("A", elem.clone(), &a_shape),
            Buffer::new("B", elem, &[k, n]),
            Buffer::new("C", Type::F32, &[m, n]),
        ],
        output: Access::at(2, &[i, j]),
        value: Expr::binary(BinOp::Mul, Expr::Load(a_at), Expr::load(1, &[kk, j])),
        epilogue: None,
    }
}

#[test]
fn f32_matmul_on_register_blocked_ffma_tiles() {
    // The FFMA tile's register-blocked accumulator (4x4 runs a thread, `a`
    // staged K-major, 16-byte shared loads): 64x64 over 4 warps (8x4 a
    // thread) and 128x128 over 8 (8x8), tails in M, N and K.
    for (block, warps, bk, (m, n, k)) in [
        ([64, 64], 4, 16, (70, 100, 37)),
        ([128, 128], 8, 8, (130, 136, 20)),
    ] {
        let spec = matmul(m, n, k, Type::F32, false);
        let options = NestTileOptions {
            schedule: Some(
                zyntax_tile::Schedule::block(&block)
                    .k(bk)
                    .warps(warps)
                    .arch(zyntax_hir::Arch::Sm90a),
            ),
            arch: zyntax_hir::Arch::Sm90a,
            ..NestTileOptions::default()
        };
        let nk = check(&spec, &options, 1e-5);
        let hir = zyntax_hir::print_module(&nk.kernel.module);
        assert!(
            hir.contains("ptr<shared, vec<f32, 4>>"),
            "{block:?}: no 16-byte shared loads"
        );
    }
}

fn on_tensor_cores(nk: &NestKernel) -> bool {
    zyntax_hir::print_module(&nk.kernel.module).contains("mma.sync")
}

#[test]
fn f32_matmul_at_odd_sizes() {
    for (m, n, k) in [(17, 33, 9), (64, 48, 40)] {
        let spec = matmul(m, n, k, Type::F32, false);
        assert!(matches!(recognize(&spec), Ok(Recognition::Contraction(_))));
        let nk = check(&spec, &NestTileOptions::default(), 1e-5);
        assert!(!on_tensor_cores(&nk));
    }
}

#[test]
fn transposed_a_matmul() {
    let spec = matmul(33, 17, 21, Type::F32, true);
    check(&spec, &NestTileOptions::default(), 1e-5);
}

#[test]
fn half_precision_matmul_on_tensor_cores() {
    for elem in [Type::BF16, Type::F16] {
        for (m, n, k) in [(17, 33, 9), (64, 48, 40)] {
            let spec = matmul(m, n, k, elem.clone(), false);
            let nk = check(&spec, &NestTileOptions::default(), 1e-5);
            assert!(on_tensor_cores(&nk), "{elem} {m}x{n}x{k}: not on mma.sync");
        }
    }
}

#[test]
fn a_fused_epilogue_at_4096_takes_128x128_and_llvm_o1() {
    // matmul + bias + gelu + residual at 4096^3 on 132 SMs: the epilogue's
    // 128x128 tile over 8 consumer warps (not 128x256), the output stored
    // through TMA (a third tensor map), and its functions at O1 (LLVM's
    // kernel pipeline).
    // Lowered only: the interpreter runs the same pipeline at 130x136 below.
    let n = 4096;
    let mut spec = matmul(n, n, n, Type::BF16, false);
    spec.buffers[2] = Buffer::new("C", Type::BF16, &[n, n]);
    spec.buffers.push(Buffer::new("bias", Type::BF16, &[n]));
    spec.buffers.push(Buffer::new("res", Type::BF16, &[n, n]));
    let biased = Expr::binary(BinOp::Add, Expr::Reduced, Expr::load(3, &[1]));
    spec.epilogue = Some(Expr::binary(
        BinOp::Add,
        gelu(biased),
        Expr::load(4, &[0, 1]),
    ));
    let options = NestTileOptions {
        arch: zyntax_hir::Arch::Sm90a,
        ..NestTileOptions::default()
    };
    let nk = lower(&spec, &options).unwrap();
    assert!(nk.schedule.tma_store && nk.schedule.warp_specialize);
    assert_eq!(nk.schedule.block, [128, 128]);
    assert_eq!(nk.kernel.launch.tensor_maps.len(), 3, "{}", nk.pipeline);
    assert!(
        nk.pipeline.ends_with("output stored through TMA)"),
        "{}",
        nk.pipeline
    );
    for f in &nk.kernel.module.functions {
        assert_eq!(
            f.constraints.opt_level,
            zyntax_hir::OptLevel::O1,
            "{}",
            f.name
        );
    }
}

#[test]
fn bf16_matmul_on_sm90a_takes_the_warp_specialised_pipeline() {
    // The library matmul's choice (ws_heuristic): with 4 SMs and a short
    // K, 128x128 tiles over two ping-pong sets of 4 consumer warps, 6
    // stages, persistent. 130x136 has tails in M and N (TMA zero-fills), K
    // of 7 steps wraps the 6-stage ring; the interpreter runs 3 CTAs over
    // the 2x2 instances. The f32 output keeps register stores: ping-pong
    // sets do not store through TMA (docs/tile.md, "Known problems").
    let sm90a = |sms| NestTileOptions {
        arch: zyntax_hir::Arch::Sm90a,
        sms,
        ..NestTileOptions::default()
    };
    for elem in [Type::BF16, Type::F16] {
        let spec = matmul(130, 136, 448, elem.clone(), false);
        let nk = check(&spec, &sm90a(4), 1e-4);
        assert_eq!(
            nk.kernel.launch.tensor_maps.len(),
            2,
            "{elem}: {}",
            nk.pipeline
        );
        assert!(nk.kernel.launch.persistent && nk.schedule.warp_specialize);
        assert_eq!(nk.schedule.block, [128, 128]);
        assert!(nk.schedule.pingpong);
        assert!(
            nk.pipeline.starts_with("warp-specialised"),
            "{}",
            nk.pipeline
        );
        assert_eq!(nk.tensor_map_views(), [0, 1]);
        let hir = zyntax_hir::print_module(&nk.kernel.module);
        assert!(
            hir.contains("tma.load") && !hir.contains("tma.store") && !hir.contains("cp.async")
        );
    }
    // The output written into columns 1.. of a 130x137 f32 buffer: its rows
    // (548 bytes) and first element are not 16-byte aligned, so TMA cannot
    // store it; plain (masked) stores, still warp-specialised.
    let mut spec = matmul(130, 136, 448, Type::BF16, false);
    spec.buffers[2] = Buffer::new("C", Type::F32, &[130, 137]);
    spec.output.index[1] = Index::Affine(Affine {
        terms: vec![(1, 1)],
        constant: 1,
    });
    let nk = lower(&spec, &sm90a(4)).unwrap();
    assert_eq!(nk.kernel.launch.tensor_maps.len(), 2, "{}", nk.pipeline);
    assert!(
        nk.pipeline.starts_with("warp-specialised") && !nk.pipeline.contains("output stored"),
        "{}",
        nk.pipeline
    );
    // The fused matmul + bias + gelu + residual: the epilogue runs in the
    // consumers' registers (its loads re-read in the accumulator's layout),
    // so it stays on the WS pipeline.
    let mut spec = matmul(130, 136, 448, Type::BF16, false);
    spec.buffers.push(Buffer::new("bias", Type::BF16, &[136]));
    spec.buffers
        .push(Buffer::new("res", Type::BF16, &[130, 136]));
    let biased = Expr::binary(BinOp::Add, Expr::Reduced, Expr::load(3, &[1]));
    spec.epilogue = Some(Expr::binary(
        BinOp::Add,
        gelu(biased),
        Expr::load(4, &[0, 1]),
    ));
    let nk = check(&spec, &sm90a(4), 1e-4);
    assert!(
        nk.pipeline.starts_with("warp-specialised"),
        "{}",
        nk.pipeline
    );
    // Why not, in the report: rows of A (K = 447 bf16) are not 16-byte
    // aligned for TMA; a transposed A is not unit-stride along k; too few
    // tiles for 132 SMs. Each keeps the cp.async wgmma pipeline.
    for (spec, why) in [
        (matmul(130, 136, 447, Type::BF16, false), "16-byte aligned"),
        (
            matmul(130, 136, 448, Type::BF16, true),
            "unit stride along `k`",
        ),
    ] {
        let nk = check(&spec, &sm90a(4), 1e-4);
        assert!(nk.kernel.launch.tensor_maps.is_empty());
        assert!(nk.pipeline.contains(why), "{}", nk.pipeline);
    }
    let nk = lower(&matmul(130, 136, 448, Type::BF16, false), &sm90a(132)).unwrap();
    assert!(
        nk.pipeline.contains("too few output tiles"),
        "{}",
        nk.pipeline
    );
    assert!(nk.pipeline.starts_with("wgmma cp.async"), "{}", nk.pipeline);
    // f32 stays on FFMA.
    let nk = lower(&matmul(130, 136, 448, Type::F32, false), &sm90a(4)).unwrap();
    assert!(nk.pipeline.starts_with("FFMA"), "{}", nk.pipeline);
}

#[test]
fn matmul_with_bias_relu_epilogue_and_accumulate() {
    let mut spec = matmul(37, 45, 19, Type::F32, false);
    spec.buffers.push(Buffer::new("bias", Type::F32, &[45]));
    let biased = Expr::binary(BinOp::Add, Expr::Reduced, Expr::load(3, &[1]));
    spec.epilogue = Some(Expr::binary(BinOp::Max, biased, Expr::Const(0.0)));
    check(&spec, &NestTileOptions::default(), 1e-5);
    // C[i,j] += Σ_k A B: the epilogue reads the output at the written element.
    spec.epilogue = Some(Expr::binary(
        BinOp::Add,
        Expr::Reduced,
        Expr::load(2, &[0, 1]),
    ));
    check(&spec, &NestTileOptions::default(), 1e-5);
}

#[test]
fn map_with_tails_and_broadcast() {
    // out[i,j] = exp(x[i,j]) * 0.5 + y[j], 37x70 (tails on both dims).
    let spec = NestSpec {
        name: "map2".into(),
        loops: vec![Loop::parallel("i", 37), Loop::parallel("j", 70)],
        buffers: vec![
            Buffer::new("x", Type::F32, &[37, 70]),
            Buffer::new("y", Type::F32, &[70]),
            Buffer::new("out", Type::F32, &[37, 70]),
        ],
        output: Access::at(2, &[0, 1]),
        value: Expr::binary(
            BinOp::Add,
            Expr::binary(
                BinOp::Mul,
                Expr::unary(UnOp::Exp, Expr::load(0, &[0, 1])),
                Expr::Const(0.5),
            ),
            Expr::load(1, &[1]),
        ),
        epilogue: None,
    };
    assert!(matches!(recognize(&spec), Ok(Recognition::Map(_))));
    check(&spec, &NestTileOptions::default(), 1e-5);
    // 1-D, 1000 elements, strided read x[2*i + 1] from a buffer of 2001.
    let spec = NestSpec {
        name: "map1".into(),
        loops: vec![Loop::parallel("i", 1000)],
        buffers: vec![
            Buffer::new("x", Type::F32, &[2001]),
            Buffer::new("out", Type::F32, &[1000]),
        ],
        output: Access::at(1, &[0]),
        value: Expr::unary(
            UnOp::Tanh,
            Expr::Load(Access {
                buffer: 0,
                index: vec![Index::Affine(Affine {
                    terms: vec![(0, 2)],
                    constant: 1,
                })],
            }),
        ),
        epilogue: None,
    };
    check(&spec, &NestTileOptions::default(), 1e-5);
}

fn refused(spec: &NestSpec) -> RefusalKind {
    match lower(spec, &NestTileOptions::default()) {
        Err(NestTileError::Refused(r)) => {
            assert!(tiling_report(spec).contains(&r.message));
            r.kind
        }
        Err(e) => panic!("{}: not a refusal: {e}", spec.name),
        Ok(_) => panic!("{}: lowered", spec.name),
    }
}

#[test]
fn refusals_say_why() {
    // A[idx[k], i]: not affine.
    let mut s = matmul(16, 16, 16, Type::F32, false);
    s.value = Expr::binary(
        BinOp::Mul,
        Expr::Load(Access {
            buffer: 0,
            index: vec![
                Index::Affine(Affine::var(0)),
                Index::Opaque("idx[k]".into()),
            ],
        }),
        Expr::load(1, &[2, 1]),
    );
    assert_eq!(refused(&s), RefusalKind::NonAffineIndex);
    // Output not indexed by j: iterations of j race.
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.buffers[2].shape = vec![8];
    s.output = Access::at(2, &[0]);
    assert_eq!(refused(&s), RefusalKind::LoopCarriedDependence);
    // The output read inside the reduction.
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.value = Expr::binary(BinOp::Mul, Expr::load(0, &[0, 2]), Expr::load(2, &[0, 1]));
    assert_eq!(refused(&s), RefusalKind::LoopCarriedDependence);
    // A map reading its neighbour: out[i] = out[i+1]... (x aliased with out).
    let s = NestSpec {
        name: "shift".into(),
        loops: vec![Loop::parallel("i", 7)],
        buffers: vec![Buffer::new("x", Type::F32, &[8])],
        output: Access::at(0, &[0]),
        value: Expr::Load(Access {
            buffer: 0,
            index: vec![Index::Affine(Affine {
                terms: vec![(0, 1)],
                constant: 1,
            })],
        }),
        epilogue: None,
    };
    assert_eq!(refused(&s), RefusalKind::LoopCarriedDependence);
    // An epilogue reading along the reduction loop.
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.epilogue = Some(Expr::binary(
        BinOp::Add,
        Expr::Reduced,
        Expr::load(0, &[0, 2]),
    ));
    assert_eq!(refused(&s), RefusalKind::NotAContraction);
    // A reversed read.
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.value = Expr::binary(
        BinOp::Mul,
        Expr::Load(Access {
            buffer: 0,
            index: vec![
                Index::Affine(Affine::var(0)),
                Index::Affine(Affine {
                    terms: vec![(2, -1)],
                    constant: 7,
                }),
            ],
        }),
        Expr::load(1, &[2, 1]),
    );
    assert_eq!(refused(&s), RefusalKind::UnsupportedAccess);
    // Out of bounds.
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.buffers[0].shape = vec![8, 4];
    assert_eq!(refused(&s), RefusalKind::UnsupportedAccess);
    // Integer buffers.
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.buffers[0].elem = Type::I32;
    assert_eq!(refused(&s), RefusalKind::UnsupportedDtype);
    // The report of a recognised nest.
    let r = tiling_report(&matmul(8, 8, 8, Type::BF16, false));
    assert!(r.contains("contraction") && r.contains("mma.sync"), "{r}");
}

/// `gelu(x) = 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))`.
fn gelu(x: Expr) -> Expr {
    let mul = |a, b| Expr::binary(BinOp::Mul, a, b);
    let add = |a, b| Expr::binary(BinOp::Add, a, b);
    let cube = mul(x.clone(), mul(x.clone(), x.clone()));
    let inner = mul(
        Expr::Const(0.797_884_560_8),
        add(x.clone(), mul(Expr::Const(0.044_715), cube)),
    );
    let t = add(Expr::Const(1.0), Expr::unary(UnOp::Tanh, inner));
    mul(mul(Expr::Const(0.5), x), t)
}

#[test]
fn fused_matmul_bias_gelu_residual() {
    // out = gelu(A·B + bias[j]) + res[i,j], bf16 operands on mma.sync and
    // f32 on FFMA, at a size with tails.
    for elem in [Type::BF16, Type::F32] {
        let mut spec = matmul(40, 24, 36, elem.clone(), false);
        spec.buffers.push(Buffer::new("bias", Type::F32, &[24]));
        spec.buffers.push(Buffer::new("res", Type::F32, &[40, 24]));
        let biased = Expr::binary(BinOp::Add, Expr::Reduced, Expr::load(3, &[1]));
        spec.epilogue = Some(Expr::binary(
            BinOp::Add,
            gelu(biased),
            Expr::load(4, &[0, 1]),
        ));
        let nk = check(&spec, &NestTileOptions::default(), 1e-4);
        assert_eq!(on_tensor_cores(&nk), elem == Type::BF16);
    }
}

#[test]
fn schedules_and_arches() {
    // A given schedule replaces the heuristic.
    let spec = matmul(33, 40, 20, Type::F32, false);
    let s = zyntax_opt::nest_tile::Schedule::block(&[32, 16])
        .k(8)
        .warps(2);
    let nk = check(
        &spec,
        &NestTileOptions {
            schedule: Some(s.clone()),
            ..NestTileOptions::default()
        },
        1e-5,
    );
    assert_eq!(nk.schedule, s);
    assert_eq!(nk.grid, [2, 3, 1]);
    // bf16 on sm_70: no tensor cores, FFMA.
    let spec = matmul(17, 9, 12, Type::BF16, false);
    let nk = check(
        &spec,
        &NestTileOptions {
            arch: zyntax_hir::Arch::Sm70,
            schedule: None,
            ..NestTileOptions::default()
        },
        1e-5,
    );
    assert!(!on_tensor_cores(&nk));
    // A schedule that cannot apply is a tile error, not a panic.
    let bad = zyntax_opt::nest_tile::Schedule::block(&[32, 32])
        .k(16)
        .warps(3);
    let err = lower(
        &spec,
        &NestTileOptions {
            schedule: Some(bad),
            ..NestTileOptions::default()
        },
    );
    assert!(matches!(err, Err(NestTileError::Tile(_))), "{err:?}");
}

#[test]
fn half_precision_map_and_output() {
    // out_f16[i,j] = x_bf16[j,i] * 2 - y_f32[i,j] (a transposed read), 19x45.
    let spec = NestSpec {
        name: "map_half".into(),
        loops: vec![Loop::parallel("i", 19), Loop::parallel("j", 45)],
        buffers: vec![
            Buffer::new("x", Type::BF16, &[45, 19]),
            Buffer::new("y", Type::F32, &[19, 45]),
            Buffer::new("out", Type::F16, &[19, 45]),
        ],
        output: Access::at(2, &[0, 1]),
        value: Expr::binary(
            BinOp::Sub,
            Expr::binary(BinOp::Mul, Expr::load(0, &[1, 0]), Expr::Const(2.0)),
            Expr::load(1, &[0, 1]),
        ),
        epilogue: None,
    };
    // The result is rounded to f16 (11 significant bits).
    check(&spec, &NestTileOptions::default(), 1e-3);
}

#[test]
fn more_refusals() {
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.value = Expr::binary(BinOp::Rem, Expr::load(0, &[0, 2]), Expr::load(1, &[2, 1]));
    assert_eq!(refused(&s), RefusalKind::UnsupportedOp);
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.loops[1].extent = 0;
    assert_eq!(refused(&s), RefusalKind::BadSpec);
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.value = Expr::binary(BinOp::Mul, Expr::load(0, &[0, 2]), Expr::load(5, &[2, 1]));
    assert_eq!(refused(&s), RefusalKind::BadSpec);
    // Batched: C[b,i,j] = Σ_k A[b,i,k] B[k,j].
    let s = NestSpec {
        name: "bmm".into(),
        loops: vec![
            Loop::parallel("b", 2),
            Loop::parallel("i", 8),
            Loop::parallel("j", 8),
            Loop::reduction("k", 8),
        ],
        buffers: vec![
            Buffer::new("A", Type::F32, &[2, 8, 8]),
            Buffer::new("B", Type::F32, &[8, 8]),
            Buffer::new("C", Type::F32, &[2, 8, 8]),
        ],
        output: Access::at(2, &[0, 1, 2]),
        value: Expr::binary(
            BinOp::Mul,
            Expr::load(0, &[0, 1, 3]),
            Expr::load(1, &[3, 2]),
        ),
        epilogue: None,
    };
    assert_eq!(refused(&s), RefusalKind::UnsupportedShape);
    // Two reduction loops.
    let mut s = matmul(8, 8, 8, Type::F32, false);
    s.loops.push(Loop::reduction("l", 2));
    assert_eq!(refused(&s), RefusalKind::UnsupportedShape);
}

#[test]
fn reductions_that_are_not_dots() {
    // Row sum of exp: out[i] = Σ_k exp(x[i,k]) + 1, 37 rows of 70.
    let spec = NestSpec {
        name: "rowsum".into(),
        loops: vec![Loop::parallel("i", 37), Loop::reduction("k", 70)],
        buffers: vec![
            Buffer::new("x", Type::F32, &[37, 70]),
            Buffer::new("out", Type::F32, &[37]),
        ],
        output: Access::at(1, &[0]),
        value: Expr::unary(UnOp::Exp, Expr::load(0, &[0, 1])),
        epilogue: Some(Expr::binary(BinOp::Add, Expr::Reduced, Expr::Const(1.0))),
    };
    assert!(matches!(recognize(&spec), Ok(Recognition::Reduction(_))));
    check(&spec, &NestTileOptions::default(), 1e-5);
    // Matrix-vector: y[i] = Σ_k A[i,k] x[k], 45x19.
    let spec = NestSpec {
        name: "matvec".into(),
        loops: vec![Loop::parallel("i", 45), Loop::reduction("k", 19)],
        buffers: vec![
            Buffer::new("A", Type::F32, &[45, 19]),
            Buffer::new("x", Type::F32, &[19]),
            Buffer::new("y", Type::F32, &[45]),
        ],
        output: Access::at(2, &[0]),
        value: Expr::binary(BinOp::Mul, Expr::load(0, &[0, 1]), Expr::load(1, &[1])),
        epilogue: None,
    };
    assert!(tiling_report(&spec).contains("reduction over k"));
    check(&spec, &NestTileOptions::default(), 1e-5);
    // An f64 matmul (no f64 dot) with a bias: summed in f64.
    let mut spec = matmul(19, 21, 13, Type::F64, false);
    spec.buffers[2].elem = Type::F64;
    spec.buffers.push(Buffer::new("bias", Type::F64, &[19]));
    spec.epilogue = Some(Expr::binary(BinOp::Add, Expr::Reduced, Expr::load(3, &[0])));
    let r = recognize(&spec);
    assert!(
        matches!(&r, Ok(Recognition::Reduction(p)) if p.why_not_contraction.contains("f64")),
        "{r:?}"
    );
    check(&spec, &NestTileOptions::default(), 1e-12);
}

#[test]
fn ffma_register_prefetch_with_a_prologue_and_ragged_k() {
    // exp(A)·B: the prologue maps the zeros past K to 1, so the prefetched
    // step past the end must stay masked; K = 37 is not a multiple of 16.
    let mut spec = matmul(35, 29, 37, Type::F32, false);
    spec.value = Expr::binary(
        BinOp::Mul,
        Expr::unary(UnOp::Exp, Expr::load(0, &[0, 2])),
        Expr::load(1, &[2, 1]),
    );
    for stages in [1, 2] {
        let s = zyntax_opt::nest_tile::Schedule::block(&[16, 32])
            .k(16)
            .warps(2)
            .stages(stages)
            .dot_path(zyntax_opt::nest_tile::DotPath::Ffma);
        let options = NestTileOptions {
            schedule: Some(s),
            ..NestTileOptions::default()
        };
        check(&spec, &options, 1e-5);
    }
    // The default FFMA schedule of an f32 nest does not (measured slower, B1).
    let nk = lower(
        &matmul(64, 64, 64, Type::F32, false),
        &NestTileOptions::default(),
    )
    .unwrap();
    assert_eq!(nk.schedule.stages, 1);
}

#[test]
fn a_large_f32_matmul_takes_the_f32_tile_and_its_launch_bound() {
    // At 4096^3 (enough 128x128 tiles for 132 SMs) the f32 nest takes
    // 128x128 tiles, K steps of 8 over 8 warps (8x8 accumulators a thread,
    // register-blocked) with a launch bound of 2 blocks per SM (ptxas: 128
    // registers, no spill); a small one keeps the heuristic's tile.
    // Lowered only: the interpreter runs the same tile in
    // f32_matmul_on_register_blocked_ffma_tiles.
    let options = NestTileOptions {
        arch: zyntax_hir::Arch::Sm90a,
        ..NestTileOptions::default()
    };
    let nk = lower(&matmul(4096, 4096, 4096, Type::F32, false), &options).unwrap();
    assert_eq!(
        (nk.schedule.block.clone(), nk.schedule.k, nk.schedule.warps),
        (vec![128, 128], 8, 8)
    );
    let hir = zyntax_hir::print_module(&nk.kernel.module);
    assert!(hir.contains("min_blocks(2)"), "{}", &hir[..200]);
    let small = lower(&matmul(300, 300, 64, Type::F32, false), &options).unwrap();
    assert_ne!(small.schedule.block, [128, 128]);
    assert!(!zyntax_hir::print_module(&small.kernel.module).contains("min_blocks"));
}
