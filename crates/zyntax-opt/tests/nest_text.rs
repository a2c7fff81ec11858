//! The tiny nest language (`nest_tile::parse`) of the `nest_dsl` example:
//! the example's programs (the seed's matmul, the fused
//! matmul + bias + gelu + residual) parsed at small sizes, lowered and run
//! on the reference interpreter against `nest_tile::evaluate` (f64) on fresh
//! pseudo-random inputs with the output poisoned; parse errors at
//! `line:col`; what the parser hands the recogniser (opaque indices,
//! `+=`, maps).

use half::bf16;
use zyntax_hir::{BinOp, Type};
#[path = "common/interp_launch.rs"]
mod interp_launch;
use interp_launch::interp_launch;
use zyntax_opt::nest_tile::{
    self, evaluate, lower, parse, parse_with, Expr, Index, NestSpec, NestTileOptions, Recognition,
    RefusalKind,
};

const MATMUL: &str = include_str!("../examples/nests/matmul.nest");
const FUSED: &str = include_str!("../examples/nests/matmul_bias_gelu_residual.nest");

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
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0
    }
}

fn encode(v: f64, t: &Type) -> Vec<u8> {
    match *t {
        Type::BF16 => bf16::from_f64(v).to_le_bytes().to_vec(),
        Type::F64 => v.to_le_bytes().to_vec(),
        _ => (v as f32).to_le_bytes().to_vec(),
    }
}

fn decode(bytes: &[u8], t: &Type) -> Vec<f64> {
    match *t {
        Type::BF16 => bytes
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Type::F64 => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    }
}

/// Lowers and runs `spec` on the interpreter over fresh inputs (the output
/// poisoned with NaN unless the nest reads it) against `evaluate`.
fn check(spec: &NestSpec, tol: f64) -> Recognition {
    check_with(spec, &NestTileOptions::default(), tol).recognition
}

fn check_with(spec: &NestSpec, options: &NestTileOptions, tol: f64) -> nest_tile::NestKernel {
    let nk = lower(spec, options).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new();
    let reads_output = format!("{:?}{:?}", spec.value, spec.epilogue)
        .contains(&format!("buffer: {},", spec.output.buffer));
    let (mut values, mut bytes) = (Vec::new(), Vec::new());
    for (i, b) in spec.buffers.iter().enumerate() {
        let n: u64 = b.shape.iter().product();
        let poison = i == spec.output.buffer && !reads_output;
        let vals: Vec<f64> = (0..n)
            .map(|_| {
                let v = if poison { f64::NAN } else { rng.next() };
                decode(&encode(v, &b.elem), &b.elem)[0]
            })
            .collect();
        bytes.push(
            vals.iter()
                .flat_map(|&v| encode(v, &b.elem))
                .collect::<Vec<u8>>(),
        );
        values.push(vals);
    }
    let want = evaluate(spec, &values).unwrap();
    interp_launch(spec, &nk, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
    let out = spec.output.buffer;
    let got = decode(&bytes[out], &spec.buffers[out].elem);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{}: element {i}: got {g}, want {w}",
            spec.name
        );
    }
    nk
}

#[test]
fn the_seed_matmul_program() {
    let spec = parse_with(MATMUL, &[("M", 45), ("N", 70), ("K", 37)]).unwrap();
    assert_eq!(spec.name, "matmul");
    assert!(spec.epilogue.is_none());
    assert_eq!(spec.buffers[0].elem, Type::BF16);
    let r = check(&spec, 1e-2);
    assert!(matches!(r, Recognition::Contraction(_)), "{r:?}");
    // The file's own sizes.
    let big = parse(MATMUL).unwrap();
    assert_eq!(big.loops[2].extent, 4096);
    assert!(nest_tile::tiling_report(&big).contains("mma.sync"));
}

