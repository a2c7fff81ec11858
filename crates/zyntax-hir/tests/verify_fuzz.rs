//! The verifier never panics: random garbage functions (random ops, types and
//! ids, many out of range) and random corruptions of valid functions. And
//! whatever it accepts is structurally sound.

use proptest::prelude::*;
use zyntax_hir::*;

fn scalar() -> impl Strategy<Value = ScalarType> {
    (0usize..ScalarType::ALL.len()).prop_map(|n| ScalarType::ALL[n])
}

fn space() -> impl Strategy<Value = AddrSpace> {
    (0usize..AddrSpace::ALL.len()).prop_map(|n| AddrSpace::ALL[n])
}

fn frag() -> impl Strategy<Value = FragType> {
    (
        0u8..3,
        0usize..3,
        scalar(),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(k, s, elem, l)| FragType {
            kind: [FragKind::A, FragKind::B, FragKind::Acc][k as usize],
            shape: MmaShape::ALL[s],
            elem,
            layout: l.map(|row| if row { Layout::Row } else { Layout::Col }),
        })
}

fn ty() -> impl Strategy<Value = Type> {
    let leaf = prop_oneof![
        4 => scalar().prop_map(Type::Scalar),
        1 => (scalar(), 0u32..10).prop_map(|(s, n)| Type::Vector(s, n)),
        1 => frag().prop_map(Type::Frag),
    ];
    leaf.prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (space(), inner.clone()).prop_map(|(s, t)| Type::ptr(s, t)),
            (inner, prop_oneof![Just(0u64), 1u64..5, Just(u64::MAX)])
                .prop_map(|(t, n)| Type::array(t, n)),
        ]
    })
}

/// Every op variant, chosen by `n`, with immediates from `k`, `c` and `t`.
fn op(n: u8, k: u32, c: i64, t: Type, fr: FragType, name: String) -> Op {
    match n % 53 {
        0 => Op::Const(ConstValue::Int(c)),
        1 => Op::Const(ConstValue::Float(c as u64)),
        2 => Op::Const(ConstValue::Bool(c & 1 == 1)),
        3 => Op::Binary(BinOp::ALL[k as usize % BinOp::ALL.len()]),
        4 => Op::Unary(UnOp::ALL[k as usize % UnOp::ALL.len()]),
        5 => Op::Fma,
        6 => Op::Cmp(CmpOp::ALL[k as usize % CmpOp::ALL.len()]),
        7 => Op::Select,
        8 => Op::Cast,
        9 => Op::Bitcast,
        10 => Op::Extract(k % 10),
        11 => Op::Insert(k % 10),
        12 => Op::Load,
        13 => Op::Store,
        14 => Op::PtrAdd,
        15 => Op::PtrCast,
        16 => Op::Alloca {
            elem: t,
            count: c as u64,
        },
        17 => Op::SharedAlloc {
            elem: t,
            count: c as u64 % 100_000,
            align: 1 << (k % 12),
        },
        18 => Op::DynShared {
            elem: t,
            align: 1 << (k % 12),
        },
        19 => Op::ThreadIdx(Dim::ALL[k as usize % 3]),
        20 => Op::BlockIdx(Dim::ALL[k as usize % 3]),
        21 => Op::BlockDim(Dim::ALL[k as usize % 3]),
        22 => Op::GridDim(Dim::ALL[k as usize % 3]),
        23 => Op::LaneId,
        24 => Op::Barrier,
        25 => Op::Fence(Scope::ALL[k as usize % 3]),
        26 => Op::WarpSync,
        27 => Op::Atomic {
            op: AtomicOp::ALL[k as usize % AtomicOp::ALL.len()],
            scope: Scope::ALL[(k as usize / 16) % 3],
        },
        28 => Op::AtomicCas {
            scope: Scope::ALL[k as usize % 3],
        },
        29 => Op::Shfl {
            mode: ShflMode::ALL[k as usize % 4],
            width: (c as u32) % 70,
        },
        30 => Op::Vote(VoteMode::ALL[k as usize % 3]),
        31 => Op::Match(MatchMode::ALL[k as usize % 2]),
        32 => Op::MmaLoad {
            frag: fr,
            layout: if k & 1 == 0 { Layout::Row } else { Layout::Col },
        },
        33 => Op::MmaFill,
        34 => Op::Mma,
        35 => Op::MmaStore {
            layout: if k & 1 == 0 { Layout::Row } else { Layout::Col },
        },
        36 => Op::CpAsync {
            bytes: k % 20,
            cache: if c & 1 == 0 {
                CacheHint::Ca
            } else {
                CacheHint::Cg
            },
        },
        37 => Op::CpAsyncCommit,
        38 => Op::CpAsyncWait(k % 40),
        39 => Op::Call(name),
        40 => Op::Jump,
        41 => Op::Branch,
        42 => Op::Return,
        // Issue 12 items 1-3 (warp MMA, ldmatrix/stmatrix, approx math, cache operators).
        43 => Op::MmaSync {
            shape: WarpShape::ALL[k as usize % WarpShape::ALL.len()],
            elem: MmaElem::ALL[c.unsigned_abs() as usize % MmaElem::ALL.len()],
        },
        44 => Op::Ldmatrix {
            num: k % 6,
            trans: c & 1 == 0,
        },
        45 => Op::Stmatrix {
            num: k % 6,
            trans: c & 1 == 0,
        },
        46 => Op::Approx(ApproxOp::ALL[k as usize % ApproxOp::ALL.len()]),
        47 => Op::LoadCached(CacheOp::ALL[k as usize % CacheOp::ALL.len()]),
        48 => Op::StoreCached(CacheOp::ALL[k as usize % CacheOp::ALL.len()]),
        // Issue 12 (rest): named barriers, packed conversions.
        49 => Op::NamedBarrier {
            arrive: c & 1 == 0,
            id: k % 20,
            count: (c as u32) % 1100,
        },
        50 => Op::CvtPack(PackFmt::ALL[k as usize % PackFmt::ALL.len()]),
        51 => Op::CvtUnpack(PackFmt::ALL[k as usize % PackFmt::ALL.len()]),
        _ => Op::Unreachable,
    }
}

