//! Fuzzing the JSON loader, and replaying the kept crash corpus.
//!
//! Mutations of valid modules' JSON (ids, numbers, spans, nesting) must never
//! panic `Module::from_json` or the verifier; whatever loads has every id in
//! range; whatever verifies prints, parses back and round-trips through JSON.
//! `tests/fuzz_corpus/` (repository root) holds inputs that once crashed a
//! loader (`*.zir`, `*.json`); each is replayed through the same checks.
//!
//! Cases per property: `ZYNTAX_FUZZ_CASES` (default 300, the bounded run of
//! `scripts/test.sh`); see docs/testing.md for a long run.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use zyntax_hir::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cases(default: u32) -> u32 {
    std::env::var("ZYNTAX_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Valid modules' JSON: every `.zir` example and test file.
fn seeds() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["examples", "tests/data"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "zir"))
            .collect();
        paths.sort();
        for p in paths {
            let m = parse_module(&std::fs::read_to_string(&p).unwrap()).unwrap();
            out.push(m.to_json().unwrap());
        }
    }
    assert!(out.len() >= 5, "seeds missing");
    out
}

/// What loading promises: ids in range, so accessors and the verifier are
/// safe; what verification promises: the module prints and parses back, and
/// round-trips through JSON.
fn check_module(m: &Module) -> Result<(), String> {
    m.check_structure()?;
    for f in &m.functions {
        let _ = f.param_types();
        for (_, i) in f.insts_in_order() {
            let _ = print_inst(f, i);
        }
    }
    match verify_module(m) {
        Ok(()) => {
            let text = print_module(m);
            let back = parse_module(&text)
                .map_err(|e| format!("a verified module does not parse back: {e}\n{text}"))?;
            verify_module(&back).map_err(|e| format!("reparsed module fails: {e}\n{text}"))?;
            // Unchanged: the text is the module up to renumbering, nothing dropped
            // (a layout that omitted block0 once lost a kernel's parameters here).
            let mut canonical = m.clone();
            canonical
                .functions
                .iter_mut()
                .for_each(Function::canonicalize);
            if back != canonical {
                return Err(format!("the .zir round trip changed the module\n{text}"));
            }
            for (f, g) in m.functions.iter().zip(&back.functions) {
                let sizes = |f: &Function| (f.blocks.len(), f.insts.len(), f.values.len());
                if sizes(f) != sizes(g) || f.param_types() != g.param_types() {
                    return Err(format!("the .zir round trip dropped part of @{}", f.name));
                }
            }
            let json = m.to_json().map_err(|e| e.to_string())?;
            let again = Module::from_json(&json).map_err(|e| format!("JSON round trip: {e}"))?;
            if &again != m {
                return Err("JSON round trip changed the module".into());
            }
        }
        Err(e) => {
            let _ = zyntax_hir::verify::print_with_errors(m, &e);
        }
    }
    Ok(())
}

fn check_json(text: &str) -> Result<(), String> {
    match Module::from_json(text) {
        Ok(m) => check_module(&m),
        Err(_) => Ok(()),
    }
}

fn check_zir(text: &str) -> Result<(), String> {
    match parse_module(text) {
        Ok(m) => check_module(&m),
        Err(_) => Ok(()),
    }
}

/// Mutations that reach past serde's type checks: change a number (an id, a
/// length, a count), delete or duplicate a span, nest a value deeper.
fn mutate(text: &str, ops: &[(u8, u32, u32)]) -> String {
    let mut s: Vec<u8> = text.as_bytes().to_vec();
    for &(kind, a, b) in ops {
        let len = s.len().max(1);
        let i = a as usize % len;
        match kind % 5 {
            0 => {
                // Replace the number at or after i.
                if let Some(start) = (i..s.len()).find(|&k| s[k].is_ascii_digit()) {
                    let end = (start..s.len())
                        .find(|&k| !s[k].is_ascii_digit())
                        .unwrap_or(s.len());
                    let n = match b % 4 {
                        0 => u64::from(b % 8),
                        1 => u64::from(u32::MAX),
                        2 => u64::from(b),
                        _ => u64::MAX,
                    };
                    s.splice(start..end, n.to_string().bytes());
                }
            }
            1 => {
                let end = (i + 1 + b as usize % 16).min(s.len());
                if i < end {
                    s.drain(i..end);
                }
            }
            2 => {
                let end = (i + 1 + b as usize % 120).min(s.len());
                if i < end {
                    let piece = s[i..end].to_vec();
                    s.splice(end..end, piece);
                }
            }
            3 => {
                // Wrap a type in pointers: `{"scalar":"f32"}` → `{"ptr":["global",...]}`.
                let t = String::from_utf8_lossy(&s).into_owned();
                if let Some(at) = t[i.min(t.len())..].find("{\"scalar\"").map(|k| k + i) {
                    let end = at + t[at..].find('}').unwrap_or(0) + 1;
                    let depth = 1 + b as usize % 40;
                    let wrapped = format!(
                        "{}{}{}",
                        "{\"ptr\":[\"global\",".repeat(depth),
                        &t[at..end],
                        "]}".repeat(depth)
                    );
                    s = format!("{}{}{}", &t[..at], wrapped, &t[end..]).into_bytes();
                }
            }
            _ => {
                if i < s.len() {
                    s[i] = (b % 0x7f) as u8;
                }
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(300), ..ProptestConfig::default() })]

    #[test]
    fn mutated_module_json_never_panics(
        which in any::<usize>(),
        ops in proptest::collection::vec((any::<u8>(), any::<u32>(), any::<u32>()), 1..5),
    ) {
        let seeds = seeds();
        let text = mutate(&seeds[which % seeds.len()], &ops);
        check_json(&text).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn seeds_load_and_verify() {
    for s in seeds() {
        let m = Module::from_json(&s).unwrap();
        verify_module(&m).unwrap();
        check_module(&m).unwrap();
    }
}

/// Every kept crash input is replayed: it must give an error or a module that
/// keeps the promises above, never a panic.
#[test]
fn crash_corpus_replays() {
    let dir = root().join("tests/fuzz_corpus");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        // Other kinds of hostile input live here too (the cache's tar archives):
        // only HIR texts and JSON modules are this test's to replay.
        let check: fn(&str) -> Result<(), String> = match p.extension().and_then(|e| e.to_str()) {
            Some("zir") => check_zir,
            Some("json") => check_json,
            _ => continue,
        };
        let text = std::fs::read_to_string(&p).unwrap();
        let r = check(&text);
        r.unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        n += 1;
    }
    assert!(n >= 4, "corpus missing from {}", dir.display());
}

/// Modules whose layout leaves a block or an instruction outside it once
/// verified, and printing dropped what the layout omits (block0 with the
/// kernel's parameters, a store): the verifier refuses them.
#[test]
fn layout_omissions_are_refused() {
    for name in [
        "json_layout_omits_entry_block.json",
        "json_layout_starts_past_entry_block.json",
        "json_inst_outside_layout.json",
    ] {
        let text = std::fs::read_to_string(root().join("tests/fuzz_corpus").join(name)).unwrap();
        let m = Module::from_json(&text).unwrap();
        let e = verify_module(&m).expect_err(name);
        let shown = e.to_string();
        assert!(
            shown.contains("not in the layout") || shown.contains("not placed in any block"),
            "{name}: {shown}"
        );
    }
}
