//! Round trips of the `.zir` text format: hand-written modules covering every
//! op, type form and function attribute; non-canonical spellings; the files in
//! `examples/`; and the errors (location and message) of malformed input.

use std::path::PathBuf;
use zyntax_hir::*;

/// Every op, every scalar type, every type form and every attribute, in canonical form.
const ALL_OPS: &str = r#"module "all_ops" version(2) targets(sm_80, sm_90) ptx(7.8)

device @helper -> f32, i32 inline_always opt(O2) {
block0(v0: f32, v1: i32):
    return v0, v1
}

kernel @everything max_threads(128, 2, 1) min_blocks(2) max_registers(64) shared_bytes(1024) arch(sm_80) no_bounds_check opt(Olatency) {
block0(v0: ptr<global, f32>, v1: ptr<global, u32>, v2: ptr<global, f16>, v3: ptr<global, vec<f32, 4>>, v4: i32, v5: u64, v6: bool):
    v7: i8 = const -128
    v8: i16 = const 32767
    v9: i32 = const -2147483648
    v10: i64 = const 9223372036854775807
    v11: u8 = const 255
    v12: u16 = const 65535
    v13: u32 = const 4294967295
    v14: u64 = const 18446744073709551615
    v15: bool = const true
    v16: bool = const false
    v17: f32 = const 1.5
    v18: f64 = const 1e-7
    v19: f16 = const inf
    v20: bf16 = const -inf
    v21: f32 = const nan:0x7ff8000000000001
    v22: f64 = const -0.0
    v23: f32 = const 1e300
    v24: i32 = add v4, v4
    v25: i32 = sub v24, v4
    v26: i32 = mul v25, v4
    v27: i32 = div v26, v4
    v28: i32 = rem v27, v4
    v29: i32 = min v28, v4
    v30: i32 = max v29, v4
    v31: i32 = and v30, v4
    v32: i32 = or v31, v4
    v33: i32 = xor v32, v4
    v34: i32 = shl v33, v4
    v35: i32 = shr v34, v4
    v36: i32 = neg v35
    v37: i32 = not v36
    v38: i32 = abs v37
    v39: f32 = sqrt v17
    v40: f32 = rsqrt v39
    v41: f32 = exp v40
    v42: f32 = log v41
    v43: f32 = sin v42
    v44: f32 = cos v43
    v45: f32 = tanh v44
    v46: f32 = floor v45
    v47: f32 = ceil v46
    v48: f32 = fma v47, v46, v45
    v49: bool = cmp.eq v4, v38
    v50: bool = cmp.ne v4, v38
    v51: bool = cmp.lt v4, v38
    v52: bool = cmp.le v4, v38
    v53: bool = cmp.gt v4, v38
    v54: bool = cmp.ge v4, v38
    v55: i32 = select v54, v4, v38
    v56: f32 = cast v55
    v57: u32 = bitcast v56
    v58: vec<f32, 4> = load v3
    v59: f32 = extract v58, 3
    v60: vec<f32, 4> = insert v58, v59, 0
    store v3, v60
    v61: ptr<global, f32> = ptr_add v0, v57
    v62: ptr<generic, f32> = ptr_cast v61
    v63: ptr<local, [f32; 4]> = alloca [f32; 4], 2
    v64: ptr<shared, f32> = shared_alloc f32, 256
    v65: ptr<shared, [[u8; 16]; 2]> = dyn_shared [[u8; 16]; 2]
    v66: u32 = thread_idx.x
    v67: u32 = thread_idx.y
    v68: u32 = thread_idx.z
    v69: u32 = block_idx.x
    v70: u32 = block_idx.y
    v71: u32 = block_idx.z
    v72: u32 = block_dim.x
    v73: u32 = block_dim.y
    v74: u32 = block_dim.z
    v75: u32 = grid_dim.x
    v76: u32 = grid_dim.y
    v77: u32 = grid_dim.z
    v78: u32 = lane_id
    barrier
    fence.block
    fence.device
    fence.system
    warp_sync v13
    v79: u32 = atomic.add.block v1, v78
    v80: u32 = atomic.sub.device v1, v78
    v81: u32 = atomic.min.system v1, v78
    v82: u32 = atomic.max.device v1, v78
    v83: u32 = atomic.and.device v1, v78
    v84: u32 = atomic.or.device v1, v78
    v85: u32 = atomic.xor.device v1, v78
    v86: u32 = atomic.exch.device v1, v78
    v87: u32 = atomic.inc.device v1, v78
    v88: u32 = atomic.dec.device v1, v78
    v89: u32 = atomic.cas.device v1, v78, v88
    v90: f32 = shfl.idx v13, v59, v78 width 32
    v91: f32 = shfl.up v13, v59, v78 width 16
    v92: f32 = shfl.down v13, v59, v78 width 8
    v93: f32 = shfl.xor v13, v59, v78 width 32
    v94: u32 = vote.ballot v13, v6
    v95: bool = vote.any v13, v6
    v96: bool = vote.all v13, v6
    v97: u32 = match.any v13, v57
    v98: u32, v99: bool = match.all v13, v57
    v100: u32 = const 16
    v101: frag<a, m16n16k16, f16, row> = mma.load.row v2, v100
    v102: frag<b, m16n16k16, f16, col> = mma.load.col v2, v100
    v103: f32 = const 0.0
    v104: frag<acc, m16n16k16, f32> = mma.fill v103
    v105: frag<acc, m16n16k16, f32> = mma v101, v102, v104
    mma.store.row v0, v105, v100
    v106: frag<a, m32n8k16, bf16, col> = mma.load.col v2, v100
    v107: frag<acc, m8n32k16, f16> = mma.load.row v2, v100
    mma.store.col v2, v107, v100
    v108: ptr<global, f32> = ptr_cast v62
    cp.async.ca.4 v64, v108
    cp.async.cg.16 v64, v108
    cp.async.commit
    cp.async.wait 0
    v109: f32, v110: i32 = call @helper v59, v4
    call @nothing
    br v6, block1(v109), block2
block1(v111: f32):
    jump block2
block2:
    unreachable
}

