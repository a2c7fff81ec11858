//! Verifier errors on modules read from `.zir` text carry the file, line and
//! column of the offending instruction.

use zyntax_hir::*;

fn errors(text: &str) -> VerifyError {
    let m = parse_module_named(text, Some("t.zir")).unwrap_or_else(|e| panic!("parse: {e}"));
    match verify_module(&m) {
        Ok(()) => panic!("expected verification errors:\n{text}"),
        Err(e) => e,
    }
}

/// The diagnostic containing `fragment`, checked to sit at `line:col` of t.zir.
fn at(e: &VerifyError, fragment: &str, line: u32, col: u32) -> Diagnostic {
    let d = e
        .diagnostics
        .iter()
        .find(|d| d.message.contains(fragment))
        .unwrap_or_else(|| panic!("no error contains {fragment:?}:\n{e}"))
        .clone();
    let loc = d.loc.clone().unwrap_or_else(|| panic!("no location: {d}"));
    assert_eq!(loc.file.as_deref(), Some("t.zir"), "{d}");
    assert_eq!((loc.line, loc.col), (line, col), "{d}");
    assert!(
        d.to_string().starts_with(&format!("t.zir:{line}:{col}: ")),
        "{d}"
    );
    d
}

#[test]
fn type_errors_point_at_the_instruction() {
    let e = errors(
        r#"module "m"

kernel @k {
block0(v0: ptr<global, f32>, v1: i32):
    v2: f32 = load v0
    v3: i32 = add v1, v1
    v4: f32 = sqrt v3
    store v0, v3
    return
}
"#,
    );
    let d = at(&e, "`sqrt` takes a float, got i32", 7, 5);
    assert_eq!(d.function, "k");
    assert_eq!(d.block, Some(BlockId(0)));
    assert_eq!(d.inst_text.as_deref(), Some("v4: f32 = sqrt v3"));
    at(
        &e,
        "stored value has type i32, but the pointer points to f32",
        8,
        5,
    );
    // One diagnostic per instruction: its first problem.
    assert_eq!(e.diagnostics.len(), 2, "{e}");
}

#[test]
fn dominance_and_gpu_errors_point_at_the_instruction() {
    let e = errors(
        r#"module "m" targets(sm_75)

host @h -> u32 {
block0:
    v0: u32 = lane_id
    return v0
}

kernel @k {
block0(v0: ptr<global, f32>, v1: bool):
    br v1, block1, block2
block1:
    v2: f32 = const 1.0
    jump block2
block2:
    store v0, v2
    v3: ptr<shared, f32> = shared_alloc f32, 4
    cp.async.ca.4 v3, v0
    return
}
"#,
    );
    at(&e, "GPU instruction `lane_id` in host function @h", 5, 5);
    at(&e, "does not dominate this use", 16, 5);
    at(&e, "cp.async needs sm_80", 18, 5);
}

#[test]
fn valid_text_verifies() {
    let text = r#"module "m" targets(sm_80, sm_90)

device @sq -> f32 {
block0(v0: f32):
    v1: f32 = mul v0, v0
    return v1
}

kernel @k max_threads(256, 1, 1) {
block0(v0: ptr<global, f32>, v1: u32):
    v2: u32 = thread_idx.x
    v3: bool = cmp.lt v2, v1
    br v3, block1, block2
block1:
    v4: ptr<global, f32> = ptr_add v0, v2
    v5: f32 = load v4
    v6: f32 = call @sq v5
    store v4, v6
    jump block2
block2:
    return
}
"#;
    let m = parse_module(text).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = verify_module(&m) {
        panic!("{e}");
    }
}

#[test]
fn errors_print_inline_and_the_text_still_parses() {
    let text = r#"module "m" targets(sm_75)

kernel @k {
block0(v0: ptr<global, f32>, v1: i32):
    v2: f32 = sqrt v1
    v3: ptr<shared, f32> = shared_alloc f32, 4
    cp.async.ca.4 v3, v0
    return
}
"#;
    let m = parse_module(text).unwrap();
    let e = verify_module(&m).unwrap_err();
    let shown = zyntax_hir::verify::print_with_errors(&m, &e);
    assert!(
        shown.contains("    v2: f32 = sqrt v1\n    ; error: `sqrt` takes a float, got i32\n"),
        "{shown}"
    );
    assert!(
        shown.contains("    cp.async.ca.4 v3, v0\n    ; error: cp.async needs sm_80"),
        "{shown}"
    );
    // Comments only: the annotated text reads back to the same module.
    assert_eq!(parse_module(&shown).unwrap(), m);
}
