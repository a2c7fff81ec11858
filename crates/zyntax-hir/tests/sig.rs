//! The declared operand-type signatures (`zyntax_hir::sig`): every row's
//! signature parses and fits the row, a well-typed instance passes, and each
//! operand given a type of the wrong kind is an error that names the operand.

use zyntax_hir::sig::{self, Pat, Sig, Space};
use zyntax_hir::table::{sig_of, OpDef, OPS};
use zyntax_hir::*;

/// Rows with a signature, and their operand names (none when variadic).
fn declared() -> impl Iterator<Item = (&'static OpDef, &'static Sig, &'static [&'static str])> {
    OPS.iter()
        .filter_map(|d| Some((d, sig_of(d)?, d.operands.unwrap_or(&[]))))
}

/// The signature's operand items, a repeated one as often as it must be.
fn items(s: &Sig) -> Vec<&sig::Item> {
    s.args
        .iter()
        .flat_map(|it| std::iter::repeat_n(it, it.repeat.map_or(1, |(lo, _)| lo)))
        .collect()
}

/// A type `p` accepts, with variables bound by `vars` (first use binds).
fn sample(p: &Pat, s: &Sig, vars: &mut Vec<(char, Type)>) -> Type {
    match p {
        Pat::Any => Type::U32,
        Pat::Exact(t) => t.clone(),
        Pat::Int => Type::I64,
        Pat::Set(set) => Type::Scalar(set[set.len() - 1]),
        Pat::Var(v, set) => {
            if let Some((_, t)) = vars.iter().find(|(n, _)| n == v) {
                return t.clone();
            }
            let from_where = s
                .var_set
                .as_ref()
                .filter(|(w, _)| w == v)
                .map(|(_, set)| set);
            let t = match set.as_ref().or(from_where) {
                Some(set) => Type::Scalar(set[0]),
                None => Type::F32,
            };
            vars.push((*v, t.clone()));
            t
        }
        Pat::Ptr(space, inner) => {
            let space = match space {
                Space::Any | Space::Mem => AddrSpace::Global,
                Space::Is(s) => *s,
            };
            Type::ptr(space, sample(inner, s, vars))
        }
    }
}

/// Types of every kind: some is wrong for any pattern but `_`.
fn wrong_kinds() -> Vec<Type> {
    vec![
        Type::F64,
        Type::BOOL,
        Type::U16,
        Type::Vector(ScalarType::F16, 2),
        Type::TensorMap,
        Type::ptr(AddrSpace::Local, Type::F64),
        Type::ptr(AddrSpace::Shared, Type::I8),
        Type::ptr(AddrSpace::Global, Type::I8),
    ]
}

fn instance(s: &Sig) -> (Vec<Type>, Vec<Type>) {
    let mut vars = Vec::new();
    let args = items(s)
        .iter()
        .map(|it| sample(&it.pat, s, &mut vars))
        .collect();
    let results = s
        .results
        .iter()
        .map(|it| sample(&it.pat, s, &mut vars))
        .collect();
    (args, results)
}

#[test]
fn every_signature_parses_and_fits_its_row() {
    let mut n = 0;
    for (d, s, names) in declared() {
        assert_eq!(
            if d.operands.is_some() {
                s.args.len()
            } else {
                0
            },
            names.len(),
            "`{}`: one pattern per operand",
            d.mnemonic
        );
        if let Some(results) = d.results {
            assert_eq!(
                s.results.len(),
                results,
                "`{}`: one pattern per result",
                d.mnemonic
            );
        }
        // The rendering reads back as the same signature (the docs column is faithful).
        let (args, results) = s.render(&[]);
        let text = match &s.var_set {
            Some(_) => format!("{args} -> {results}")
                .replace(" (", " where ")
                .replace(')', ""),
            None => format!("{args} -> {results}"),
        };
        let back = sig::parse(&text).unwrap_or_else(|e| panic!("`{}`: {text}: {e}", d.mnemonic));
        assert_eq!(
            back.args.iter().map(|i| &i.pat).collect::<Vec<_>>(),
            s.args.iter().map(|i| &i.pat).collect::<Vec<_>>()
        );
        n += 1;
    }
    assert!(n >= 60, "only {n} rows declare signatures");
}

#[test]
fn a_well_typed_instance_passes() {
    for (d, s, names) in declared() {
        let (args, results) = instance(s);
        let a: Vec<&Type> = args.iter().collect();
        let r: Vec<&Type> = results.iter().collect();
        if let Err(e) = sig::check(s, d.mnemonic, names, &a, &r) {
            panic!("`{}` rejects {args:?} -> {results:?}: {e}", d.mnemonic);
        }
    }
}

/// Whether `p` mentions a type variable.
fn binds(p: &Pat) -> bool {
    match p {
        Pat::Var(..) => true,
        Pat::Ptr(_, inner) => binds(inner),
        _ => false,
    }
}