#[test]
fn the_fused_program() {
    let spec = parse_with(FUSED, &[("M", 33), ("N", 50), ("K", 41)]).unwrap();
    assert!(spec.epilogue.is_some());
    let r = check(&spec, 1e-2);
    assert!(matches!(r, Recognition::Contraction(_)), "{r:?}");
    assert!(nest_tile::tiling_report(&spec).contains("epilogue"));
    // The same program in f32 (FFMA), tighter.
    let spec = parse_with(
        &FUSED.replace("bf16", "f32"),
        &[("M", 20), ("N", 17), ("K", 9)],
    )
    .unwrap();
    check(&spec, 1e-5);
}

#[test]
fn maps_accumulation_and_strided_indices() {
    let map = "nest m\nbuffer x f32[10, 40]\nbuffer y f32[10, 20]\n\
               parallel i < 10, j < 20\ny[i, j] = relu(x[i, 2*j + 1] - 0.25) * exp(-x[i, j])";
    let spec = parse(map).unwrap();
    assert!(matches!(check(&spec, 1e-5), Recognition::Map(_)));
    let acc = "nest acc\nsize M = 9, N = 11, K = 7\nbuffer A f32[M, K]\nbuffer B f32[K, N]\n\
               buffer C f32[M, N]\nparallel i < M, j < N\nreduce k < K\nC[i, j] += sum(A[i, k] * B[k, j])";
    let spec = parse(acc).unwrap();
    assert!(matches!(
        spec.epilogue,
        Some(Expr::Binary(BinOp::Add, _, _))
    ));
    check(&spec, 1e-5);
    let rowsum = "nest rowsum\nbuffer x f32[6, 300]\nbuffer s f32[6]\nparallel i < 6\n\
                  reduce j < 300\ns[i] = sum(max(x[i, j], 0.0))";
    assert!(matches!(
        check(&parse(rowsum).unwrap(), 1e-5),
        Recognition::Reduction(_)
    ));
}

#[test]
fn a_non_affine_index_is_kept_for_the_report() {
    let src = "nest gather\nbuffer x f32[64]\nbuffer idx f32[8]\nbuffer y f32[8, 8]\n\
               parallel i < 8, j < 8\ny[i, j] = x[i * j]";
    let spec = parse(src).unwrap();
    let Expr::Load(a) = &spec.value else { panic!() };
    assert_eq!(a.index[0], Index::Opaque("i*j".into()));
    let refusal = nest_tile::recognize(&spec).unwrap_err();
    assert_eq!(refusal.kind, RefusalKind::NonAffineIndex);
    assert!(nest_tile::tiling_report(&spec).contains("i*j"));
}

#[test]
fn errors_point_at_line_and_column() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        (
            "nest a\nbuffer x f33[4]",
            (2, 10),
            "unknown element type `f33`",
        ),
        ("nest a\nbuffer x f32[N]", (2, 14), "unknown size `N`"),
        (
            "buffer x f32[4]\nparallel i < 4\ny[i] = x[i]",
            (3, 1),
            "unknown buffer `y`",
        ),
        (
            "buffer x f32[4]\nparallel i < 4\nx[i] = x[i] $ 2",
            (3, 13),
            "unexpected character `$`",
        ),
        (
            "buffer x f32[4]\nparallel i < 4\nx[i] = foo(x[i])",
            (3, 8),
            "unknown function `foo`",
        ),
        (
            "buffer x f32[4]\nparallel i < 4\nx[i] = sum(x[i])",
            (3, 1),
            "needs a `reduce` loop",
        ),
        (
            "buffer x f32[4]\nbuffer y f32[1]\nreduce k < 4\ny[0] = sum(x[k]) + sum(x[k])",
            (4, 1),
            "exactly once",
        ),
        ("buffer x f32[4]\nparallel i < 4", (2, 1), "no assignment"),
        (
            "buffer x f32[4]\nparallel i < 4\nx[i] = 1\nx[i] = 2",
            (4, 1),
            "nothing may follow",
        ),
        ("size M = 4, M = 5", (1, 13), "declared twice"),
    ];
    for (src, (line, col), what) in cases {
        let e = parse(src).unwrap_err();
        assert!(e.message.contains(what), "{src:?}: {e}");
        assert_eq!((e.line, e.col), (*line, *col), "{src:?}: {e}");
    }
    let e = parse_with(MATMUL, &[("Q", 3)]).unwrap_err();
    assert!(e.message.contains("size Q"), "{e}");
}

