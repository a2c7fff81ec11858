//! Kernels whose barriers and warp shuffles sit in device functions (how the
//! front-ends write warp sums and block reductions) run natively on the CPU:
//! the backend inlines such callees into the kernel, which is the coroutine.
//! Checked against the reference interpreter and a Rust reference on fresh
//! random inputs with poisoned outputs, bit-exact (u32); a callee holding its
//! own `shared_alloc` keeps the kernel on the interpreter.

use zyntax_hir::parse_module;
use zyntax_interp::{Arg as IArg, Interpreter};
use zyntax_llvm::host::{self, Arg, Buffer, HostFnKind, HostOptions};

mod fresh_rng;
use fresh_rng::Rng;

const POISON: u32 = 0xDEAD_BEEF;

/// `@warp_add` sums a u32 over the warp by a `shfl.xor` butterfly in a loop;
/// `@lane_total` calls it (a collective two calls deep); `@block_total`
/// reduces one value per thread through a shared array passed in, with
/// barriers in a loop, and returns the block's total to every thread.
/// out[gid] = lane_total(x[gid]) + 3 * block_total(x[gid]) (wrapping).
const KERNEL: &str = r#"module "inl" targets(sm_80)

device @warp_add -> u32 {
block0(v0: u32):
    v1: u32 = const 16
    jump block1(v1, v0)
block1(v2: u32, v3: u32):
    v4: u32 = const 0
    v5: bool = cmp.gt v2, v4
    br v5, block2, block3
block2:
    v6: u32 = const 4294967295
    v7: u32 = shfl.xor v6, v3, v2 width 32
    v8: u32 = add v3, v7
    v9: u32 = const 1
    v10: u32 = shr v2, v9
    jump block1(v10, v8)
block3:
    return v3
}

device @lane_total -> u32 {
block0(v0: u32):
    v1: u32 = call @warp_add v0
    return v1
}

device @block_total -> u32 {
block0(v0: ptr<shared, u32>, v1: u32, v2: u32):
    v3: ptr<shared, u32> = ptr_add v0, v1
    store v3, v2
    barrier
    v4: u32 = const 128
    jump block1(v4)
block1(v5: u32):
    v6: u32 = const 0
    v7: bool = cmp.gt v5, v6
    br v7, block2, block5
block2:
    v8: bool = cmp.lt v1, v5
    br v8, block3, block4
block3:
    v9: u32 = add v1, v5
    v10: ptr<shared, u32> = ptr_add v0, v9
    v11: u32 = load v10
    v12: u32 = load v3
    v13: u32 = add v12, v11
    store v3, v13
    jump block4
block4:
    barrier
    v14: u32 = const 1
    v15: u32 = shr v5, v14
    jump block1(v15)
block5:
    v16: u32 = load v0
    barrier
    return v16
}

kernel @k {
block0(v0: ptr<global, u32>, v1: ptr<global, u32>):
    v2: ptr<shared, u32> = shared_alloc u32, 256
    v3: u32 = thread_idx.x
    v4: u32 = block_idx.x
    v5: u32 = block_dim.x
    v6: u32 = mul v4, v5
    v7: u32 = add v6, v3
    v8: ptr<global, u32> = ptr_add v0, v7
    v9: u32 = load v8
    v10: u32 = call @lane_total v9
    v11: u32 = call @block_total v2, v3, v9
    v12: u32 = const 3
    v13: u32 = mul v11, v12
    v14: u32 = add v10, v13
    v15: ptr<global, u32> = ptr_add v1, v7
    store v15, v14
    return
}
"#;

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn collectives_and_barriers_in_device_functions_run_natively() {
    let m = parse_module(KERNEL).unwrap();
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    assert_eq!(jit.function("k").unwrap().kind, HostFnKind::CpuKernel);
    let report = jit.report.to_string();
    assert!(
        report.contains("inlined call to @lane_total for the CPU"),
        "{report}"
    );
    assert!(
        report.contains("inlined call to @block_total for the CPU"),
        "{report}"
    );

    let mut rng = Rng::new();
    let (grid, block) = (3u32, 256u32);
    let n = (grid * block) as usize;
    let x = rng.words(n);

    let mut xs = x.clone();
    let mut out = vec![POISON; n];
    let mut args = vec![
        Arg::Buffer(Buffer::new(&mut xs)),
        Arg::Buffer(Buffer::new(&mut out)),
    ];
    jit.launch("k", [grid, 1, 1], [block, 1, 1], &mut args, 0)
        .unwrap();
    drop(args);

    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![
        x.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>(),
        vec![0xAB; n * 4],
    ];
    it.launch(
        "k",
        [grid, 1, 1],
        [block, 1, 1],
        0,
        &[IArg::Buffer(0), IArg::Buffer(1)],
        &mut bufs,
    )
    .unwrap();
    assert_eq!(out, words(&bufs[1]), "native against the interpreter");

    for (i, got) in out.iter().enumerate() {
        let w = i / 32 * 32;
        let b = i / block as usize * block as usize;
        let warp = x[w..w + 32].iter().fold(0u32, |a, v| a.wrapping_add(*v));
        let blk = x[b..b + block as usize]
            .iter()
            .fold(0u32, |a, v| a.wrapping_add(*v));
        assert_eq!(*got, warp.wrapping_add(blk.wrapping_mul(3)), "thread {i}");
    }
}

/// A callee with its own `shared_alloc` is one array for all its call sites
/// on the GPU; an inlined copy would get its own, so it is not inlined and the
/// kernel stays on the interpreter, which the launch then says.
#[test]
fn a_callee_with_its_own_shared_array_stays_on_the_interpreter() {
    let text = r#"module "inl2" targets(sm_80)

device @stage -> u32 {
block0(v0: u32, v1: u32):
    v2: ptr<shared, u32> = shared_alloc u32, 64
    v3: ptr<shared, u32> = ptr_add v2, v0
    store v3, v1
    barrier
    v4: u32 = const 63
    v5: u32 = sub v4, v0
    v6: ptr<shared, u32> = ptr_add v2, v5
    v7: u32 = load v6
    return v7
}

kernel @rev {
block0(v0: ptr<global, u32>):
    v1: u32 = thread_idx.x
    v2: ptr<global, u32> = ptr_add v0, v1
    v3: u32 = load v2
    v4: u32 = call @stage v1, v3
    store v2, v4
    return
}
"#;
    let m = parse_module(text).unwrap();
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    match &jit.function("rev").unwrap().kind {
        HostFnKind::InterpKernel(why) => {
            assert!(why.iter().any(|w| w.contains("barrier")), "{why:?}")
        }
        k => panic!("expected the interpreter, got {k:?}"),
    }
}
