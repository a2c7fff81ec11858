//! CPU backend: JIT results against Rust references on fresh random inputs,
//! constraint errors, bounds errors, CPU kernels, AOT emission.

use zyntax_hir::*;
use zyntax_llvm::host::{self, Arg, Buffer, Emit, HostError, HostFnKind, HostOptions, Scalar};

mod fresh_rng;
use fresh_rng::Rng;

fn module(fs: Vec<Function>) -> Module {
    let mut m = Module::new("t");
    m.functions = fs;
    m
}

fn f64s(v: &[Scalar]) -> Vec<f64> {
    v.iter()
        .map(|s| match s {
            Scalar::Float(x) => *x,
            Scalar::Int(x) => *x as f64,
            Scalar::UInt(x) => *x as f64,
            Scalar::Bool(b) => f64::from(u8::from(*b)),
        })
        .collect()
}

/// sum(x[i] * y[i]) over n elements, with the given constraints.
fn dot(name: &str, c: Constraints) -> Function {
    let p = Type::ptr(AddrSpace::Generic, Type::F64);
    let mut b = FunctionBuilder::host(name, &[p.clone(), p, Type::I64], &[Type::F64]);
    *b.constraints_mut() = c;
    let (x, y, n) = (b.param(0), b.param(1), b.param(2));
    let zero = b.iconst(Type::I64, 0).unwrap();
    let one = b.iconst(Type::I64, 1).unwrap();
    let acc0 = b.fconst(Type::F64, 0.0).unwrap();
    let fr = b.begin_for(zero, n, one, &[acc0]).unwrap();
    let px = b.ptr_add(x, fr.iv).unwrap();
    let py = b.ptr_add(y, fr.iv).unwrap();
    let (vx, vy) = (b.load(px).unwrap(), b.load(py).unwrap());
    let acc = b.fma(vx, vy, fr.carried[0]).unwrap();
    let out = b.end_for(fr, &[acc]).unwrap();
    b.ret(&[out[0]]).unwrap();
    b.finish().unwrap()
}

