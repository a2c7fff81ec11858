//! Calls: non-recursive calls are inlined; recursive ones run as nested
//! activations with their own allocas.

mod common;

use common::*;
use zyntax_hir::*;
use zyntax_interp::{Arg, InterpError, Interpreter, TrapKind};

/// fib(n) = n < 2 ? n : fib(n-1) + fib(n-2), through a per-activation alloca
/// holding n (so activations that shared memory would compute garbage).
fn fib(kind: FunctionKind) -> Function {
    let mut b = FunctionBuilder::new("fib", kind, &[Type::U64], &[Type::U64]);
    let n = b.param(0);
    let slot = b.alloca(Type::U64, 1).unwrap();
    b.store(slot, n).unwrap();
    let two = b.iconst(Type::U64, 2).unwrap();
    let small = b.cmp(CmpOp::Lt, n, two).unwrap();
    let mut fr = b.begin_if(small, &[Type::U64]).unwrap();
    b.begin_else(&mut fr, &[n]).unwrap();
    let one = b.iconst(Type::U64, 1).unwrap();
    let n1 = b.sub(n, one).unwrap();
    let f1 = b.call("fib", &[n1], &[Type::U64]).unwrap()[0];
    let again = b.load(slot).unwrap(); // still n after the nested calls
    let n2 = b.sub(again, two).unwrap();
    let f2 = b.call("fib", &[n2], &[Type::U64]).unwrap()[0];
    let s = b.add(f1, f2).unwrap();
    let out = b.end_if(fr, &[s]).unwrap();
    b.ret(&[out[0]]).unwrap();
    b.finish().unwrap()
}

fn fib_ref(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

#[test]
fn recursive_host_function() {
    let mut m = Module::new("rec");
    m.functions.push(fib(FunctionKind::Host));
    let it = Interpreter::new(&m).unwrap();
    for n in [0u64, 1, 2, 10, 17] {
        let r = it.call("fib", &[Arg::Int(n.into())], &mut []).unwrap();
        assert_eq!(r[0].as_i128(), Some(i128::from(fib_ref(n))), "fib({n})");
    }
}

#[test]
fn recursive_device_function_per_thread() {
    let mut b = FunctionBuilder::kernel("k", &[Type::ptr(AddrSpace::Global, Type::U64)]);
    let out = b.param(0);
    let tid = b.thread_idx(Dim::X).unwrap();
    let n = b.cast(tid, Type::U64).unwrap();
    let f = b.call("fib", &[n], &[Type::U64]).unwrap()[0];
    let p = b.ptr_add(out, tid).unwrap();
    b.store(p, f).unwrap();
    b.ret(&[]).unwrap();
    let mut m = Module::new("rec");
    m.targets = vec![Arch::from_name("sm_80").unwrap()];
    m.functions.push(b.finish().unwrap());
    m.functions.push(fib(FunctionKind::Device));
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![vec![0u8; 8 * 40]];
    it.launch("k", [1, 1, 1], [20, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap();
    let got = bytes_u64(&bufs[0]);
    for (t, v) in got.iter().enumerate().take(20) {
        assert_eq!(*v, fib_ref(t as u64), "thread {t}");
    }
    assert!(got[20..].iter().all(|v| *v == 0));
}

#[test]
fn endless_recursion_is_a_stack_overflow() {
    let mut b = FunctionBuilder::host("down", &[Type::U32], &[Type::U32]);
    let n = b.param(0);
    let one = b.iconst(Type::U32, 1).unwrap();
    let m1 = b.add(n, one).unwrap();
    let r = b.call("down", &[m1], &[Type::U32]).unwrap()[0];
    b.ret(&[r]).unwrap();
    let mut m = Module::new("rec");
    m.functions.push(b.finish().unwrap());
    let e = Interpreter::new(&m)
        .unwrap()
        .call("down", &[Arg::Int(0)], &mut [])
        .unwrap_err();
    assert!(
        matches!(&e, InterpError::Trap(t) if t.kind == TrapKind::StackOverflow),
        "{e}"
    );
}

/// sign(x) with three `return`s, called (inlined) from a host function and run directly.
#[test]
fn functions_with_several_returns() {
    let mut b = FunctionBuilder::host("sign", &[Type::I32], &[Type::I32]);
    let x = b.param(0);
    let zero = b.iconst(Type::I32, 0).unwrap();
    let neg = b.cmp(CmpOp::Lt, x, zero).unwrap();
    let fr = b.begin_if(neg, &[]).unwrap();
    let m1 = b.iconst(Type::I32, -1).unwrap();
    b.ret(&[m1]).unwrap();
    b.end_if(fr, &[]).unwrap();
    let pos = b.cmp(CmpOp::Gt, x, zero).unwrap();
    let fr = b.begin_if(pos, &[]).unwrap();
    let p1 = b.iconst(Type::I32, 1).unwrap();
    b.ret(&[p1]).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[zero]).unwrap();
    let sign = b.finish().unwrap();
    let mut b = FunctionBuilder::host("twice_sign", &[Type::I32], &[Type::I32]);
    let x = b.param(0);
    let s = b.call("sign", &[x], &[Type::I32]).unwrap()[0];
    let d = b.add(s, s).unwrap();
    b.ret(&[d]).unwrap();
    let mut m = Module::new("rets");
    m.functions.push(sign);
    m.functions.push(b.finish().unwrap());
    let it = Interpreter::new(&m).unwrap();
    for (x, want) in [(-5i128, -1i128), (0, 0), (7, 1)] {
        let r = it.call("sign", &[Arg::Int(x)], &mut []).unwrap();
        assert_eq!(r[0].as_i128(), Some(want), "sign({x})");
        let r = it.call("twice_sign", &[Arg::Int(x)], &mut []).unwrap();
        assert_eq!(r[0].as_i128(), Some(2 * want), "twice_sign({x})");
    }
}