// ------------------------------------------------------------ fusion (nest_tile::fuse)

const MM: &str = "nest mm\nsize M = 24, N = 40, K = 19\nbuffer A f32[M, K]\nbuffer B f32[K, N]\n\
                  buffer T f32[M, N]\nparallel i < M, j < N\nreduce k < K\nT[i, j] = sum(A[i, k] * B[k, j])";
const ACT: &str = "nest act\nsize M = 24, N = 40\nbuffer T f32[M, N]\nbuffer bias f32[N]\n\
                   buffer U f32[M, N]\nparallel r < M, c < N\nU[r, c] = gelu(T[r, c] + bias[c])";
const RES: &str = "nest res\nsize M = 24, N = 40\nbuffer U f32[M, N]\nbuffer R f32[M, N]\n\
                   buffer C f32[M, N]\nparallel i < M, j < N\nC[i, j] = U[i, j] + R[i, j]";

/// Runs `nests` one after the other in f64 over buffers shared by name.
fn run_sequence(nests: &[NestSpec], values: &mut std::collections::HashMap<String, Vec<f64>>) {
    for n in nests {
        let bufs: Vec<Vec<f64>> = n.buffers.iter().map(|b| values[&b.name].clone()).collect();
        let out = evaluate(n, &bufs).unwrap();
        values.insert(n.buffers[n.output.buffer].name.clone(), out);
    }
}

#[test]
fn matmul_bias_gelu_residual_fuse_into_one_contraction() {
    let nests: Vec<NestSpec> = [MM, ACT, RES].iter().map(|s| parse(s).unwrap()).collect();
    let f = nest_tile::fuse(&nests, &["T", "U"], &nest_tile::FuseOptions::default());
    assert_eq!(f.nests.len(), 1, "{}", f.report());
    assert_eq!(f.members[0], ["mm", "act", "res"]);
    assert!(f.decisions.iter().all(|d| d.fused), "{}", f.report());
    let fused = &f.nests[0];
    let names: Vec<&str> = fused.buffers.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        ["A", "B", "bias", "R", "C"],
        "the intermediates are elided"
    );
    // The fused nest on the interpreter against the three nests run in f64.
    let mut rng = Rng::new();
    let mut values = std::collections::HashMap::new();
    for n in &nests {
        for b in &n.buffers {
            let len: u64 = b.shape.iter().product();
            let v: Vec<f64> = (0..len).map(|_| f64::from(rng.next() as f32)).collect();
            values.entry(b.name.clone()).or_insert(v);
        }
    }
    run_sequence(&nests, &mut values);
    let inputs: Vec<Vec<f64>> = fused
        .buffers
        .iter()
        .map(|b| values[&b.name].clone())
        .collect();
    assert_eq!(evaluate(fused, &inputs).unwrap(), values["C"]);
    assert!(matches!(check(fused, 1e-5), Recognition::Contraction(_)));
}

