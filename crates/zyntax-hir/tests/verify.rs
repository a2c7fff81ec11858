//! Verifier tests: valid modules are accepted; for each rule, a minimal bad
//! module is rejected with the specific message at the right function, block
//! and instruction.

mod verify_support;

use verify_support::*;
use zyntax_hir::*;

#[test]
fn valid_modules_verify() {
    ok(&module(vec![saxpy()]));
    ok(&module_for(&[Arch::Sm70, Arch::Sm90a], vec![saxpy()]));
    ok(&module_for(&[Arch::Sm70], loop_and_call()));
    ok(&module(vec![host_fn()]));
    ok(&module_for(
        &[Arch::Sm70],
        vec![wmma_kernel(
            MmaShape::M16N16K16,
            ScalarType::F16,
            ScalarType::F32,
        )],
    ));
    ok(&module_for(
        &[Arch::Sm70],
        vec![wmma_kernel(
            MmaShape::M32N8K16,
            ScalarType::F16,
            ScalarType::F16,
        )],
    ));
    ok(&module_for(
        &[Arch::Sm80, Arch::Sm90],
        vec![wmma_kernel(
            MmaShape::M8N32K16,
            ScalarType::BF16,
            ScalarType::F32,
        )],
    ));
    ok(&module_for(
        &[Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90],
        vec![cp_async_kernel()],
    ));
}

#[test]
fn every_scalar_op_on_every_allowed_type_verifies() {
    for s in ScalarType::ALL {
        let t = Type::Scalar(s);
        let f = kernel_with(&[gptr(t.clone()), t.clone()], |b, p| {
            let x = b.load(p[0])?;
            let y = p[1];
            let mut ops: Vec<BinOp> = Vec::new();
            if s.is_int() || s.is_float() {
                ops.extend([
                    BinOp::Add,
                    BinOp::Sub,
                    BinOp::Mul,
                    BinOp::Div,
                    BinOp::Min,
                    BinOp::Max,
                ]);
            }
            if s.is_int() {
                ops.extend([BinOp::Rem, BinOp::Shl, BinOp::Shr]);
            }
            if s.is_int() || s.is_bool() {
                ops.extend([BinOp::And, BinOp::Or, BinOp::Xor]);
            }
            let mut acc = x;
            for op in ops {
                acc = b.binary(op, acc, y)?;
            }
            if s.is_float() {
                for u in UnOp::ALL
                    .iter()
                    .filter(|u| **u != UnOp::Not && !u.int_only())
                {
                    acc = b.unary(*u, acc)?;
                }
                acc = b.fma(acc, y, x)?;
            }
            if s.is_int() {
                for u in UnOp::ALL.iter().filter(|u| u.int_only()) {
                    acc = b.unary(*u, acc)?;
                }
            }
            if s.is_signed() {
                acc = b.unary(UnOp::Abs, acc)?;
            }
            if s.is_int() || s.is_bool() {
                acc = b.unary(UnOp::Not, acc)?;
            }
            let c = b.cmp(CmpOp::Eq, acc, y)?;
            let sel = b.select(c, acc, x)?;
            if !s.is_bool() {
                let _ = b.cmp(CmpOp::Lt, sel, y)?;
                let _ = b.cast(sel, Type::F32)?;
                let _ = b.cast(sel, Type::I64)?;
            } else {
                let _ = b.cast(sel, Type::U8)?;
            }
            b.store(p[0], sel)
        });
        ok(&module_for(&[Arch::Sm80], vec![f]));
    }
}

