//! Verifier tests of the GPU rules (placement, atomics, warp collectives, MMA,
//! cp.async, calls, stack, arch features): each bad module is rejected with
//! the specific message at the right function, block and instruction.

mod verify_support;

use verify_support::*;
use zyntax_hir::arch::{self, check_arch};
use zyntax_hir::*;

// ------------------------------------------------------------------ GPU rules

#[test]
fn gpu_instructions_not_in_host_functions() {
    let mut h = FunctionBuilder::host("h", &[], &[Type::U32]);
    let t = h.thread_idx(Dim::X).unwrap();
    h.ret(&[t]).unwrap();
    let f = h.finish().unwrap();
    let d = err(
        &module(vec![f.clone()]),
        "GPU instruction `thread_idx.x` in host function @h",
    );
    assert_at(&d, &f, "thread_idx.x");

    let mut h = FunctionBuilder::host("h", &[], &[]);
    h.barrier().unwrap();
    h.ret(&[]).unwrap();
    err(
        &module(vec![h.finish().unwrap()]),
        "GPU instruction `barrier`",
    );
}

#[test]
fn atomic_rules() {
    let lp = Type::ptr(AddrSpace::Local, Type::U32);
    let f = kernel_with(&[lp, Type::U32], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    bad_inst(
        f,
        "atomic.add.device",
        "pointer to global, shared or generic memory, got ptr<local, u32>",
    );
    let f = kernel_with(&[gptr(Type::U32), Type::I32], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    bad_inst(
        f,
        "atomic.add.device",
        "atomic value has type i32, but the pointer points to u32",
    );
    for (op, t, want) in [
        (
            AtomicOp::Min,
            Type::F16,
            "atomic.min works on i32, u32, i64, u64, f32 or f64, got f16",
        ),
        (AtomicOp::Inc, Type::I32, "atomic.inc works on u32, got i32"),
        (
            AtomicOp::And,
            Type::U16,
            "atomic.and works on i32, u32, i64 or u64, got u16",
        ),
        (
            AtomicOp::Add,
            Type::U8,
            "atomic.add works on i32, u32, i64, u64, f16, bf16, f32, f64, vec<f16, 2> or vec<bf16, 2>, got u8",
        ),
        (
            AtomicOp::Exch,
            Type::F16,
            "atomic.exch works on i32, u32, i64, u64, f32 or f64, got f16",
        ),
        (
            AtomicOp::Sub,
            Type::F32,
            "atomic.sub works on i32, u32, i64 or u64, got f32",
        ),
    ] {
        let f = kernel_with(&[gptr(t.clone()), t], |b, p| {
            b.atomic(op, Scope::Block, p[0], p[1]).map(|_| ())
        });
        bad_inst(f, &format!("atomic.{op}.block"), want);
    }
    let f = kernel_with(&[gptr(Type::F32), Type::F32], |b, p| {
        b.atomic_cas(Scope::Device, p[0], p[1], p[1]).map(|_| ())
    });
    bad_inst(
        f,
        "atomic.cas.device",
        "atomic.cas works on i32, u32, i64 or u64, got f32",
    );
    let f = kernel_with(&[gptr(Type::U32), Type::U32, Type::I32], |b, p| {
        b.atomic_cas(Scope::Device, p[0], p[1], p[2]).map(|_| ())
    });
    bad_inst(
        f,
        "atomic.cas.device",
        "the desired value has type i32, expected u32",
    );
}

#[test]
fn warp_collective_rules() {
    let f = kernel_with(&[Type::U32, Type::F32], |b, p| {
        b.shfl(ShflMode::Down, p[0], p[1], p[0], 3).map(|_| ())
    });
    bad_inst(
        f,
        "shfl.down",
        "shuffle width 3 must be a power of two in 1..=32",
    );
    let f = kernel_with(&[Type::U32, Type::F32], |b, p| {
        b.shfl(ShflMode::Idx, p[0], p[1], p[0], 64).map(|_| ())
    });
    bad_inst(f, "shfl.idx", "shuffle width 64");
    let f = kernel_with(&[Type::U32, Type::F16], |b, p| {
        b.shfl(ShflMode::Xor, p[0], p[1], p[0], 32).map(|_| ())
    });
    bad_inst(
        f,
        "shfl.xor",
        "shuffled value must be i32, u32, f32, i64, u64 or f64, got f16",
    );
    let f = kernel_with(&[Type::I32, Type::F32], |b, p| {
        b.shfl(ShflMode::Up, p[0], p[1], p[0], 32).map(|_| ())
    });
    bad_inst(f, "shfl.up", "the mask must be u32, got i32");
    let f = kernel_with(&[Type::U32, Type::U32], |b, p| {
        b.vote(VoteMode::Any, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "vote.any", "the predicate has type u32, expected bool");
    let f = kernel_with(&[Type::U32, Type::F32], |b, p| {
        b.match_(MatchMode::Any, p[0], p[1]).map(|_| ())
    });
    bad_inst(
        f,
        "match.any",
        "matched value must be i32, u32, i64 or u64, got f32",
    );
    let f = kernel_with(&[Type::U64], |b, p| b.warp_sync(p[0]));
    bad_inst(f, "warp_sync", "the mask must be u32, got u64");
}

#[test]
fn mma_rules() {
    let s = MmaShape::M16N16K16;
    let a_row = frag_type(FragKind::A, s, ScalarType::F16, Some(Layout::Row));
    let b_col = frag_type(FragKind::B, s, ScalarType::F16, Some(Layout::Col));
    let acc16 = frag_type(FragKind::Acc, s, ScalarType::F16, None);
    let acc32 = frag_type(FragKind::Acc, s, ScalarType::F32, None);
    let hp = gptr(Type::F16);

    let f = kernel_with(&[hp.clone(), Type::U32], |b, p| {
        b.mma_load(a_row, Layout::Col, p[0], p[1]).map(|_| ())
    });
    bad_inst(
        f,
        "mma.load.col",
        "A/B fragments load with their own layout (row)",
    );
    let f = kernel_with(&[gptr(Type::F32), Type::U32], |b, p| {
        b.mma_load(a_row, Layout::Row, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "mma.load.row", "the pointee has type f32, expected f16");
    let f = kernel_with(&[hp.clone(), Type::I32], |b, p| {
        b.mma_load(a_row, Layout::Row, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "mma.load.row", "ldm must be u32, got i32");
    let bad_frag = frag_type(FragKind::A, s, ScalarType::F32, Some(Layout::Row));
    let f = kernel_with(&[gptr(Type::F32), Type::U32], |b, p| {
        b.mma_load(bad_frag, Layout::Row, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "mma.load.row", "A/B fragments hold f16 or bf16");

    // bf16 inputs accumulate in f32 only.
    let a_bf = frag_type(FragKind::A, s, ScalarType::BF16, Some(Layout::Row));
    let b_bf = frag_type(FragKind::B, s, ScalarType::BF16, Some(Layout::Row));
    let f = kernel_with(&[gptr(Type::BF16), Type::U32, Type::F16], |b, p| {
        let fa = b.mma_load(a_bf, Layout::Row, p[0], p[1])?;
        let fb = b.mma_load(b_bf, Layout::Row, p[0], p[1])?;
        let fc = b.mma_fill(acc16, p[2])?;
        b.mma(fa, fb, fc).map(|_| ())
    });
    bad_inst(f, "mma", "bf16 mma accumulates in f32, got f16");

    // Shapes must agree; operand order matters.
    let b_other = frag_type(
        FragKind::B,
        MmaShape::M32N8K16,
        ScalarType::F16,
        Some(Layout::Col),
    );
    let f = kernel_with(&[hp.clone(), Type::U32, Type::F32], |b, p| {
        let fa = b.mma_load(a_row, Layout::Row, p[0], p[1])?;
        let fb = b.mma_load(b_other, Layout::Col, p[0], p[1])?;
        let fc = b.mma_fill(acc32, p[2])?;
        b.mma(fa, fb, fc).map(|_| ())
    });
    bad_inst(
        f,
        "mma",
        "mma fragments must have one shape, got m16n16k16, m32n8k16, m16n16k16",
    );
    let f = kernel_with(&[hp.clone(), Type::U32, Type::F32], |b, p| {
        let fa = b.mma_load(a_row, Layout::Row, p[0], p[1])?;
        let fb = b.mma_load(b_col, Layout::Col, p[0], p[1])?;
        let fc = b.mma_fill(acc32, p[2])?;
        b.mma(fb, fa, fc).map(|_| ())
    });
    bad_inst(f, "mma", "in that order");

    let f = kernel_with(&[hp.clone(), Type::U32], |b, p| {
        let fa = b.mma_load(a_row, Layout::Row, p[0], p[1])?;
        b.mma_store(Layout::Row, p[0], fa, p[1])
    });
    bad_inst(f, "mma.store.row", "mma.store stores accumulators");
    let f = kernel_with(&[hp.clone(), Type::F16], |b, p| {
        b.mma_fill(a_row, p[1]).map(|_| ())
    });
    bad_inst(f, "mma.fill", "mma.fill fills accumulators");
    let f = kernel_with(&[hp, Type::F16], |b, p| b.mma_fill(acc32, p[1]).map(|_| ()));
    bad_inst(f, "mma.fill", "the fill value has type f16, expected f32");
}

#[test]
fn cp_async_rules() {
    let sp = Type::ptr(AddrSpace::Shared, Type::F32);
    let f = kernel_with(&[gptr(Type::F32)], |b, p| {
        b.cp_async(16, CacheHint::Ca, p[0], p[0])
    });
    let d = bad_inst(
        f,
        "cp.async.ca.16",
        "destination must be a pointer to shared memory",
    );
    assert!(d.message.contains("ptr<global, f32>"));
    let _ = sp;
    let f = kernel_with(&[gptr(Type::F32)], |b, _| {
        let s = b.shared_alloc(Type::F32, 4)?;
        b.cp_async(16, CacheHint::Ca, s, s)
    });
    bad_inst(
        f,
        "cp.async.ca.16",
        "source must be a pointer to global memory",
    );
    let f = kernel_with(&[gptr(Type::F32)], |b, p| {
        let s = b.shared_alloc(Type::F32, 4)?;
        b.cp_async(12, CacheHint::Ca, s, p[0])
    });
    bad_inst(
        f,
        "cp.async.ca.12",
        "cp.async copies 4, 8 or 16 bytes, got 12",
    );
    let f = kernel_with(&[gptr(Type::F32)], |b, p| {
        let s = b.shared_alloc(Type::F32, 4)?;
        b.cp_async(8, CacheHint::Cg, s, p[0])
    });
    bad_inst(
        f,
        "cp.async.cg.8",
        "cp.async.cg copies 16 bytes only, got 8",
    );
    let f = kernel_with(&[], |b, _| b.cp_async_wait(40));
    bad_inst(f, "cp.async.wait", "at most 31 pending groups");
}

#[test]
fn call_rules() {
    let dev = {
        let mut d = FunctionBuilder::device("dev", &[Type::I32], &[Type::F32]);
        let x = d.param(0);
        let y = d.cast(x, Type::F32).unwrap();
        d.ret(&[y]).unwrap();
        d.finish().unwrap()
    };
    let host = {
        let mut h = FunctionBuilder::host("hostf", &[], &[]);
        h.ret(&[]).unwrap();
        h.finish().unwrap()
    };
    let kern = kernel_with(&[], |_, _| Ok(()));
    let kern = Function {
        name: "kern".into(),
        ..kern
    };

    let call_from = |kind: FunctionKind, callee: &str, args: &[Type], rets: &[Type]| {
        let mut b = FunctionBuilder::new("caller", kind, args, &[]);
        let ps = b.params();
        b.call(callee, &ps, rets).unwrap();
        b.ret(&[]).unwrap();
        let f = b.finish().unwrap();
        module(vec![dev.clone(), host.clone(), kern.clone(), f])
    };
    let k = || FunctionKind::Kernel(KernelInfo::default());
    ok(&call_from(k(), "dev", &[Type::I32], &[Type::F32]));
    ok(&call_from(FunctionKind::Host, "hostf", &[], &[]));
    let d = err(
        &call_from(k(), "nothere", &[], &[]),
        "call to @nothere, which is not in the module",
    );
    assert_eq!(d.function, "caller");
    assert_eq!(d.inst_text.as_deref(), Some("call @nothere"));
    err(
        &call_from(FunctionKind::Host, "dev", &[Type::I32], &[Type::F32]),
        "host function calls device function @dev",
    );
    err(
        &call_from(FunctionKind::Device, "hostf", &[], &[]),
        "GPU function calls host function @hostf",
    );
    err(
        &call_from(k(), "kern", &[], &[]),
        "@kern is a kernel; kernels are launched, not called",
    );
    err(
        &call_from(k(), "dev", &[], &[Type::F32]),
        "@dev takes 1 argument, got 0",
    );
    err(
        &call_from(k(), "dev", &[Type::U32], &[Type::F32]),
        "argument 0 has type u32, expected i32",
    );
    err(
        &call_from(k(), "dev", &[Type::I32], &[]),
        "@dev returns 1 value, the call has 0 results",
    );
    err(
        &call_from(k(), "dev", &[Type::I32], &[Type::F64]),
        "result 0 has type f64, expected f32",
    );
}

#[test]
fn recursion_is_allowed() {
    let mut d = FunctionBuilder::device("fact", &[Type::U32], &[Type::U32]);
    let n = d.param(0);
    let r = d.call("fact", &[n], &[Type::U32]).unwrap();
    d.ret(&r).unwrap();
    ok(&module(vec![d.finish().unwrap()]));
}

#[test]
fn no_alloc_allows_bounded_stack() {
    // A small constant alloca is bounded stack, not an allocation in the issue's sense.
    let mut d = FunctionBuilder::device("scratch", &[], &[]);
    d.alloca(Type::F32, 4).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut k = FunctionBuilder::kernel("k", &[]);
    k.constraints_mut().no_alloc = true;
    k.call("scratch", &[], &[]).unwrap();
    k.ret(&[]).unwrap();
    ok(&module(vec![dev, k.finish().unwrap()]));
}

#[test]
fn no_alloc_rejects_unbounded_stack_naming_each_site() {
    // 40 KiB here plus 40 KiB in the callee: over the 64 KiB budget.
    let mut d = FunctionBuilder::device("scratch", &[], &[]);
    d.alloca(Type::F32, 10 * 1024).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut k = FunctionBuilder::device("k", &[], &[]);
    k.constraints_mut().no_alloc = true;
    k.alloca(Type::F64, 5 * 1024).unwrap();
    k.call("scratch", &[], &[]).unwrap();
    k.ret(&[]).unwrap();
    let kf = k.finish().unwrap();
    let m = module(vec![dev, kf.clone()]);
    let d = err(
        &m,
        "no_alloc function reaches @scratch, which allocates 40960 bytes",
    );
    assert_eq!(d.function, "k");
    let d = err(
        &m,
        "alloca in a no_alloc function whose stack reaches 81920 bytes",
    );
    assert_at(&d, &kf, "alloca");
}

#[test]
fn no_alloc_rejects_reachable_recursion() {
    let mut r = FunctionBuilder::device("fact", &[Type::U32], &[Type::U32]);
    let n = r.param(0);
    let x = r.call("fact", &[n], &[Type::U32]).unwrap();
    r.ret(&x).unwrap();
    let fact = r.finish().unwrap();
    let mut k = FunctionBuilder::kernel("k", &[Type::U32]);
    k.constraints_mut().no_alloc = true;
    let n = k.param(0);
    k.call("fact", &[n], &[Type::U32]).unwrap();
    k.ret(&[]).unwrap();
    let d = err(
        &module(vec![fact, k.finish().unwrap()]),
        "no_alloc function reaches recursion, which needs unbounded stack: @fact -> @fact",
    );
    assert_eq!(d.function, "k");
}

// ------------------------------------------------------------------ kernel metadata, names

fn kernel_info(info: KernelInfo) -> Module {
    let mut f = kernel_with(&[], |_, _| Ok(()));
    f.kind = FunctionKind::Kernel(info);
    module(vec![f])
}

#[test]
fn kernel_metadata_rules() {
    let d = err(
        &kernel_info(KernelInfo {
            max_threads: Some([64, 32, 1]),
            ..Default::default()
        }),
        "a block has at most 1024 threads, this allows 2048",
    );
    assert_eq!((d.function.as_str(), d.block, d.inst), ("k", None, None));
    err(
        &kernel_info(KernelInfo {
            max_threads: Some([0, 1, 1]),
            ..Default::default()
        }),
        "every dimension must be at least 1",
    );
    err(
        &kernel_info(KernelInfo {
            max_threads: Some([1, 1, 128]),
            ..Default::default()
        }),
        "z at most 64",
    );
    err(
        &kernel_info(KernelInfo {
            min_blocks: Some(2),
            ..Default::default()
        }),
        "min_blocks needs max_threads",
    );
    err(
        &kernel_info(KernelInfo {
            max_threads: Some([32, 1, 1]),
            min_blocks: Some(0),
            ..Default::default()
        }),
        "min_blocks(0) must be in 1..=32",
    );
    err(
        &kernel_info(KernelInfo {
            max_registers: Some(0),
            ..Default::default()
        }),
        "max_registers(0) must be in 24..=255",
    );
    err(
        &kernel_info(KernelInfo {
            max_registers: Some(256),
            ..Default::default()
        }),
        "max_registers(256)",
    );
    err(
        &kernel_info(KernelInfo {
            shared_bytes: 300_000,
            ..Default::default()
        }),
        "shared_bytes(300000) exceeds",
    );
    let mut m = kernel_info(KernelInfo {
        shared_bytes: 100_000,
        ..Default::default()
    });
    m.targets = vec![Arch::Sm75];
    err(&m, "exceed sm_75's per-block maximum of 65536 bytes");
    m.targets = vec![Arch::Sm80];
    ok(&m);
    ok(&kernel_info(KernelInfo {
        max_threads: Some([256, 4, 1]),
        min_blocks: Some(2),
        max_registers: Some(64),
        shared_bytes: 4096,
        arch: Some(Arch::Sm80),
        exact_threads: None,
        cluster: None,
    }));
}

#[test]
fn kernel_parameter_types() {
    let f = kernel_with(&[Type::ptr(AddrSpace::Shared, Type::F32)], |_, _| Ok(()));
    let d = err(
        &module(vec![f]),
        "kernel parameters are scalars, vectors, tensormaps or pointers to global, generic or constant memory",
    );
    assert_eq!(d.block, Some(BlockId(0)));
    let fr = frag_type(FragKind::Acc, MmaShape::M16N16K16, ScalarType::F32, None);
    let f = kernel_with(&[Type::Frag(fr)], |_, _| Ok(()));
    err(
        &module(vec![f]),
        "kernel parameter v0 has type frag<acc, m16n16k16, f32>",
    );
    let mut h = FunctionBuilder::host("h", &[Type::Frag(fr)], &[]);
    h.ret(&[]).unwrap();
    err(
        &module(vec![h.finish().unwrap()]),
        "host functions cannot use fragment types",
    );
    let f = kernel_with(&[Type::array(Type::F32, 4)], |_, _| Ok(()));
    err(&module(vec![f]), "array [f32; 4] is not a value type");
}

#[test]
fn function_names() {
    for (name, want) in [
        ("1abc", "is not an identifier"),
        ("a-b", "is not an identifier"),
        ("", "is not an identifier"),
        ("_", "is not an identifier"),
        ("memcpy", "is reserved: the backends call"),
        ("sinf", "is reserved"),
        ("__nv_sinf", "is reserved"),
    ] {
        let mut f = saxpy();
        f.name = name.into();
        let d = err(&module(vec![f]), want);
        assert_eq!(d.function, name);
    }
    let d = err(
        &module(vec![saxpy(), saxpy()]),
        "function name @saxpy is defined more than once",
    );
    assert_eq!(d.function, "saxpy");
    let mut f = saxpy();
    f.name = "_Z3foo".into();
    ok(&module(vec![f]));
}

// ------------------------------------------------------------------ arch gating

#[test]
fn cp_async_needs_sm80() {
    let m = module_for(&[Arch::Sm75, Arch::Sm80], vec![cp_async_kernel()]);
    let d = err(
        &m,
        "cp.async needs sm_80 and PTX 7.0, but this function is compiled for sm_75 with PTX 6.4",
    );
    assert_eq!(d.inst_text.as_deref(), Some("cp.async.cg.16 v5, v6"));
    assert!(check_arch(&module(vec![cp_async_kernel()]), Arch::Sm70).is_err());
    assert!(check_arch(&module(vec![cp_async_kernel()]), Arch::Sm80).is_ok());
}

#[test]
fn bf16_needs_sm80() {
    let f = kernel_storing(Type::BF16, |b| b.fconst(Type::BF16, 1.0));
    let m = module_for(&[Arch::Sm75], vec![f.clone()]);
    // Both the entry parameter and the constant are reported.
    let e = verify_module(&m).unwrap_err();
    assert!(
        e.diagnostics.iter().any(|d| d.block == Some(BlockId(0))
            && d.inst.is_none()
            && d.message.contains("bf16 needs sm_80")),
        "{e}"
    );
    let d = err(&m, "bf16 needs sm_80");
    assert!(d.message.contains("sm_75"));
    ok(&module_for(&[Arch::Sm80], vec![f.clone()]));
    // A bf16 wmma needs sm_80 as well.
    let w = wmma_kernel(MmaShape::M16N16K16, ScalarType::BF16, ScalarType::F32);
    err(
        &module_for(&[Arch::Sm70], vec![w]),
        "wmma bf16 needs sm_80 and PTX 7.0",
    );
    // Host functions are not gated.
    let mut h = FunctionBuilder::host("h", &[Type::BF16], &[Type::BF16]);
    let x = h.param(0);
    h.ret(&[x]).unwrap();
    ok(&module_for(&[Arch::Sm70], vec![h.finish().unwrap()]));
}

#[test]
fn atomic_float_gating() {
    let f16_add = kernel_with(&[gptr(Type::F16), Type::F16], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    ok(&module_for(&[Arch::Sm70], vec![f16_add.clone()]));
    let mut m = module_for(&[Arch::Sm70], vec![f16_add]);
    m.ptx_version = Some(PtxVersion::new(6, 0));
    err(&m, "atomic add on f16 needs sm_70 and PTX 6.3, but this function is compiled for sm_70 with PTX 6.0");

    let bf_add = kernel_with(&[gptr(Type::BF16), Type::BF16], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    let d = err(
        &module_for(&[Arch::Sm80], vec![bf_add.clone()]),
        "atomic add on bf16 needs sm_90 and PTX 7.8",
    );
    assert_at(&d, &bf_add, "atomic.add.device");
    ok(&module_for(&[Arch::Sm90], vec![bf_add]));
}

#[test]
fn wmma_shape_needs_ptx61() {
    let w = wmma_kernel(MmaShape::M32N8K16, ScalarType::F16, ScalarType::F32);
    let mut m = module_for(&[Arch::Sm70], vec![w]);
    m.ptx_version = Some(PtxVersion::new(6, 0));
    err(&m, "wmma f16 m32n8k16/m8n32k16 needs sm_70 and PTX 6.1");
    m.ptx_version = Some(PtxVersion::new(6, 1));
    ok(&m);
}

#[test]
fn ptx_version_rules() {
    let mut m = module_for(&[Arch::Sm86], vec![saxpy()]);
    m.ptx_version = Some(PtxVersion::new(7, 0));
    let d = err(
        &m,
        "ptx(7.0) is too old for sm_86, which needs PTX 7.1 or newer",
    );
    assert_eq!(d.function, "");
    assert!(d.to_string().starts_with("in module: ptx(7.0)"), "{d}");
    m.ptx_version = Some(PtxVersion::new(9, 0));
    err(&m, "ptx(9.0) is not a PTX version LLVM 19 can emit");
    m.ptx_version = Some(PtxVersion::new(6, 9));
    err(&m, "ptx(6.9) is not a PTX version");
    m.ptx_version = Some(PtxVersion::new(8, 5));
    ok(&m);
    // A kernel's own arch counts as well.
    let mut f = saxpy();
    f.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm90a),
        ..Default::default()
    });
    let mut m = module(vec![f]);
    m.ptx_version = Some(PtxVersion::new(7, 8));
    err(&m, "too old for sm_90a, which needs PTX 8.0");
    assert!(check_arch(&m, Arch::Sm90a).is_err());
    assert!(check_arch(&m, Arch::Sm90).is_ok());
}

#[test]
fn kernel_arch_overrides_targets_and_reaches_device_functions() {
    // Module targets sm_90 but the kernel is compiled for sm_75 only.
    let mut k = cp_async_kernel();
    k.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm75),
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm90], vec![k]);
    err(&m, "compiled for sm_75");

    // A device function using cp.async, reached from a kernel compiled for sm_75.
    let mut d = FunctionBuilder::device(
        "stage",
        &[Type::ptr(AddrSpace::Shared, Type::F32), gptr(Type::F32)],
        &[],
    );
    let (s, g) = (d.param(0), d.param(1));
    d.cp_async(4, CacheHint::Ca, s, g).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut k = FunctionBuilder::kernel("k", &[gptr(Type::F32)]);
    let g = k.param(0);
    let s = k.shared_alloc(Type::F32, 1).unwrap();
    k.call("stage", &[s, g], &[]).unwrap();
    k.ret(&[]).unwrap();
    let mut kf = k.finish().unwrap();
    let m = module(vec![dev.clone(), kf.clone()]);
    ok(&m); // no targets: decided at compile time
    assert!(check_arch(&m, Arch::Sm75).is_err());
    kf.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm75),
        ..Default::default()
    });
    let m = module(vec![dev, kf]);
    let d = err(&m, "cp.async needs sm_80");
    assert_eq!(d.function, "stage");
}

fn explicit_ptx_feature(f: &arch::Feature) -> bool {
    [
        arch::MMA_SYNC_FP8,
        arch::CVT_FP8,
        arch::L2_HINT,
        arch::WGMMA_MIXED_INT,
    ]
    .contains(f)
}

#[test]
fn arch_table_is_consistent() {
    for a in Arch::ALL {
        assert!(arch::min_ptx(a) <= a.default_ptx(), "{a}");
        assert!(arch::ptx_supported(a.default_ptx()), "{a}");
        assert!(arch::ptx_supported(arch::min_ptx(a)), "{a}");
        assert!(arch::max_shared_bytes(a) <= 227 * 1024);
    }
    for f in arch::FEATURES {
        // A feature's own arch can express its PTX version.
        assert!(
            arch::min_ptx(f.arch) <= f.ptx || f.ptx <= f.arch.default_ptx(),
            "{f:?}"
        );
        // Every feature fits the newest target's default, except fp8 mma.sync
        // and fp8 conversions, which need an explicit ptx(8.4) / ptx(8.1) (issue 12).
        if !explicit_ptx_feature(f) {
            assert!(f.available(Arch::Sm90a, Arch::Sm90a.default_ptx()), "{f:?}");
        }
    }
    // Every default PTX covers every feature its arch has.
    for a in Arch::ALL {
        for f in arch::FEATURES {
            if a >= f.arch && !explicit_ptx_feature(f) {
                assert!(
                    f.available(a, a.default_ptx()),
                    "{a} default PTX lacks {}",
                    f.name
                );
            }
        }
    }
}

// ------------------------------------------------------------------ diagnostics

#[test]
fn all_errors_are_collected_with_locations() {
    let mut b = FunctionBuilder::kernel("k", &[Type::I32, Type::F32]);
    let (x, y) = (b.param(0), b.param(1));
    b.set_loc(Some(Loc {
        file: Some("k.py".into()),
        line: 3,
        col: 5,
    }));
    b.add(x, y).unwrap();
    b.set_loc(Some(Loc {
        file: Some("k.py".into()),
        line: 4,
        col: 9,
    }));
    b.unary(UnOp::Sqrt, x).unwrap();
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let e = verify_module(&m).unwrap_err();
    assert_eq!(e.diagnostics.len(), 2, "{e}");
    let first = &e.diagnostics[0];
    assert_eq!(first.loc.as_ref().map(|l| (l.line, l.col)), Some((3, 5)));
    assert_eq!(
        e.diagnostics[1].loc.as_ref().map(|l| (l.line, l.col)),
        Some((4, 9))
    );
    let text = e.to_string();
    assert!(text.contains("k.py:3:5: in @k, block0, `v2: i32 = add v0, v1`: `add` operands must have the same type"), "{text}");
    assert!(
        text.starts_with("verification failed with 2 errors"),
        "{text}"
    );
}

#[test]
fn verify_function_checks_one_function() {
    let good = saxpy();
    let mut bad = saxpy();
    bad.name = "bad".into();
    bad.blocks[2].insts.clear();
    let m = module(vec![good.clone(), bad.clone()]);
    assert!(verify_function(&m, &good).is_ok());
    let e = verify_function(&m, &bad).unwrap_err();
    assert!(e.diagnostics.iter().all(|d| d.function == "bad"));
}

#[test]
fn llvm_phi_rules() {
    // br to one block twice with different arguments.
    let mut b = FunctionBuilder::device("d", &[Type::BOOL, Type::I32, Type::I32], &[Type::I32]);
    let (c, x, y) = (b.param(0), b.param(1), b.param(2));
    let join = b.create_block(&[Type::I32]);
    b.branch(c, join, &[x], join, &[y]).unwrap();
    b.switch_to(join);
    let p = b.block_params(join).unwrap()[0];
    b.ret(&[p]).unwrap();
    let f = b.finish().unwrap();
    let d = err(
        &module(vec![f.clone()]),
        "both targets are block1 but pass different arguments",
    );
    assert_at(&d, &f, "br");
    // Same arguments are fine.
    let mut f2 = f;
    let br = find_inst(&f2, "br").1;
    f2.insts[br.index()].targets[1].args = vec![ValueId(1)];
    ok(&module(vec![f2]));

    // A block with parameters that nothing branches to.
    let mut b = FunctionBuilder::device("d", &[Type::I32], &[Type::I32]);
    let x = b.param(0);
    b.ret(&[x]).unwrap();
    let dead = b.create_block(&[Type::I32]);
    b.switch_to(dead);
    let p = b.block_params(dead).unwrap()[0];
    b.ret(&[p]).unwrap();
    let d = err(
        &module(vec![b.finish().unwrap()]),
        "block1 has parameters but no branch targets it",
    );
    assert_eq!((d.block, d.inst), (Some(BlockId(1)), None));
}

#[test]
fn kernel_parameter_space_is_bounded() {
    let params = vec![Type::Vector(ScalarType::F64, 8); 65];
    let f = kernel_with(&params, |_, _| Ok(()));
    err(
        &module(vec![f]),
        "kernel parameters take 4160 bytes; PTX allows at most 4096",
    );
    let params = vec![Type::Vector(ScalarType::F64, 8); 64];
    ok(&module(vec![kernel_with(&params, |_, _| Ok(()))]));
}

#[test]
fn huge_sizes_do_not_overflow() {
    // Found by verify_fuzz: static shared size saturates, plus u32::MAX dynamic bytes.
    let mut f = kernel_with(&[], |b, _| {
        b.shared_alloc(Type::array(Type::F64, u64::MAX / 4), 3)
            .map(|_| ())
    });
    f.kind = FunctionKind::Kernel(KernelInfo {
        shared_bytes: u32::MAX,
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm90], vec![f]);
    err(&m, "larger than 2^40 bytes");
    err(&m, "shared_bytes(4294967295) exceeds");
}

#[test]
fn host_multi_returns_fit_slots() {
    let v4 = Type::Vector(ScalarType::F32, 4);
    let mut h = FunctionBuilder::host("h", std::slice::from_ref(&v4), &[v4.clone(), Type::U64]);
    let x = h.param(0);
    let z = h.iconst(Type::U64, 0).unwrap();
    h.ret(&[x, z]).unwrap();
    let d = err(
        &module(vec![h.finish().unwrap()]),
        "return type vec<f32, 4> is larger than 8 bytes",
    );
    assert_eq!((d.function.as_str(), d.block), ("h", None));
    // One return of any size is fine.
    let mut h = FunctionBuilder::host("h", std::slice::from_ref(&v4), std::slice::from_ref(&v4));
    let x = h.param(0);
    h.ret(&[x]).unwrap();
    ok(&module(vec![h.finish().unwrap()]));
}

#[test]
fn kernel_limits_per_arch() {
    // ptxas raises register caps below 24 (with a warning).
    let m = kernel_info(KernelInfo {
        max_registers: Some(16),
        ..Default::default()
    });
    err(&m, "max_registers(16) must be in 24..=255");
    ok(&kernel_info(KernelInfo {
        max_registers: Some(24),
        ..Default::default()
    }));

    // Resident blocks per SM: 16 on sm_75 and sm_86, 24 on sm_89, 32 elsewhere.
    let occ = |x: u32, blocks: u32, arch: Arch| {
        let mut m = kernel_info(KernelInfo {
            max_threads: Some([x, 1, 1]),
            min_blocks: Some(blocks),
            ..Default::default()
        });
        m.targets = vec![arch];
        m
    };
    ok(&occ(1, 16, Arch::Sm75));
    let d = err(
        &occ(1, 17, Arch::Sm75),
        "min_blocks(17) exceeds the 16 resident blocks per SM of sm_75",
    );
    assert_eq!((d.function.as_str(), d.block), ("k", None));
    ok(&occ(1, 24, Arch::Sm89));
    err(
        &occ(1, 25, Arch::Sm89),
        "exceeds the 24 resident blocks per SM of sm_89",
    );
    ok(&occ(1, 32, Arch::Sm90));
    // Resident threads per SM, counted in whole warps: 1024 on sm_75, 1536 on sm_86/89, 2048 elsewhere.
    ok(&occ(1024, 2, Arch::Sm80));
    err(
        &occ(1024, 2, Arch::Sm75),
        "exceed the 1024 resident threads per SM of sm_75",
    );
    ok(&occ(512, 3, Arch::Sm86));
    err(
        &occ(300, 5, Arch::Sm86),
        "min_blocks(5) blocks of 300 threads (320 in whole warps) exceed the 1536 resident threads per SM of sm_86",
    );
    // check_arch applies the same limits to an arch the module does not list.
    let m = occ(1024, 2, Arch::Sm80);
    assert!(check_arch(&m, Arch::Sm80).is_ok());
    let e = check_arch(&m, Arch::Sm75).unwrap_err();
    assert!(
        e.to_string().contains("resident threads per SM of sm_75"),
        "{e}"
    );
    let mut m = kernel_info(KernelInfo {
        shared_bytes: 100_000,
        ..Default::default()
    });
    m.targets.clear();
    ok(&m);
    assert!(check_arch(&m, Arch::Sm80).is_ok());
    assert!(check_arch(&m, Arch::Sm75).is_err());
}

#[test]
fn alloca_total_is_bounded() {
    let f = kernel_with(&[], |b, _| {
        b.alloca(Type::F32, 100_000)?;
        b.alloca(Type::F32, 100_000).map(|_| ())
    });
    let d = err(
        &module(vec![f]),
        "the allocas of this function take 800000 bytes; at most 524288",
    );
    assert_eq!((d.function.as_str(), d.block), ("k", None));
}

#[test]
fn long_block_chains_verify_without_recursion() {
    // 50k blocks in a chain, each using the previous block's value: the
    // dominator walk and the DFS are iterative, so no stack overflow.
    let mut b = FunctionBuilder::device("chain", &[Type::I32], &[Type::I32]);
    let mut v = b.param(0);
    for _ in 0..50_000 {
        let next = b.create_block(&[]);
        b.jump(next, &[]).unwrap();
        b.switch_to(next);
        v = b.add(v, v).unwrap();
    }
    b.ret(&[v]).unwrap();
    let f = b.finish().unwrap();
    let start = std::time::Instant::now();
    ok(&module(vec![f]));
    // Generous bound: linear work, debug build, shared machine.
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

#[test]
fn pinned_kernels_and_device_functions_follow_lowering() {
    // A kernel pinned to sm_80 may use cp.async in a module targeting sm_75:
    // the sm_75 PTX does not hold it, so check_arch(sm_75) skips it.
    let mut k = cp_async_kernel();
    k.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm80),
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm75], vec![k, saxpy()]);
    ok(&m);
    assert!(check_arch(&m, Arch::Sm75).is_ok());
    assert!(check_arch(&m, Arch::Sm80).is_ok());

    // Every arch's PTX holds every device function: one using cp.async fails
    // when any kernel is pinned to an older arch, even if that kernel never calls it.
    let mut d = FunctionBuilder::device(
        "stage",
        &[Type::ptr(AddrSpace::Shared, Type::F32), gptr(Type::F32)],
        &[],
    );
    let (s, g) = (d.param(0), d.param(1));
    d.cp_async(4, CacheHint::Ca, s, g).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut old = saxpy();
    old.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm70),
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm80], vec![dev.clone(), old]);
    let d = err(&m, "cp.async needs sm_80");
    assert_eq!(d.function, "stage");
    assert!(d.message.contains("sm_70"), "{d}");
    ok(&module_for(&[Arch::Sm80], vec![dev, saxpy()]));
}
