//! SSA construction in the builder (`declare_var`/`def_var`/`use_var`,
//! sealed blocks): every function built here verifies, joins get exactly the
//! block parameters they need, trivial ones are removed, and misuse is a
//! `BuildError` naming the variable. Running such functions on the
//! interpreter is in `crates/zyntax-interp/tests/ssa.rs`.

use zyntax_hir::*;

fn verified(f: Function) -> Function {
    let mut m = Module::new("t");
    m.functions.push(f);
    if let Err(e) = verify_module(&m) {
        panic!(
            "expected the function to verify, got {e}\n{}",
            print_module(&m)
        );
    }
    // Also round-trips through `.zir` unchanged.
    let text = print_module(&m);
    assert_eq!(parse_module(&text).unwrap(), m, "{text}");
    m.functions.pop().unwrap()
}

/// Number of parameters of each block, in layout order.
fn param_counts(f: &Function) -> Vec<usize> {
    f.layout.iter().map(|b| f.block(*b).params.len()).collect()
}

fn message<T: std::fmt::Debug>(r: BuildResult<T>) -> String {
    r.expect_err("expected a BuildError").to_string()
}

// ------------------------------------------------------------------ loops

/// `a, b = 0, 1; s = 0; for i in range(n): s += a; a, b = b, a + b; return s`
/// — three loop-varying variables and one loop-invariant one (`k`).
fn fib_sum() -> FunctionBuilder {
    let mut b = FunctionBuilder::host("fib_sum", &[Type::I64], &[Type::I64]);
    let n = b.param(0);
    let (va, vb, vs, vk) = (
        b.declare_named_var("a", Type::I64),
        b.declare_named_var("b", Type::I64),
        b.declare_named_var("s", Type::I64),
        b.declare_named_var("k", Type::I64),
    );
    let zero = b.iconst(Type::I64, 0).unwrap();
    let one = b.iconst(Type::I64, 1).unwrap();
    let three = b.iconst(Type::I64, 3).unwrap();
    b.def_var(va, zero).unwrap();
    b.def_var(vb, one).unwrap();
    b.def_var(vs, zero).unwrap();
    b.def_var(vk, three).unwrap();
    let lp = b.begin_for(zero, n, one, &[]).unwrap();
    let (a, bb, s, k) = (
        b.use_var(va).unwrap(),
        b.use_var(vb).unwrap(),
        b.use_var(vs).unwrap(),
        b.use_var(vk).unwrap(),
    );
    let ak = b.mul(a, k).unwrap();
    let s2 = b.add(s, ak).unwrap();
    b.def_var(vs, s2).unwrap();
    let ab = b.add(a, bb).unwrap();
    b.def_var(va, bb).unwrap();
    b.def_var(vb, ab).unwrap();
    b.end_for(lp, &[]).unwrap();
    let s = b.use_var(vs).unwrap();
    b.ret(&[s]).unwrap();
    b
}

#[test]
fn loop_with_several_variables() {
    let f = verified(fib_sum().finish().unwrap());
    // entry, header (iv + a, b, s; the invariant k needs none), body, exit.
    assert_eq!(param_counts(&f), vec![1, 4, 0, 0], "{}", print_function(&f));
    let text = print_function(&f);
    // The back edge passes the new a (= old b), b (= a + b) and s.
    assert!(text.contains("jump block1("), "{text}");
}