device @nothing {
block0:
    return
}

host @host_fn -> f64 critical_path no_alloc {
block0(v0: ptr<generic, f64>, v1: u64, v2: ptr<constant, f64>):
    v3: f64 = load v0
    return v3
}

host @empty {
}
"#;

/// Parse `text`, print it back and require the same text; reparse and require an equal module.
fn assert_canonical(text: &str) -> Module {
    let m = match parse_module(text) {
        Ok(m) => m,
        Err(e) => panic!("parse failed: {e}"),
    };
    let printed = print_module(&m);
    if printed != text {
        for (n, (a, b)) in text.lines().zip(printed.lines()).enumerate() {
            assert_eq!(a, b, "line {} differs after print(parse(text))", n + 1);
        }
        assert_eq!(printed, text, "print(parse(text)) differs in length");
    }
    let again = parse_module(&printed).expect("reparse of printed text");
    assert_eq!(again, m);
    m
}

#[test]
fn all_ops_are_canonical() {
    let m = assert_canonical(ALL_OPS);
    let k = m.function("everything").expect("kernel");
    // Every Op variant appears (by mnemonic class), so the corpus cannot silently shrink.
    let mnemonics: std::collections::BTreeSet<String> = k
        .insts
        .iter()
        .map(|i| i.op.mnemonic().split('.').next().unwrap_or("").to_string())
        .collect();
    for m in [
        "const",
        "add",
        "sub",
        "mul",
        "div",
        "rem",
        "min",
        "max",
        "and",
        "or",
        "xor",
        "shl",
        "shr",
        "neg",
        "not",
        "abs",
        "sqrt",
        "rsqrt",
        "exp",
        "log",
        "sin",
        "cos",
        "tanh",
        "floor",
        "ceil",
        "fma",
        "cmp",
        "select",
        "cast",
        "bitcast",
        "extract",
        "insert",
        "load",
        "store",
        "ptr_add",
        "ptr_cast",
        "alloca",
        "shared_alloc",
        "dyn_shared",
        "thread_idx",
        "block_idx",
        "block_dim",
        "grid_dim",
        "lane_id",
        "barrier",
        "fence",
        "warp_sync",
        "atomic",
        "shfl",
        "vote",
        "match",
        "mma",
        "cp",
        "call",
        "br",
        "jump",
        "unreachable",
    ] {
        assert!(mnemonics.contains(m), "corpus lacks `{m}`");
    }
    let info = k.kind.kernel_info().expect("kernel info");
    assert_eq!(info.max_threads, Some([128, 2, 1]));
    assert_eq!(info.min_blocks, Some(2));
    assert_eq!(info.max_registers, Some(64));
    assert_eq!(info.shared_bytes, 1024);
    assert_eq!(info.arch, Some(Arch::Sm80));
    assert!(k.constraints.no_bounds_check);
    assert_eq!(k.constraints.opt_level, OptLevel::Olatency);
    assert_eq!(m.targets, vec![Arch::Sm80, Arch::Sm90]);
    assert_eq!(m.ptx_version, Some(PtxVersion::new(7, 8)));
    let h = m.function("host_fn").expect("host fn");
    assert!(h.constraints.critical_path && h.constraints.no_alloc);
    assert_eq!(h.returns, vec![Type::F64]);
}

