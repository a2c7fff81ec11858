//! Functions built with variables (`declare_var`/`def_var`/`use_var`, the
//! builder's SSA construction) compute what the source program means: each
//! runs on the interpreter against a Rust reference. The structure of what
//! SSA construction produces is tested in `crates/zyntax-hir/tests/ssa.rs`.

mod common;

use common::*;
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};

fn module(fs: Vec<Function>) -> Module {
    let mut m = Module::new("ssa");
    m.targets = vec![Arch::from_name("sm_80").unwrap()];
    m.functions = fs;
    m
}

fn call_i64(m: &Module, name: &str, args: &[Arg]) -> i128 {
    let it = Interpreter::new(m).unwrap();
    let r = it.call(name, args, &mut []).unwrap();
    r[0].as_i128().unwrap()
}

/// `a, b, s = 0, 1, 0; for i in range(n): s += 3 * a; a, b = b, a + b; return s`.
fn fib_sum() -> Function {
    let mut b = FunctionBuilder::host("fib_sum", &[Type::I64], &[Type::I64]);
    let n = b.param(0);
    let (va, vb, vs) = (
        b.declare_named_var("a", Type::I64),
        b.declare_named_var("b", Type::I64),
        b.declare_named_var("s", Type::I64),
    );
    let zero = b.iconst(Type::I64, 0).unwrap();
    let one = b.iconst(Type::I64, 1).unwrap();
    let three = b.iconst(Type::I64, 3).unwrap();
    b.def_var(va, zero).unwrap();
    b.def_var(vb, one).unwrap();
    b.def_var(vs, zero).unwrap();
    let lp = b.begin_for(zero, n, one, &[]).unwrap();
    let (a, bb, s) = (
        b.use_var(va).unwrap(),
        b.use_var(vb).unwrap(),
        b.use_var(vs).unwrap(),
    );
    let a3 = b.mul(a, three).unwrap();
    let s2 = b.add(s, a3).unwrap();
    b.def_var(vs, s2).unwrap();
    let ab = b.add(a, bb).unwrap();
    b.def_var(va, bb).unwrap();
    b.def_var(vb, ab).unwrap();
    b.end_for(lp, &[]).unwrap();
    let s = b.use_var(vs).unwrap();
    b.ret(&[s]).unwrap();
    b.finish().unwrap()
}

fn fib_sum_ref(n: i64) -> i64 {
    let (mut a, mut b, mut s) = (0i64, 1i64, 0i64);
    for _ in 0..n {
        s = s.wrapping_add(3i64.wrapping_mul(a));
        (a, b) = (b, a.wrapping_add(b));
    }
    s
}

#[test]
fn loop_with_several_variables_runs() {
    let m = module(vec![fib_sum()]);
    for n in [0i64, 1, 2, 5, 30, 91] {
        let got = call_i64(&m, "fib_sum", &[Arg::Int(n.into())]);
        assert_eq!(got, i128::from(fib_sum_ref(n)), "n = {n}");
    }
}

/// Early exits: `break`, `continue` and `return` inside the loop.
/// s = 0; for i in range(n):
///     if i == stop: break
///     if i % 3 == 1: continue
///     if i == bad: return -1
///     if i % 2 == 0: s += i else: s -= 2 * i
/// return s
fn exits() -> Function {
    let mut b = FunctionBuilder::host("exits", &[Type::I32, Type::I32, Type::I32], &[Type::I32]);
    let (n, stop, bad) = (b.param(0), b.param(1), b.param(2));
    let vs = b.declare_named_var("s", Type::I32);
    let c = |b: &mut FunctionBuilder, v: i64| b.iconst(Type::I32, v).unwrap();
    let (zero, one, two, three) = (c(&mut b, 0), c(&mut b, 1), c(&mut b, 2), c(&mut b, 3));
    b.def_var(vs, zero).unwrap();
    let lp = b.begin_for(zero, n, one, &[]).unwrap();
    let i = lp.iv;

    let hit = b.cmp(CmpOp::Eq, i, stop).unwrap();
    let fr = b.begin_if(hit, &[]).unwrap();
    b.break_for(&lp, &[]).unwrap();
    b.end_if(fr, &[]).unwrap();

    let r3 = b.rem(i, three).unwrap();
    let skip = b.cmp(CmpOp::Eq, r3, one).unwrap();
    let fr = b.begin_if(skip, &[]).unwrap();
    b.continue_for(&lp, &[]).unwrap();
    b.end_if(fr, &[]).unwrap();

    let is_bad = b.cmp(CmpOp::Eq, i, bad).unwrap();
    let fr = b.begin_if(is_bad, &[]).unwrap();
    let m1 = c(&mut b, -1);
    b.ret(&[m1]).unwrap();
    b.end_if(fr, &[]).unwrap();

    let r2 = b.rem(i, two).unwrap();
    let even = b.cmp(CmpOp::Eq, r2, zero).unwrap();
    let mut fr = b.begin_if(even, &[]).unwrap();
    let s = b.use_var(vs).unwrap();
    let s = b.add(s, i).unwrap();
    b.def_var(vs, s).unwrap();
    b.begin_else(&mut fr, &[]).unwrap();
    let s = b.use_var(vs).unwrap();
    let i2 = b.mul(i, two).unwrap();
    let s = b.sub(s, i2).unwrap();
    b.def_var(vs, s).unwrap();
    b.end_if(fr, &[]).unwrap();

    b.end_for(lp, &[]).unwrap();
    let s = b.use_var(vs).unwrap();
    b.ret(&[s]).unwrap();
    b.finish().unwrap()
}

