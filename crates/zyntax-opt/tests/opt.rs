//! The critical-path optimizer: constraint proofs, the HIR inliner (checked
//! with the reference interpreter on random inputs), DCE, analyses, report.

use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};
use zyntax_opt::analysis::{pointer_origins, streaming_loads};
use zyntax_opt::{optimize, Origin};

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("seed {s}");
    s
}

fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// clampadd(a, b) = a + b if a < b else a - b (an if/else with a yielded value).
fn clampadd(inline_always: bool) -> Function {
    let mut b = FunctionBuilder::host("clampadd", &[Type::I64, Type::I64], &[Type::I64]);
    b.constraints_mut().inline_always = inline_always;
    let (x, y) = (b.param(0), b.param(1));
    let c = b.cmp(CmpOp::Lt, x, y).unwrap();
    let mut fr = b.begin_if(c, &[Type::I64]).unwrap();
    let s = b.add(x, y).unwrap();
    b.begin_else(&mut fr, &[s]).unwrap();
    let d = b.sub(x, y).unwrap();
    let r = b.end_if(fr, &[d]).unwrap();
    b.ret(&[r[0]]).unwrap();
    b.finish().unwrap()
}

/// caller(a, b, c) = clampadd(a, b) * clampadd(b, c) + (dead arithmetic)
fn caller(critical: bool) -> Function {
    let mut b = FunctionBuilder::host("caller", &[Type::I64, Type::I64, Type::I64], &[Type::I64]);
    b.constraints_mut().critical_path = critical;
    b.constraints_mut().no_alloc = true;
    let (x, y, z) = (b.param(0), b.param(1), b.param(2));
    let p = b.call("clampadd", &[x, y], &[Type::I64]).unwrap()[0];
    let q = b.call("clampadd", &[y, z], &[Type::I64]).unwrap()[0];
    let _dead = b.mul(p, p).unwrap();
    let r = b.mul(p, q).unwrap();
    b.ret(&[r]).unwrap();
    b.finish().unwrap()
}

fn run(m: &Module, args: [i64; 3]) -> i128 {
    let it = Interpreter::new(m).unwrap();
    let a: Vec<Arg> = args.iter().map(|v| Arg::Int(i128::from(*v))).collect();
    it.call("caller", &a, &mut []).unwrap()[0]
        .as_i128()
        .unwrap()
}

#[test]
fn inliner_preserves_semantics_and_reports() {
    for (inline_always, critical) in [(true, false), (false, true)] {
        let mut m = Module::new("inl");
        m.functions = vec![clampadd(inline_always), caller(critical)];
        verify_module(&m).unwrap();
        let o = optimize(&m).unwrap();
        verify_module(&o.module).unwrap();
        let f = o.module.function("caller").unwrap();
        assert!(
            f.insts.iter().all(|d| !matches!(d.op, Op::Call(_))),
            "calls left"
        );
        let fr = o.report.function("caller").unwrap();
        let inlined = fr
            .actions
            .iter()
            .filter(|a| a.pass == "inline" && a.what.starts_with("inlined"))
            .count();
        assert_eq!(inlined, 2);
        assert!(
            fr.actions.iter().any(|a| a.pass == "dce"),
            "dead mul not removed: {fr:?}"
        );
        let mut s = seed();
        for _ in 0..200 {
            let args = [0, 1, 2].map(|_| (next(&mut s) % 2001) as i64 - 1000);
            assert_eq!(run(&m, args), run(&o.module, args), "args {args:?}");
        }
    }
    // Without either reason nothing is inlined.
    let mut m = Module::new("inl");
    m.functions = vec![clampadd(false), caller(false)];
    let o = optimize(&m).unwrap();
    assert_eq!(
        o.module
            .function("caller")
            .unwrap()
            .insts
            .iter()
            .filter(|d| matches!(d.op, Op::Call(_)))
            .count(),
        2
    );
}

#[test]
fn unmeetable_constraints_name_function_and_reason() {
    // Recursion below a no_alloc function.
    let mut b = FunctionBuilder::host("rec", &[Type::I64], &[Type::I64]);
    let x = b.param(0);
    let r = b.call("rec", &[x], &[Type::I64]).unwrap()[0];
    b.ret(&[r]).unwrap();
    let rec = b.finish().unwrap();
    let mut b = FunctionBuilder::host("top", &[Type::I64], &[Type::I64]);
    b.constraints_mut().no_alloc = true;
    let x = b.param(0);
    let r = b.call("rec", &[x], &[Type::I64]).unwrap()[0];
    b.ret(&[r]).unwrap();
    let mut m = Module::new("bad");
    m.functions = vec![rec.clone(), b.finish().unwrap()];
    let e = optimize(&m).unwrap_err();
    let v = &e.violations[0];
    assert_eq!(
        (v.function.as_str(), v.constraint.as_str()),
        ("top", "no_alloc")
    );
    assert!(v.sites[0].reason.contains("@rec -> @rec"), "{e}");

    // inline_always on a recursive function, critical_path at O0.
    let mut rec2 = rec;
    rec2.constraints.inline_always = true;
    rec2.constraints.critical_path = true;
    rec2.constraints.opt_level = OptLevel::O0;
    let mut m = Module::new("bad2");
    m.functions = vec![rec2];
    let e = optimize(&m).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("@rec: constraint `inline_always` cannot be met: the function is recursive"),
        "{text}"
    );
    assert!(
        text.contains("@rec: constraint `critical_path` cannot be met: opt_level O0"),
        "{text}"
    );
}

fn dot() -> Function {
    let p = Type::ptr(AddrSpace::Generic, Type::F64);
    let mut b = FunctionBuilder::host("dot", &[p.clone(), p, Type::I64], &[Type::F64]);
    b.constraints_mut().critical_path = true;
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
fn analyses_and_plans() {
    let f = dot();
    let origins = pointer_origins(&f);
    let loads: Vec<_> = f.insts.iter().filter(|d| d.op == Op::Load).collect();
    assert_eq!(loads.len(), 2);
    assert_eq!(origins[loads[0].args[0].index()], Some(Origin::Param(0)));
    assert_eq!(origins[loads[1].args[0].index()], Some(Origin::Param(1)));
    let s = streaming_loads(&f);
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|x| x.distance == 64), "{s:?}");
    let mut m = Module::new("d");
    m.functions = vec![f];
    let o = optimize(&m).unwrap();
    let p = o.plan("dot").unwrap();
    assert_eq!(p.opt_level, OptLevel::Olatency);
    assert!(p.hot && p.no_stack_protector && p.vectorize_loops && p.bounds_checks);
    assert_eq!(p.align, Some(64));
    // The float accumulator keeps the loop scalar, so its streams are prefetched.
    assert_eq!(p.prefetch.len(), 2);
    let json: serde_json::Value = serde_json::from_str(&o.report.to_json()).unwrap();
    assert_eq!(json["functions"][0]["name"], "dot");
    assert!(o
        .report
        .to_string()
        .contains("[prefetch] software prefetch 64 elements ahead"));

    // A loaded pointer has no origin (its accesses cannot be checked).
    let pp = Type::ptr(AddrSpace::Generic, Type::ptr(AddrSpace::Generic, Type::I32));
    let mut b = FunctionBuilder::host("deref", &[pp], &[Type::I32]);
    let x = b.param(0);
    let q = b.load(x).unwrap();
    let v = b.load(q).unwrap();
    b.ret(&[v]).unwrap();
    let g = b.finish().unwrap();
    let o = pointer_origins(&g);
    assert_eq!(o[q.index()], None);
    assert_eq!(o[x.index()], Some(Origin::Param(0)));
}