#[test]
fn constants_keep_their_exact_values() {
    let m = parse_module(ALL_OPS).expect("parse");
    let k = m.function("everything").expect("kernel");
    let consts: Vec<ConstValue> = k
        .insts
        .iter()
        .filter_map(|i| match i.op {
            Op::Const(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(consts[0], ConstValue::Int(-128));
    assert_eq!(consts[5], ConstValue::Int(65535));
    // u32 and u64 constants are stored as the builder stores them.
    assert_eq!(
        consts[6],
        ConstValue::Int(normalize_int(ScalarType::U32, -1))
    );
    assert_eq!(consts[7], ConstValue::Int(-1));
    assert_eq!(consts[8], ConstValue::Bool(true));
    assert_eq!(consts[10], ConstValue::float(1.5));
    assert_eq!(consts[11], ConstValue::float(1e-7));
    assert_eq!(consts[12], ConstValue::float(f64::INFINITY));
    assert_eq!(consts[13], ConstValue::float(f64::NEG_INFINITY));
    assert_eq!(consts[14], ConstValue::Float(0x7ff8_0000_0000_0001));
    assert_eq!(consts[15], ConstValue::float(-0.0));
    // An f32 constant keeps the f64 value as written, unrounded.
    assert_eq!(consts[16], ConstValue::float(1e300));
}

#[test]
fn builder_modules_round_trip() {
    // A kernel with an if and a loop carrying a value, built with the builder.
    let mut b = FunctionBuilder::kernel(
        "sum_rows",
        &[
            Type::ptr(AddrSpace::Global, Type::F32),
            Type::ptr(AddrSpace::Global, Type::F32),
            Type::U32,
        ],
    );
    let (inp, out, n) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let zero = b.iconst(Type::U32, 0).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let acc0 = b.fconst(Type::F32, 0.0).unwrap();
    let frame = b.begin_for(zero, n, one, &[acc0]).unwrap();
    let row = b.mul(tid, n).unwrap();
    let idx = b.add(row, frame.iv).unwrap();
    let p = b.ptr_add(inp, idx).unwrap();
    let x = b.load(p).unwrap();
    let acc = b.add(frame.carried[0], x).unwrap();
    let done = b.end_for(frame, &[acc]).unwrap();
    let pos = b.cmp(CmpOp::Gt, done[0], acc0).unwrap();
    let mut fr = b.begin_if(pos, &[Type::F32]).unwrap();
    let s = b.unary(UnOp::Sqrt, done[0]).unwrap();
    b.begin_else(&mut fr, &[s]).unwrap();
    let r = b.end_if(fr, &[acc0]).unwrap();
    let q = b.ptr_add(out, tid).unwrap();
    b.store(q, r[0]).unwrap();
    b.ret(&[]).unwrap();
    if let Some(info) = b.kernel_info_mut() {
        info.max_threads = Some([256, 1, 1]);
    }
    let mut m = Module::new("built");
    m.targets = vec![Arch::Sm70];
    m.functions.push(b.finish().unwrap());
    let text = print_module(&m);
    let parsed = parse_module(&text).expect("parse printed builder module");
    assert_eq!(parsed, m);
    assert_canonical(&text);
}

#[test]
fn hand_numbering_comments_and_forward_references() {
    // Names in any order, used before defined, comments, blank lines, odd spacing,
    // attributes in another order, `max_threads` with one dimension.
    let text = r#"
; a hand-written module
module "hand"   ptx(7.0) targets( sm_70 )

kernel @k opt(O1) max_threads(64) {   ; attributes in any order
block7(v9: ptr<global, [f32; 4]>, v3: u32):   ; parameters
    v100: bool = const true
    br v100, block2(v3), block5
block5:
    jump block2(v42)
block2(v50: u32):
    v51: u32 = add v50,v42 ; uses v42, defined further down
    return
block9:
    v42: u32 = const 7
    jump block5
}
"#;
    let m = parse_module(text).expect("parse");
    let canonical = r#"module "hand" version(2) targets(sm_70) ptx(7.0)

kernel @k max_threads(64, 1, 1) opt(O1) {
block0(v0: ptr<global, [f32; 4]>, v1: u32):
    v2: bool = const true
    br v2, block2(v1), block1
block1:
    jump block2(v3)
block2(v4: u32):
    v5: u32 = add v4, v3
    return
block3:
    v3: u32 = const 7
    jump block1
}
"#;
    // Not canonical either: canonical numbering puts block2's parameter before
    // the constant of the last block. Both parse to the same canonical function.
    let expected = parse_module(canonical).expect("parse canonical");
    assert_eq!(m, expected);
    let printed = print_module(&m);
    assert_canonical(&printed);
    assert!(printed.contains("block0(v0: ptr<global, [f32; 4]>, v1: u32):"));
}

#[test]
fn locations_are_recorded() {
    let text =
        "module \"m\"\n\nhost @f -> i32 {\nblock0:\n    v0: i32 = const 1\n      return v0\n}\n";
    let m = parse_module_named(text, Some("f.zir")).expect("parse");
    let f = &m.functions[0];
    let loc = |line, col| {
        Some(Loc {
            file: Some("f.zir".into()),
            line,
            col,
        })
    };
    assert_eq!(f.loc, loc(3, 1));
    assert_eq!(f.insts[0].loc, loc(5, 5));
    assert_eq!(f.insts[1].loc, loc(6, 7));
}

#[test]
fn integer_literals_for_floats_and_hex_for_ints() {
    let m = parse_module(
        "module \"m\"\nhost @f {\nblock0:\n    v0: f32 = const 2\n    v1: u8 = const 0xff\n    v2: i8 = const -0x80\n    v3: f64 = const nan\n    return\n}\n",
    )
    .expect("parse");
    let c: Vec<ConstValue> = m.functions[0]
        .insts
        .iter()
        .filter_map(|i| {
            if let Op::Const(c) = i.op {
                Some(c)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(c[0], ConstValue::float(2.0));
    assert_eq!(c[1], ConstValue::Int(255));
    assert_eq!(c[2], ConstValue::Int(-128));
    assert!(c[3].as_f64().is_some_and(f64::is_nan));
}

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn examples_are_canonical_and_verify() {
    let mut n = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "zir"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("read example");
        let name = path.display().to_string();
        let m = parse_module_named(&text, Some(&name)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(print_module(&m), text, "{name} is not canonical");
        if let Err(e) = verify_module(&m) {
            panic!("{name} does not verify: {e}");
        }
        n += 1;
    }
    assert!(n >= 8, "expected at least 8 examples, found {n}");
}

/// (input, line, column, message fragment)
const ERRORS: &[(&str, u32, u32, &str)] = &[
    ("", 1, 1, "expected `module`, found end of file"),
    ("modul \"m\"", 1, 1, "expected `module`, found `modul`"),
    ("module m", 1, 8, "expected the module name as a string"),
    ("module \"m", 1, 8, "unterminated string"),
    ("module \"a\\qb\"", 1, 8, "unknown escape `\\q`"),
    ("module \"m\" targets(sm_71)", 1, 20, "unknown target arch `sm_71`"),
    ("module \"m\" targets(sm_70 sm_80)", 1, 26, "expected `,` or `)` after target arch, found `sm_80`"),
    ("module \"m\" ptx(7)", 1, 16, "invalid PTX version `7`"),
    ("module \"m\" ptx(7.8) ptx(7.8)", 1, 21, "duplicate `ptx(...)`"),
    ("module \"m\" version(3)", 1, 20, "format version 3 is newer than this zyntax reads (1 to 2)"),
    ("module \"m\" version(0)", 1, 20, "format version 0 does not exist"),
    ("module \"m\" version(2) version(2)", 1, 23, "duplicate `version(...)`"),
    ("module \"m\" version(two)", 1, 20, "expected a format version number (like `2`), found `two`"),
    ("module \"m\" foo", 1, 12, "expected `version(...)`, `targets(...)`, `ptx(...)` or end of line after the module name, found `foo`"),
    ("module \"m\"\nfunc @f {\n}", 2, 1, "expected `host`, `device` or `kernel` to start a function, found `func`"),
    ("module \"m\"\nhost f {\n}", 2, 6, "expected a function name (like `@main`), found `f`"),
    ("module \"m\"\nhost @ {\n}", 2, 6, "expected a function name after `@`"),
    ("module \"m\"\nhost @f -> {\n}", 2, 12, "expected a type, found `{`"),
    ("module \"m\"\nhost @f -> f33 {\n}", 2, 12, "unknown type `f33`"),
    ("module \"m\"\nhost @f fast {\n}", 2, 9, "unknown function attribute `fast`"),
    ("module \"m\"\nhost @f no_alloc no_alloc {\n}", 2, 18, "duplicate attribute `no_alloc`"),
    ("module \"m\"\nhost @f max_threads(32) {\n}", 2, 9, "attribute `max_threads` is only allowed on kernels, not on host functions"),
    ("module \"m\"\nkernel @f arch(sm_99) {\n}", 2, 16, "unknown arch `sm_99`"),
    ("module \"m\"\nkernel @f opt(O9) {\n}", 2, 15, "unknown optimization level `O9`"),
    ("module \"m\"\nkernel @f max_threads(1, 2, 3, 4) {\n}", 2, 30, "expected `)` to close `max_threads(...)`, found `,`"),
    ("module \"m\"\nkernel @f max_threads(4294967296) {\n}", 2, 23, "`4294967296` is out of range for a thread count (0 to 4294967295)"),
    ("module \"m\"\nhost @f {\n}\nhost @f {\n}", 4, 6, "duplicate function `@f`"),
    ("module \"m\"\nhost @f {\nblock0:\n    return\n", 5, 1, "expected a block label, an instruction or `}`, found end of file"),
    ("module \"m\"\nhost @f {\n    return\n}", 3, 5, "expected a block label (like `block0:`) before the first instruction, found `return`"),
    ("module \"m\"\nhost @f {\nblock0:\n    frobnicate\n}", 4, 5, "unknown instruction `frobnicate`"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32):\n    v1: i32 = add v0 v0\n}", 4, 22, "expected `,` or end of line after operand, found `v0`"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32):\n    v1: i32 = add v0, v9\n    return\n}", 4, 23, "undefined value `v9`"),
    ("module \"m\"\nhost @f {\nblock0:\n    jump block3\n}", 4, 10, "undefined block `block3`"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32):\n    v0: i32 = const 1\n}", 4, 5, "duplicate definition of value `v0`"),
    ("module \"m\"\nhost @f {\nblock0:\n    return\nblock0:\n    return\n}", 5, 1, "duplicate definition of block `block0`"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32, v1):\n}", 3, 19, "expected `:` and a type after the block parameter, found `)`"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32 v1: i32):\n}", 3, 16, "expected `,` or `)` after block parameter, found `v1`"),
    ("module \"m\"\nhost @f {\nblock0(v0: bool):\n    br v0, block1(v0 v0), block1\nblock1(v1: bool):\n    return\n}", 4, 22, "expected `,` or `)` after argument, found `v0`"),
    ("module \"m\"\nhost @f {\nblock0(v0: bool):\n    br v0, block1\n}", 4, 18, "expected `,` and the else-target after the then-target, found end of line"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: i8 = const 128\n}", 4, 20, "constant `128` is out of range for i8 (-128 to 127)"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: u32 = const -1\n}", 4, 21, "constant `-1` is out of range for u32"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: i32 = const 1.5\n}", 4, 21, "expected an integer literal for type i32, found `1.5`"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: bool = const 1\n}", 4, 22, "expected `true` or `false` for a bool constant, found `1`"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: f32 = const nan:0x0\n}", 4, 25, "is not the bit pattern of an f64 NaN"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: f32 = const 0x3f800000\n}", 4, 21, "expected a decimal float literal"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: vec<f32, 4> = const 1\n}", 4, 23, "`const` needs exactly one result of a scalar type"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: f32 = const\n}", 4, 20, "expected a float literal for type f32"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32):\n    v1: bool = cmp.lq v0, v0\n}", 4, 16, "unknown comparison in `cmp.lq`"),
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<global, i32>, v1: i32):\n    v2: i32 = atomic.nand.device v0, v1\n}", 4, 15, "unknown atomic operation in `atomic.nand.device`"),
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<global, i32>, v1: i32):\n    v2: i32 = atomic.add.cluster v0, v1\n}", 4, 15, "unknown scope in `atomic.add.cluster`"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: u32 = thread_idx.w\n}", 4, 15, "unknown dimension in `thread_idx.w`"),
    ("module \"m\"\nhost @f {\nblock0(v0: u32, v1: f32):\n    v2: f32 = shfl.down v0, v1, v0\n}", 4, 35, "expected `,` or `width` after operand, found end of line"),
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<global, f16>, v1: u32):\n    v2: f32 = mma.load.row v0, v1\n}", 4, 15, "`mma.load.row` needs exactly one result of a fragment type"),
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<shared, f32>, v1: ptr<global, f32>):\n    cp.async.cg.x v0, v1\n}", 4, 5, "invalid byte count `x`"),
    ("module \"m\"\nhost @f {\nblock0:\n    call f\n}", 4, 10, "expected the callee (like `@f`) after `call`, found `f`"),
    ("module \"m\"\nhost @f {\nblock0:\n    barrier 3\n}", 4, 13, "expected end of line after `barrier` instruction, found `3`"),
    ("module \"m\"\nhost @f {\nblock0(v0: vec<f32, 4>):\n    v1: f32 = extract v0\n}", 4, 25, "expected `,` and a lane number after the operands, found end of line"),
    ("module \"m\"\nhost @f {\nblock0(v0: vec<ptr<global, f32>, 2>):\n}", 3, 16, "vector elements must be scalars"),
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<texture, f32>):\n}", 3, 16, "unknown address space `texture`"),
    ("module \"m\"\nhost @f {\nblock0(v0: frag<c, m16n16k16, f16>):\n}", 3, 17, "unknown fragment kind `c`"),
    ("module \"m\"\nhost @f {\nblock0(v0: frag<a, m16n16k8, f16>):\n}", 3, 20, "unknown MMA shape `m16n16k8`"),
    ("module \"m\"\nhost @f {\nblock0(v0: [f32, 4]):\n}", 3, 16, "expected `;` and a length after the array element type, found `,`"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32):\n    v1 i32 = neg v0\n}", 4, 8, "expected `:` and a type after the result name, found `i32`"),
    ("module \"m\"\nhost @f {\nblock0(v0: i32):\n    v1: i32 neg v0\n}", 4, 13, "expected `,` or `=` after the result type, found `neg`"),
    ("module \"m\"\nhost @f {\nblock0:\n    v0: i32 = const 1 # x\n}", 4, 23, "unexpected character '#'"),
    // Immediates read through the instruction table.
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<shared, u16>):\n    v1: u32 = ldmatrix.x4.zz v0\n}", 4, 15, "unknown flag `zz` in `ldmatrix.x4.zz` (expected one of `trans`)"),
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<shared, u16>):\n    v1: u32 = ldmatrix.y4 v0\n}", 4, 15, "invalid matrix count `y4` in `ldmatrix.y4`"),
    ("module \"m\"\nhost @f {\nblock0:\n    setmaxnreg.up.40\n}", 4, 5, "unknown setmaxnreg direction in `setmaxnreg.up.40` (expected one of `inc`, `dec`)"),
    ("module \"m\"\nhost @f {\nblock0:\n    bar.sync 1 64\n}", 4, 16, "expected `,` and a thread count after the named-barrier id, found `64`"),
    ("module \"m\"\nhost @f {\nblock0(v0: ptr<global, i32>, v1: i32):\n    red.nand.device v0, v1\n}", 4, 5, "unknown reduction operation in `red.nand.device` (expected one of `add`, `sub`"),
    ("module \"m\"\nhost @f {\nblock0:\n    wgmma.wait_group.x\n}", 4, 5, "invalid count `x` in `wgmma.wait_group.x`"),
];