#[test]
fn gpu_collectives_verify() {
    let f = kernel_with(
        &[
            gptr(Type::U32),
            gptr(Type::F64),
            gptr(Type::F16),
            gptr(Type::I64),
        ],
        |b, p| {
            let mask = b.iconst(Type::U32, -1)?;
            let lane = b.lane_id()?;
            let v = b.load(p[1])?;
            for mode in ShflMode::ALL {
                for w in [1, 2, 4, 8, 16, 32] {
                    let _ = b.shfl(*mode, mask, v, lane, w)?;
                }
            }
            let t = b.bconst(true)?;
            let _ = b.vote(VoteMode::Ballot, mask, t)?;
            let _ = b.vote(VoteMode::Any, mask, t)?;
            let _ = b.vote(VoteMode::All, mask, t)?;
            let x = b.load(p[3])?;
            let _ = b.match_(MatchMode::Any, mask, x)?;
            let _ = b.match_(MatchMode::All, mask, lane)?;
            b.warp_sync(mask)?;
            b.fence(Scope::Block)?;
            b.fence(Scope::System)?;
            for op in [
                AtomicOp::Add,
                AtomicOp::Sub,
                AtomicOp::Min,
                AtomicOp::Max,
                AtomicOp::And,
                AtomicOp::Or,
                AtomicOp::Xor,
                AtomicOp::Exch,
                AtomicOp::Inc,
                AtomicOp::Dec,
            ] {
                let _ = b.atomic(op, Scope::Device, p[0], lane)?;
            }
            let _ = b.atomic(AtomicOp::Add, Scope::System, p[1], v)?;
            let _ = b.atomic(AtomicOp::Exch, Scope::Block, p[1], v)?;
            let h = b.fconst(Type::F16, 1.0)?;
            let _ = b.atomic(AtomicOp::Add, Scope::Device, p[2], h)?;
            let _ = b.atomic(AtomicOp::Max, Scope::Device, p[3], x)?;
            let _ = b.atomic_cas(Scope::Device, p[3], x, x)?;
            let g = b.ptr_cast(p[0], Type::ptr(AddrSpace::Generic, Type::U32))?;
            let _ = b.atomic_cas(Scope::Block, g, lane, lane)?;
            Ok(())
        },
    );
    ok(&module_for(&[Arch::Sm70, Arch::Sm80], vec![f]));
}

// ------------------------------------------------------------------ structure

#[test]
fn empty_layout_is_rejected() {
    let f = Function::new("k", FunctionKind::Device, vec![]);
    let d = err(&module(vec![f]), "no blocks");
    assert_eq!(d.function, "k");
    assert_eq!(d.block, None);
}

#[test]
fn layout_with_missing_and_duplicate_blocks() {
    let mut f = saxpy();
    f.layout.push(BlockId(99));
    let d = err(&module(vec![f]), "names block99, which does not exist");
    assert_eq!(d.function, "saxpy");

    let mut f = saxpy();
    f.layout.push(BlockId(1));
    let d = err(&module(vec![f]), "appears more than once in the layout");
    assert_eq!(d.block, Some(BlockId(1)));
}

#[test]
fn empty_block_and_missing_terminator() {
    // saxpy: block0 (entry, br), block1 (then: ... store, jump), block2 (return).
    let mut f = saxpy();
    f.blocks[2].insts.clear();
    let d = err(&module(vec![f]), "block2 is empty");
    assert_eq!((d.block, d.inst), (Some(BlockId(2)), None));

    let mut f = saxpy();
    f.blocks[1].insts.pop();
    let store = *f.blocks[1].insts.last().unwrap();
    let d = err(
        &module(vec![f]),
        "block1 ends with `store`, which is not a terminator",
    );
    assert_eq!((d.block, d.inst), (Some(BlockId(1)), Some(store)));

    // One instruction placed in two blocks.
    let mut f = saxpy();
    let ret = f.blocks[2].insts[0];
    f.blocks[1].insts.insert(0, ret);
    let d = err(&module(vec![f]), "placed more than once");
    assert_eq!(d.inst, Some(ret));
}

#[test]
fn terminator_in_the_middle() {
    // The builder refuses to append after a terminator, so splice one in.
    let mut f = kernel_with(&[], |b, _| b.barrier());
    let ret = f.blocks[0].insts[1];
    let bar = f.blocks[0].insts[0];
    f.blocks[0].insts = vec![ret, bar];
    let m = module(vec![f]);
    let d = err(&m, "terminator `return` in the middle of block0");
    assert_eq!(d.inst, Some(ret));
    let d = err(&m, "block0 ends with `barrier`");
    assert_eq!(d.inst, Some(bar));
}

