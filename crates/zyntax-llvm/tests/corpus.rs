//! A generated corpus of small modules: each instruction × type combination
//! HIR allows, compiled and assembled with `ptxas -Werror` on every arch it is
//! available on. The expected minimum arch of each case is stated here and
//! must agree with the verifier's gating table (so neither side drifts).

mod common;

use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use zyntax_hir::*;

struct Case {
    module: Module,
    /// Oldest arch the case must compile for (every newer one too).
    min: Arch,
    /// Substrings the PTX must contain on every arch.
    expect: Vec<String>,
}

fn gptr(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

const INTS: [ScalarType; 8] = [
    ScalarType::I8,
    ScalarType::I16,
    ScalarType::I32,
    ScalarType::I64,
    ScalarType::U8,
    ScalarType::U16,
    ScalarType::U32,
    ScalarType::U64,
];
const FLOATS: [ScalarType; 4] = [
    ScalarType::F16,
    ScalarType::BF16,
    ScalarType::F32,
    ScalarType::F64,
];

fn min_for(s: ScalarType) -> Arch {
    if s == ScalarType::BF16 {
        Arch::Sm80
    } else {
        Arch::Sm70
    }
}

/// `k(a, b, out)`: x = a[tid], y = b[tid], out[tid] = body(x, y).
fn elementwise(
    name: &str,
    t: ScalarType,
    rt: ScalarType,
    body: impl FnOnce(&mut FunctionBuilder, ValueId, ValueId) -> ValueId,
) -> Module {
    let mut b = FunctionBuilder::kernel(
        name,
        &[
            gptr(Type::Scalar(t)),
            gptr(Type::Scalar(t)),
            gptr(Type::Scalar(rt)),
        ],
    );
    let (pa, pb, po) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let qa = b.ptr_add(pa, tid).unwrap();
    let qb = b.ptr_add(pb, tid).unwrap();
    let x = b.load(qa).unwrap();
    let y = b.load(qb).unwrap();
    let r = body(&mut b, x, y);
    let qo = b.ptr_add(po, tid).unwrap();
    b.store(qo, r).unwrap();
    b.ret(&[]).unwrap();
    module(name, vec![b.finish().unwrap()])
}

fn binary_cases(out: &mut Vec<Case>) {
    for op in BinOp::ALL.iter().copied() {
        let types: Vec<ScalarType> = match op {
            BinOp::Rem | BinOp::Shl | BinOp::Shr => INTS.to_vec(),
            BinOp::And | BinOp::Or | BinOp::Xor => {
                INTS.iter().copied().chain([ScalarType::Bool]).collect()
            }
            _ => INTS.iter().chain(FLOATS.iter()).copied().collect(),
        };
        for t in types {
            let name = format!("bin_{}_{}", op.name(), t.name());
            let m = elementwise(&name, t, t, |b, x, y| b.binary(op, x, y).unwrap());
            let mut expect = vec![];
            if matches!(op, BinOp::Div | BinOp::Rem) && t.is_int() {
                expect.push("trap;".to_string()); // division by zero traps
            }
            out.push(Case {
                module: m,
                min: min_for(t),
                expect,
            });
        }
    }
}

fn unary_cases(out: &mut Vec<Case>) {
    for op in UnOp::ALL.iter().copied() {
        for t in INTS
            .iter()
            .chain(FLOATS.iter())
            .chain([ScalarType::Bool].iter())
            .copied()
        {
            // The operand types each op accepts, from the instruction table.
            if !Op::Unary(op).def().types.accepts(t) {
                continue;
            }
            let name = format!("un_{}_{}", op.name(), t.name());
            let m = elementwise(&name, t, t, |b, x, _| b.unary(op, x).unwrap());
            let mut expect = vec![];
            if t == ScalarType::F32 {
                match op {
                    UnOp::Sin => expect.push("sin.approx.f32".into()),
                    UnOp::Cos => expect.push("cos.approx.f32".into()),
                    UnOp::Exp | UnOp::Tanh => expect.push("ex2.approx.f32".into()),
                    UnOp::Log => expect.push("lg2.approx.f32".into()),
                    UnOp::Sqrt => expect.push("sqrt.rn.f32".into()),
                    UnOp::Floor => expect.push("cvt.rmi.f32.f32".into()),
                    _ => {}
                }
            }
            out.push(Case {
                module: m,
                min: min_for(t),
                expect,
            });
        }
    }
}

fn cmp_select_cases(out: &mut Vec<Case>) {
    for t in INTS
        .iter()
        .chain(FLOATS.iter())
        .chain([ScalarType::Bool].iter())
        .copied()
    {
        let name = format!("cmp_{}", t.name());
        let m = elementwise(&name, t, t, |b, x, y| {
            let mut acc = x;
            for op in CmpOp::ALL.iter().copied() {
                if t.is_bool() && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
                    continue; // bool compares with eq/ne only
                }
                let c = b.cmp(op, acc, y).unwrap();
                acc = b.select(c, x, y).unwrap();
            }
            acc
        });
        out.push(Case {
            module: m,
            min: min_for(t),
            expect: vec![],
        });
    }
    // fma on every float type.
    for t in FLOATS {
        let name = format!("fma_{}", t.name());
        let m = elementwise(&name, t, t, |b, x, y| b.fma(x, y, x).unwrap());
        let expect = if t == ScalarType::F64 {
            vec!["fma.rn.f64".into()]
        } else {
            vec![]
        };
        out.push(Case {
            module: m,
            min: min_for(t),
            expect,
        });
    }
}