#[test]
fn loop_header_waits_for_its_back_edge() {
    // A `while` built from raw blocks: the header is sealed only after the
    // back edge exists, so the read in it becomes a parameter then.
    let mut b = FunctionBuilder::host("count", &[Type::U32], &[Type::U32]);
    let n = b.param(0);
    let i = b.declare_named_var("i", Type::U32);
    let zero = b.iconst(Type::U32, 0).unwrap();
    b.def_var(i, zero).unwrap();
    let (header, body, exit) = (
        b.create_block(&[]),
        b.create_block(&[]),
        b.create_block(&[]),
    );
    b.jump(header, &[]).unwrap();
    b.switch_to(header);
    assert!(!b.is_sealed(header));
    let cur = b.use_var(i).unwrap();
    assert_eq!(
        b.block_params(header).unwrap(),
        vec![cur],
        "a pending parameter"
    );
    let go = b.cmp(CmpOp::Lt, cur, n).unwrap();
    b.branch(go, body, &[], exit, &[]).unwrap();
    b.seal_block(body).unwrap();
    b.switch_to(body);
    let cur = b.use_var(i).unwrap();
    let two = b.iconst(Type::U32, 2).unwrap();
    let next = b.add(cur, two).unwrap();
    b.def_var(i, next).unwrap();
    b.jump(header, &[]).unwrap();
    b.seal_block(header).unwrap();
    b.seal_block(exit).unwrap();
    b.switch_to(exit);
    let last = b.use_var(i).unwrap();
    b.ret(&[last]).unwrap();
    let f = verified(b.finish().unwrap());
    assert_eq!(param_counts(&f), vec![1, 1, 0, 0], "{}", print_function(&f));
}

#[test]
fn finish_seals_what_was_left_unsealed() {
    // Same loop, never sealed by hand: finish() seals every block.
    let mut b = FunctionBuilder::host("count", &[Type::U32], &[Type::U32]);
    let n = b.param(0);
    let i = b.declare_var(Type::U32);
    let zero = b.iconst(Type::U32, 0).unwrap();
    b.def_var(i, zero).unwrap();
    let (header, body, exit) = (
        b.create_block(&[]),
        b.create_block(&[]),
        b.create_block(&[]),
    );
    b.jump(header, &[]).unwrap();
    b.switch_to(header);
    let cur = b.use_var(i).unwrap();
    let go = b.cmp(CmpOp::Lt, cur, n).unwrap();
    b.branch(go, body, &[], exit, &[]).unwrap();
    b.switch_to(body);
    let cur = b.use_var(i).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let next = b.add(cur, one).unwrap();
    b.def_var(i, next).unwrap();
    b.jump(header, &[]).unwrap();
    b.switch_to(exit);
    let last = b.use_var(i).unwrap();
    b.ret(&[last]).unwrap();
    let f = verified(b.finish().unwrap());
    // body and exit read i through parameters of their own (they were unsealed
    // when read); the ones with one incoming value are removed as trivial.
    assert_eq!(param_counts(&f), vec![1, 1, 0, 0], "{}", print_function(&f));
}

// ------------------------------------------------------------------ ifs

#[test]
fn nested_ifs_join_only_what_differs() {
    // x = 1; y = 7
    // if c1: (if c2: x = 2 else: x = 3) else: pass
    // return x + y   — the merges join x, never y.
    let mut b = FunctionBuilder::host("pick", &[Type::BOOL, Type::BOOL], &[Type::I32]);
    let (c1, c2) = (b.param(0), b.param(1));
    let (vx, vy) = (
        b.declare_named_var("x", Type::I32),
        b.declare_named_var("y", Type::I32),
    );
    let one = b.iconst(Type::I32, 1).unwrap();
    let seven = b.iconst(Type::I32, 7).unwrap();
    b.def_var(vx, one).unwrap();
    b.def_var(vy, seven).unwrap();
    let outer = b.begin_if(c1, &[]).unwrap();
    let mut inner = b.begin_if(c2, &[]).unwrap();
    let two = b.iconst(Type::I32, 2).unwrap();
    b.def_var(vx, two).unwrap();
    b.begin_else(&mut inner, &[]).unwrap();
    let three = b.iconst(Type::I32, 3).unwrap();
    b.def_var(vx, three).unwrap();
    b.end_if(inner, &[]).unwrap();
    b.end_if(outer, &[]).unwrap();
    let x = b.use_var(vx).unwrap();
    let y = b.use_var(vy).unwrap();
    assert_eq!(y, seven, "y is never redefined: no parameter");
    let s = b.add(x, y).unwrap();
    b.ret(&[s]).unwrap();
    let f = verified(b.finish().unwrap());
    let joins: usize = param_counts(&f).iter().skip(1).sum();
    assert_eq!(joins, 2, "x at both merges:\n{}", print_function(&f));
}