/// Ids mostly in a small range (so some are valid), sometimes huge.
fn id() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..12, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

fn ids(max: usize) -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(id(), 0..max)
}

fn inst() -> impl Strategy<Value = InstData> {
    (
        (any::<u8>(), any::<u32>(), any::<i64>(), ty(), frag()),
        prop_oneof![
            Just("f0".to_string()),
            Just("f1".to_string()),
            Just("nope".to_string())
        ],
        ids(4),
        ids(3),
        proptest::collection::vec((id(), ids(3)), 0..3),
    )
        .prop_map(
            |((n, k, c, t, fr), name, args, results, targets)| InstData {
                op: op(n, k, c, t, fr, name),
                args: args.into_iter().map(ValueId).collect(),
                results: results.into_iter().map(ValueId).collect(),
                targets: targets
                    .into_iter()
                    .map(|(b, a)| BlockCall {
                        block: BlockId(b),
                        args: a.into_iter().map(ValueId).collect(),
                    })
                    .collect(),
                loc: None,
            },
        )
}

fn kind() -> impl Strategy<Value = FunctionKind> {
    let info = (
        proptest::option::of((0u32..2000, 0u32..2000, 0u32..100).prop_map(|(x, y, z)| [x, y, z])),
        proptest::option::of(0u32..40),
        proptest::option::of(0u32..300),
        prop_oneof![Just(0u32), 0u32..300_000, Just(u32::MAX)],
        proptest::option::of((0usize..Arch::ALL.len()).prop_map(|n| Arch::ALL[n])),
    )
        .prop_map(
            |(max_threads, min_blocks, max_registers, shared_bytes, arch)| KernelInfo {
                max_threads,
                min_blocks,
                max_registers,
                shared_bytes,
                arch,
                exact_threads: None,
                cluster: None,
            },
        );
    prop_oneof![
        Just(FunctionKind::Host),
        Just(FunctionKind::Device),
        info.prop_map(FunctionKind::Kernel),
    ]
}

