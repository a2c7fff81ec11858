//! Module globals (`__constant__` / `__device__`): `.zir` round trip, JSON,
//! builder, and the verifier's errors.

use zyntax_hir::*;

const TEXT: &str = r#"module "g" version(2)

global @table : constant f32, 4 = [1.5, -2.0, 0.25, 1000000.0]
global @counts : global u32, 8
global @pairs : global vec<i16, 2>, 2 = [1, -2, 3, 32767]

kernel @k {
block0(v0: ptr<global, f32>):
    v1: ptr<constant, f32> = global_addr @table
    v2: f32 = load v1
    v3: ptr<global, u32> = global_addr @counts
    v4: u32 = const 7
    store v3, v4
    store v0, v2
    return
}
"#;

#[test]
fn globals_round_trip_through_text_and_json() {
    let m = parse_module(TEXT).unwrap();
    verify_module(&m).unwrap();
    assert_eq!(m.globals.len(), 3);
    assert_eq!(m.globals[0].space, AddrSpace::Constant);
    assert_eq!(m.globals[0].init.len(), 4);
    assert_eq!(m.globals[2].lanes(), 4);
    assert_eq!(m.global("counts").unwrap().size_bytes(), Some(32));
    let printed = print_module(&m);
    assert_eq!(printed, TEXT);
    let back = Module::from_json(&m.to_json().unwrap()).unwrap();
    assert_eq!(back, m);
}

#[test]
fn builder_makes_the_same_module() {
    let mut m = Module::new("g");
    let g = GlobalVar {
        name: "t".into(),
        space: AddrSpace::Constant,
        elem: Type::F32,
        count: 2,
        init: vec![ConstValue::float(1.0), ConstValue::float(2.0)],
    };
    let ty = g.ptr_type();
    m.globals.push(g);
    let mut b = FunctionBuilder::new(
        "k",
        FunctionKind::Kernel(KernelInfo::default()),
        &[Type::ptr(AddrSpace::Global, Type::F32)],
        &[],
    );
    let out = b.param(0);
    let p = b.global_addr("t", ty).unwrap();
    let x = b.load(p).unwrap();
    b.store(out, x).unwrap();
    b.ret(&[]).unwrap();
    m.functions.push(b.finish().unwrap());
    verify_module(&m).unwrap();
    let again = parse_module(&print_module(&m)).unwrap();
    assert_eq!(again, m);
}

fn verify_err(text: &str) -> String {
    let m = parse_module(text).unwrap();
    verify_module(&m).unwrap_err().to_string()
}

fn with(globals: &str, body: &str) -> String {
    format!("module \"g\" version(2)\n{globals}\nkernel @k {{\nblock0:\n{body}    return\n}}\n")
}

#[test]
fn verifier_rejects_bad_globals() {
    let cases: &[(&str, &str, &str)] = &[
        ("", "    v0: ptr<constant, f32> = global_addr @nope\n", "not a global of the module"),
        ("global @a : global f32, 1\nglobal @a : global f32, 1", "", "defined more than once"),
        ("global @k : global f32, 1", "", "name of a function"),
        ("global @a : constant f32, 3 = [1.0, 2.0]", "", "initializer has 2 literals"),
        ("global @a : constant i8, 1 = [300]", "", "out of range"),
        ("global @a : constant f32, 16385", "", "more than the 65536"),
        ("global @a : global bool, 1", "", "not a numeric scalar"),
        ("global @a : global f32, 0", "", "count 0"),
        ("global @a : shared f32, 1", "", "not `shared`"),
        (
            "global @a : global f32, 1",
            "    v0: ptr<constant, f32> = global_addr @a\n",
            "expected ptr<global, f32>",
        ),
        (
            "global @a : constant f32, 1",
            "    v0: ptr<constant, f32> = global_addr @a\n    v1: f32 = const 1.0\n    store v0, v1\n",
            "read-only",
        ),
    ];
    for (globals, body, want) in cases {
        let text = with(globals, body);
        let got = match parse_module(&text) {
            Ok(m) => verify_module(&m)
                .map(|_| String::new())
                .unwrap_or_else(|e| e.to_string()),
            Err(e) => e.to_string(),
        };
        assert!(got.contains(want), "{text}\nwanted {want:?}, got: {got}");
    }
    // global_addr is GPU-only.
    let host = "module \"g\" version(2)\nglobal @a : global f32, 1\nhost @h {\nblock0:\n    v0: ptr<global, f32> = global_addr @a\n    return\n}\n";
    assert!(verify_err(host).contains("global_addr"));
}