#[test]
fn if_without_assignment_adds_nothing() {
    let mut b = FunctionBuilder::host("same", &[Type::BOOL, Type::F32], &[Type::F32]);
    let (c, a) = (b.param(0), b.param(1));
    let v = b.declare_var(Type::F32);
    b.def_var(v, a).unwrap();
    let fr = b.begin_if(c, &[]).unwrap();
    let inside = b.use_var(v).unwrap();
    assert_eq!(inside, a);
    b.end_if(fr, &[]).unwrap();
    assert_eq!(b.use_var(v).unwrap(), a);
    b.ret(&[a]).unwrap();
    let f = verified(b.finish().unwrap());
    assert_eq!(param_counts(&f).iter().skip(1).sum::<usize>(), 0);
}

// ------------------------------------------------------------------ early exits

#[test]
fn early_exits_break_continue_and_return() {
    // s = 0; for i in range(n):
    //   if i == 7: break
    //   if i % 2 == 1: continue
    //   if i == 100: return -1
    //   s += i
    // return s
    let mut b = FunctionBuilder::host("exits", &[Type::I32], &[Type::I32]);
    let n = b.param(0);
    let vs = b.declare_named_var("s", Type::I32);
    let c = |b: &mut FunctionBuilder, v: i64| b.iconst(Type::I32, v).unwrap();
    let zero = c(&mut b, 0);
    let one = c(&mut b, 1);
    b.def_var(vs, zero).unwrap();
    let lp = b.begin_for(zero, n, one, &[]).unwrap();
    let seven = c(&mut b, 7);
    let is7 = b.cmp(CmpOp::Eq, lp.iv, seven).unwrap();
    let fr = b.begin_if(is7, &[]).unwrap();
    b.break_for(&lp, &[]).unwrap();
    b.end_if(fr, &[]).unwrap();
    let two = c(&mut b, 2);
    let r = b.rem(lp.iv, two).unwrap();
    let odd = b.cmp(CmpOp::Eq, r, one).unwrap();
    let fr = b.begin_if(odd, &[]).unwrap();
    b.continue_for(&lp, &[]).unwrap();
    b.end_if(fr, &[]).unwrap();
    let hundred = c(&mut b, 100);
    let is100 = b.cmp(CmpOp::Eq, lp.iv, hundred).unwrap();
    let fr = b.begin_if(is100, &[]).unwrap();
    let m1 = c(&mut b, -1);
    b.ret(&[m1]).unwrap();
    b.end_if(fr, &[]).unwrap();
    let s = b.use_var(vs).unwrap();
    let s = b.add(s, lp.iv).unwrap();
    b.def_var(vs, s).unwrap();
    b.end_for(lp, &[]).unwrap();
    let s = b.use_var(vs).unwrap();
    b.ret(&[s]).unwrap();
    let f = verified(b.finish().unwrap());
    // The header joins iv and s; the exit gets s from the header on both of
    // its edges (the loop test and the break), so no parameter there.
    assert_eq!(param_counts(&f)[1], 2, "{}", print_function(&f));
}

// ------------------------------------------------------------------ trivial parameters

