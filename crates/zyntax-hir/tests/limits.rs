//! The one type-nesting limit (`MAX_TYPE_DEPTH`) on every path into the HIR,
//! and structural validation of modules read from JSON (out-of-range ids are
//! an error, never a panic).

use zyntax_hir::*;

/// `ptr<global, ptr<global, ... f32>>` with `depth` pointers, built without recursion.
fn nested_ptr(depth: u32) -> Type {
    let mut t = Type::F32;
    for _ in 0..depth {
        t = Type::ptr(AddrSpace::Global, t);
    }
    t
}

/// Drop a type of any depth without recursing (the derived drop recurses).
fn drop_deep(mut t: Type) {
    loop {
        match t {
            Type::Ptr(_, e) | Type::Array(e, _) => t = *e,
            _ => return,
        }
    }
}

fn host_with_param(t: Type) -> Module {
    let mut b = FunctionBuilder::host("f", &[t], &[]);
    b.ret(&[]).unwrap();
    let mut m = Module::new("m");
    m.functions.push(b.finish().unwrap());
    m
}

#[test]
fn the_deepest_allowed_type_verifies_prints_parses_and_serializes_back() {
    let m = host_with_param(nested_ptr(MAX_TYPE_DEPTH));
    verify_module(&m).expect("the limit itself is allowed");
    let text = print_module(&m);
    let back = parse_module(&text).expect("a verified module parses back");
    assert_eq!(back, m);
    let json = m.to_json().unwrap();
    let back = Module::from_json(&json).expect("a verified module loads back from JSON");
    assert_eq!(back, m);

    // Arrays and vectors count as levels too, the same in the verifier and the parser.
    let mut t = Type::Vector(ScalarType::F32, 4);
    for _ in 0..MAX_TYPE_DEPTH - 2 {
        t = Type::array(t, 2);
    }
    let m = host_with_param(Type::ptr(AddrSpace::Global, t));
    verify_module(&m).expect("vector + arrays + pointer at the limit");
    assert_eq!(parse_module(&print_module(&m)).unwrap(), m);
}

#[test]
fn one_level_deeper_is_rejected_everywhere() {
    let too_deep = nested_ptr(MAX_TYPE_DEPTH + 1);
    assert!(too_deep.check_depth().is_err());
    let m = host_with_param(too_deep);
    let e = verify_module(&m).expect_err("too deep");
    assert!(e.to_string().contains("nested 33 levels deep"), "{e}");
    let pe = parse_module(&print_module(&m)).expect_err("the parser has the same limit");
    assert!(pe.message.contains("nested more than 32"), "{pe}");
    let je = Module::from_json(&m.to_json().unwrap()).expect_err("so has the JSON loader");
    assert!(je.to_string().contains("nested 33 levels deep"), "{je}");
}

#[test]
fn an_allocation_whose_pointer_would_be_too_deep_is_rejected() {
    let mut b = FunctionBuilder::host("f", &[], &[]);
    // The builder does not check depth; the verifier does.
    b.alloca(nested_ptr(MAX_TYPE_DEPTH), 1).unwrap();
    b.ret(&[]).unwrap();
    let mut m = Module::new("m");
    m.functions.push(b.finish().unwrap());
    let e = verify_module(&m).expect_err("result pointer nests 33 deep");
    assert!(e.to_string().contains("levels deep"), "{e}");
}

#[test]
fn a_type_100k_deep_built_in_rust_is_a_verify_error_and_prints_without_recursion() {
    let deep = nested_ptr(100_000);
    let text = deep.to_string();
    assert_eq!(
        text.len(),
        "ptr<global, ".len() * 100_000 + "f32".len() + 100_000
    );
    drop(text);
    // Build the function by hand: the builder clones types, which recurses.
    let mut f = Function::new("f", FunctionKind::Host, vec![]);
    f.values.push(ValueData {
        ty: deep,
        def: ValueDef::Param(BlockId(0), 0),
    });
    f.blocks.push(BlockData {
        params: vec![ValueId(0)],
        insts: vec![],
    });
    f.layout.push(BlockId(0));
    let mut m = Module::new("m");
    m.functions.push(f);
    let e = verify_module(&m).expect_err("too deep");
    assert!(e.to_string().contains("100000 levels deep"), "{e}");
    let ty = std::mem::replace(&mut m.functions[0].values[0].ty, Type::F32);
    drop_deep(ty);
}