#[test]
fn value_definitions_must_match() {
    let mut f = saxpy();
    f.values[4].def = ValueDef::Param(BlockId(0), 7);
    let d = err(
        &module(vec![f]),
        "v4 is result 0 of inst0 but its definition says parameter 7 of block0",
    );
    assert_eq!(d.inst, Some(InstId(0)));

    let mut f = saxpy();
    f.values[0].def = ValueDef::Result(InstId(3), 0);
    let d = err(
        &module(vec![f]),
        "v0 is parameter 0 of block0 but its definition says result 0 of inst3",
    );
    assert_eq!((d.block, d.inst), (Some(BlockId(0)), None));

    // One value as the result of two instructions.
    let mut f = saxpy();
    f.insts[1].results = vec![ValueId(4)];
    err(&module(vec![f]), "v4 is defined more than once");
}

#[test]
fn garbage_ids_are_reported_not_panicked_on() {
    let mut f = saxpy();
    f.insts[2].args = vec![ValueId(1000), ValueId(u32::MAX)];
    let d = err(&module(vec![f]), "operand v1000 does not exist");
    assert_eq!(d.inst, Some(InstId(2)));

    let mut f = saxpy();
    f.blocks[0].insts.push(InstId(5000));
    err(&module(vec![f]), "holds inst5000, which does not exist");

    let mut f = saxpy();
    f.insts[0].results = vec![ValueId(77)];
    err(&module(vec![f]), "result 0 is v77, which does not exist");

    let mut f = saxpy();
    f.blocks[0].params.push(ValueId(4242));
    err(
        &module(vec![f]),
        "parameter 4 is v4242, which does not exist",
    );
}

#[test]
fn branch_targets_are_checked() {
    let base = saxpy();
    let (bb, br) = find_inst(&base, "br");

    let mut f = base.clone();
    f.insts[br.index()].targets[0].block = BlockId(40);
    let d = err(&module(vec![f]), "target block40 does not exist");
    assert_eq!((d.block, d.inst), (Some(bb), Some(br)));

    let mut f = base.clone();
    f.insts[br.index()].targets[0].block = BlockId(0);
    err(
        &module(vec![f]),
        "is the entry block, which cannot be branched to",
    );

    let mut f = base.clone();
    f.blocks.push(BlockData::default());
    f.insts[br.index()].targets[0].block = BlockId(3);
    err(&module(vec![f]), "target block3 is not in the layout");

    let mut f = base.clone();
    f.insts[br.index()].targets[0].args.push(ValueId(0));
    err(&module(vec![f]), "takes 0 arguments, got 1");

    let mut f = base.clone();
    f.insts[br.index()].targets.pop();
    err(&module(vec![f]), "`br` takes 1 operand, 2 targets");

    let mut f = base.clone();
    f.insts[br.index()].args = vec![ValueId(0)];
    err(
        &module(vec![f]),
        "the branch condition has type ptr<global, f32>, expected bool",
    );

    let mut f = base;
    let add = find_inst(&f, "add").1;
    f.insts[add.index()].targets.push(BlockCall {
        block: BlockId(1),
        args: vec![],
    });
    err(&module(vec![f]), "only jump and br have branch targets");
}

#[test]
fn block_argument_types_must_match() {
    let mut b = FunctionBuilder::device("d", &[Type::I32, Type::F32], &[Type::I32]);
    let (x, y) = (b.param(0), b.param(1));
    let next = b.create_block(&[Type::I32]);
    b.jump(next, &[y]).unwrap();
    b.switch_to(next);
    let p = b.block_params(next).unwrap()[0];
    b.ret(&[p]).unwrap();
    let _ = x;
    let f = b.finish().unwrap();
    let d = err(
        &module(vec![f.clone()]),
        "argument 0 to block1 (v1) has type f32, but the parameter v2 has type i32",
    );
    assert_at(&d, &f, "jump");
}

