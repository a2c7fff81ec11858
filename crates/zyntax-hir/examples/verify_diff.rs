//! Dev tool (not committed): verify every .zir given, then mutate each
//! instruction's operand and result types and print the verifier's verdicts.
use std::collections::BTreeSet;
use zyntax_hir::*;

fn first_msg(m: &Module) -> String {
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
        let text = std::fs::read_to_string(&path).unwrap();
        let m = match parse_module_named(&text, Some(&path)) {
            Ok(m) => m,
            Err(e) => {
                println!("{path}: PARSE {e}");
                continue;
            }
        };
        println!("{path}: {}", first_msg(&m));
        for (fi, f) in m.functions.iter().enumerate() {
            let types: BTreeSet<String> = f.values.iter().map(|v| v.ty.to_string()).collect();
            let mut reps: Vec<usize> = Vec::new();
            let mut seen = BTreeSet::new();
            for (vi, v) in f.values.iter().enumerate() {
                if seen.insert(v.ty.to_string()) {
                    reps.push(vi);
                }
            }
            let _ = types;
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
                            first_msg(&m2)
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
                            first_msg(&m2)
                        );
                    }
                }
            }
        }
    }
}