fn cast_cases(out: &mut Vec<Case>) {
    let all: Vec<ScalarType> = INTS
        .iter()
        .chain(FLOATS.iter())
        .chain([ScalarType::Bool].iter())
        .copied()
        .collect();
    for from in all.iter().copied() {
        // One kernel per source type casting to every numeric type.
        let name = format!("cast_from_{}", from.name());
        let mut params = vec![gptr(Type::Scalar(from))];
        let targets: Vec<ScalarType> = all.iter().copied().filter(|t| !t.is_bool()).collect();
        params.extend(targets.iter().map(|t| gptr(Type::Scalar(*t))));
        let mut b = FunctionBuilder::kernel(&name, &params);
        let x = b.load(b.param(0)).unwrap();
        for (n, to) in targets.iter().enumerate() {
            let c = b.cast(x, Type::Scalar(*to)).unwrap();
            b.store(b.param(n + 1), c).unwrap();
        }
        b.ret(&[]).unwrap();
        let m = module(&name, vec![b.finish().unwrap()]);
        // Every kernel here stores bf16 somewhere.
        out.push(Case {
            module: m,
            min: Arch::Sm80,
            expect: vec![],
        });
    }
    // Casts among the sm_70 types only (no bf16), so sm_70/75 are covered too.
    for from in all.iter().copied().filter(|t| *t != ScalarType::BF16) {
        let name = format!("cast70_from_{}", from.name());
        let targets: Vec<ScalarType> = all
            .iter()
            .copied()
            .filter(|t| !t.is_bool() && *t != ScalarType::BF16)
            .collect();
        let mut params = vec![gptr(Type::Scalar(from))];
        params.extend(targets.iter().map(|t| gptr(Type::Scalar(*t))));
        let mut b = FunctionBuilder::kernel(&name, &params);
        let x = b.load(b.param(0)).unwrap();
        for (n, to) in targets.iter().enumerate() {
            let c = b.cast(x, Type::Scalar(*to)).unwrap();
            b.store(b.param(n + 1), c).unwrap();
        }
        b.ret(&[]).unwrap();
        let m = module(&name, vec![b.finish().unwrap()]);
        out.push(Case {
            module: m,
            min: Arch::Sm70,
            expect: vec![],
        });
    }
    // Bitcasts between same-size scalars and vectors.
    let pairs: [(Type, Type); 6] = [
        (Type::F32, Type::U32),
        (Type::I64, Type::F64),
        (Type::F16, Type::I16),
        (Type::Vector(ScalarType::F16, 2), Type::U32),
        (Type::Vector(ScalarType::U8, 8), Type::F64),
        (
            Type::Vector(ScalarType::F32, 4),
            Type::Vector(ScalarType::I32, 4),
        ),
    ];
    for (n, (from, to)) in pairs.into_iter().enumerate() {
        let name = format!("bitcast_{n}");
        let mut b = FunctionBuilder::kernel(&name, &[gptr(from.clone()), gptr(to.clone())]);
        let x = b.load(b.param(0)).unwrap();
        let c = b.bitcast(x, to).unwrap();
        b.store(b.param(1), c).unwrap();
        b.ret(&[]).unwrap();
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            min: Arch::Sm70,
            expect: vec![],
        });
    }
}

fn memory_cases(out: &mut Vec<Case>) {
    let types: Vec<Type> = INTS
        .iter()
        .chain(FLOATS.iter())
        .chain([ScalarType::Bool].iter())
        .map(|s| Type::Scalar(*s))
        .chain([
            Type::Vector(ScalarType::F32, 4),
            Type::Vector(ScalarType::F16, 8),
            Type::Vector(ScalarType::I32, 2),
            Type::Vector(ScalarType::U8, 4),
        ])
        .collect();
    for t in types {
        let name = format!("mem_{}", t.to_string().replace(['<', '>', ',', ' '], "_"));
        let mut b = FunctionBuilder::kernel(
            &name,
            &[
                gptr(t.clone()),
                Type::ptr(AddrSpace::Constant, t.clone()),
                gptr(t.clone()),
            ],
        );
        let (pg, pc, po) = (b.param(0), b.param(1), b.param(2));
        let tid = b.thread_idx(Dim::X).unwrap();
        // global -> shared -> local -> generic -> global, plus a constant load.
        let g = b.ptr_add(pg, tid).unwrap();
        let x = b.load(g).unwrap();
        let sh = b.shared_alloc(t.clone(), 64).unwrap();
        let shi = b.ptr_add(sh, tid).unwrap();
        b.store(shi, x).unwrap();
        b.barrier().unwrap();
        let y = b.load(shi).unwrap();
        let loc = b.alloca(t.clone(), 4).unwrap();
        b.store(loc, y).unwrap();
        let z = b.load(loc).unwrap();
        let gen = b
            .ptr_cast(po, Type::ptr(AddrSpace::Generic, t.clone()))
            .unwrap();
        let gi = b.ptr_add(gen, tid).unwrap();
        b.store(gi, z).unwrap();
        let c = b.load(pc).unwrap();
        let one = b.iconst(Type::U32, 1).unwrap();
        let gi1 = b.ptr_add(gi, one).unwrap();
        b.store(gi1, c).unwrap();
        b.ret(&[]).unwrap();
        let min = min_for(t.elem_scalar().unwrap_or(ScalarType::U8));
        let expect = if t == Type::Vector(ScalarType::F32, 4) {
            vec!["ld.global.v4.f32".into(), "st.shared.v4.f32".into()]
        } else {
            vec![]
        };
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            min,
            expect,
        });
    }
    // Vector lanes.
    let name = "vec_lanes";
    let v4 = Type::Vector(ScalarType::F32, 4);
    let mut b = FunctionBuilder::kernel(name, &[gptr(v4.clone())]);
    let p = b.param(0);
    let v = b.load(p).unwrap();
    let l1 = b.extract(v, 1).unwrap();
    let l2 = b.extract(v, 2).unwrap();
    let s = b.add(l1, l2).unwrap();
    let w = b.insert(v, s, 3).unwrap();
    b.store(p, w).unwrap();
    b.ret(&[]).unwrap();
    out.push(Case {
        module: module(name, vec![b.finish().unwrap()]),
        min: Arch::Sm70,
        expect: vec![],
    });
}