#[test]
fn returns_must_match() {
    let mut b = FunctionBuilder::device("d", &[Type::I32], &[Type::F32]);
    let x = b.param(0);
    b.ret(&[x]).unwrap();
    let f = b.finish().unwrap();
    let d = err(
        &module(vec![f.clone()]),
        "returned value 0 has type i32, expected f32",
    );
    assert_at(&d, &f, "return");

    let mut b = FunctionBuilder::device("d", &[Type::I32], &[Type::I32]);
    b.ret(&[]).unwrap();
    err(
        &module(vec![b.finish().unwrap()]),
        "return gives 0 values, but @d returns 1",
    );

    let mut b = FunctionBuilder::new(
        "k",
        FunctionKind::Kernel(KernelInfo::default()),
        &[Type::I32],
        &[Type::I32],
    );
    let x = b.param(0);
    b.ret(&[x]).unwrap();
    let d = err(
        &module(vec![b.finish().unwrap()]),
        "a kernel returns nothing",
    );
    assert_eq!((d.block, d.inst), (None, None));
}

// ------------------------------------------------------------------ SSA

#[test]
fn use_before_def_in_one_block() {
    let mut f = kernel_storing(Type::I32, |b| {
        let one = b.iconst(Type::I32, 1)?;
        b.add(one, one)
    });
    // Swap the const and the add.
    f.blocks[0].insts.swap(0, 1);
    let d = err(&module(vec![f.clone()]), "v1 is used before it is defined");
    assert_at(&d, &f, "add");
}

#[test]
fn non_dominating_definition() {
    // A value defined in the then-branch, used after the if.
    let mut b = FunctionBuilder::kernel("k", &[gptr(Type::I32), Type::BOOL]);
    let (out, c) = (b.param(0), b.param(1));
    let fr = b.begin_if(c, &[]).unwrap();
    let v = b.iconst(Type::I32, 7).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.store(out, v).unwrap();
    b.ret(&[]).unwrap();
    let f = b.finish().unwrap();
    let d = err(
        &module(vec![f.clone()]),
        "the definition of v2 in block1 does not dominate this use",
    );
    assert_at(&d, &f, "store");
}

#[test]
fn undefined_value_is_rejected() {
    // v9 exists in the arena but is defined by an instruction in no block.
    let mut f = kernel_storing(Type::I32, |b| b.iconst(Type::I32, 3));
    let c = f.blocks[0].insts.remove(0);
    let _ = c;
    err(
        &module(vec![f]),
        "uses v1, which no placed block parameter or instruction defines",
    );
}

#[test]
fn unreachable_blocks_are_checked() {
    // An if whose branches both return leaves an unreachable merge block.
    let mut b = FunctionBuilder::device("d", &[Type::BOOL, Type::I32], &[Type::I32]);
    let (c, x) = (b.param(0), b.param(1));
    let mut fr = b.begin_if(c, &[]).unwrap();
    let y = b.add(x, x).unwrap();
    b.ret(&[y]).unwrap();
    b.begin_else(&mut fr, &[]).unwrap();
    b.ret(&[x]).unwrap();
    b.end_if(fr, &[]).unwrap();
    // Uses of entry values are fine in the unreachable block ...
    let z = b.mul(x, x).unwrap();
    b.ret(&[z]).unwrap();
    let f = b.finish().unwrap();
    ok(&module(vec![f]));

    // ... but not values of other blocks, and it is still type-checked.
    let mut b = FunctionBuilder::device("d", &[Type::BOOL, Type::I32], &[Type::I32]);
    let (c, x) = (b.param(0), b.param(1));
    let mut fr = b.begin_if(c, &[]).unwrap();
    let y = b.add(x, x).unwrap();
    b.ret(&[y]).unwrap();
    b.begin_else(&mut fr, &[]).unwrap();
    b.ret(&[x]).unwrap();
    b.end_if(fr, &[]).unwrap();
    let z = b.mul(y, c).unwrap();
    b.ret(&[z]).unwrap();
    let f = b.finish().unwrap();
    let m = module(vec![f.clone()]);
    let d = err(&m, "is unreachable from the entry, so it may only use values defined in itself or the entry block");
    assert_at(&d, &f, "mul");
    err(
        &m,
        "`mul` operands must have the same type, got i32 and bool",
    );
}