#[test]
fn fusion_refusals_say_why() {
    let p = |s: &str| parse(s).unwrap();
    let opts = nest_tile::FuseOptions::default();
    let rule = |nests: &[NestSpec], temps: &[&str]| {
        let f = nest_tile::fuse(nests, temps, &opts);
        assert_eq!(f.nests.len(), nests.len(), "{}", f.report());
        f.decisions[0].rule.clone()
    };
    // T read after the sequence.
    assert_eq!(rule(&[p(MM), p(ACT)], &[]), "live_out");
    // Not a consumer of T.
    assert_eq!(rule(&[p(MM), p(RES)], &["T", "U"]), "no_dependence");
    // T read transposed (another program instance's element).
    let square = |s: &str| s.replace("M = 24", "M = 40");
    let transposed = square(ACT).replace("T[r, c] + bias[c]", "T[c, r] + bias[c]");
    assert_eq!(
        rule(&[p(&square(MM)), p(&transposed)], &["T"]),
        "not_at_point"
    );
    // Another iteration space.
    let smaller = ACT.replace("parallel r < M, c < N", "parallel r < 8, c < N");
    assert_eq!(rule(&[p(MM), p(&smaller)], &["T"]), "space");
    // A row sum of the contraction's output.
    let rowsum = "buffer T f32[24, 40]\nbuffer s f32[24]\nparallel i < 24\nreduce j < 40\ns[i] = sum(T[i, j])";
    assert_eq!(rule(&[p(MM), p(rowsum)], &["T"]), "reduction_consumer");
}

#[test]
fn fusion_charges_the_fused_kernels_measurement() {
    let nests: Vec<NestSpec> = [MM, ACT].iter().map(|s| parse(s).unwrap()).collect();
    let measured = std::cell::Cell::new(0);
    // A measurement over the budget: the fusion is undone, naming it.
    let heavy = |k: &nest_tile::NestKernel| {
        measured.set(measured.get() + 1);
        // The fused kernel computes gelu: `1 + tanh(v)` is lowered as
        // 2·rsqrt(1 + exp(-2v))² (nest_tile::lower).
        assert!(zyntax_hir::print_module(&k.kernel.module).contains("rsqrt"));
        Some(nest_tile::Resources {
            registers: 300,
            shared_bytes: 1024,
        })
    };
    let opts = nest_tile::FuseOptions {
        measure: Some(&heavy),
        ..Default::default()
    };
    let f = nest_tile::fuse(&nests, &["T"], &opts);
    assert_eq!((f.nests.len(), measured.get()), (2, 1));
    assert_eq!(f.decisions[0].rule, "registers");
    assert!(
        f.decisions[0].why.contains("300 registers"),
        "{}",
        f.report()
    );
    let light = |_: &nest_tile::NestKernel| {
        Some(nest_tile::Resources {
            registers: 96,
            shared_bytes: 8192,
        })
    };
    let opts = nest_tile::FuseOptions {
        measure: Some(&light),
        ..Default::default()
    };
    let f = nest_tile::fuse(&nests, &["T"], &opts);
    assert_eq!(f.nests.len(), 1);
    assert!(
        f.decisions[0].why.contains("96 registers"),
        "{}",
        f.report()
    );
}

#[test]
fn bf16_matmul_on_sm90a_takes_the_wgmma_pipeline() {
    // 128x128 tiles, K steps of 64, 4 cp.async stages; sizes with tails on
    // every dim and a K loop that wraps the stage ring.
    let spec = parse_with(MATMUL, &[("M", 150), ("N", 130), ("K", 300)]).unwrap();
    let options = NestTileOptions {
        arch: zyntax_hir::Arch::Sm90a,
        schedule: None,
        ..NestTileOptions::default()
    };
    let nk = check_with(&spec, &options, 1e-2);
    assert_eq!(
        (nk.schedule.block.clone(), nk.schedule.k),
        (vec![128, 128], 64)
    );
    // Plain sm_90 has no wgmma (arch-specific PTX): mma.sync.
    let plain = NestTileOptions {
        arch: zyntax_hir::Arch::Sm90,
        schedule: None,
        ..NestTileOptions::default()
    };
    let nk90 = lower(&spec, &plain).unwrap();
    assert!(!zyntax_hir::print_module(&nk90.kernel.module).contains("wgmma"));
    let hir = zyntax_hir::print_module(&nk.kernel.module);
    assert!(hir.contains("wgmma"), "no wgmma in the kernel");
    assert!(nk.args.iter().all(|a| a.align == 16), "{:?}", nk.args);
    // The fused epilogue reads the wgmma accumulator.
    let spec = parse_with(FUSED, &[("M", 130), ("N", 140), ("K", 70)]).unwrap();
    let nk = check_with(&spec, &options, 1e-2);
    assert!(zyntax_hir::print_module(&nk.kernel.module).contains("wgmma"));
}