fn atomic_cases(out: &mut Vec<Case>) {
    let table: Vec<(AtomicOp, Vec<ScalarType>)> = vec![
        (
            AtomicOp::Add,
            vec![
                ScalarType::I32,
                ScalarType::U32,
                ScalarType::I64,
                ScalarType::U64,
                ScalarType::F16,
                ScalarType::BF16,
                ScalarType::F32,
                ScalarType::F64,
            ],
        ),
        (
            AtomicOp::Exch,
            vec![
                ScalarType::I32,
                ScalarType::U32,
                ScalarType::I64,
                ScalarType::U64,
                ScalarType::F32,
                ScalarType::F64,
            ],
        ),
        (AtomicOp::Inc, vec![ScalarType::U32]),
        (AtomicOp::Dec, vec![ScalarType::U32]),
    ]
    .into_iter()
    .chain(
        [
            AtomicOp::Sub,
            AtomicOp::Min,
            AtomicOp::Max,
            AtomicOp::And,
            AtomicOp::Or,
            AtomicOp::Xor,
        ]
        .into_iter()
        .map(|op| {
            (
                op,
                vec![
                    ScalarType::I32,
                    ScalarType::U32,
                    ScalarType::I64,
                    ScalarType::U64,
                ],
            )
        }),
    )
    .collect();
    for (op, types) in table {
        for t in types {
            let ty = Type::Scalar(t);
            let name = format!("atomic_{}_{}", op.name(), t.name());
            let mut b = FunctionBuilder::kernel(&name, &[gptr(ty.clone()), gptr(ty.clone())]);
            let (p, o) = (b.param(0), b.param(1));
            let v = b.load(o).unwrap();
            let sh = b.shared_alloc(ty.clone(), 32).unwrap();
            let gen = b
                .ptr_cast(p, Type::ptr(AddrSpace::Generic, ty.clone()))
                .unwrap();
            let mut last = v;
            for target in [p, sh, gen] {
                for scope in Scope::ALL.iter().copied() {
                    last = b.atomic(op, scope, target, last).unwrap();
                }
            }
            b.store(o, last).unwrap();
            b.ret(&[]).unwrap();
            let min = match (op, t) {
                (AtomicOp::Add, ScalarType::BF16) => Arch::Sm90,
                _ => min_for(t),
            };
            let ptx_op = if op == AtomicOp::Sub {
                "add"
            } else {
                op.name()
            };
            let expect = vec![
                format!("atom.cta.global.{ptx_op}"),
                format!("atom.sys.{ptx_op}"),
                format!("atom.shared.{ptx_op}"),
            ];
            out.push(Case {
                module: module(&name, vec![b.finish().unwrap()]),
                min,
                expect,
            });
        }
    }
    for t in [
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::U64,
    ] {
        let ty = Type::Scalar(t);
        let name = format!("atomic_cas_{}", t.name());
        let mut b = FunctionBuilder::kernel(&name, &[gptr(ty.clone()), gptr(ty.clone())]);
        let (p, o) = (b.param(0), b.param(1));
        let e = b.load(o).unwrap();
        let sh = b.shared_alloc(ty.clone(), 32).unwrap();
        let gen = b
            .ptr_cast(p, Type::ptr(AddrSpace::Generic, ty.clone()))
            .unwrap();
        let mut last = e;
        for target in [p, sh, gen] {
            for scope in Scope::ALL.iter().copied() {
                last = b.atomic_cas(scope, target, e, last).unwrap();
            }
        }
        b.store(o, last).unwrap();
        b.ret(&[]).unwrap();
        let bits = t.bits();
        let expect = vec![
            format!("atom.gpu.global.cas.b{bits}"),
            format!("atom.shared.cas.b{bits}"),
        ];
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            min: Arch::Sm70,
            expect,
        });
    }
}