#[test]
fn malformed_input_gives_located_errors() {
    for (text, line, col, fragment) in ERRORS {
        match parse_module_named(text, Some("bad.zir")) {
            Ok(_) => panic!("accepted malformed input:\n{text}"),
            Err(e) => {
                assert!(
                    e.message.contains(fragment),
                    "for input\n{text}\nexpected message containing `{fragment}`, got `{}` at {}",
                    e.message,
                    e.loc
                );
                assert_eq!(
                    (e.loc.line, e.loc.col),
                    (*line, *col),
                    "wrong location for `{}` in\n{text}",
                    e.message
                );
                assert_eq!(e.loc.file.as_deref(), Some("bad.zir"));
            }
        }
    }
}

#[test]
fn deeply_nested_types_are_an_error_not_a_stack_overflow() {
    let depth = 10_000;
    let text = format!(
        "module \"m\"\nhost @f {{\nblock0(v0: {}f32{}):\n}}\n",
        "[".repeat(depth),
        "; 1]".repeat(depth)
    );
    let e = parse_module(&text).expect_err("too deep");
    assert!(e.message.contains("nested more than"), "{e}");
}

#[test]
fn crlf_tabs_and_multiline_headers_parse_the_same() {
    let canonical = parse_module(ALL_OPS).expect("parse");
    let crlf = ALL_OPS.replace('\n', "\r\n").replace("    ", "\t");
    assert_eq!(parse_module(&crlf).expect("crlf"), canonical);
    let spread = "module \"m\"\n\nkernel @k\n    max_threads(32)\n    no_alloc\n{\nblock0(\n    v0: u32,\n    v1: u32\n): jump block1\nblock1:\n    return\n}";
    let m = parse_module(spread).expect("multi-line header and parameters");
    assert_eq!(
        print_module(&m),
        "module \"m\" version(2)\n\nkernel @k max_threads(32, 1, 1) no_alloc {\nblock0(v0: u32, v1: u32):\n    jump block1\nblock1:\n    return\n}\n"
    );
}

