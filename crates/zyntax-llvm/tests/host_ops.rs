//! The scoped memory-model ops natively on the CPU (`red`, `load.acquire`,
//! `store.release`, `fence.acq_rel`, `compiler_fence`, cached loads and
//! stores) against the reference interpreter on fresh random inputs; and the
//! typed refusals: a kernel using an op the CPU does not lower (grid sync,
//! clusters, packed atomics) is an interpreter kernel
//! naming the op, and the rest of its module still compiles and runs.

use zyntax_hir::parse_module;
use zyntax_interp::{Arg as IArg, Interpreter};
use zyntax_llvm::host::{self, Arg, Buffer, HostFnKind, HostOptions};

mod fresh_rng;
use fresh_rng::Rng;

/// cnt: [add, max, inc, sub, shared sum]; fs: [sum, min] of x; out[tid]:
/// x-derived value released, acquired and released again; copy[tid] = the
/// cached load of x's bits through a cached store.
const KERNEL: &str = r#"module "ops" targets(sm_80)

kernel @memory_model {
block0(v0: ptr<global, u32>, v1: ptr<global, f32>, v2: ptr<global, f32>, v3: ptr<global, u32>, v4: ptr<global, u32>, v5: ptr<global, u32>):
    v7: u32 = thread_idx.x
    v8: u32 = const 1
    red.add.device v0, v8
    v9: ptr<global, u32> = ptr_add v0, v8
    red.max.device v9, v7
    v10: u32 = const 2
    v11: ptr<global, u32> = ptr_add v0, v10
    v12: u32 = const 1000
    red.inc.device v11, v12
    v13: u32 = const 3
    v14: ptr<global, u32> = ptr_add v0, v13
    red.sub.system v14, v10
    v15: ptr<global, f32> = ptr_add v2, v7
    v16: f32 = load v15
    red.add.block v1, v16
    v17: ptr<global, f32> = ptr_add v1, v8
    red.min.device v17, v16
    v22: ptr<shared, u32> = shared_alloc u32, 1
    v23: u32 = const 0
    v24: bool = cmp.eq v7, v23
    br v24, block1, block2
block1:
    store v22, v23
    jump block2
block2:
    barrier
    red.add.block v22, v7
    barrier
    v25: u32 = const 4
    v26: ptr<global, u32> = ptr_add v0, v25
    br v24, block3, block4
block3:
    v27: u32 = load v22
    store v26, v27
    jump block4
block4:
    v28: ptr<global, u32> = ptr_add v3, v7
    v29: u32 = mul v7, v13
    store.release.device v28, v29
    fence.acq_rel.system
    compiler_fence
    v30: u32 = load.acquire.block v28
    v31: u32 = add v30, v8
    store.release.block v28, v31
    v32: ptr<global, u32> = ptr_add v4, v7
    v33: u32 = load.cg v32
    v34: ptr<global, u32> = ptr_add v5, v7
    store.cs v34, v33
    return
}
"#;

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn memory_model_ops_match_the_interpreter() {
    let m = parse_module(KERNEL).unwrap();
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    assert_eq!(
        jit.function("memory_model").unwrap().kind,
        HostFnKind::CpuKernel
    );
    let mut rng = Rng::new();
    let threads = 96usize;
    // Small integers in f32: the float reductions are exact in any order.
    let x: Vec<f32> = (0..threads).map(|_| (rng.next() % 50) as f32).collect();
    let cnt0: Vec<u32> = (0..5).map(|_| rng.next() as u32 % 1000).collect();
    let fs0 = vec![(rng.next() % 100) as f32, 1.0e6];
    let bits = rng.words(threads);

    let (mut cnt, mut fs, mut xs) = (cnt0.clone(), fs0.clone(), x.clone());
    let mut out = vec![0xDEAD_BEEFu32; threads];
    let mut src = bits.clone();
    let mut copy = vec![0xDEAD_BEEFu32; threads];
    let mut args = vec![
        Arg::Buffer(Buffer::new(&mut cnt)),
        Arg::Buffer(Buffer::new(&mut fs)),
        Arg::Buffer(Buffer::new(&mut xs)),
        Arg::Buffer(Buffer::new(&mut out)),
        Arg::Buffer(Buffer::new(&mut src)),
        Arg::Buffer(Buffer::new(&mut copy)),
    ];
    jit.launch(
        "memory_model",
        [1, 1, 1],
        [threads as u32, 1, 1],
        &mut args,
        0,
    )
    .unwrap();
    drop(args);

    let le = |w: &[u32]| w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let lef = |w: &[f32]| w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let mut bufs = vec![
        le(&cnt0),
        lef(&fs0),
        lef(&x),
        le(&vec![0xDEAD_BEEF; threads]),
        le(&bits),
        le(&vec![0xDEAD_BEEF; threads]),
    ];
    let it = Interpreter::new(&m).unwrap();
    let iargs: Vec<IArg> = (0..6).map(IArg::Buffer).collect();
    it.launch(
        "memory_model",
        [1, 1, 1],
        [threads as u32, 1, 1],
        0,
        &iargs,
        &mut bufs,
    )
    .unwrap();
    assert_eq!(cnt, words(&bufs[0]), "counters");
    let fsi: Vec<f32> = words(&bufs[1]).into_iter().map(f32::from_bits).collect();
    assert_eq!(fs, fsi, "float reductions");
    assert_eq!(out, words(&bufs[3]), "release/acquire");
    assert_eq!(copy, words(&bufs[5]), "cached load and store");
    // And against Rust.
    let t = threads as u32;
    assert_eq!(cnt[0], cnt0[0] + t);
    assert_eq!(cnt[1], cnt0[1].max(t - 1));
    assert_eq!(cnt[4], (0..t).sum::<u32>());
    assert_eq!(fs[0], fs0[0] + x.iter().sum::<f32>());
    assert_eq!(fs[1], x.iter().copied().fold(fs0[1], f32::min));
    assert_eq!(out, (0..t).map(|i| 3 * i + 1).collect::<Vec<_>>());
    assert_eq!(copy, bits);
}