fn warp_cases(out: &mut Vec<Case>) {
    for t in [
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::U64,
        ScalarType::F32,
        ScalarType::F64,
    ] {
        let name = format!("shfl_{}", t.name());
        let mut b = FunctionBuilder::kernel(&name, &[gptr(Type::Scalar(t))]);
        let p = b.param(0);
        let mut v = b.load(p).unwrap();
        let mask = b.iconst(Type::U32, -1).unwrap();
        let lane = b.iconst(Type::U32, 3).unwrap();
        for (mode, width) in [
            (ShflMode::Idx, 32),
            (ShflMode::Up, 16),
            (ShflMode::Down, 8),
            (ShflMode::Xor, 2),
        ] {
            v = b.shfl(mode, mask, v, lane, width).unwrap();
        }
        b.store(p, v).unwrap();
        b.ret(&[]).unwrap();
        let expect = vec![
            "shfl.sync.idx.b32".into(),
            "shfl.sync.up.b32".into(),
            "shfl.sync.down.b32".into(),
            "shfl.sync.bfly.b32".into(),
        ];
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            min: Arch::Sm70,
            expect,
        });
    }
    for t in [
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::U64,
    ] {
        let name = format!("match_{}", t.name());
        let mut b = FunctionBuilder::kernel(&name, &[gptr(Type::Scalar(t)), gptr(Type::U32)]);
        let (p, o) = (b.param(0), b.param(1));
        let v = b.load(p).unwrap();
        let mask = b.iconst(Type::U32, -1).unwrap();
        let any = b.match_(MatchMode::Any, mask, v).unwrap()[0];
        let all = b.match_(MatchMode::All, mask, v).unwrap();
        let s = b.select(all[1], any, all[0]).unwrap();
        b.store(o, s).unwrap();
        b.ret(&[]).unwrap();
        let w = t.bits();
        let expect = vec![
            format!("match.any.sync.b{w}"),
            format!("match.all.sync.b{w}"),
        ];
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            min: Arch::Sm70,
            expect,
        });
    }
    for mode in VoteMode::ALL.iter().copied() {
        let name = format!("vote_{}", mode.name());
        let mut b = FunctionBuilder::kernel(&name, &[gptr(Type::U32), gptr(Type::BOOL)]);
        let (p, q) = (b.param(0), b.param(1));
        let v = b.load(p).unwrap();
        let zero = b.iconst(Type::U32, 0).unwrap();
        let pred = b.cmp(CmpOp::Gt, v, zero).unwrap();
        let mask = b.iconst(Type::U32, -1).unwrap();
        let r = b.vote(mode, mask, pred).unwrap();
        if mode == VoteMode::Ballot {
            b.store(p, r).unwrap();
        } else {
            b.store(q, r).unwrap();
        }
        b.ret(&[]).unwrap();
        let expect = vec![format!("vote.sync.{}", mode.name())];
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            min: Arch::Sm70,
            expect,
        });
    }
}

fn mma_cases(out: &mut Vec<Case>) {
    let combos = [
        (ScalarType::F16, ScalarType::F32),
        (ScalarType::F16, ScalarType::F16),
        (ScalarType::BF16, ScalarType::F32),
    ];
    let spaces = [AddrSpace::Global, AddrSpace::Shared, AddrSpace::Generic];
    let mut n = 0;
    for (elem, acc) in combos {
        for shape in MmaShape::ALL.iter().copied() {
            for la in [Layout::Row, Layout::Col] {
                for lb in [Layout::Row, Layout::Col] {
                    let space = spaces[n % spaces.len()];
                    n += 1;
                    let name = format!(
                        "mma_{}_{}_{}_{}{}_{}",
                        elem,
                        acc,
                        shape.name(),
                        la.name(),
                        lb.name(),
                        space.name()
                    );
                    let e = Type::Scalar(elem);
                    let mut b =
                        FunctionBuilder::kernel(&name, &[gptr(e.clone()), gptr(Type::Scalar(acc))]);
                    let (pa, pc) = (b.param(0), b.param(1));
                    let src = match space {
                        AddrSpace::Global => pa,
                        AddrSpace::Shared => b.shared_alloc(e.clone(), 512).unwrap(),
                        _ => b
                            .ptr_cast(pa, Type::ptr(AddrSpace::Generic, e.clone()))
                            .unwrap(),
                    };
                    let ld = b.iconst(Type::U32, 32).unwrap();
                    let a = b
                        .mma_load(frag_type(FragKind::A, shape, elem, Some(la)), la, src, ld)
                        .unwrap();
                    let bb = b
                        .mma_load(frag_type(FragKind::B, shape, elem, Some(lb)), lb, src, ld)
                        .unwrap();
                    let zero = b.fconst(Type::Scalar(acc), 0.0).unwrap();
                    let c = b
                        .mma_fill(frag_type(FragKind::Acc, shape, acc, None), zero)
                        .unwrap();
                    let d = b.mma(a, bb, c).unwrap();
                    let d2 = b.mma(a, bb, d).unwrap();
                    b.mma_store(la, pc, d2, ld).unwrap();
                    b.ret(&[]).unwrap();
                    let min = if elem == ScalarType::BF16 {
                        Arch::Sm80
                    } else {
                        Arch::Sm70
                    };
                    let expect = vec![
                        format!("wmma.load.a.sync.aligned.{}.{}", la.name(), shape.name()),
                        format!(
                            "wmma.mma.sync.aligned.{}.{}.{}",
                            la.name(),
                            lb.name(),
                            shape.name()
                        ),
                        format!("wmma.store.d.sync.aligned.{}.{}", la.name(), shape.name()),
                    ];
                    out.push(Case {
                        module: module(&name, vec![b.finish().unwrap()]),
                        min,
                        expect,
                    });
                }
            }
        }
    }
}