#[test]
fn scalar_ops_match_rust() {
    let mut b = FunctionBuilder::host(
        "ops",
        &[Type::I32, Type::I32, Type::F64, Type::U32],
        &[Type::I32, Type::I32, Type::F64, Type::U32, Type::BOOL],
    );
    let (a, c, x, u) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let q = b.binary(BinOp::Div, a, c).unwrap();
    let r = b.binary(BinOp::Rem, a, c).unwrap();
    let s = b.unary(UnOp::Sqrt, x).unwrap();
    let xs = b.unary(UnOp::Abs, x).unwrap();
    let s2 = b.unary(UnOp::Sqrt, xs).unwrap();
    let e = b.add(s2, x).unwrap();
    let _ = s;
    let sh = b.iconst(Type::U32, 3).unwrap();
    let us = b.binary(BinOp::Shr, u, sh).unwrap();
    let lt = b.cmp(CmpOp::Lt, a, c).unwrap();
    b.ret(&[q, r, e, us, lt]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    let mut rng = Rng::new();
    for _ in 0..200 {
        let (a, mut c, x, u) = (
            rng.i32(),
            rng.i32() % 1000,
            rng.f64() * 100.0,
            rng.next() as u32,
        );
        if c == 0 {
            c = 7;
        }
        let out = jit
            .call(
                "ops",
                &mut [
                    Arg::Scalar(Scalar::Int(a.into())),
                    Arg::Scalar(Scalar::Int(c.into())),
                    Arg::Scalar(Scalar::Float(x)),
                    Arg::Scalar(Scalar::UInt(u.into())),
                ],
            )
            .unwrap();
        assert_eq!(out[0], Scalar::Int(a.wrapping_div(c).into()));
        assert_eq!(out[1], Scalar::Int(a.wrapping_rem(c).into()));
        assert_eq!(out[2], Scalar::Float(x.abs().sqrt() + x));
        assert_eq!(out[3], Scalar::UInt((u >> 3).into()));
        assert_eq!(out[4], Scalar::Bool(a < c));
    }
    // Division by zero is an error naming the function, not a crash.
    let e = jit
        .call(
            "ops",
            &mut [
                Arg::Scalar(Scalar::Int(5)),
                Arg::Scalar(Scalar::Int(0)),
                Arg::Scalar(Scalar::Float(1.0)),
                Arg::Scalar(Scalar::UInt(1)),
            ],
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("@ops: integer division by zero"),
        "{e}"
    );
    // Wrong argument types name the signature.
    let e = jit
        .call("ops", &mut [Arg::Scalar(Scalar::Float(1.5))])
        .unwrap_err();
    assert!(
        matches!(e, HostError::Argument(_)) && e.to_string().contains("@ops(i32, i32, f64, u32)"),
        "{e}"
    );
    let e = jit
        .call(
            "ops",
            &mut [
                Arg::Scalar(Scalar::Int(1 << 40)),
                Arg::Scalar(Scalar::Int(1)),
                Arg::Scalar(Scalar::Float(1.0)),
                Arg::Scalar(Scalar::UInt(1)),
            ],
        )
        .unwrap_err();
    assert!(e.to_string().contains("does not fit i32"), "{e}");
}

#[test]
fn loops_bounds_checks_and_critical_path() {
    let fast = Constraints {
        critical_path: true,
        no_alloc: true,
        no_bounds_check: true,
        ..Default::default()
    };
    let m = module(vec![
        dot("dot_checked", Constraints::default()),
        dot("dot_fast", fast),
    ]);
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    let mut rng = Rng::new();
    let n = 1000 + (rng.next() % 500) as usize;
    let mut x: Vec<f64> = (0..n).map(|_| rng.f64()).collect();
    let mut y: Vec<f64> = (0..n).map(|_| rng.f64()).collect();
    let want = x.iter().zip(&y).fold(0.0, |a, (p, q)| p.mul_add(*q, a));
    for name in ["dot_checked", "dot_fast"] {
        let got = f64s(
            &jit.call(
                name,
                &mut [
                    Arg::Buffer(Buffer::new(&mut x)),
                    Arg::Buffer(Buffer::new(&mut y)),
                    Arg::Scalar(Scalar::Int(n as i64)),
                ],
            )
            .unwrap(),
        )[0];
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{name}: {got} vs {want}"
        );
    }
    // Reading past the end of y: a clear error with function, parameter and index.
    let mut short = y[..10].to_vec();
    let e = jit
        .call(
            "dot_checked",
            &mut [
                Arg::Buffer(Buffer::new(&mut x)),
                Arg::Buffer(Buffer::new(&mut short)),
                Arg::Scalar(Scalar::Int(20)),
            ],
        )
        .unwrap_err();
    let HostError::Runtime(r) = &e else {
        panic!("{e}")
    };
    assert_eq!(
        (r.index, r.param, r.len),
        (Some(10), Some(1), Some(10)),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("@dot_checked: index 10 out of bounds for parameter 1"),
        "{e}"
    );
    // Wrong dtype: an argument error naming the signature.
    let mut wrong = vec![1f32; 4];
    let e = jit
        .call(
            "dot_fast",
            &mut [
                Arg::Buffer(Buffer::new(&mut wrong)),
                Arg::Buffer(Buffer::new(&mut y)),
                Arg::Scalar(Scalar::Int(4)),
            ],
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("array of f32 passed for ptr<generic, f64>"),
        "{e}"
    );
    // The report and IR show what the critical-path optimizer did.
    let fr = jit.report.function("dot_fast").unwrap();
    let passes: Vec<&str> = fr.actions.iter().map(|a| a.pass.as_str()).collect();
    for p in [
        "no_alloc",
        "pipeline",
        "attributes",
        "loops",
        "prefetch",
        "bounds",
    ] {
        assert!(passes.contains(&p), "missing {p} in {passes:?}");
    }
    assert!(
        jit.llvm_ir.contains("llvm.prefetch"),
        "no prefetch in optimized IR"
    );
    eprintln!("notes: {:?}", jit.report.notes);
    let checked = jit
        .functions
        .iter()
        .find(|f| f.name == "dot_checked")
        .unwrap();
    assert_eq!((checked.checks, checked.unchecked), (2, 0));
}