// ------------------------------------------------------------------ scalar typing

#[test]
fn binary_typing() {
    let f = kernel_storing(Type::I32, |b| {
        let x = b.iconst(Type::I32, 1)?;
        let y = b.iconst(Type::U32, 1)?;
        b.add(x, y)
    });
    bad_inst(
        f,
        "add",
        "`add` operands must have the same type, got i32 and u32",
    );

    for (op, t, want) in [
        (
            BinOp::And,
            Type::F32,
            "`and` takes integers or bool, got f32",
        ),
        (BinOp::Shl, Type::F64, "`shl` takes integers, got f64"),
        (BinOp::Rem, Type::F32, "`rem` takes integers, got f32"),
        (
            BinOp::Add,
            Type::BOOL,
            "`add` takes integers or floats, got bool",
        ),
    ] {
        let f = kernel_with(std::slice::from_ref(&t), |b, p| {
            b.binary(op, p[0], p[0]).map(|_| ())
        });
        bad_inst(f, op.name(), want);
    }

    let v4 = Type::Vector(ScalarType::F32, 4);
    let f = kernel_with(&[v4], |b, p| b.add(p[0], p[0]).map(|_| ()));
    bad_inst(f, "add", "`add` takes scalars, got vec<f32, 4>");
}

#[test]
fn unary_and_fma_typing() {
    for (op, t, want) in [
        (UnOp::Sqrt, Type::I32, "`sqrt` takes a float, got i32"),
        (
            UnOp::Abs,
            Type::U32,
            "`abs` takes a signed integer or a float, got u32",
        ),
        (
            UnOp::Not,
            Type::F32,
            "`not` takes an integer or bool, got f32",
        ),
        (
            UnOp::Neg,
            Type::BOOL,
            "`neg` takes an integer or a float, got bool",
        ),
    ] {
        let f = kernel_with(&[t], |b, p| b.unary(op, p[0]).map(|_| ()));
        bad_inst(f, op.name(), want);
    }
    let f = kernel_with(&[Type::I32], |b, p| b.fma(p[0], p[0], p[0]).map(|_| ()));
    bad_inst(f, "fma", "`fma` takes floats, got i32");
    let f = kernel_with(&[Type::F32, Type::F64], |b, p| {
        b.fma(p[0], p[1], p[0]).map(|_| ())
    });
    bad_inst(f, "fma", "operand 2 has type f64, expected f32");
}

#[test]
fn cmp_select_cast_bitcast_typing() {
    let f = kernel_with(&[Type::I32, Type::I64], |b, p| {
        b.cmp(CmpOp::Lt, p[0], p[1]).map(|_| ())
    });
    bad_inst(
        f,
        "cmp.lt",
        "operands must have the same type, got i32 and i64",
    );
    let f = kernel_with(&[Type::BOOL], |b, p| {
        b.cmp(CmpOp::Lt, p[0], p[0]).map(|_| ())
    });
    bad_inst(f, "cmp.lt", "bool and pointers with eq/ne only");
    let f = kernel_with(&[Type::I32], |b, p| {
        b.push(Op::Cmp(CmpOp::Eq), &[p[0], p[0]], &[Type::I32], vec![])
            .map(|_| ())
    });
    bad_inst(f, "cmp.eq", "the result has type i32, expected bool");

    let f = kernel_with(&[Type::I32], |b, p| b.select(p[0], p[0], p[0]).map(|_| ()));
    bad_inst(f, "select", "the condition has type i32, expected bool");

    let f = kernel_with(&[Type::I32], |b, p| b.cast(p[0], Type::BOOL).map(|_| ()));
    bad_inst(f, "cast", "`cast` to bool is not defined");
    let f = kernel_with(&[gptr(Type::I32)], |b, p| {
        b.cast(p[0], Type::U64).map(|_| ())
    });
    bad_inst(f, "cast", "use ptr_cast for pointers");

    let f = kernel_with(&[Type::I32], |b, p| b.bitcast(p[0], Type::F64).map(|_| ()));
    bad_inst(
        f,
        "bitcast",
        "`bitcast` needs types of one size, got i32 (4 bytes) to f64 (8 bytes)",
    );
    let f = kernel_with(&[Type::U64], |b, p| {
        b.bitcast(p[0], Type::Vector(ScalarType::F16, 4))
            .map(|_| ())
    });
    ok(&module(vec![f]));
}