#[test]
fn the_first_error_in_the_text_wins() {
    // A lexical error later in the file does not hide an earlier syntax error.
    let e = parse_module("module \"m\"\nfoo\n#").expect_err("bad");
    assert_eq!((e.loc.line, e.loc.col), (2, 1), "{e}");
    // Of an undefined value and an undefined block, the one used first is reported.
    let e =
        parse_module("module \"m\"\nhost @f {\nblock0:\n    jump block5(v7)\n}").expect_err("bad");
    assert_eq!(e.message, "undefined block `block5`");
    let e =
        parse_module("module \"m\"\nhost @f {\nblock0(v0: bool):\n    br v3, block0, block9\n}")
            .expect_err("bad");
    assert_eq!(e.message, "undefined value `v3`");
}

/// `print_module_located` writes each instruction's location as a comment:
/// the text reads back to the same module, and every comment points at the
/// line of the source `.zir` that spelled that instruction.
#[test]
fn located_printing_names_each_instructions_source_line() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let path = dir.join("saxpy.zir");
    let text = std::fs::read_to_string(&path).unwrap();
    let name = path.display().to_string();
    let m = parse_module_named(&text, Some(&name)).unwrap();
    let located = print_module_located(&m);
    assert_eq!(parse_module(&located).unwrap(), m);
    assert!(
        located.contains(&format!("; source: {name}\n")),
        "{located}"
    );
    let src: Vec<&str> = text.lines().collect();
    let mut seen = 0;
    for line in located.lines().filter(|l| l.starts_with("    ")) {
        let (inst, loc) = line.split_once("  ; ").expect(line);
        let (l, c) = loc.split_once(':').unwrap();
        let (l, c): (usize, usize) = (l.parse().unwrap(), c.parse().unwrap());
        assert_eq!(src[l - 1].trim(), inst.trim(), "{line}");
        assert_eq!(src[l - 1].find(inst.trim()).unwrap() + 1, c, "{line}");
        seen += 1;
    }
    assert!(seen > 10, "{located}");
    // The plain printer is unchanged by locations.
    assert!(!print_module(&m).contains(';'));
}