#[test]
fn inline_always_and_constraint_errors() {
    let mut b = FunctionBuilder::host("sq", &[Type::F64], &[Type::F64]);
    b.constraints_mut().inline_always = true;
    let x = b.param(0);
    let y = b.mul(x, x).unwrap();
    b.ret(&[y]).unwrap();
    let sq = b.finish().unwrap();
    let mut b = FunctionBuilder::host("hyp", &[Type::F64, Type::F64], &[Type::F64]);
    b.constraints_mut().no_alloc = true;
    let (x, y) = (b.param(0), b.param(1));
    let a = b.call("sq", &[x], &[Type::F64]).unwrap()[0];
    let c = b.call("sq", &[y], &[Type::F64]).unwrap()[0];
    let s = b.add(a, c).unwrap();
    let r = b.unary(UnOp::Sqrt, s).unwrap();
    b.ret(&[r]).unwrap();
    let m = module(vec![sq, b.finish().unwrap()]);
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    let mut rng = Rng::new();
    let (x, y) = (rng.f64(), rng.f64());
    assert_eq!(
        f64s(
            &jit.call(
                "hyp",
                &mut [Arg::Scalar(Scalar::Float(x)), Arg::Scalar(Scalar::Float(y))]
            )
            .unwrap()
        )[0],
        (x * x + y * y).sqrt()
    );
    assert!(
        jit.hir
            .function("hyp")
            .unwrap()
            .insts
            .iter()
            .all(|d| !matches!(d.op, Op::Call(_))),
        "call left after HIR inlining"
    );
    assert!(jit
        .report
        .function("hyp")
        .unwrap()
        .actions
        .iter()
        .any(|a| a.what.contains("inlined call to @sq")));

    // no_alloc: recursion below the function needs unbounded stack. The
    // verifier rejects it before the optimizer's proof (which checks the same).
    let mut b = FunctionBuilder::host("rec", &[Type::I32], &[Type::I32]);
    let x = b.param(0);
    let r = b.call("rec", &[x], &[Type::I32]).unwrap()[0];
    b.ret(&[r]).unwrap();
    let rec = b.finish().unwrap();
    let mut b = FunctionBuilder::host("bad", &[Type::I32], &[Type::I32]);
    b.constraints_mut().no_alloc = true;
    let x = b.param(0);
    let r = b.call("rec", &[x], &[Type::I32]).unwrap()[0];
    b.ret(&[r]).unwrap();
    let m = module(vec![rec, b.finish().unwrap()]);
    let e = match host::prepare(&m, &HostOptions::default()) {
        Err(e) => e,
        Ok(_) => panic!("no_alloc violation accepted"),
    };
    let text = e.to_string();
    assert!(
        text.contains("in @bad: no_alloc function reaches recursion")
            && text.contains("@rec -> @rec"),
        "{text}"
    );

    // critical_path with O0 cannot be met.
    let mut f = dot(
        "cp0",
        Constraints {
            critical_path: true,
            opt_level: OptLevel::O0,
            ..Default::default()
        },
    );
    f.constraints.no_alloc = false;
    let e = host::prepare(&module(vec![f]), &HostOptions::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("@cp0: constraint `critical_path` cannot be met"),
        "{e}"
    );
}