fn cp_async_cases(out: &mut Vec<Case>) {
    for (bytes, hint) in [
        (4, CacheHint::Ca),
        (8, CacheHint::Ca),
        (16, CacheHint::Ca),
        (16, CacheHint::Cg),
    ] {
        let name = format!("cp_async_{}_{bytes}", hint.name());
        let mut b = FunctionBuilder::kernel(&name, &[gptr(Type::U32)]);
        let p = b.param(0);
        let sh = b.shared_alloc(Type::U32, 128).unwrap();
        let tid = b.thread_idx(Dim::X).unwrap();
        let words = b.iconst(Type::U32, i64::from(bytes / 4)).unwrap();
        let off = b.mul(tid, words).unwrap();
        let dst = b.ptr_add(sh, off).unwrap();
        let src = b.ptr_add(p, off).unwrap();
        b.cp_async(bytes, hint, dst, src).unwrap();
        b.cp_async_commit().unwrap();
        b.cp_async_wait(1).unwrap();
        b.cp_async_wait(0).unwrap();
        let v = b.load(dst).unwrap();
        b.store(src, v).unwrap();
        b.ret(&[]).unwrap();
        let expect = vec![
            format!("cp.async.{}.shared.global", hint.name()),
            "cp.async.commit_group".into(),
            "cp.async.wait_group 1".into(),
        ];
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            min: Arch::Sm80,
            expect,
        });
    }
}

/// Loops with carried values, nested ifs, device calls with several results,
/// recursion-free call chains, unreachable blocks.
fn control_cases(out: &mut Vec<Case>) {
    // sum_{i<n} a[i] with a loop and an early-exit if.
    let mut b = FunctionBuilder::kernel("loop_sum", &[gptr(Type::F32), Type::U32, gptr(Type::F32)]);
    let (a, n, o) = (b.param(0), b.param(1), b.param(2));
    let zero = b.iconst(Type::U32, 0).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let fz = b.fconst(Type::F32, 0.0).unwrap();
    let lp = b.begin_for(zero, n, one, &[fz]).unwrap();
    let (iv, acc) = (lp.iv, lp.carried[0]);
    let p = b.ptr_add(a, iv).unwrap();
    let x = b.load(p).unwrap();
    let pos = b.cmp(CmpOp::Gt, x, fz).unwrap();
    let fr = b.begin_if(pos, &[Type::F32]).unwrap();
    let t = b.add(acc, x).unwrap();
    let mut fr = fr;
    b.begin_else(&mut fr, &[t]).unwrap();
    let e = b.sub(acc, x).unwrap();
    let merged = b.end_if(fr, &[e]).unwrap();
    let res = b.end_for(lp, &merged).unwrap();
    b.store(o, res[0]).unwrap();
    b.ret(&[]).unwrap();
    out.push(Case {
        module: module("loop_sum", vec![b.finish().unwrap()]),
        min: Arch::Sm70,
        expect: vec!["bra".into()],
    });

    // A device function returning two values, called twice; inline_always one too.
    let mut d = FunctionBuilder::device("divmod", &[Type::U32, Type::U32], &[Type::U32, Type::U32]);
    let (x, y) = (d.param(0), d.param(1));
    let q = d.binary(BinOp::Div, x, y).unwrap();
    let r = d.binary(BinOp::Rem, x, y).unwrap();
    d.ret(&[q, r]).unwrap();
    let mut h = FunctionBuilder::device("twice", &[Type::F32], &[Type::F32]);
    h.constraints_mut().inline_always = true;
    let hx = h.param(0);
    let s = h.add(hx, hx).unwrap();
    h.ret(&[s]).unwrap();
    let mut k = FunctionBuilder::kernel("calls", &[gptr(Type::U32), gptr(Type::F32)]);
    let (pu, pf) = (k.param(0), k.param(1));
    let u = k.load(pu).unwrap();
    let seven = k.iconst(Type::U32, 7).unwrap();
    let qr = k
        .call("divmod", &[u, seven], &[Type::U32, Type::U32])
        .unwrap();
    let qr2 = k
        .call("divmod", &[qr[0], qr[1]], &[Type::U32, Type::U32])
        .unwrap();
    k.store(pu, qr2[1]).unwrap();
    let f = k.load(pf).unwrap();
    let f2 = k.call("twice", &[f], &[Type::F32]).unwrap();
    k.store(pf, f2[0]).unwrap();
    k.ret(&[]).unwrap();
    let m = module(
        "calls",
        vec![
            d.finish().unwrap(),
            h.finish().unwrap(),
            k.finish().unwrap(),
        ],
    );
    out.push(Case {
        module: m,
        min: Arch::Sm70,
        expect: vec![],
    });

    // O0 function keeps its call; Olatency/critical-path attributes are accepted.
    let mut d = FunctionBuilder::device("slow", &[Type::I32], &[Type::I32]);
    d.constraints_mut().opt_level = OptLevel::O0;
    let x = d.param(0);
    let y = d.mul(x, x).unwrap();
    d.ret(&[y]).unwrap();
    let mut k = FunctionBuilder::kernel("calls_o0", &[gptr(Type::I32)]);
    k.constraints_mut().critical_path = true;
    k.constraints_mut().opt_level = OptLevel::Olatency;
    let p = k.param(0);
    let v = k.load(p).unwrap();
    let r = k.call("slow", &[v], &[Type::I32]).unwrap();
    k.store(p, r[0]).unwrap();
    k.ret(&[]).unwrap();
    let m = module("calls_o0", vec![d.finish().unwrap(), k.finish().unwrap()]);
    out.push(Case {
        module: m,
        min: Arch::Sm70,
        expect: vec!["call.uni".into()],
    });
}