#[test]
fn invariant_variable_in_nested_loops_gets_no_parameter() {
    // Each unsealed header first gets a parameter for k; when sealed, every
    // incoming value is k itself (or the parameter), so both are removed.
    let mut b = FunctionBuilder::host("inv", &[Type::I32], &[Type::I32]);
    let n = b.param(0);
    let vk = b.declare_named_var("k", Type::I32);
    let vs = b.declare_named_var("s", Type::I32);
    let zero = b.iconst(Type::I32, 0).unwrap();
    let one = b.iconst(Type::I32, 1).unwrap();
    let k0 = b.iconst(Type::I32, 5).unwrap();
    b.def_var(vk, k0).unwrap();
    b.def_var(vs, zero).unwrap();
    let outer = b.begin_for(zero, n, one, &[]).unwrap();
    let inner = b.begin_for(zero, n, one, &[]).unwrap();
    let k = b.use_var(vk).unwrap();
    let s = b.use_var(vs).unwrap();
    let s = b.add(s, k).unwrap();
    b.def_var(vs, s).unwrap();
    b.end_for(inner, &[]).unwrap();
    b.end_for(outer, &[]).unwrap();
    let k_after = b.use_var(vk).unwrap();
    assert_eq!(k_after, k0, "k resolves to its one definition");
    let s = b.use_var(vs).unwrap();
    let r = b.add(s, k_after).unwrap();
    b.ret(&[r]).unwrap();
    let f = verified(b.finish().unwrap());
    // entry(n), outer header (iv, s), outer body, inner header (iv, s),
    // inner body, inner exit, outer exit: no parameter for k anywhere.
    assert_eq!(
        param_counts(&f),
        vec![1, 2, 0, 2, 0, 0, 0],
        "{}",
        print_function(&f)
    );
}

#[test]
fn removal_cascades_to_parameters_that_used_the_removed_one() {
    // x = x0
    // for i in range(n):
    //     h = x             # the header is unsealed: a pending parameter p
    //     if c: x = x0
    //     m = x             # the merge joins x0 and p: a parameter q
    //     y = m + h
    //     x = h             # the back edge passes p
    // When the header is sealed p gets x0 and itself: trivial, p = x0; then
    // q gets x0 twice: trivial too, and its use in `y` is rewritten.
    let mut b = FunctionBuilder::host("cascade", &[Type::BOOL, Type::I32, Type::I32], &[Type::I32]);
    let (c, x0, n) = (b.param(0), b.param(1), b.param(2));
    let vx = b.declare_named_var("x", Type::I32);
    b.def_var(vx, x0).unwrap();
    let zero = b.iconst(Type::I32, 0).unwrap();
    let one = b.iconst(Type::I32, 1).unwrap();
    let lp = b.begin_for(zero, n, one, &[]).unwrap();
    let h = b.use_var(vx).unwrap();
    let fr = b.begin_if(c, &[]).unwrap();
    b.def_var(vx, x0).unwrap();
    b.end_if(fr, &[]).unwrap();
    let m = b.use_var(vx).unwrap();
    assert!(
        m != x0 && m != h,
        "a real join while the header is unsealed"
    );
    let y = b.add(m, h).unwrap();
    b.def_var(vx, h).unwrap();
    b.end_for(lp, &[]).unwrap();
    let x = b.use_var(vx).unwrap();
    assert_eq!(x, x0, "x is invariant: every parameter for it went away");
    b.ret(&[x]).unwrap();
    let f = verified(b.finish().unwrap());
    // entry (c, x0, n), header (iv), nothing else.
    assert_eq!(
        param_counts(&f).iter().sum::<usize>(),
        4,
        "{}",
        print_function(&f)
    );
    // `y = m + h` became `x0 + x0`.
    let add = f
        .insts
        .iter()
        .find(|i| matches!(i.op, Op::Binary(BinOp::Add)) && i.args[0] == i.args[1]);
    assert!(add.is_some(), "{}", print_function(&f));
    let _ = y;
}