fn exits_ref(n: i32, stop: i32, bad: i32) -> i32 {
    let mut s = 0i32;
    for i in 0..n {
        if i == stop {
            break;
        }
        if i % 3 == 1 {
            continue;
        }
        if i == bad {
            return -1;
        }
        if i % 2 == 0 {
            s += i;
        } else {
            s -= 2 * i;
        }
    }
    s
}

#[test]
fn early_exits_run() {
    let m = module(vec![exits()]);
    let mut rng = Rng::new(0x55a);
    let mut cases = vec![
        (0, 5, 99),
        (20, 100, 100),
        (20, 7, 100),
        (20, 100, 9),
        (20, 100, 10),
    ];
    for _ in 0..20 {
        let r = |rng: &mut Rng| rng.below(40) as i32;
        cases.push((r(&mut rng), r(&mut rng), r(&mut rng)));
    }
    for (n, stop, bad) in cases {
        let args = [
            Arg::Int(n.into()),
            Arg::Int(stop.into()),
            Arg::Int(bad.into()),
        ];
        let got = call_i64(&m, "exits", &args);
        assert_eq!(
            got,
            i128::from(exits_ref(n, stop, bad)),
            "n={n} stop={stop} bad={bad}"
        );
    }
}

/// A kernel: thread t sums row t of an n x m matrix, halving negative
/// elements, and counts the negatives — two loop-carried variables through
/// an if inside the loop, no carried values threaded by hand.
fn row_sums() -> Function {
    let g = |t: Type| Type::ptr(AddrSpace::Global, t);
    let mut b = FunctionBuilder::kernel(
        "row_sums",
        &[
            g(Type::F32),
            g(Type::F32),
            g(Type::U32),
            Type::U32,
            Type::U32,
        ],
    );
    let (x, sums, negs, n, m) = (b.param(0), b.param(1), b.param(2), b.param(3), b.param(4));
    let vsum = b.declare_named_var("acc", Type::F32);
    let vneg = b.declare_named_var("negatives", Type::U32);
    let t = b.thread_idx(Dim::X).unwrap();
    let inb = b.cmp(CmpOp::Lt, t, n).unwrap();
    let outer = b.begin_if(inb, &[]).unwrap();
    let fzero = b.fconst(Type::F32, 0.0).unwrap();
    let uzero = b.iconst(Type::U32, 0).unwrap();
    let uone = b.iconst(Type::U32, 1).unwrap();
    b.def_var(vsum, fzero).unwrap();
    b.def_var(vneg, uzero).unwrap();
    let base = b.mul(t, m).unwrap();
    let lp = b.begin_for(uzero, m, uone, &[]).unwrap();
    let k = b.add(base, lp.iv).unwrap();
    let p = b.ptr_add(x, k).unwrap();
    let v = b.load(p).unwrap();
    let neg = b.cmp(CmpOp::Lt, v, fzero).unwrap();
    let fr = b.begin_if(neg, &[]).unwrap();
    let half = b.fconst(Type::F32, 0.5).unwrap();
    let hv = b.mul(v, half).unwrap();
    let acc = b.use_var(vsum).unwrap();
    let acc = b.add(acc, hv).unwrap();
    b.def_var(vsum, acc).unwrap();
    let c = b.use_var(vneg).unwrap();
    let c = b.add(c, uone).unwrap();
    b.def_var(vneg, c).unwrap();
    b.end_if(fr, &[]).unwrap();
    let fr = b.begin_if(neg, &[]).unwrap();
    // (an empty then-branch: the merge sees the same values on both edges)
    b.end_if(fr, &[]).unwrap();
    let pos = b.cmp(CmpOp::Ge, v, fzero).unwrap();
    let fr = b.begin_if(pos, &[]).unwrap();
    let acc = b.use_var(vsum).unwrap();
    let acc = b.add(acc, v).unwrap();
    b.def_var(vsum, acc).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.end_for(lp, &[]).unwrap();
    let ps = b.ptr_add(sums, t).unwrap();
    let acc = b.use_var(vsum).unwrap();
    b.store(ps, acc).unwrap();
    let pn = b.ptr_add(negs, t).unwrap();
    let c = b.use_var(vneg).unwrap();
    b.store(pn, c).unwrap();
    b.end_if(outer, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn kernel_with_loop_carried_variables_runs() {
    let m = module(vec![row_sums()]);
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(0xabc);
    let (n, cols) = (40u32, 13u32);
    let x: Vec<f32> = (0..n * cols).map(|_| rng.f32(-1.0, 1.0)).collect();
    // Outputs are poisoned first; threads past n must leave them alone.
    let poison = vec![f32::NAN; 64];
    let mut bufs = vec![
        f32_bytes(&x),
        f32_bytes(&poison),
        u32_bytes(&[u32::MAX; 64]),
    ];
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(n.into()),
        Arg::Int(cols.into()),
    ];
    it.launch("row_sums", [1, 1, 1], [64, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    let sums = bytes_f32(&bufs[1]);
    let negs = bytes_u32(&bufs[2]);
    for t in 0..n as usize {
        let (mut acc, mut count) = (0.0f32, 0u32);
        for v in &x[t * cols as usize..(t + 1) * cols as usize] {
            if *v < 0.0 {
                acc += v * 0.5;
                count += 1;
            }
            if *v >= 0.0 {
                acc += v;
            }
        }
        assert_eq!(sums[t].to_bits(), acc.to_bits(), "row {t}");
        assert_eq!(negs[t], count, "row {t}");
    }
    assert!(sums[n as usize..].iter().all(|s| s.is_nan()));
    assert!(negs[n as usize..].iter().all(|c| *c == u32::MAX));
}

/// The example of docs/hir.md, "Variables and SSA construction".
fn docs_example() -> Result<Function, BuildError> {
    // s = 0; for i in range(n): if i % 3 != 0: s += i;  return s
    let mut b = FunctionBuilder::host("f", &[Type::I32], &[Type::I32]);
    let n = b.param(0);
    let s = b.declare_named_var("s", Type::I32);
    let (zero, one, three) = (
        b.iconst(Type::I32, 0)?,
        b.iconst(Type::I32, 1)?,
        b.iconst(Type::I32, 3)?,
    );
    b.def_var(s, zero)?;
    let lp = b.begin_for(zero, n, one, &[])?; // no carried values
    let r = b.rem(lp.iv, three)?;
    let keep = b.cmp(CmpOp::Ne, r, zero)?;
    let fr = b.begin_if(keep, &[])?;
    let acc = b.use_var(s)?; // a header parameter, made on demand
    let acc = b.add(acc, lp.iv)?;
    b.def_var(s, acc)?;
    b.end_if(fr, &[])?;
    b.end_for(lp, &[])?; // seals the header: its arguments are filled in
    let out = b.use_var(s)?;
    b.ret(&[out])?;
    b.finish()
}

#[test]
fn docs_example_runs() {
    let m = module(vec![docs_example().unwrap()]);
    for n in [0i32, 1, 3, 4, 10, 100] {
        let want: i32 = (0..n).filter(|i| i % 3 != 0).sum();
        let got = call_i64(&m, "f", &[Arg::Int(n.into())]);
        assert_eq!(got, i128::from(want), "n = {n}");
    }
}