/// Less common shapes: pointer values, odd parameter types, fragments across
/// calls, recursion, shared memory in device functions, `unreachable`.
fn edge_cases(out: &mut Vec<Case>) {
    // Pointers as values: stored, loaded, compared, selected, carried through a loop.
    let pp = Type::ptr(AddrSpace::Global, Type::ptr(AddrSpace::Global, Type::F32));
    let mut b = FunctionBuilder::kernel("ptr_values", &[pp, gptr(Type::F32), Type::I64, Type::U8]);
    let (pp, p, i64i, u8i) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let q = b.load(pp).unwrap();
    let q1 = b.ptr_add(q, i64i).unwrap();
    let q2 = b.ptr_add(p, u8i).unwrap();
    let same = b.cmp(CmpOp::Eq, q1, q2).unwrap();
    let sel = b.select(same, q1, q2).unwrap();
    b.store(pp, sel).unwrap();
    let zero = b.iconst(Type::U32, 0).unwrap();
    let three = b.iconst(Type::U32, 3).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let lp = b.begin_for(zero, three, one, &[sel]).unwrap();
    let cur = lp.carried[0];
    let nxt = b.ptr_add(cur, one).unwrap();
    let res = b.end_for(lp, &[nxt]).unwrap();
    let f = b.fconst(Type::F32, 1.0).unwrap();
    b.store(res[0], f).unwrap();
    b.ret(&[]).unwrap();
    out.push(Case {
        module: module("ptr_values", vec![b.finish().unwrap()]),
        min: Arch::Sm70,
        expect: vec![],
    });

    // Kernel parameters of every by-value kind.
    let params = [
        Type::BOOL,
        Type::I8,
        Type::U16,
        Type::F16,
        Type::F64,
        Type::Vector(ScalarType::F32, 4),
        Type::Vector(ScalarType::U8, 2),
        gptr(Type::F32),
    ];
    let mut b = FunctionBuilder::kernel("param_kinds", &params);
    let ps: Vec<ValueId> = (0..params.len()).map(|i| b.param(i)).collect();
    let h = b.cast(ps[3], Type::F32).unwrap();
    let d = b.cast(ps[4], Type::F32).unwrap();
    let l = b.extract(ps[5], 2).unwrap();
    let c = b.cast(ps[1], Type::F32).unwrap();
    let u = b.cast(ps[2], Type::F32).unwrap();
    let e = b.extract(ps[6], 1).unwrap();
    let e = b.cast(e, Type::F32).unwrap();
    let mut acc = b.add(h, d).unwrap();
    for v in [l, c, u, e] {
        acc = b.add(acc, v).unwrap();
    }
    let zf = b.fconst(Type::F32, 0.0).unwrap();
    let r = b.select(ps[0], acc, zf).unwrap();
    b.store(ps[7], r).unwrap();
    b.ret(&[]).unwrap();
    out.push(Case {
        module: module("param_kinds", vec![b.finish().unwrap()]),
        min: Arch::Sm70,
        expect: vec![],
    });

    // Fragments passed to and returned from a device function.
    let fa = frag_type(
        FragKind::A,
        MmaShape::M16N16K16,
        ScalarType::F16,
        Some(Layout::Row),
    );
    let fb = frag_type(
        FragKind::B,
        MmaShape::M16N16K16,
        ScalarType::F16,
        Some(Layout::Col),
    );
    let fc = frag_type(FragKind::Acc, MmaShape::M16N16K16, ScalarType::F32, None);
    let mut d = FunctionBuilder::device(
        "mma_step",
        &[Type::Frag(fa), Type::Frag(fb), Type::Frag(fc)],
        &[Type::Frag(fc)],
    );
    let (x, y, z) = (d.param(0), d.param(1), d.param(2));
    let r = d.mma(x, y, z).unwrap();
    d.ret(&[r]).unwrap();
    let mut k = FunctionBuilder::kernel("mma_calls", &[gptr(Type::F16), gptr(Type::F32)]);
    let (pa, pc) = (k.param(0), k.param(1));
    let ld = k.iconst(Type::U32, 16).unwrap();
    let a = k.mma_load(fa, Layout::Row, pa, ld).unwrap();
    let bb = k.mma_load(fb, Layout::Col, pa, ld).unwrap();
    let z0 = k.fconst(Type::F32, 0.0).unwrap();
    let c = k.mma_fill(fc, z0).unwrap();
    let c = k.call("mma_step", &[a, bb, c], &[Type::Frag(fc)]).unwrap()[0];
    let c = k.call("mma_step", &[a, bb, c], &[Type::Frag(fc)]).unwrap()[0];
    k.mma_store(Layout::Row, pc, c, ld).unwrap();
    k.ret(&[]).unwrap();
    let m = module("mma_calls", vec![d.finish().unwrap(), k.finish().unwrap()]);
    out.push(Case {
        module: m,
        min: Arch::Sm70,
        expect: vec!["wmma.mma.sync".into()],
    });

    // Recursion (PTX supports it) and a device function with its own shared memory,
    // called from two kernels.
    let mut f = FunctionBuilder::device("fact", &[Type::U64], &[Type::U64]);
    let n = f.param(0);
    let one = f.iconst(Type::U64, 1).unwrap();
    let small = f.cmp(CmpOp::Le, n, one).unwrap();
    let mut fr = f.begin_if(small, &[Type::U64]).unwrap();
    f.begin_else(&mut fr, &[one]).unwrap();
    let n1 = f.sub(n, one).unwrap();
    let r = f.call("fact", &[n1], &[Type::U64]).unwrap()[0];
    let prod = f.mul(n, r).unwrap();
    let res = f.end_if(fr, &[prod]).unwrap();
    f.ret(&[res[0]]).unwrap();
    let mut s = FunctionBuilder::device("stage", &[Type::U32], &[Type::U32]);
    let v = s.param(0);
    let sh = s.shared_alloc(Type::U32, 32).unwrap();
    let lane = s.lane_id().unwrap();
    let slot = s.ptr_add(sh, lane).unwrap();
    s.store(slot, v).unwrap();
    s.barrier().unwrap();
    let m31 = s.iconst(Type::U32, 31).unwrap();
    let other = s.sub(m31, lane).unwrap();
    let q = s.ptr_add(sh, other).unwrap();
    let w = s.load(q).unwrap();
    s.ret(&[w]).unwrap();
    let mut kernels = Vec::new();
    for name in ["rec_a", "rec_b"] {
        let mut k = FunctionBuilder::kernel(name, &[gptr(Type::U64), gptr(Type::U32)]);
        let (p, u) = (k.param(0), k.param(1));
        let x = k.load(p).unwrap();
        let y = k.call("fact", &[x], &[Type::U64]).unwrap()[0];
        k.store(p, y).unwrap();
        let t = k.load(u).unwrap();
        let t2 = k.call("stage", &[t], &[Type::U32]).unwrap()[0];
        k.store(u, t2).unwrap();
        k.ret(&[]).unwrap();
        kernels.push(k.finish().unwrap());
    }
    let mut fs = vec![f.finish().unwrap(), s.finish().unwrap()];
    fs.extend(kernels);
    out.push(Case {
        module: module("recursion_shared", fs),
        min: Arch::Sm70,
        expect: vec![".entry rec_a(".into(), ".entry rec_b(".into()],
    });

    // An empty kernel, and one whose else-branch is `unreachable`.
    let mut e = FunctionBuilder::kernel("empty", &[]);
    e.ret(&[]).unwrap();
    let mut u = FunctionBuilder::kernel("unreach", &[gptr(Type::U32)]);
    let p = u.param(0);
    let v = u.load(p).unwrap();
    let z = u.iconst(Type::U32, 0).unwrap();
    let c = u.cmp(CmpOp::Ne, v, z).unwrap();
    let mut fr = u.begin_if(c, &[]).unwrap();
    u.store(p, z).unwrap();
    u.begin_else(&mut fr, &[]).unwrap();
    u.unreachable().unwrap();
    u.end_if(fr, &[]).unwrap();
    u.ret(&[]).unwrap();
    let m = module(
        "empty_unreach",
        vec![e.finish().unwrap(), u.finish().unwrap()],
    );
    out.push(Case {
        module: m,
        min: Arch::Sm70,
        expect: vec![".entry empty(".into()],
    });
}