#[test]
fn prologues_on_the_factors() {
    // exp on both factors with a ragged K: a masked 0 past K would become
    // exp(0) = 1 on both sides; the lowering masks it after the prologue.
    let src = "nest pro\nsize M = 37, N = 29, K = 21\nbuffer A DT[M, K]\nbuffer B DT[K, N]\n\
               buffer C f32[M, N]\nparallel i < M, j < N\nreduce k < K\n\
               C[i, j] = sum(exp(A[i, k] * 0.5) * (relu(B[k, j]) + 0.25))";
    for (dt, tol) in [("f32", 1e-5), ("bf16", 2e-2)] {
        let spec = parse(&src.replace("DT", dt)).unwrap();
        let r = nest_tile::recognize(&spec).unwrap();
        let Recognition::Contraction(c) = &r else {
            panic!("{r:?}")
        };
        assert!(c.a_prologue.is_some() && c.b_prologue.is_some());
        assert!(nest_tile::tiling_report(&spec).contains("prologue"));
        check(&spec, tol);
    }
    // Two loads in one factor is not a prologue: the sum is not a dot (it
    // takes the reduction path, which says why).
    let two = src
        .replace("DT", "f32")
        .replace("A[i, k] * 0.5", "A[i, k] * B[k, j]");
    let r = nest_tile::recognize(&parse(&two).unwrap()).unwrap();
    let Recognition::Reduction(red) = &r else {
        panic!("{r:?}")
    };
    assert!(red.why_not_contraction.contains("one load"), "{r:?}");
}

#[test]
fn a_map_feeding_a_factor_fuses_as_its_prologue() {
    let act = "nest act\nbuffer X f32[24, 19]\nbuffer X2 f32[24, 19]\nparallel r < 24, c < 19\n\
               X2[r, c] = gelu(X[r, c])";
    let mm = MM
        .replace("buffer A f32[M, K]", "buffer X2 f32[M, K]")
        .replace("A[i, k]", "X2[i, k]");
    let nests = [parse(act).unwrap(), parse(&mm).unwrap()];
    let f = nest_tile::fuse(&nests, &["X2"], &nest_tile::FuseOptions::default());
    assert_eq!(f.nests.len(), 1, "{}", f.report());
    assert!(f.decisions[0].why.contains("prologue"), "{}", f.report());
    let fused = &f.nests[0];
    let names: Vec<&str> = fused.buffers.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["B", "T", "X"], "X2 is elided");
    let mut rng = Rng::new();
    let mut values = std::collections::HashMap::new();
    for n in &nests {
        for b in &n.buffers {
            let len: u64 = b.shape.iter().product();
            let v: Vec<f64> = (0..len).map(|_| f64::from(rng.next() as f32)).collect();
            values.entry(b.name.clone()).or_insert(v);
        }
    }
    run_sequence(&nests, &mut values);
    let inputs: Vec<Vec<f64>> = fused
        .buffers
        .iter()
        .map(|b| values[&b.name].clone())
        .collect();
    let got = evaluate(fused, &inputs).unwrap();
    for (g, w) in got.iter().zip(&values["T"]) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0));
    }
    check(fused, 1e-5);
    // A map reading two elements is not a one-load prologue: the fused sum is
    // no longer a contraction, so the fusion is refused, saying so.
    let scaled = act.replace("gelu(X[r, c])", "X[r, c] * X[0, c]");
    let f = nest_tile::fuse(
        &[parse(&scaled).unwrap(), parse(&mm).unwrap()],
        &["X2"],
        &nest_tile::FuseOptions::default(),
    );
    assert_eq!(
        (f.nests.len(), f.decisions[0].rule.as_str()),
        (2, "kind"),
        "{}",
        f.report()
    );
}