fn vadd_kernel(with_barrier: bool) -> Function {
    let p = Type::ptr(AddrSpace::Global, Type::F32);
    let mut b = FunctionBuilder::kernel(
        if with_barrier { "vadd_bar" } else { "vadd" },
        &[
            p.clone(),
            p.clone(),
            p,
            Type::ptr(AddrSpace::Global, Type::U32),
            Type::U32,
        ],
    );
    let (x, y, o, cnt, n) = (b.param(0), b.param(1), b.param(2), b.param(3), b.param(4));
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let base = b.mul(bid, bd).unwrap();
    let i = b.add(base, tid).unwrap();
    if with_barrier {
        b.barrier().unwrap();
    }
    let inb = b.cmp(CmpOp::Lt, i, n).unwrap();
    let fr = b.begin_if(inb, &[]).unwrap();
    let (px, py, po) = (
        b.ptr_add(x, i).unwrap(),
        b.ptr_add(y, i).unwrap(),
        b.ptr_add(o, i).unwrap(),
    );
    let (vx, vy) = (b.load(px).unwrap(), b.load(py).unwrap());
    let s = b.add(vx, vy).unwrap();
    b.store(po, s).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    b.atomic(AtomicOp::Add, Scope::Device, cnt, one).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn kernels_run_on_cpu_in_parallel() {
    for vector_threads in [None, Some(true)] {
        kernels_run_on_cpu(&HostOptions {
            vector_threads,
            ..HostOptions::default()
        });
    }
}

fn kernels_run_on_cpu(opts: &HostOptions) {
    let mut m = module(vec![vadd_kernel(false), vadd_kernel(true)]);
    m.targets = vec![Arch::Sm80];
    let jit = host::jit(&m, opts).unwrap();
    assert_eq!(jit.function("vadd").unwrap().kind, HostFnKind::CpuKernel);
    // A barrier splits the block into regions (tests/host_barriers.rs).
    assert_eq!(
        jit.function("vadd_bar").unwrap().kind,
        HostFnKind::CpuKernel
    );
    let mut rng = Rng::new();
    let n = 3000 + (rng.next() % 1000) as usize;
    let mut x: Vec<f32> = (0..n).map(|_| rng.f64() as f32).collect();
    let mut y: Vec<f32> = (0..n).map(|_| rng.f64() as f32).collect();
    let mut o = vec![0f32; n];
    let mut cnt = vec![0u32; 1];
    let blocks = n.div_ceil(128) as u32;
    jit.launch(
        "vadd",
        [blocks, 1, 1],
        [128, 1, 1],
        &mut [
            Arg::Buffer(Buffer::new(&mut x)),
            Arg::Buffer(Buffer::new(&mut y)),
            Arg::Buffer(Buffer::new(&mut o)),
            Arg::Buffer(Buffer::new(&mut cnt)),
            Arg::Scalar(Scalar::UInt(n as u64)),
        ],
        0,
    )
    .unwrap();
    for k in 0..n {
        assert_eq!(o[k], x[k] + y[k]);
    }
    assert_eq!(cnt[0] as usize, n);
    // A grid larger than the arrays: bounds error instead of a crash.
    let mut small = vec![0f32; 10];
    let e = jit
        .launch(
            "vadd",
            [blocks, 1, 1],
            [128, 1, 1],
            &mut [
                Arg::Buffer(Buffer::new(&mut x)),
                Arg::Buffer(Buffer::new(&mut y)),
                Arg::Buffer(Buffer::new(&mut small)),
                Arg::Buffer(Buffer::new(&mut cnt)),
                Arg::Scalar(Scalar::UInt(n as u64)),
            ],
            0,
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("@vadd: index") && e.to_string().contains("parameter 2"),
        "{e}"
    );
}

#[test]
fn aot_object_and_shared_library() {
    let m = module(vec![dot(
        "dot",
        Constraints {
            critical_path: true,
            ..Default::default()
        },
    )]);
    let obj = host::emit(&m, &HostOptions::default(), Emit::Object).unwrap();
    assert_eq!(&obj.bytes[..4], b"\x7fELF");
    assert!(
        obj.symbols.iter().any(|s| s == "dot") && obj.symbols.iter().any(|s| s == "dot.zx_slots"),
        "{:?}",
        obj.symbols
    );
    let so = host::emit(
        &m,
        &HostOptions {
            cpu: Some("x86-64".into()),
            ..Default::default()
        },
        Emit::SharedLib,
    )
    .unwrap();
    assert_eq!(&so.bytes[..4], b"\x7fELF");
    assert_eq!(so.target.cpu, "x86-64");
    let asm = host::emit(&m, &HostOptions::default(), Emit::Asm).unwrap();
    let text = String::from_utf8_lossy(&asm.bytes);
    assert!(text.contains("dot:"));
    // critical_path: the function entry and its innermost loop on 64 bytes.
    assert!(text.matches(".p2align\t6").count() >= 2, "{text}");
}

/// A barrier-free kernel runs through its vectorizable variant; a failure
/// there re-runs the block checked for the details, and a failure that does
/// not recur (the kernel changed its own input) still fails the launch.
#[test]
fn vector_runner_failures_are_reported() {
    let mut b = FunctionBuilder::kernel(
        "flaky",
        &[
            Type::ptr(AddrSpace::Global, Type::U32),
            Type::ptr(AddrSpace::Global, Type::F32),
        ],
    );
    let (idx, x) = (b.param(0), b.param(1));
    let i = b.load(idx).unwrap();
    let z = b.iconst(Type::U32, 0).unwrap();
    b.store(idx, z).unwrap();
    let px = b.ptr_add(x, i).unwrap();
    let one = b.fconst(Type::F32, 1.0).unwrap();
    b.store(px, one).unwrap();
    b.ret(&[]).unwrap();
    let mut m = module(vec![b.finish().unwrap()]);
    m.targets = vec![Arch::Sm80];
    let opts = HostOptions {
        vector_threads: Some(true),
        ..HostOptions::default()
    };
    let p = host::prepare(&m, &opts).unwrap();
    assert!(p.ir.contains("flaky.zx_fast") && p.ir.contains("flaky.zx_checked"));
    // Off (the default only where the target lacks AVX-512): no fast variant.
    let off = HostOptions {
        vector_threads: Some(false),
        ..HostOptions::default()
    };
    let plain = host::prepare(&m, &off).unwrap();
    assert!(!plain.ir.contains("flaky.zx_fast"));
    let jit = host::jit(&m, &opts).unwrap();
    let mut rng = Rng::new();
    let n = 8 + (rng.next() % 64) as usize;
    let mut x = vec![0f32; n];
    // In bounds: runs, writes x[i].
    let k = (rng.next() % n as u64) as u32;
    let mut ix = vec![k];
    jit.launch(
        "flaky",
        [1, 1, 1],
        [1, 1, 1],
        &mut [
            Arg::Buffer(Buffer::new(&mut ix)),
            Arg::Buffer(Buffer::new(&mut x)),
        ],
        0,
    )
    .unwrap();
    assert_eq!((ix[0], x[k as usize]), (0, 1.0));
    // Out of bounds once, in bounds on the checked re-run: still an error.
    let mut ix = vec![n as u32 + (rng.next() % 100) as u32];
    let e = jit
        .launch(
            "flaky",
            [1, 1, 1],
            [1, 1, 1],
            &mut [
                Arg::Buffer(Buffer::new(&mut ix)),
                Arg::Buffer(Buffer::new(&mut x)),
            ],
            0,
        )
        .unwrap_err();
    assert!(e.to_string().contains("out of bounds"), "{e}");
}