#[test]
fn long_block_chains_do_not_exhaust_the_stack() {
    // 20,000 blocks in a row, the variable defined only in the entry: the
    // lookup walks them without recursing.
    let mut b = FunctionBuilder::host("chain", &[Type::I64], &[Type::I64]);
    let v = b.declare_var(Type::I64);
    let p = b.param(0);
    b.def_var(v, p).unwrap();
    for _ in 0..20_000 {
        let next = b.create_block(&[]);
        b.jump(next, &[]).unwrap();
        b.seal_block(next).unwrap();
        b.switch_to(next);
    }
    let x = b.use_var(v).unwrap();
    assert_eq!(x, p);
    b.ret(&[x]).unwrap();
    b.finish().unwrap();

    // The same chain with joins: each block is reached twice (a `br` whose
    // targets agree), so every block gets a parameter (resolved as trivial).
    let mut b = FunctionBuilder::host("joins", &[Type::BOOL, Type::I64], &[Type::I64]);
    let (c, p) = (b.param(0), b.param(1));
    let v = b.declare_var(Type::I64);
    b.def_var(v, p).unwrap();
    for _ in 0..20_000 {
        let next = b.create_block(&[]);
        b.branch(c, next, &[], next, &[]).unwrap();
        b.switch_to(next);
    }
    b.seal_all_blocks().unwrap();
    let x = b.use_var(v).unwrap();
    assert_eq!(x, p);
    b.ret(&[x]).unwrap();
    verified(b.finish().unwrap());
}

// ------------------------------------------------------------------ errors

#[test]
fn def_of_another_type_is_an_error() {
    let mut b = FunctionBuilder::host("f", &[Type::I32], &[]);
    let v = b.declare_named_var("acc", Type::F32);
    let m = message(b.def_var(v, b.param(0)));
    assert!(
        m.contains("variable `acc` (var0) is f32 but v0 is i32"),
        "{m}"
    );
}

#[test]
fn undeclared_variables_are_errors() {
    let mut b = FunctionBuilder::host("f", &[Type::I32], &[]);
    let m = message(b.use_var(Var(3)));
    assert!(
        m.contains("unknown variable var3 (0 variables declared)"),
        "{m}"
    );
    let p = b.param(0);
    let m = message(b.def_var(Var(0), p));
    assert!(m.contains("unknown variable var0"), "{m}");
    assert!(message(b.var_type(Var(9))).contains("unknown variable var9"));
}

#[test]
fn use_before_any_definition_is_an_error_naming_the_variable() {
    let mut b = FunctionBuilder::host("f", &[], &[Type::I32]);
    let v = b.declare_named_var("x", Type::I32);
    b.set_loc(Some(Loc {
        file: Some("k.py".into()),
        line: 4,
        col: 9,
    }));
    let m = message(b.use_var(v));
    assert!(
        m.contains("variable `x` (var0) (i32) is used at k.py:4:9 in block0 before any definition"),
        "{m}"
    );
    assert!(m.contains("the entry block0 reaches it without one"), "{m}");
    // Nothing changed: defining it now makes the function whole.
    let one = b.iconst(Type::I32, 1).unwrap();
    b.def_var(v, one).unwrap();
    let x = b.use_var(v).unwrap();
    b.ret(&[x]).unwrap();
    verified(b.finish().unwrap());
}

#[test]
fn use_after_a_loop_of_a_variable_assigned_only_inside_is_an_error() {
    // for i in range(n): t = i
    // return t        — undefined when n <= 0
    let mut b = FunctionBuilder::host("f", &[Type::I32], &[Type::I32]);
    let n = b.param(0);
    let t = b.declare_named_var("t", Type::I32);
    let zero = b.iconst(Type::I32, 0).unwrap();
    let one = b.iconst(Type::I32, 1).unwrap();
    let lp = b.begin_for(zero, n, one, &[]).unwrap();
    b.def_var(t, lp.iv).unwrap();
    b.end_for(lp, &[]).unwrap();
    let m = message(b.use_var(t));
    assert!(
        m.contains("variable `t` (var0) (i32) is used in block"),
        "{m}"
    );
    assert!(m.contains("the entry block0 reaches it without one"), "{m}");
}