/// Kernels with ops the CPU does not lower are interpreter kernels naming
/// the op (a typed refusal), and the module's other kernels and host
/// functions still compile natively.
#[test]
fn unlowered_ops_are_named_refusals_per_kernel() {
    let data = |f: &str| {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(f),
        )
        .unwrap()
    };
    for (file, kernel, op) in [
        ("examples/grid_reduce.zir", "grid_reduce", "grid_sync"),
        ("examples/cluster_exchange.zir", "exchange", "cluster"),
        ("tests/data/warp_sync.zir", "memory_model", "on a vector"),
    ] {
        let m = parse_module(&data(file)).unwrap();
        let jit = host::jit(&m, &HostOptions::default())
            .unwrap_or_else(|e| panic!("{file}: the module must compile: {e}"));
        match &jit.function(kernel).unwrap().kind {
            HostFnKind::InterpKernel(why) => assert!(
                why.iter().any(|w| w.contains(op)),
                "{file} @{kernel}: {why:?} should name {op}"
            ),
            k => panic!("{file} @{kernel}: expected an interpreter kernel, got {k:?}"),
        }
    }
}

/// `ex2.approx`, `rcp.approx`, `tanh.approx`, `ex2_ftz.approx` natively give
/// the interpreter's bits (the correctly rounded value) on random operands,
/// subnormals, zeros and infinities included.
#[test]
fn approximate_math_matches_the_interpreter() {
    let text = r#"module "approx" targets(sm_80)

kernel @approx {
block0(v0: ptr<global, f32>, v1: ptr<global, f32>):
    v2: u32 = thread_idx.x
    v3: u32 = block_idx.x
    v4: u32 = block_dim.x
    v5: u32 = mul v3, v4
    v6: u32 = add v5, v2
    v7: ptr<global, f32> = ptr_add v0, v6
    v8: f32 = load v7
    v9: f32 = ex2.approx v8
    v10: f32 = rcp.approx v8
    v11: f32 = tanh.approx v8
    v12: f32 = ex2_ftz.approx v8
    v13: u32 = const 4
    v14: u32 = mul v6, v13
    v15: ptr<global, f32> = ptr_add v1, v14
    store v15, v9
    v16: u32 = const 1
    v17: ptr<global, f32> = ptr_add v15, v16
    store v17, v10
    v18: ptr<global, f32> = ptr_add v17, v16
    store v18, v11
    v19: ptr<global, f32> = ptr_add v18, v16
    store v19, v12
    return
}
"#;
    let m = parse_module(text).unwrap();
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    assert_eq!(jit.function("approx").unwrap().kind, HostFnKind::CpuKernel);
    let mut rng = Rng::new();
    let n = 512usize;
    let mut x: Vec<f32> = (0..n)
        .map(|_| ((rng.next() % 4000) as f32 - 2000.0) / 37.0)
        .collect();
    let special = [
        0.0f32,
        -0.0,
        1.0e-40,
        -3.0e-39,
        f32::INFINITY,
        -f32::INFINITY,
        200.0,
        -200.0,
    ];
    x[..special.len()].copy_from_slice(&special);
    let mut xs = x.clone();
    let mut out = vec![f32::NAN; 4 * n];
    let mut args = vec![
        Arg::Buffer(Buffer::new(&mut xs)),
        Arg::Buffer(Buffer::new(&mut out)),
    ];
    jit.launch("approx", [4, 1, 1], [128, 1, 1], &mut args, 0)
        .unwrap();
    drop(args);
    let lef = |w: &[f32]| w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let mut bufs = vec![lef(&x), lef(&vec![f32::NAN; 4 * n])];
    Interpreter::new(&m)
        .unwrap()
        .launch(
            "approx",
            [4, 1, 1],
            [128, 1, 1],
            0,
            &[IArg::Buffer(0), IArg::Buffer(1)],
            &mut bufs,
        )
        .unwrap();
    let want = words(&bufs[1]);
    for (k, (g, w)) in out.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            *w,
            "x = {:e}, op {}: {g:e} vs {:e}",
            x[k / 4],
            k % 4,
            f32::from_bits(*w)
        );
    }
}