#[test]
fn vector_lanes_and_types() {
    let v4 = Type::Vector(ScalarType::F32, 4);
    let f = kernel_with(std::slice::from_ref(&v4), |b, p| {
        b.extract(p[0], 4).map(|_| ())
    });
    bad_inst(f, "extract", "lane 4 is out of range for vec<f32, 4>");
    let f = kernel_with(&[v4.clone(), Type::F64], |b, p| {
        b.insert(p[0], p[1], 1).map(|_| ())
    });
    bad_inst(f, "insert", "the inserted value has type f64, expected f32");
    let f = kernel_with(&[v4, Type::F32], |b, p| {
        let v = b.insert(p[0], p[1], 3)?;
        b.extract(v, 0).map(|_| ())
    });
    ok(&module(vec![f]));

    let f = kernel_with(&[Type::Vector(ScalarType::F32, 3)], |_, _| Ok(()));
    let d = err(
        &module(vec![f]),
        "vector vec<f32, 3> must have 2, 4 or 8 lanes",
    );
    assert_eq!(d.block, Some(BlockId(0)));
    let f = kernel_with(&[gptr(Type::Vector(ScalarType::Bool, 2))], |_, _| Ok(()));
    err(&module(vec![f]), "vectors of bool are not supported");
}

#[test]
fn constants_fit_their_type() {
    let f = kernel_with(&[], |b, _| {
        b.push(Op::Const(ConstValue::Int(300)), &[], &[Type::U8], vec![])
            .map(|_| ())
    });
    bad_inst(f, "const", "integer constant 300 does not fit u8");
    let f = kernel_with(&[], |b, _| {
        b.push(Op::Const(ConstValue::Int(-1)), &[], &[Type::U32], vec![])
            .map(|_| ())
    });
    bad_inst(f, "const", "does not fit u32");
    let f = kernel_with(&[], |b, _| {
        b.push(Op::Const(ConstValue::Int(1)), &[], &[Type::F32], vec![])
            .map(|_| ())
    });
    bad_inst(f, "const", "integer constant 1 for non-integer type f32");
    let f = kernel_with(&[], |b, _| b.fconst(Type::F16, 1e6).map(|_| ()));
    bad_inst(f, "const", "float constant 1000000 overflows f16");
    let f = kernel_with(&[], |b, _| {
        b.push(Op::Const(ConstValue::Bool(true)), &[], &[Type::I32], vec![])
            .map(|_| ())
    });
    bad_inst(f, "const", "bool constant for type i32");
    let f = kernel_with(&[], |b, _| {
        b.push(
            Op::Const(ConstValue::Int(1)),
            &[],
            &[gptr(Type::I32)],
            vec![],
        )
        .map(|_| ())
    });
    bad_inst(f, "const", "constants are scalars");
    // Extremes that fit, inf and nan.
    let f = kernel_with(&[], |b, _| {
        b.iconst(Type::I64, i64::MIN)?;
        b.iconst(Type::U64, -1)?;
        b.iconst(Type::U8, 255)?;
        b.fconst(Type::F16, 65504.0)?;
        b.fconst(Type::F32, f64::INFINITY)?;
        b.fconst(Type::BF16, f64::NAN)?;
        b.fconst(Type::F32, 0.1).map(|_| ())
    });
    ok(&module_for(&[Arch::Sm80], vec![f]));
}

// ------------------------------------------------------------------ memory