#[test]
fn a_pending_read_that_turns_out_undefined_fails_at_seal() {
    // Read in an unsealed loop header; only the back edge defines it.
    let mut b = FunctionBuilder::host("f", &[Type::BOOL], &[]);
    let c = b.param(0);
    let v = b.declare_named_var("late", Type::BOOL);
    let header = b.create_block(&[]);
    let exit = b.create_block(&[]);
    b.jump(header, &[]).unwrap();
    b.switch_to(header);
    b.set_loc(Some(Loc {
        file: None,
        line: 12,
        col: 3,
    }));
    let x = b.use_var(v).unwrap(); // fine so far: the header is not sealed
    b.def_var(v, c).unwrap();
    b.branch(x, header, &[], exit, &[]).unwrap();
    let m = message(b.seal_block(header));
    assert!(
        m.contains("variable `late` (var0) (bool) is used at 12:3 in block1"),
        "{m}"
    );
    assert!(!b.is_sealed(header), "a failed seal changes nothing");
    // finish() seals too, and reports the same.
    let m = message(b.finish());
    assert!(m.contains("variable `late`"), "{m}");
}

#[test]
fn reads_in_blocks_nothing_branches_to_are_errors() {
    let mut b = FunctionBuilder::host("f", &[Type::I32], &[]);
    let v = b.declare_named_var("x", Type::I32);
    let p = b.param(0);
    b.def_var(v, p).unwrap();
    b.ret(&[]).unwrap();
    let dead = b.create_block(&[]);
    b.seal_block(dead).unwrap();
    b.switch_to(dead);
    let m = message(b.use_var(v));
    assert!(
        m.contains("nothing branches to block1 (unreachable code)"),
        "{m}"
    );
}

#[test]
fn branches_to_sealed_blocks_and_the_entry_are_errors() {
    let mut b = FunctionBuilder::host("f", &[], &[]);
    let entry = b.current_block().unwrap();
    let m = message(b.jump(entry, &[]));
    assert!(
        m.contains("targets the entry block block0, which cannot be branched to"),
        "{m}"
    );
    let blk = b.create_block(&[]);
    b.seal_block(blk).unwrap();
    b.seal_block(blk).unwrap(); // sealing twice is harmless
    let m = message(b.jump(blk, &[]));
    assert!(m.contains("`jump` targets block1, which is sealed"), "{m}");
    assert!(!b.is_terminated(), "the rejected jump was not added");
    assert!(message(b.seal_block(BlockId(99))).contains("unknown block block99"));
}

#[test]
fn definitions_after_a_terminator_and_without_a_block_are_errors() {
    let mut b = FunctionBuilder::host("f", &[Type::I32], &[]);
    let v = b.declare_var(Type::I32);
    let p = b.param(0);
    b.ret(&[]).unwrap();
    let m = message(b.def_var(v, p));
    assert!(
        m.contains("block0 already ends in a terminator; cannot define variable var0"),
        "{m}"
    );
}

#[test]
fn structured_helpers_still_take_explicit_carried_values() {
    // Variables and explicit carried values mix: the header's explicit
    // parameters come first, those for variables after them.
    let mut b = FunctionBuilder::host("mix", &[Type::I32], &[Type::I32]);
    let n = b.param(0);
    let vs = b.declare_var(Type::I32);
    let zero = b.iconst(Type::I32, 0).unwrap();
    let one = b.iconst(Type::I32, 1).unwrap();
    b.def_var(vs, zero).unwrap();
    let lp = b.begin_for(zero, n, one, &[one]).unwrap();
    let s = b.use_var(vs).unwrap();
    let s = b.add(s, lp.carried[0]).unwrap();
    b.def_var(vs, s).unwrap();
    let p = b.add(lp.carried[0], lp.carried[0]).unwrap();
    let out = b.end_for(lp, &[p]).unwrap();
    let s = b.use_var(vs).unwrap();
    let r = b.add(s, out[0]).unwrap();
    b.ret(&[r]).unwrap();
    let f = verified(b.finish().unwrap());
    assert_eq!(param_counts(&f), vec![1, 3, 0, 1], "{}", print_function(&f));
}
