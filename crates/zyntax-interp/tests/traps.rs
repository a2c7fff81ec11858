//! Deliberate bugs are caught with the right error, naming kernel,
//! instruction, thread and block; interpreter limits are errors, not hangs.

mod common;

use common::*;
use zyntax_hir::*;
use zyntax_interp::{Arg, InterpError, Interpreter, Options, TrapKind};

fn g(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

fn module(fs: Vec<Function>) -> Module {
    let mut m = Module::new("t");
    m.targets = vec![Arch::from_name("sm_80").unwrap()];
    m.functions = fs;
    m
}

/// saxpy with `i <= n` instead of `i < n`.
fn saxpy_off_by_one() -> Module {
    let mut b =
        FunctionBuilder::kernel("saxpy", &[Type::U32, Type::F32, g(Type::F32), g(Type::F32)]);
    let (n, a, x, y) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let bid = b.block_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let base = b.mul(bid, bd).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let i = b.add(base, tid).unwrap();
    let inb = b.cmp(CmpOp::Le, i, n).unwrap();
    let fr = b.begin_if(inb, &[]).unwrap();
    let px = b.ptr_add(x, i).unwrap();
    let py = b.ptr_add(y, i).unwrap();
    let xv = b.load(px).unwrap();
    let yv = b.load(py).unwrap();
    let r = b.fma(a, xv, yv).unwrap();
    b.store(py, r).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    module(vec![b.finish().unwrap()])
}

fn trap_of(e: &InterpError) -> &zyntax_interp::Trap {
    e.trap()
        .unwrap_or_else(|| panic!("expected a trap, got {e}"))
}

#[test]
fn off_by_one_is_out_of_bounds_with_location() {
    let m = saxpy_off_by_one();
    let it = Interpreter::new(&m).unwrap();
    let n = 1000u32;
    let mut rng = Rng::new(21);
    let x: Vec<f32> = (0..n).map(|_| rng.f32(-1.0, 1.0)).collect();
    let mut bufs = vec![f32_bytes(&x), f32_bytes(&x)];
    let args = [
        Arg::Int(n.into()),
        Arg::Float(2.0),
        Arg::Buffer(0),
        Arg::Buffer(1),
    ];
    let e = it
        .launch("saxpy", [4, 1, 1], [256, 1, 1], 0, &args, &mut bufs)
        .unwrap_err();
    let t = trap_of(&e);
    assert_eq!(t.kind, TrapKind::OutOfBounds);
    // Thread 1000 = block 3, thread 232; its first access is the load of x[1000].
    assert_eq!(t.block, [3, 0, 0]);
    assert_eq!(t.thread, [232, 0, 0]);
    assert_eq!(t.kernel, "saxpy");
    assert!(t.inst.contains("load"), "{}", t.inst);
    let msg = e.to_string();
    assert!(msg.contains("element index 1000"), "{msg}");
    assert!(msg.contains("byte offset 4000"), "{msg}");
    assert!(msg.contains("4000 bytes"), "{msg}");
    // The buffers are handed back even after a trap.
    assert_eq!(bufs[0].len(), 4000);
}

/// Tree reduction in shared memory; `barriers` says whether each step ends in one.
fn shared_reduce(barriers: bool) -> Module {
    let mut b = FunctionBuilder::kernel("reduce", &[g(Type::U32), g(Type::U32)]);
    let (x, out) = (b.param(0), b.param(1));
    let s = b.shared_alloc(Type::U32, 256).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let px = b.ptr_add(x, tid).unwrap();
    let v = b.load(px).unwrap();
    let ps = b.ptr_add(s, tid).unwrap();
    b.store(ps, v).unwrap();
    b.barrier().unwrap();
    let mut half = 128;
    while half >= 1 {
        let h = b.iconst(Type::U32, half).unwrap();
        let lt = b.cmp(CmpOp::Lt, tid, h).unwrap();
        let fr = b.begin_if(lt, &[]).unwrap();
        let j = b.add(tid, h).unwrap();
        let pj = b.ptr_add(s, j).unwrap();
        let a = b.load(ps).unwrap();
        let c = b.load(pj).unwrap();
        let sum = b.add(a, c).unwrap();
        b.store(ps, sum).unwrap();
        b.end_if(fr, &[]).unwrap();
        if barriers {
            b.barrier().unwrap();
        }
        half /= 2;
    }
    let zero = b.iconst(Type::U32, 0).unwrap();
    let is0 = b.cmp(CmpOp::Eq, tid, zero).unwrap();
    let fr = b.begin_if(is0, &[]).unwrap();
    let r = b.load(s).unwrap();
    b.store(out, r).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    module(vec![b.finish().unwrap()])
}

#[test]
fn missing_barrier_is_a_race() {
    let mut rng = Rng::new(22);
    let x: Vec<u32> = (0..256).map(|_| rng.below(1000) + 1).collect();
    let sum: u32 = x.iter().sum();
    let args = [Arg::Buffer(0), Arg::Buffer(1)];

    let good = shared_reduce(true);
    let mut bufs = vec![u32_bytes(&x), vec![0u8; 4]];
    Interpreter::new(&good)
        .unwrap()
        .launch("reduce", [1, 1, 1], [256, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    assert_eq!(bytes_u32(&bufs[1])[0], sum);

    let bad = shared_reduce(false);
    let mut bufs = vec![u32_bytes(&x), vec![0u8; 4]];
    let e = Interpreter::new(&bad)
        .unwrap()
        .launch("reduce", [1, 1, 1], [256, 1, 1], 0, &args, &mut bufs)
        .unwrap_err();
    let t = trap_of(&e);
    assert_eq!(t.kind, TrapKind::DataRace, "{e}");
    assert!(e.to_string().contains("shared"), "{e}");

    // With checks off the racy kernel runs (and its result is whatever the schedule gives).
    let opts = Options {
        checks: false,
        ..Options::default()
    };
    let mut bufs = vec![u32_bytes(&x), vec![0u8; 4]];
    Interpreter::with_options(&bad, opts)
        .unwrap()
        .launch("reduce", [1, 1, 1], [256, 1, 1], 0, &args, &mut bufs)
        .unwrap();
}

#[test]
fn write_write_race_and_uninitialized_read() {
    // Every thread writes s[0]: a write/write race.
    let mut b = FunctionBuilder::kernel("ww", &[g(Type::U32)]);
    let s = b.shared_alloc(Type::U32, 4).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    b.store(s, tid).unwrap();
    b.ret(&[]).unwrap();
    let f1 = b.finish().unwrap();
    // Thread t reads s[t] that nobody wrote.
    let mut b = FunctionBuilder::kernel("uninit", &[g(Type::U32)]);
    let out = b.param(0);
    let s = b.shared_alloc(Type::U32, 64).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let p = b.ptr_add(s, tid).unwrap();
    let v = b.load(p).unwrap();
    let po = b.ptr_add(out, tid).unwrap();
    b.store(po, v).unwrap();
    b.ret(&[]).unwrap();
    let f2 = b.finish().unwrap();
    let m = module(vec![f1, f2]);
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![vec![0u8; 256]];
    let e = it
        .launch("ww", [1, 1, 1], [64, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap_err();
    assert_eq!(trap_of(&e).kind, TrapKind::DataRace);
    assert!(e.to_string().contains("write after write"), "{e}");
    let e = it
        .launch(
            "uninit",
            [1, 1, 1],
            [64, 1, 1],
            0,
            &[Arg::Buffer(0)],
            &mut bufs,
        )
        .unwrap_err();
    assert_eq!(trap_of(&e).kind, TrapKind::UninitializedRead);
    assert_eq!(trap_of(&e).thread, [0, 0, 0]);
}

#[test]
fn divergent_barrier_is_reported() {
    // if (tid < 16) barrier; barrier;
    let mut b = FunctionBuilder::kernel("div", &[g(Type::U32)]);
    let tid = b.thread_idx(Dim::X).unwrap();
    let c16 = b.iconst(Type::U32, 16).unwrap();
    let lt = b.cmp(CmpOp::Lt, tid, c16).unwrap();
    let fr = b.begin_if(lt, &[]).unwrap();
    b.barrier().unwrap();
    b.end_if(fr, &[]).unwrap();
    b.barrier().unwrap();
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let e = Interpreter::new(&m)
        .unwrap()
        .launch(
            "div",
            [2, 1, 1],
            [64, 1, 1],
            0,
            &[Arg::Buffer(0)],
            &mut [vec![0u8; 4]],
        )
        .unwrap_err();
    let t = trap_of(&e);
    assert_eq!(t.kind, TrapKind::DivergentBarrier, "{e}");
    assert_eq!(t.block, [0, 0, 0]);
    assert!(t.inst.contains("barrier"));
}

#[test]
fn divergent_shuffle_is_a_deadlock() {
    // Lanes < 16 shuffle with the full mask; the other lanes never get there.
    let mut b = FunctionBuilder::kernel("k", &[g(Type::U32)]);
    let out = b.param(0);
    let tid = b.thread_idx(Dim::X).unwrap();
    let c16 = b.iconst(Type::U32, 16).unwrap();
    let lt = b.cmp(CmpOp::Lt, tid, c16).unwrap();
    let fr = b.begin_if(lt, &[]).unwrap();
    let mask = b.iconst(Type::U32, 0xffff_ffff).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let r = b.shfl(ShflMode::Down, mask, tid, one, 32).unwrap();
    let p = b.ptr_add(out, tid).unwrap();
    b.store(p, r).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let e = Interpreter::new(&m)
        .unwrap()
        .launch(
            "k",
            [1, 1, 1],
            [32, 1, 1],
            0,
            &[Arg::Buffer(0)],
            &mut [vec![0u8; 128]],
        )
        .unwrap_err();
    assert_eq!(trap_of(&e).kind, TrapKind::DivergentWarp, "{e}");
    assert!(e.to_string().contains("has exited"), "{e}");
}

#[test]
fn unreachable_null_misaligned_and_fuel() {
    // unreachable in thread 5 only.
    let mut b = FunctionBuilder::kernel("unr", &[g(Type::U32)]);
    let tid = b.thread_idx(Dim::X).unwrap();
    let c5 = b.iconst(Type::U32, 5).unwrap();
    let eq = b.cmp(CmpOp::Eq, tid, c5).unwrap();
    let fr = b.begin_if(eq, &[]).unwrap();
    b.unreachable().unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    let f1 = b.finish().unwrap();
    // A store through a byte-offset f32 pointer.
    let mut b = FunctionBuilder::kernel("mis", &[g(Type::F32)]);
    let p = b.param(0);
    let pb = b.ptr_cast(p, g(Type::U8)).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let pb1 = b.ptr_add(pb, one).unwrap();
    let pf = b.ptr_cast(pb1, g(Type::F32)).unwrap();
    let x = b.fconst(Type::F32, 1.0).unwrap();
    b.store(pf, x).unwrap();
    b.ret(&[]).unwrap();
    let f2 = b.finish().unwrap();
    // An endless loop.
    let mut b = FunctionBuilder::kernel("spin", &[g(Type::U32)]);
    let lp = b.create_block(&[]);
    b.jump(lp, &[]).unwrap();
    b.switch_to(lp);
    b.jump(lp, &[]).unwrap();
    let f3 = b.finish().unwrap();
    let m = module(vec![f1, f2, f3]);
    let it = Interpreter::with_options(
        &m,
        Options {
            fuel: 100_000,
            ..Options::default()
        },
    )
    .unwrap();
    let e = it
        .launch(
            "unr",
            [1, 1, 1],
            [32, 1, 1],
            0,
            &[Arg::Buffer(0)],
            &mut [vec![0u8; 4]],
        )
        .unwrap_err();
    assert_eq!(trap_of(&e).kind, TrapKind::Unreachable);
    assert_eq!(trap_of(&e).thread, [5, 0, 0]);
    let e = it
        .launch("unr", [1, 1, 1], [32, 1, 1], 0, &[Arg::Null], &mut [])
        .map(|_| ())
        .and_then(|_| {
            it.launch("mis", [1, 1, 1], [1, 1, 1], 0, &[Arg::Null], &mut [])
                .map(|_| ())
        })
        .unwrap_err();
    // `unr` with a null argument still hits unreachable first; `mis` is tested next.
    assert_eq!(trap_of(&e).kind, TrapKind::Unreachable);
    let e = it
        .launch("mis", [1, 1, 1], [1, 1, 1], 0, &[Arg::Null], &mut [])
        .unwrap_err();
    assert_eq!(trap_of(&e).kind, TrapKind::NullPointer);
    let e = it
        .launch(
            "mis",
            [1, 1, 1],
            [1, 1, 1],
            0,
            &[Arg::Buffer(0)],
            &mut [vec![0u8; 16]],
        )
        .unwrap_err();
    assert_eq!(trap_of(&e).kind, TrapKind::Misaligned);
    let e = it
        .launch(
            "spin",
            [1, 1, 1],
            [32, 1, 1],
            0,
            &[Arg::Buffer(0)],
            &mut [vec![0u8; 4]],
        )
        .unwrap_err();
    assert!(matches!(e, InterpError::FuelExhausted { .. }), "{e}");
}

#[test]
fn launch_errors() {
    let m = saxpy_off_by_one();
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![vec![0u8; 16], vec![0u8; 16]];
    let ok_args = [Arg::Int(4), Arg::Float(1.0), Arg::Buffer(0), Arg::Buffer(1)];
    for (grid, block) in [
        ([0, 1, 1], [32, 1, 1]),
        ([1, 1, 1], [2048, 1, 1]),
        ([1, 1, 1], [32, 32, 2]),
    ] {
        let e = it
            .launch("saxpy", grid, block, 0, &ok_args, &mut bufs)
            .unwrap_err();
        assert!(matches!(e, InterpError::Launch(_)), "{e}");
    }
    let bad_args: [&[Arg]; 4] = [
        &[Arg::Int(4)],
        &[
            Arg::Int(-1),
            Arg::Float(1.0),
            Arg::Buffer(0),
            Arg::Buffer(1),
        ],
        &[Arg::Int(4), Arg::Float(1.0), Arg::Buffer(7), Arg::Buffer(1)],
        &[
            Arg::Float(4.0),
            Arg::Float(1.0),
            Arg::Buffer(0),
            Arg::Buffer(1),
        ],
    ];
    for args in bad_args {
        let e = it
            .launch("saxpy", [1, 1, 1], [4, 1, 1], 0, args, &mut bufs)
            .unwrap_err();
        assert!(matches!(e, InterpError::Launch(_)), "{e}");
    }
    let e = it
        .launch("nope", [1, 1, 1], [4, 1, 1], 0, &ok_args, &mut bufs)
        .unwrap_err();
    assert!(matches!(e, InterpError::Launch(_)));
    let e = it.call("saxpy", &ok_args, &mut bufs).unwrap_err();
    assert!(matches!(e, InterpError::Launch(_)));
}

#[test]
fn cp_async_becomes_visible_at_the_wait() {
    // s[t] <- cp.async(x[4t..4t+4]); before the wait s still holds zeros; after it, the data.
    let mut b = FunctionBuilder::kernel("k", &[g(Type::F32), g(Type::F32)]);
    let (x, out) = (b.param(0), b.param(1));
    let s = b.shared_alloc(Type::F32, 128).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let four = b.iconst(Type::U32, 4).unwrap();
    let i = b.mul(tid, four).unwrap();
    let src = b.ptr_add(x, i).unwrap();
    let dst = b.ptr_add(s, i).unwrap();
    b.cp_async(16, CacheHint::Cg, dst, src).unwrap();
    b.cp_async_commit().unwrap();
    let before = b.load(dst).unwrap();
    b.cp_async_wait(0).unwrap();
    let after = b.load(dst).unwrap();
    let two = b.iconst(Type::U32, 2).unwrap();
    let j = b.mul(tid, two).unwrap();
    let p0 = b.ptr_add(out, j).unwrap();
    b.store(p0, before).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let j1 = b.add(j, one).unwrap();
    let p1 = b.ptr_add(out, j1).unwrap();
    b.store(p1, after).unwrap();
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let mut rng = Rng::new(23);
    let x: Vec<f32> = (0..128).map(|_| rng.f32(1.0, 2.0)).collect();
    let args = [Arg::Buffer(0), Arg::Buffer(1)];
    // With checks the early read is an uninitialized read.
    let mut bufs = vec![f32_bytes(&x), vec![0u8; 64 * 4]];
    let e = Interpreter::new(&m)
        .unwrap()
        .launch("k", [1, 1, 1], [32, 1, 1], 0, &args, &mut bufs)
        .unwrap_err();
    assert_eq!(trap_of(&e).kind, TrapKind::UninitializedRead);
    let opts = Options {
        checks: false,
        ..Options::default()
    };
    Interpreter::with_options(&m, opts)
        .unwrap()
        .launch("k", [1, 1, 1], [32, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    let got = bytes_f32(&bufs[1]);
    for t in 0..32 {
        assert_eq!(got[2 * t], 0.0, "thread {t} saw the copy before the wait");
        assert_eq!(got[2 * t + 1], x[4 * t]);
    }
}

#[test]
fn integer_division_by_zero_traps_and_min_div_wraps() {
    let mut b = FunctionBuilder::host(
        "f",
        &[Type::U32, Type::U32, Type::I32, Type::I32],
        &[Type::U32, Type::U32, Type::I32, Type::I32],
    );
    let ps = b.params();
    let q = b.binary(BinOp::Div, ps[0], ps[1]).unwrap();
    let r = b.binary(BinOp::Rem, ps[0], ps[1]).unwrap();
    let qs = b.binary(BinOp::Div, ps[2], ps[3]).unwrap();
    let rs = b.binary(BinOp::Rem, ps[2], ps[3]).unwrap();
    b.ret(&[q, r, qs, rs]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let it = Interpreter::new(&m).unwrap();
    // Like the compiled code (`trap;`), division by zero is a fault, never a panic.
    for args in [
        [Arg::Int(7), Arg::Int(0), Arg::Int(-7), Arg::Int(1)],
        [Arg::Int(7), Arg::Int(1), Arg::Int(-7), Arg::Int(0)],
    ] {
        let e = it.call("f", &args, &mut []).unwrap_err();
        assert_eq!(trap_of(&e).kind, TrapKind::DivisionByZero, "{e}");
    }
    let v = it
        .call(
            "f",
            &[
                Arg::Int(7),
                Arg::Int(2),
                Arg::Int(i128::from(i32::MIN)),
                Arg::Int(-1),
            ],
            &mut [],
        )
        .unwrap();
    let got: Vec<i128> = v.iter().map(|x| x.as_i128().unwrap()).collect();
    assert_eq!(got, vec![3, 1, i128::from(i32::MIN), 0]);
}

#[test]
fn shared_operands_outside_shared_memory_are_address_space_traps() {
    // A global pointer stored to memory and loaded back as a shared one still
    // points into the global buffer: an mbarrier there, or a cp.async
    // destination there, is an address-space trap naming the instruction,
    // the buffer and both spaces.
    for (what, cp_async) in [("mbarrier.init", false), ("cp.async destination", true)] {
        let mut b = FunctionBuilder::kernel("k", &[g(Type::U64), g(g(Type::U64))]);
        let (p, q) = (b.param(0), b.param(1));
        b.store(q, p).unwrap();
        let shared_ptr = Type::ptr(AddrSpace::Shared, Type::U64);
        let q_as_shared = b.ptr_cast(q, g(shared_ptr)).unwrap();
        let s = b.load(q_as_shared).unwrap();
        if cp_async {
            b.cp_async(8, CacheHint::Ca, s, p).unwrap();
        } else {
            let one = b.iconst(Type::U32, 1).unwrap();
            b.mbarrier(MbarrierOp::Init, &[s, one]).unwrap();
        }
        b.ret(&[]).unwrap();
        let mut m = module(vec![b.finish().unwrap()]);
        m.targets = vec![Arch::from_name("sm_90").unwrap()];
        let mut bufs = vec![vec![0u8; 8], vec![0u8; 8]];
        let args = [Arg::Buffer(0), Arg::Buffer(1)];
        let e = Interpreter::new(&m)
            .unwrap()
            .launch("k", [1, 1, 1], [1, 1, 1], 0, &args, &mut bufs)
            .unwrap_err();
        let t = trap_of(&e);
        assert_eq!(t.kind, TrapKind::AddressSpace, "{what}: {e}");
        assert!(
            t.message.starts_with(&format!("{what}: pointer into "))
                && t.message.ends_with("(global) used as a shared pointer"),
            "{}",
            t.message
        );
        assert_eq!(bufs[0], vec![0u8; 8], "{what} wrote to the global buffer");
    }
}