#[test]
fn deeply_nested_json_is_an_error() {
    let good = host_with_param(Type::F32).to_json().unwrap();
    let leaf = r#"{"scalar":"f32"}"#;
    assert_eq!(good.matches(leaf).count(), 1, "{good}");
    for (depth, expect) in [(40, "nested 40 levels deep"), (20_000, "recursion limit")] {
        let ty = format!(
            "{}{leaf}{}",
            r#"{"ptr":["global","#.repeat(depth),
            "]}".repeat(depth)
        );
        let e = Module::from_json(&good.replace(leaf, &ty)).expect_err("too deep");
        assert!(e.to_string().contains(expect), "{depth}: {e}");
    }
}

/// A valid module's JSON with one id replaced, for each kind of id.
#[test]
fn out_of_range_ids_in_json_are_an_error_not_a_panic() {
    let mut b = FunctionBuilder::host("f", &[Type::I32], &[Type::I32]);
    let x = b.param(0);
    let y = b.add(x, x).unwrap();
    b.ret(&[y]).unwrap();
    let mut m = Module::new("m");
    m.functions.push(b.finish().unwrap());
    verify_module(&m).unwrap();
    let good = m.to_json().unwrap();
    let v: serde_json::Value = serde_json::from_str(&good).unwrap();
    Module::from_json(&good).expect("the original loads");

    let set = |path: &[&str], val: serde_json::Value| {
        let mut v = v.clone();
        let mut cur = &mut v;
        for p in path {
            cur = match p.parse::<usize>() {
                Ok(i) => &mut cur[i],
                Err(_) => &mut cur[*p],
            };
        }
        *cur = val;
        serde_json::to_string(&v).unwrap()
    };
    let big = serde_json::json!(4_000_000_000u32);
    let cases = [
        set(&["functions", "0", "layout", "0"], big.clone()),
        set(
            &["functions", "0", "blocks", "0", "params", "0"],
            big.clone(),
        ),
        set(
            &["functions", "0", "blocks", "0", "insts", "0"],
            big.clone(),
        ),
        set(&["functions", "0", "insts", "0", "args", "1"], big.clone()),
        set(
            &["functions", "0", "insts", "0", "results", "0"],
            big.clone(),
        ),
        set(
            &["functions", "0", "values", "0", "def"],
            serde_json::json!({"param": [7, 0]}),
        ),
        set(
            &["functions", "0", "values", "1", "def"],
            serde_json::json!({"result": [9, 0]}),
        ),
    ];
    for (n, text) in cases.iter().enumerate() {
        let e = Module::from_json(text).expect_err("out-of-range id");
        assert!(e.to_string().contains("refers to"), "case {n}: {e}");
    }
}

/// Issue 10, item 6: the register floor depends on the arch and on MMA.
#[test]
fn max_registers_below_the_mma_floor_is_a_verify_error() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mma_tile.zir");
    let base = parse_module(&std::fs::read_to_string(path).unwrap()).unwrap();
    for (arch, floor) in [
        (Arch::Sm70, 26),
        (Arch::Sm75, 25),
        (Arch::Sm80, 28),
        (Arch::Sm90, 28),
    ] {
        let with = |n: u32| {
            let mut m = base.clone();
            m.targets = vec![arch];
            for f in &mut m.functions {
                if let FunctionKind::Kernel(k) = &mut f.kind {
                    k.max_registers = Some(n);
                }
            }
            m
        };
        verify_module(&with(floor)).unwrap_or_else(|e| panic!("{arch} {floor}: {e}"));
        let e = verify_module(&with(floor - 1)).expect_err("below the floor");
        assert!(e.to_string().contains("tensor-core MMA"), "{arch}: {e}");
    }
    // Kernels without MMA keep the general floor of 24.
    let saxpy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/saxpy.zir");
    let mut m = parse_module(&std::fs::read_to_string(saxpy).unwrap()).unwrap();
    for f in &mut m.functions {
        if let FunctionKind::Kernel(k) = &mut f.kind {
            k.max_registers = Some(24);
        }
    }
    verify_module(&m).unwrap();
}