/// `bfe`, `bfi`, `prmt` and `shf.*` (tests/data/warp_sync.zir's `bits32` and
/// `bits64`) natively give the interpreter's bits on random operands: half
/// the threads with positions and lengths inside the word, half anywhere
/// (PTX reads their low 8 bits, 32 for 64-bit types).
#[test]
fn bit_field_ops_match_the_interpreter() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/warp_sync.zir"
    ))
    .unwrap();
    let m = parse_module(&text).unwrap();
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    let mut rng = Rng::new();
    let n = 128usize;
    let small = |rng: &mut Rng, k: usize, hi: u64| -> Vec<u32> {
        (0..n)
            .map(|t| {
                if t % 2 == 0 && k >= 2 {
                    (rng.next() % hi) as u32
                } else {
                    rng.next() as u32
                }
            })
            .collect()
    };
    let le = |w: &[u32]| w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    for (kernel, words_per) in [
        ("bits32", [1usize, 1, 1, 1, 1, 8]),
        ("bits64", [2, 2, 1, 1, 6, 0]),
    ] {
        assert_eq!(
            jit.function(kernel).unwrap().kind,
            HostFnKind::CpuKernel,
            "{kernel}"
        );
        let nparams = if kernel == "bits32" { 6 } else { 5 };
        let hi = if kernel == "bits32" { 40 } else { 72 };
        let mut inputs: Vec<Vec<u32>> = (0..nparams)
            .map(|k| {
                if k + 1 == nparams {
                    vec![0xDEAD_BEEF; words_per[k] * n]
                } else if words_per[k] == 2 {
                    (0..2 * n).map(|_| rng.next() as u32).collect()
                } else {
                    small(&mut rng, k, hi)
                }
            })
            .collect();
        let mut bufs: Vec<Vec<u8>> = inputs.iter().map(|w| le(w)).collect();
        let mut args: Vec<Arg> = Vec::new();
        for (k, w) in inputs.iter_mut().enumerate() {
            let t = &m.function(kernel).unwrap().param_types()[k];
            let (elem, _) = host::pointee_elem(t).unwrap();
            let len = w.len() * 4 / elem.size_bytes() as usize;
            // SAFETY: `w` outlives the launch and holds `len` elements of `elem`.
            args.push(Arg::Buffer(unsafe {
                Buffer::from_raw(w.as_mut_ptr().cast(), len, elem)
            }));
        }
        jit.launch(kernel, [1, 1, 1], [n as u32, 1, 1], &mut args, 0)
            .unwrap();
        drop(args);
        let iargs: Vec<IArg> = (0..nparams).map(IArg::Buffer).collect();
        Interpreter::new(&m)
            .unwrap()
            .launch(kernel, [1, 1, 1], [n as u32, 1, 1], 0, &iargs, &mut bufs)
            .unwrap();
        let out = &inputs[nparams - 1];
        assert!(out.iter().filter(|w| **w == 0xDEAD_BEEF).count() < out.len() / 8);
        assert_eq!(
            *out,
            words(&bufs[nparams - 1]),
            "{kernel} against the interpreter"
        );
    }
}
