//! The verifier's verdicts on the given `.zir` files and on every mutation
//! that gives one operand or result of an instruction another type of its
//! function, one line each. Diffing the output before and after a verifier
//! change shows every accept/reject and message it changes:
//! `cargo run -p zyntax-hir --example verifier_mutations -- $(git ls-files '*.zir')`.
use std::collections::BTreeSet;
use zyntax_hir::*;

/// "OK", or every diagnostic's message.
fn verdict(m: &Module) -> String {
    match verify_module(m) {
        Ok(()) => "OK".into(),
        Err(e) => e
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

fn main() {
    for path in std::env::args().skip(1) {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                println!("{path}: READ {e}");
                continue;
            }
        };
        let m = match parse_module_named(&text, Some(&path)) {
            Ok(m) => m,
            Err(e) => {
                println!("{path}: PARSE {e}");
                continue;
            }
        };
        println!("{path}: {}", verdict(&m));
        for (fi, f) in m.functions.iter().enumerate() {
            // One value of each type the function has.
            let mut reps: Vec<usize> = Vec::new();
            let mut seen = BTreeSet::new();
            for (vi, v) in f.values.iter().enumerate() {
                if seen.insert(v.ty.to_string()) {
                    reps.push(vi);
                }
            }
            for (ii, d) in f.insts.iter().enumerate() {
                let mn = d.op.mnemonic();
                for k in 0..d.args.len() {
                    for &r in &reps {
                        let mut m2 = m.clone();
                        m2.functions[fi].insts[ii].args[k] = ValueId(r as u32);
                        println!(
                            "{path} {} {mn} arg{k}<-{}: {}",
                            f.name,
                            f.values[r].ty,
                            verdict(&m2)
                        );
                    }
                }
                for k in 0..d.results.len() {
                    for &r in &reps {
                        let mut m2 = m.clone();
                        let v = d.results[k].index();
                        m2.functions[fi].values[v].ty = f.values[r].ty.clone();
                        println!(
                            "{path} {} {mn} res{k}:{}: {}",
                            f.name,
                            f.values[r].ty,
                            verdict(&m2)
                        );
                    }
                }
            }
        }
    }
}