fn function(name: &'static str) -> impl Strategy<Value = Function> {
    (
        kind(),
        proptest::collection::vec(ty(), 0..3),
        proptest::collection::vec(
            (
                ty(),
                prop_oneof![
                    (id(), 0u32..4).prop_map(|(b, n)| ValueDef::Param(BlockId(b), n)),
                    (id(), 0u32..4).prop_map(|(i, n)| ValueDef::Result(InstId(i), n)),
                ],
            ),
            0..12,
        ),
        proptest::collection::vec((ids(4), ids(6)), 0..5),
        proptest::collection::vec(inst(), 0..12),
        ids(6),
        any::<bool>(),
    )
        .prop_map(
            move |(kind, returns, values, blocks, insts, layout, no_alloc)| {
                let mut f = Function::new(name, kind, returns);
                f.constraints.no_alloc = no_alloc;
                f.values = values
                    .into_iter()
                    .map(|(ty, def)| ValueData { ty, def })
                    .collect();
                f.blocks = blocks
                    .into_iter()
                    .map(|(p, i)| BlockData {
                        params: p.into_iter().map(ValueId).collect(),
                        insts: i.into_iter().map(InstId).collect(),
                    })
                    .collect();
                f.insts = insts;
                f.layout = layout.into_iter().map(BlockId).collect();
                f
            },
        )
}

fn module() -> impl Strategy<Value = Module> {
    (
        function("f0"),
        function("f1"),
        proptest::collection::vec((0usize..Arch::ALL.len()).prop_map(|n| Arch::ALL[n]), 0..3),
        proptest::option::of((5u32..10, 0u32..10).prop_map(|(a, b)| PtxVersion::new(a, b))),
    )
        .prop_map(|(f0, f1, targets, ptx_version)| Module {
            name: "fuzz".into(),
            globals: Vec::new(),
            targets,
            ptx_version,
            functions: vec![f0, f1],
        })
}

/// What acceptance promises to every consumer: ids in range, values defined
/// where they say, every placed block terminated.
fn assert_sound(m: &Module) {
    for f in &m.functions {
        assert!(!f.layout.is_empty());
        for b in &f.layout {
            let bd = f.blocks.get(b.index()).expect("layout block exists");
            for (n, v) in bd.params.iter().enumerate() {
                let vd = f.values.get(v.index()).expect("param exists");
                assert_eq!(vd.def, ValueDef::Param(*b, n as u32));
            }
            let last = bd.insts.last().expect("block non-empty");
            for i in &bd.insts {
                let d = f.insts.get(i.index()).expect("inst exists");
                assert_eq!(d.op.is_terminator(), i == last);
                for (n, v) in d.results.iter().enumerate() {
                    let vd = f.values.get(v.index()).expect("result exists");
                    assert_eq!(vd.def, ValueDef::Result(*i, n as u32));
                }
                for v in d
                    .args
                    .iter()
                    .chain(d.targets.iter().flat_map(|t| t.args.iter()))
                {
                    assert!(f.has_value(*v));
                }
                for t in &d.targets {
                    assert!(f.layout.contains(&t.block));
                }
            }
        }
    }
}