#[test]
fn a_wrong_operand_kind_names_the_operand() {
    let mut checked = 0;
    for (d, s, names) in declared() {
        let (args, results) = instance(s);
        for (k, it) in items(s).into_iter().enumerate() {
            if it.pat == Pat::Any {
                continue;
            }
            for wrong in wrong_kinds() {
                let mut bad = args.clone();
                bad[k] = wrong.clone();
                let a: Vec<&Type> = bad.iter().collect();
                let r: Vec<&Type> = results.iter().collect();
                let Err(e) = sig::check(s, d.mnemonic, names, &a, &r) else {
                    // This kind is one the pattern accepts.
                    continue;
                };
                let name = names.get(k).copied().unwrap_or("");
                let named = it.phrase.as_deref().or(sig::phrase(name));
                // The `where` set of the op's type variable reads "`op` works on".
                let ok = e.contains(&format!("`{}` works on", d.mnemonic))
                    || match named {
                        Some(p) => e.contains(p),
                        None => {
                            e.contains(&format!("operand {k} of `{}`", d.mnemonic))
                                || (name == "ptr"
                                    && e.contains(&format!("{} needs a pointer", d.mnemonic)))
                        }
                    };
                // A variable's first use binds it: a later use of it then disagrees.
                let relational = binds(&it.pat)
                    && (e.contains(", expected ")
                        || e.contains("operands must have the same type"));
                assert!(
                    ok || relational,
                    "`{}` operand {k} ({name}) as {wrong}: {e}",
                    d.mnemonic
                );
                assert!(
                    relational || e.contains(&wrong.to_string()),
                    "the error shows the type: {e}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "only {checked} wrong operands tried");
}

#[test]
fn a_wrong_result_type_is_an_error() {
    for (d, s, names) in declared() {
        let (args, results) = instance(s);
        for (k, it) in s.results.iter().enumerate() {
            if it.pat == Pat::Any {
                continue;
            }
            let mut bad = results.clone();
            bad[k] = if bad[k] == Type::F64 {
                Type::BOOL
            } else {
                Type::F64
            };
            let a: Vec<&Type> = args.iter().collect();
            let r: Vec<&Type> = bad.iter().collect();
            let e = sig::check(s, d.mnemonic, names, &a, &r).expect_err(d.mnemonic);
            assert!(e.contains("result"), "`{}`: {e}", d.mnemonic);
        }
    }
}

/// Through the verifier: a declared rule's error is a `VerifyError` at the
/// instruction, naming the operand.
#[test]
fn the_verifier_reports_declared_rules() {
    let text = r#"module "m" version(2) targets(sm_90)

kernel @k {
block0(v0: ptr<global, u64>, v1: u32):
    mbarrier.init v0, v1
    return
}
"#;
    let m = parse_module_named(text, Some("t.zir")).unwrap();
    let e = verify_module(&m).unwrap_err();
    let d = &e.diagnostics[0];
    assert!(
        d.message.contains(
            "`mbarrier.init`: the barrier must be a ptr<shared, u64>, got ptr<global, u64>"
        ),
        "{d}"
    );
    assert_eq!(d.loc.as_ref().map(|l| l.line), Some(5), "{d}");
}

#[test]
fn bad_signatures_are_refused() {
    for bad in [
        "ptr<heap, T>",
        "q32",
        "vec<f32, x>",
        "u32 'open",
        "T -> T where t: i32",
        "ptr<shared>",
    ] {
        assert!(sig::parse(bad).is_err(), "{bad}");
    }
}

/// The vocabulary's messages on hand-made signatures: integers, counts of a
/// repeated operand, unnamed operands of one variable, a `where` set.
#[test]
fn vocabulary_messages() {
    let run = |text: &str, names: &[&str], args: &[Type], results: &[Type]| {
        let s = sig::parse(text).unwrap();
        let a: Vec<&Type> = args.iter().collect();
        let r: Vec<&Type> = results.iter().collect();
        sig::check(&s, "op", names, &a, &r)
    };
    let p = Type::ptr(AddrSpace::Global, Type::F32);
    assert_eq!(
        run(
            "ptr<any, _>, int 'the index'",
            &[],
            &[p.clone(), Type::F32],
            &[]
        )
        .unwrap_err(),
        "`op`: the index must be an integer, got f32"
    );
    assert!(run(
        "ptr<any, _>, int 'the index'",
        &[],
        &[p.clone(), Type::U8],
        &[]
    )
    .is_ok());
    let six = vec![Type::I32; 6];
    assert_eq!(
        run("i32 'coordinate' *1..5", &[], &six, &[]).unwrap_err(),
        "`op` takes 0 operands and 1 to 5 coordinates, got 6 operands"
    );
    assert_eq!(
        run(
            "T, T -> T",
            &["a", "b"],
            &[Type::I32, Type::I64],
            &[Type::I32]
        )
        .unwrap_err(),
        "`op` operands must have the same type, got i32 and i64"
    );
    assert_eq!(
        run(
            "T, T -> T",
            &["a", "b"],
            &[Type::I32, Type::I32],
            &[Type::I64]
        )
        .unwrap_err(),
        "`op`: the result has type i64, expected i32"
    );
    assert_eq!(
        run(
            "T -> T where T: u32|i32",
            &["value"],
            &[Type::F32],
            &[Type::F32]
        )
        .unwrap_err(),
        "`op` works on u32 or i32, got f32"
    );
    assert_eq!(
        run(
            "ptr<mem, T>, T",
            &["ptr", "value"],
            &[Type::ptr(AddrSpace::Local, Type::F32), Type::F32],
            &[]
        )
        .unwrap_err(),
        "op needs a pointer to global, shared or generic memory, got ptr<local, f32>"
    );
    assert_eq!(
        run("ptr<mem, T>, T", &["ptr", "value"], &[p, Type::F64], &[]).unwrap_err(),
        "`op`: the value has type f64, expected f32"
    );
}