/// Warp MMA, ldmatrix and stmatrix (issue 12 items 1-2).
fn warp_mma_cases(out: &mut Vec<Case>) {
    for (t, suffix) in [
        (Type::F32, "f32"),
        (Type::Vector(ScalarType::F32, 4), "v4.f32"),
        (Type::Vector(ScalarType::F16, 2), "v2.b16"),
        (Type::Vector(ScalarType::U32, 2), "v2.b32"),
        (Type::Vector(ScalarType::F64, 2), "v2.f64"),
        (Type::I64, "b64"),
    ] {
        for (lc, sc) in [
            (CacheOp::Cs, CacheOp::Cs),
            (CacheOp::Lu, CacheOp::Wt),
            (CacheOp::Cg, CacheOp::Cg),
            (CacheOp::Cv, CacheOp::Wb),
        ] {
            let name = format!("cached_{lc}_{sc}_{}", suffix.replace('.', "_"));
            let mut b = FunctionBuilder::kernel(&name, &[gptr(t.clone()), gptr(t.clone())]);
            let (p, q) = (b.param(0), b.param(1));
            let tid = b.thread_idx(Dim::X).unwrap();
            let pi = b.ptr_add(p, tid).unwrap();
            let qi = b.ptr_add(q, tid).unwrap();
            let x = b.load_cached(lc, pi).unwrap();
            b.store_cached(sc, qi, x).unwrap();
            b.ret(&[]).unwrap();
            out.push(Case {
                module: module(&name, vec![b.finish().unwrap()]),
                min: Arch::Sm70,
                expect: vec![
                    format!("ld.global.{lc}.{suffix}"),
                    format!("st.global.{sc}.{suffix}"),
                ],
            });
        }
    }
    for op in ApproxOp::ALL.iter().copied() {
        let name = format!("{op}_approx");
        let mut b = FunctionBuilder::kernel(&name, &[gptr(Type::F32)]);
        let p = b.param(0);
        let tid = b.thread_idx(Dim::X).unwrap();
        let q = b.ptr_add(p, tid).unwrap();
        let x = b.load(q).unwrap();
        let y = b.approx(op, x).unwrap();
        b.store(q, y).unwrap();
        b.ret(&[]).unwrap();
        out.push(Case {
            module: module(&name, vec![b.finish().unwrap()]),
            // tanh.approx: sm_75 with PTX 7.0, newer than sm_75's default 6.4.
            min: if op == ApproxOp::Tanh {
                Arch::Sm80
            } else {
                Arch::Sm70
            },
            expect: vec![op.ptx().to_string()],
        });
    }
    for elem in MmaElem::ALL.iter().copied() {
        for &acc in elem.accumulators() {
            let shape = elem.shape();
            let [ta, tb, tc] = elem.fragment_types(acc);
            let name = format!("mma_sync_{shape}_{elem}_{acc}");
            let mut b = FunctionBuilder::kernel(&name, &[gptr(ta), gptr(tb), gptr(tc)]);
            let (pa, pb, pc) = (b.param(0), b.param(1), b.param(2));
            let tid = b.thread_idx(Dim::X).unwrap();
            let qa = b.ptr_add(pa, tid).unwrap();
            let qb = b.ptr_add(pb, tid).unwrap();
            let qc = b.ptr_add(pc, tid).unwrap();
            let x = b.load(qa).unwrap();
            let y = b.load(qb).unwrap();
            let z = b.load(qc).unwrap();
            let r = b.mma_sync(shape, elem, x, y, z).unwrap();
            let r = b.mma_sync(shape, elem, x, y, r).unwrap();
            b.store(qc, r).unwrap();
            b.ret(&[]).unwrap();
            let ptx_acc = match acc {
                ScalarType::I32 => "s32",
                other => other.name(),
            };
            let fp8 = matches!(elem, MmaElem::E4m3 | MmaElem::E5m2);
            let mut module = module(&name, vec![b.finish().unwrap()]);
            if fp8 {
                module.ptx_version = Some(PtxVersion::new(8, 4));
            }
            out.push(Case {
                module,
                min: if fp8 { Arch::Sm89 } else { Arch::Sm80 },
                expect: vec![format!(
                    "mma.sync.aligned.{shape}.row.col.{ptx_acc}.{elem}.{elem}.{ptx_acc}"
                )],
            });
        }
    }
    for store in [false, true] {
        for num in [1u32, 2, 4] {
            for trans in [false, true] {
                let t = if trans { "_trans" } else { "" };
                let which = if store { "stmatrix" } else { "ldmatrix" };
                let name = format!("{which}_x{num}{t}");
                let regs = if num == 1 {
                    Type::U32
                } else {
                    Type::Vector(ScalarType::U32, num)
                };
                let mut b = FunctionBuilder::kernel(&name, &[gptr(Type::U16), gptr(regs)]);
                let (p, q) = (b.param(0), b.param(1));
                let sh = b.shared_alloc(Type::U16, 256).unwrap();
                let tid = b.thread_idx(Dim::X).unwrap();
                let eight = b.iconst(Type::U32, 8).unwrap();
                let row = b.mul(tid, eight).unwrap();
                let rp = b.ptr_add(sh, row).unwrap();
                let qt = b.ptr_add(q, tid).unwrap();
                if store {
                    let v = b.load(qt).unwrap();
                    b.stmatrix(num, trans, rp, v).unwrap();
                    b.barrier().unwrap();
                    let x = b.load(rp).unwrap();
                    b.store(p, x).unwrap();
                } else {
                    let x = b.load(p).unwrap();
                    b.store(rp, x).unwrap();
                    b.barrier().unwrap();
                    let v = b.ldmatrix(num, trans, rp).unwrap();
                    b.store(qt, v).unwrap();
                }
                b.ret(&[]).unwrap();
                let tr = if trans { ".trans" } else { "" };
                out.push(Case {
                    module: module(&name, vec![b.finish().unwrap()]),
                    // sm_75 has ldmatrix from PTX 6.5, newer than its default 6.4.
                    min: if store { Arch::Sm90 } else { Arch::Sm80 },
                    expect: vec![format!("{which}.sync.aligned.m8n8.x{num}{tr}.shared.b16")],
                });
            }
        }
    }
}