fn check(m: &Module) {
    match verify_module(m) {
        Ok(()) => {
            assert_sound(m);
            // A verified module always prints and parses back (issue 10, item 2).
            let text = print_module(m);
            let back = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            verify_module(&back).unwrap_or_else(|e| panic!("{e}\n{text}"));
            // ... unchanged: equal to the module renumbered, nothing dropped; and
            // through JSON, equal outright.
            let mut canonical = m.clone();
            canonical
                .functions
                .iter_mut()
                .for_each(Function::canonicalize);
            assert_eq!(back, canonical, "{text}");
            for (f, g) in m.functions.iter().zip(&back.functions) {
                assert_eq!(f.blocks.len(), g.blocks.len(), "{text}");
                assert_eq!(f.insts.len(), g.insts.len(), "{text}");
                assert_eq!(f.values.len(), g.values.len(), "{text}");
            }
            let json = m.to_json().unwrap();
            assert_eq!(&Module::from_json(&json).unwrap(), m);
        }
        Err(e) => {
            assert!(!e.diagnostics.is_empty());
            let _ = e.to_string();
            let _ = zyntax_hir::verify::print_with_errors(m, &e);
        }
    }
    for f in &m.functions {
        let _ = verify_function(m, f);
    }
    for a in Arch::ALL {
        let _ = zyntax_hir::arch::check_arch(m, a);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn garbage_never_panics(m in module()) {
        check(&m);
    }

    #[test]
    fn corrupted_valid_functions_never_panic(
        edits in proptest::collection::vec((0u8..8, any::<u32>(), id()), 1..4)
    ) {
        let mut m = valid_module();
        for (what, at, to) in edits {
            let f = &mut m.functions[(at as usize) % 2];
            let n = at as usize;
            match what {
                0 if !f.insts.is_empty() => {
                    let len = f.insts.len();
                    let d = &mut f.insts[n % len];
                    if !d.args.is_empty() {
                        let k = n % d.args.len();
                        d.args[k] = ValueId(to);
                    }
                }
                1 if !f.insts.is_empty() => {
                    let len = f.insts.len();
                    let d = &mut f.insts[n % len];
                    if let Some(t) = d.targets.first_mut() {
                        t.block = BlockId(to);
                    }
                }
                2 if !f.blocks.is_empty() => {
                    let len = f.blocks.len();
                    f.blocks[n % len].insts.retain(|i| i.0 != to);
                }
                3 if !f.blocks.is_empty() => {
                    let len = f.blocks.len();
                    f.blocks[n % len].params.push(ValueId(to));
                }
                4 if !f.values.is_empty() => {
                    let len = f.values.len();
                    f.values[n % len].ty = Type::Scalar(ScalarType::ALL[to as usize % 13]);
                }
                5 if !f.layout.is_empty() => {
                    let len = f.layout.len();
                    f.layout.swap(0, n % len);
                }
                6 if !f.insts.is_empty() => {
                    let len = f.insts.len();
                    f.insts[n % len].results.push(ValueId(to));
                }
                _ => {
                    let len = f.layout.len();
                    f.layout.truncate(n % (len + 1));
                }
            }
        }
        check(&m);
    }
}

/// A kernel with a loop, an if and a call to a device function.
fn valid_module() -> Module {
    let mut d = FunctionBuilder::device("f1", &[Type::I32], &[Type::I32]);
    let x = d.param(0);
    let y = d.add(x, x).unwrap();
    d.ret(&[y]).unwrap();
    let dev = d.finish().unwrap();

    let mut k =
        FunctionBuilder::kernel("f0", &[Type::ptr(AddrSpace::Global, Type::I32), Type::I32]);
    let (out, n) = (k.param(0), k.param(1));
    let zero = k.iconst(Type::I32, 0).unwrap();
    let one = k.iconst(Type::I32, 1).unwrap();
    let fr = k.begin_for(zero, n, one, &[zero]).unwrap();
    let r = k.call("f1", &[fr.iv], &[Type::I32]).unwrap();
    let s = k.add(fr.carried[0], r[0]).unwrap();
    let done = k.end_for(fr, &[s]).unwrap();
    let c = k.cmp(CmpOp::Gt, done[0], zero).unwrap();
    let iff = k.begin_if(c, &[]).unwrap();
    k.store(out, done[0]).unwrap();
    k.end_if(iff, &[]).unwrap();
    k.ret(&[]).unwrap();
    let mut m = Module::new("valid");
    m.functions = vec![k.finish().unwrap(), dev];
    assert!(verify_module(&m).is_ok());
    m
}

/// An open structured construct while building a random program.
enum Frame {
    If {
        frame: IfFrame,
        /// Values visible before the `if`.
        outer: Vec<ValueId>,
        in_else: bool,
    },
    For {
        frame: ForFrame,
        outer: Vec<ValueId>,
    },
}

/// Drive the builder from random bytes: arithmetic on visible i32 values,
/// nested if/else yielding a value, counted loops carrying one. Every such
/// program is valid, so the verifier must accept it (no false rejections).
fn structured_program(code: &[u8], kind: FunctionKind) -> Function {
    let gpu = kind.is_gpu();
    let out_ty = if gpu {
        Type::ptr(AddrSpace::Global, Type::I32)
    } else {
        Type::ptr(AddrSpace::Generic, Type::I32)
    };
    let mut b = FunctionBuilder::new("p", kind, &[out_ty, Type::I32, Type::I32], &[]);
    let out = b.param(0);
    let mut vis: Vec<ValueId> = vec![b.param(1), b.param(2)];
    let mut stack: Vec<Frame> = Vec::new();
    let pick = |vis: &[ValueId], n: u8| vis[n as usize % vis.len()];
    for w in code.chunks(3) {
        let (op, x, y) = (w[0] % 10, *w.get(1).unwrap_or(&0), *w.get(2).unwrap_or(&1));
        match op {
            0..=3 => {
                let bop = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Xor][op as usize];
                let v = b.binary(bop, pick(&vis, x), pick(&vis, y)).unwrap();
                vis.push(v);
            }
            4 if stack.len() < 6 => {
                let c = b.cmp(CmpOp::Lt, pick(&vis, x), pick(&vis, y)).unwrap();
                let frame = b.begin_if(c, &[Type::I32]).unwrap();
                stack.push(Frame::If {
                    frame,
                    outer: vis.clone(),
                    in_else: false,
                });
            }
            5 => {
                if let Some(Frame::If {
                    frame,
                    outer,
                    in_else,
                }) = stack.last_mut()
                {
                    if !*in_else {
                        let yield_v = pick(&vis, x);
                        b.begin_else(frame, &[yield_v]).unwrap();
                        *in_else = true;
                        vis = outer.clone();
                    }
                }
            }
            6 | 8 => match stack.pop() {
                Some(Frame::If {
                    mut frame,
                    outer,
                    in_else,
                }) => {
                    let yield_v = pick(&vis, x);
                    if !in_else {
                        b.begin_else(&mut frame, &[yield_v]).unwrap();
                    }
                    vis = outer;
                    let else_v = pick(&vis, y);
                    let merged = b.end_if(frame, &[else_v]).unwrap();
                    vis.extend(merged);
                }
                Some(Frame::For { frame, outer }) => {
                    let next = pick(&vis, x);
                    vis = outer;
                    let done = b.end_for(frame, &[next]).unwrap();
                    vis.extend(done);
                }
                None => {}
            },
            7 if stack.len() < 6 => {
                let zero = b.iconst(Type::I32, 0).unwrap();
                let n = b.iconst(Type::I32, i64::from(x % 5)).unwrap();
                let one = b.iconst(Type::I32, 1).unwrap();
                let init = pick(&vis, y);
                let frame = b.begin_for(zero, n, one, &[init]).unwrap();
                let outer = vis.clone();
                vis.push(frame.iv);
                vis.push(frame.carried[0]);
                stack.push(Frame::For { frame, outer });
            }
            _ => {
                b.store(out, pick(&vis, x)).unwrap();
                if gpu && x % 4 == 0 {
                    b.barrier().unwrap();
                }
            }
        }
    }
    while let Some(f) = stack.pop() {
        match f {
            Frame::If {
                mut frame,
                outer,
                in_else,
            } => {
                let v = *vis.last().unwrap();
                if !in_else {
                    b.begin_else(&mut frame, &[v]).unwrap();
                }
                vis = outer;
                let e = *vis.last().unwrap();
                let merged = b.end_if(frame, &[e]).unwrap();
                vis.extend(merged);
            }
            Frame::For { frame, outer } => {
                let v = *vis.last().unwrap();
                vis = outer;
                let done = b.end_for(frame, &[v]).unwrap();
                vis.extend(done);
            }
        }
    }
    b.store(out, *vis.last().unwrap()).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn structured_programs_verify(code in proptest::collection::vec(any::<u8>(), 0..120), host in any::<bool>()) {
        let kind = if host {
            FunctionKind::Host
        } else {
            FunctionKind::Kernel(KernelInfo::default())
        };
        let mut m = Module::new("p");
        m.targets = vec![Arch::Sm70];
        m.functions.push(structured_program(&code, kind));
        if let Err(e) = verify_module(&m) {
            panic!("{e}\n{}", print_module(&m));
        }
        assert_sound(&m);
        // Printing and parsing gives a module that verifies too.
        let again = parse_module(&print_module(&m)).unwrap();
        prop_assert!(verify_module(&again).is_ok());
    }
}

#[test]
fn structured_generator_nests() {
    // for { if { op } else { for { op } } } with ops around.
    let code = [
        0, 0, 1, 7, 3, 0, 4, 1, 2, 1, 0, 1, 5, 0, 0, 7, 2, 1, 2, 3, 1, 8, 0, 0, 6, 1, 0, 8, 2, 0,
        9, 1, 0,
    ];
    for kind in [
        FunctionKind::Host,
        FunctionKind::Kernel(KernelInfo::default()),
    ] {
        let f = structured_program(&code, kind);
        assert!(f.blocks.len() >= 9, "{f}");
        let mut m = Module::new("p");
        m.functions.push(f);
        if let Err(e) = verify_module(&m) {
            panic!("{e}");
        }
    }
}