#[test]
fn load_store_typing() {
    let f = kernel_with(&[gptr(Type::array(Type::F32, 4))], |b, p| {
        b.load(p[0]).map(|_| ())
    });
    bad_inst(f, "load", "cannot load a whole array");
    let f = kernel_with(&[gptr(Type::F32), Type::F64], |b, p| b.store(p[0], p[1]));
    bad_inst(
        f,
        "store",
        "stored value has type f64, but the pointer points to f32",
    );
    let f = kernel_with(
        &[Type::ptr(AddrSpace::Constant, Type::F32), Type::F32],
        |b, p| b.store(p[0], p[1]),
    );
    bad_inst(f, "store", "constant memory is read-only");
    let f = kernel_with(&[Type::F32], |b, p| {
        b.push(Op::Load, &[p[0]], &[Type::F32], vec![]).map(|_| ())
    });
    bad_inst(f, "load", "`load` needs a pointer, got f32");
    let f = kernel_with(&[gptr(Type::F32), Type::F32], |b, p| {
        b.ptr_add(p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "ptr_add", "`ptr_add` index must be an integer, got f32");
}

#[test]
fn ptr_cast_rules() {
    let sh = Type::ptr(AddrSpace::Shared, Type::F32);
    let f = kernel_with(&[], |b, _| {
        let s = b.shared_alloc(Type::F32, 4)?;
        b.ptr_cast(s, gptr(Type::F32)).map(|_| ())
    });
    bad_inst(
        f,
        "ptr_cast",
        "address spaces change only to or from generic",
    );
    let f = kernel_with(&[], |b, _| {
        let s = b.shared_alloc(Type::F32, 4)?;
        let g = b.ptr_cast(s, Type::ptr(AddrSpace::Generic, Type::F32))?;
        let s2 = b.ptr_cast(g, sh.clone())?;
        b.ptr_cast(s2, Type::ptr(AddrSpace::Shared, Type::U32))
            .map(|_| ())
    });
    ok(&module(vec![f]));
    let f = kernel_with(&[gptr(Type::F32)], |b, p| {
        b.ptr_cast(p[0], Type::U64).map(|_| ())
    });
    bad_inst(f, "ptr_cast", "`ptr_cast` converts pointers");
}

#[test]
fn allocation_rules() {
    let f = kernel_with(&[], |b, _| b.alloca(Type::F32, 0).map(|_| ()));
    bad_inst(f, "alloca", "alloca needs a count of at least 1");
    let f = kernel_with(&[], |b, _| b.alloca(Type::F64, 1 << 20).map(|_| ()));
    bad_inst(f, "alloca", "exceeds 524288 bytes");
    let f = kernel_with(&[], |b, _| b.shared_alloc(Type::F32, 13_000).map(|_| ()));
    bad_inst(f, "shared_alloc", "exceeds 49152 bytes");
    let f = kernel_with(&[], |b, _| {
        b.shared_alloc(Type::array(Type::F32, 0), 1).map(|_| ())
    });
    bad_inst(f, "shared_alloc", "must have at least one element");
    let f = kernel_with(&[], |b, _| {
        b.push(
            Op::Alloca {
                elem: Type::F32,
                count: 2,
            },
            &[],
            &[Type::ptr(AddrSpace::Generic, Type::F32)],
            vec![],
        )
        .map(|_| ())
    });
    bad_inst(
        f,
        "alloca",
        "the result has type ptr<generic, f32>, expected ptr<local, f32>",
    );
    let f = kernel_with(&[], |b, _| {
        b.dyn_shared(Type::array(Type::F32, u64::MAX)).map(|_| ())
    });
    bad_inst(f, "dyn_shared", "larger than 2^40 bytes");

    // Static shared memory adds up across the kernel and its callees.
    let mut d = FunctionBuilder::device("dev", &[], &[]);
    d.shared_alloc(Type::F32, 8192).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let k = kernel_with(&[], |b, _| {
        b.shared_alloc(Type::F32, 8192)?;
        b.call("dev", &[], &[]).map(|_| ())
    });
    let d = err(
        &module(vec![dev, k]),
        "static shared memory of this kernel and the device functions it calls is 65536 bytes",
    );
    assert_eq!((d.function.as_str(), d.block), ("k", None));
}