fn all_cases() -> Vec<Case> {
    let mut out = Vec::new();
    binary_cases(&mut out);
    unary_cases(&mut out);
    cmp_select_cases(&mut out);
    cast_cases(&mut out);
    memory_cases(&mut out);
    atomic_cases(&mut out);
    warp_cases(&mut out);
    mma_cases(&mut out);
    cp_async_cases(&mut out);
    warp_mma_cases(&mut out);
    control_cases(&mut out);
    edge_cases(&mut out);
    out
}

#[test]
fn corpus_compiles_and_assembles_on_every_applicable_arch() {
    let cases = all_cases();
    assert!(cases.len() >= 60, "corpus has only {} modules", cases.len());
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let runs = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                let r = std::panic::catch_unwind(|| check_case(case));
                match r {
                    Ok(n) => {
                        runs.fetch_add(n, Ordering::SeqCst);
                    }
                    Err(e) => {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{}: {msg}", case.module.name));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    assert!(runs.load(Ordering::SeqCst) >= cases.len());
}

/// Returns the number of (module, arch) pairs compiled and assembled.
fn check_case(case: &Case) -> usize {
    let m = &case.module;
    zyntax_hir::verify_module(m).unwrap_or_else(|e| panic!("verifier: {e}\n{}", print_module(m)));
    let mut n = 0;
    for arch in Arch::ALL {
        let gated_in = zyntax_hir::arch::check_arch(m, arch).is_ok();
        assert_eq!(
            gated_in,
            arch >= case.min,
            "gating for {arch} disagrees with the expected minimum {}",
            case.min
        );
        if !gated_in {
            assert!(zyntax_llvm::compile_ptx(m, &zyntax_llvm::Options::new(arch)).is_err());
            continue;
        }
        let ptx = compile_checked(m, arch);
        for e in &case.expect {
            assert!(
                ptx.contains(e.as_str()),
                "{arch}: expected `{e}` in PTX:\n{ptx}"
            );
        }
        n += 1;
    }
    n
}
