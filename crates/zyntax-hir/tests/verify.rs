//! Verifier tests: valid modules are accepted; for each rule, a minimal bad
//! module is rejected with the specific message at the right function, block
//! and instruction.

use zyntax_hir::arch::{self, check_arch};
use zyntax_hir::*;

// ------------------------------------------------------------------ helpers

fn gptr(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

fn module(fs: Vec<Function>) -> Module {
    let mut m = Module::new("t");
    m.functions = fs;
    m
}

fn module_for(targets: &[Arch], fs: Vec<Function>) -> Module {
    let mut m = module(fs);
    m.targets = targets.to_vec();
    m
}

fn ok(m: &Module) {
    if let Err(e) = verify_module(m) {
        panic!(
            "expected the module to verify, got: {e}\n{}",
            print_module(m)
        );
    }
}

/// The diagnostic whose message contains `fragment`; fails listing all otherwise.
fn err(m: &Module, fragment: &str) -> Diagnostic {
    match verify_module(m) {
        Ok(()) => panic!(
            "expected an error containing {fragment:?}, but the module verified:\n{}",
            print_module(m)
        ),
        Err(e) => {
            // Display of every error must work too.
            let _ = e.to_string();
            match e.diagnostics.iter().find(|d| d.message.contains(fragment)) {
                Some(d) => d.clone(),
                None => panic!("no error contains {fragment:?}; got:\n{e}"),
            }
        }
    }
}

/// A kernel `k(out: ptr<global, T>)` whose body `body` computes a value of
/// type T that is stored to `out`.
fn kernel_storing(
    t: Type,
    body: impl FnOnce(&mut FunctionBuilder) -> BuildResult<ValueId>,
) -> Function {
    let mut b = FunctionBuilder::kernel("k", &[gptr(t)]);
    let out = b.param(0);
    let v = body(&mut b).unwrap();
    b.store(out, v).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// A kernel with the given params whose body adds instructions; returns.
fn kernel_with(
    params: &[Type],
    body: impl FnOnce(&mut FunctionBuilder, &[ValueId]) -> BuildResult<()>,
) -> Function {
    let mut b = FunctionBuilder::kernel("k", params);
    let ps = b.params();
    body(&mut b, &ps).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// Where the (single) instruction of mnemonic `mn` sits.
fn find_inst(f: &Function, mn: &str) -> (BlockId, InstId) {
    f.insts_in_order()
        .find(|(_, i)| f.inst(*i).op.mnemonic() == mn)
        .unwrap_or_else(|| panic!("no `{mn}` in\n{f}"))
}

fn assert_at(d: &Diagnostic, f: &Function, mn: &str) {
    let (b, i) = find_inst(f, mn);
    assert_eq!(d.function, f.name, "{d}");
    assert_eq!(d.block, Some(b), "{d}");
    assert_eq!(d.inst, Some(i), "{d}");
    assert_eq!(
        d.inst_text.as_deref(),
        Some(print_inst(f, i).as_str()),
        "{d}"
    );
}

/// Build a kernel, then check the error names the instruction `mn`.
fn bad_inst(f: Function, mn: &str, fragment: &str) -> Diagnostic {
    let m = module_for(&[Arch::Sm90], vec![f.clone()]);
    let d = err(&m, fragment);
    assert_at(&d, &f, mn);
    d
}

// ------------------------------------------------------------------ valid modules

fn saxpy() -> Function {
    let f32p = gptr(Type::F32);
    let mut b = FunctionBuilder::kernel("saxpy", &[f32p.clone(), f32p, Type::F32, Type::U32]);
    let (x, y, a, n) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let bdim = b.block_dim(Dim::X).unwrap();
    let base = b.mul(bid, bdim).unwrap();
    let i = b.add(base, tid).unwrap();
    let inb = b.cmp(CmpOp::Lt, i, n).unwrap();
    let fr = b.begin_if(inb, &[]).unwrap();
    let px = b.ptr_add(x, i).unwrap();
    let py = b.ptr_add(y, i).unwrap();
    let vx = b.load(px).unwrap();
    let vy = b.load(py).unwrap();
    let r = b.fma(a, vx, vy).unwrap();
    b.store(py, r).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// A device function with a loop carrying a sum, an if/else yielding a value,
/// called from a kernel that uses shared memory and a barrier.
fn loop_and_call() -> Vec<Function> {
    let mut d = FunctionBuilder::device("sum_to", &[Type::I32], &[Type::I32]);
    let n = d.param(0);
    let zero = d.iconst(Type::I32, 0).unwrap();
    let one = d.iconst(Type::I32, 1).unwrap();
    let fr = d.begin_for(zero, n, one, &[zero]).unwrap();
    let s = d.add(fr.carried[0], fr.iv).unwrap();
    let iv = fr.iv;
    let out = d.end_for(fr, &[s]).unwrap();
    let neg = d.cmp(CmpOp::Lt, out[0], zero).unwrap();
    let _ = iv;
    let mut ifr = d.begin_if(neg, &[Type::I32]).unwrap();
    let flipped = d.unary(UnOp::Neg, out[0]).unwrap();
    d.begin_else(&mut ifr, &[flipped]).unwrap();
    let merged = d.end_if(ifr, &[out[0]]).unwrap();
    d.ret(&merged).unwrap();
    let dev = d.finish().unwrap();

    let mut k = FunctionBuilder::kernel("k", &[gptr(Type::I32)]);
    let out = k.param(0);
    let sh = k.shared_alloc(Type::I32, 256).unwrap();
    let tid = k.thread_idx(Dim::X).unwrap();
    let ti = k.cast(tid, Type::I32).unwrap();
    let r = k.call("sum_to", &[ti], &[Type::I32]).unwrap()[0];
    let p = k.ptr_add(sh, tid).unwrap();
    k.store(p, r).unwrap();
    k.barrier().unwrap();
    let v = k.load(p).unwrap();
    let q = k.ptr_add(out, tid).unwrap();
    k.store(q, v).unwrap();
    k.ret(&[]).unwrap();
    vec![dev, k.finish().unwrap()]
}

fn host_fn() -> Function {
    let mut h = FunctionBuilder::host(
        "hsum",
        &[Type::ptr(AddrSpace::Generic, Type::F64), Type::U64],
        &[Type::F64],
    );
    let (p, n) = (h.param(0), h.param(1));
    let zero = h.iconst(Type::U64, 0).unwrap();
    let one = h.iconst(Type::U64, 1).unwrap();
    let acc0 = h.fconst(Type::F64, 0.0).unwrap();
    let fr = h.begin_for(zero, n, one, &[acc0]).unwrap();
    let q = h.ptr_add(p, fr.iv).unwrap();
    let x = h.load(q).unwrap();
    let s = h.binary(BinOp::Add, fr.carried[0], x).unwrap();
    let out = h.end_for(fr, &[s]).unwrap();
    h.ret(&out).unwrap();
    h.finish().unwrap()
}

fn f16_frag(kind: FragKind, shape: MmaShape, elem: ScalarType, layout: Option<Layout>) -> FragType {
    frag_type(kind, shape, elem, layout)
}

/// A full wmma tile: load A (row), B (col), C (fill), mma, store.
fn wmma_kernel(shape: MmaShape, inp: ScalarType, acc: ScalarType) -> Function {
    let a_t = f16_frag(FragKind::A, shape, inp, Some(Layout::Row));
    let b_t = f16_frag(FragKind::B, shape, inp, Some(Layout::Col));
    let c_t = f16_frag(FragKind::Acc, shape, acc, None);
    let mut k = FunctionBuilder::kernel(
        "wmma",
        &[
            gptr(Type::Scalar(inp)),
            gptr(Type::Scalar(inp)),
            gptr(Type::Scalar(acc)),
        ],
    );
    let (pa, pb, pc) = (k.param(0), k.param(1), k.param(2));
    let ldm = k.iconst(Type::U32, 16).unwrap();
    let fa = k.mma_load(a_t, Layout::Row, pa, ldm).unwrap();
    let fb = k.mma_load(b_t, Layout::Col, pb, ldm).unwrap();
    let zero = if acc == ScalarType::F32 {
        k.fconst(Type::F32, 0.0).unwrap()
    } else {
        k.fconst(Type::F16, 0.0).unwrap()
    };
    let fc = k.mma_fill(c_t, zero).unwrap();
    let fd = k.mma(fa, fb, fc).unwrap();
    k.mma_store(Layout::Row, pc, fd, ldm).unwrap();
    k.ret(&[]).unwrap();
    k.finish().unwrap()
}

fn cp_async_kernel() -> Function {
    kernel_with(&[gptr(Type::F32)], |b, p| {
        let sh = b.shared_alloc(Type::F32, 128)?;
        let tid = b.thread_idx(Dim::X)?;
        let four = b.iconst(Type::U32, 4)?;
        let i = b.mul(tid, four)?;
        let dst = b.ptr_add(sh, i)?;
        let src = b.ptr_add(p[0], i)?;
        b.cp_async(16, CacheHint::Cg, dst, src)?;
        b.cp_async(4, CacheHint::Ca, dst, src)?;
        b.cp_async_commit()?;
        b.cp_async_wait(0)?;
        b.barrier()
    })
}

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

// ------------------------------------------------------------------ GPU rules

#[test]
fn gpu_instructions_not_in_host_functions() {
    let mut h = FunctionBuilder::host("h", &[], &[Type::U32]);
    let t = h.thread_idx(Dim::X).unwrap();
    h.ret(&[t]).unwrap();
    let f = h.finish().unwrap();
    let d = err(
        &module(vec![f.clone()]),
        "GPU instruction `thread_idx.x` in host function @h",
    );
    assert_at(&d, &f, "thread_idx.x");

    let mut h = FunctionBuilder::host("h", &[], &[]);
    h.barrier().unwrap();
    h.ret(&[]).unwrap();
    err(
        &module(vec![h.finish().unwrap()]),
        "GPU instruction `barrier`",
    );
}

#[test]
fn atomic_rules() {
    let lp = Type::ptr(AddrSpace::Local, Type::U32);
    let f = kernel_with(&[lp, Type::U32], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    bad_inst(
        f,
        "atomic.add.device",
        "pointer to global, shared or generic memory, got ptr<local, u32>",
    );
    let f = kernel_with(&[gptr(Type::U32), Type::I32], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    bad_inst(
        f,
        "atomic.add.device",
        "atomic value has type i32, but the pointer points to u32",
    );
    for (op, t, want) in [
        (
            AtomicOp::Min,
            Type::F16,
            "atomic.min works on i32, u32, i64, u64, f32 or f64, got f16",
        ),
        (AtomicOp::Inc, Type::I32, "atomic.inc works on u32, got i32"),
        (
            AtomicOp::And,
            Type::U16,
            "atomic.and works on i32, u32, i64 or u64, got u16",
        ),
        (
            AtomicOp::Add,
            Type::U8,
            "atomic.add works on i32, u32, i64, u64, f16, bf16, f32, f64, vec<f16, 2> or vec<bf16, 2>, got u8",
        ),
        (
            AtomicOp::Exch,
            Type::F16,
            "atomic.exch works on i32, u32, i64, u64, f32 or f64, got f16",
        ),
        (
            AtomicOp::Sub,
            Type::F32,
            "atomic.sub works on i32, u32, i64 or u64, got f32",
        ),
    ] {
        let f = kernel_with(&[gptr(t.clone()), t], |b, p| {
            b.atomic(op, Scope::Block, p[0], p[1]).map(|_| ())
        });
        bad_inst(f, &format!("atomic.{op}.block"), want);
    }
    let f = kernel_with(&[gptr(Type::F32), Type::F32], |b, p| {
        b.atomic_cas(Scope::Device, p[0], p[1], p[1]).map(|_| ())
    });
    bad_inst(
        f,
        "atomic.cas.device",
        "atomic.cas works on i32, u32, i64 or u64, got f32",
    );
    let f = kernel_with(&[gptr(Type::U32), Type::U32, Type::I32], |b, p| {
        b.atomic_cas(Scope::Device, p[0], p[1], p[2]).map(|_| ())
    });
    bad_inst(
        f,
        "atomic.cas.device",
        "the desired value has type i32, expected u32",
    );
}

#[test]
fn warp_collective_rules() {
    let f = kernel_with(&[Type::U32, Type::F32], |b, p| {
        b.shfl(ShflMode::Down, p[0], p[1], p[0], 3).map(|_| ())
    });
    bad_inst(
        f,
        "shfl.down",
        "shuffle width 3 must be a power of two in 1..=32",
    );
    let f = kernel_with(&[Type::U32, Type::F32], |b, p| {
        b.shfl(ShflMode::Idx, p[0], p[1], p[0], 64).map(|_| ())
    });
    bad_inst(f, "shfl.idx", "shuffle width 64");
    let f = kernel_with(&[Type::U32, Type::F16], |b, p| {
        b.shfl(ShflMode::Xor, p[0], p[1], p[0], 32).map(|_| ())
    });
    bad_inst(
        f,
        "shfl.xor",
        "shuffled value must be i32, u32, f32, i64, u64 or f64, got f16",
    );
    let f = kernel_with(&[Type::I32, Type::F32], |b, p| {
        b.shfl(ShflMode::Up, p[0], p[1], p[0], 32).map(|_| ())
    });
    bad_inst(f, "shfl.up", "the mask must be u32, got i32");
    let f = kernel_with(&[Type::U32, Type::U32], |b, p| {
        b.vote(VoteMode::Any, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "vote.any", "the predicate has type u32, expected bool");
    let f = kernel_with(&[Type::U32, Type::F32], |b, p| {
        b.match_(MatchMode::Any, p[0], p[1]).map(|_| ())
    });
    bad_inst(
        f,
        "match.any",
        "matched value must be i32, u32, i64 or u64, got f32",
    );
    let f = kernel_with(&[Type::U64], |b, p| b.warp_sync(p[0]));
    bad_inst(f, "warp_sync", "the mask must be u32, got u64");
}

#[test]
fn mma_rules() {
    let s = MmaShape::M16N16K16;
    let a_row = frag_type(FragKind::A, s, ScalarType::F16, Some(Layout::Row));
    let b_col = frag_type(FragKind::B, s, ScalarType::F16, Some(Layout::Col));
    let acc16 = frag_type(FragKind::Acc, s, ScalarType::F16, None);
    let acc32 = frag_type(FragKind::Acc, s, ScalarType::F32, None);
    let hp = gptr(Type::F16);

    let f = kernel_with(&[hp.clone(), Type::U32], |b, p| {
        b.mma_load(a_row, Layout::Col, p[0], p[1]).map(|_| ())
    });
    bad_inst(
        f,
        "mma.load.col",
        "A/B fragments load with their own layout (row)",
    );
    let f = kernel_with(&[gptr(Type::F32), Type::U32], |b, p| {
        b.mma_load(a_row, Layout::Row, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "mma.load.row", "the pointee has type f32, expected f16");
    let f = kernel_with(&[hp.clone(), Type::I32], |b, p| {
        b.mma_load(a_row, Layout::Row, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "mma.load.row", "ldm must be u32, got i32");
    let bad_frag = frag_type(FragKind::A, s, ScalarType::F32, Some(Layout::Row));
    let f = kernel_with(&[gptr(Type::F32), Type::U32], |b, p| {
        b.mma_load(bad_frag, Layout::Row, p[0], p[1]).map(|_| ())
    });
    bad_inst(f, "mma.load.row", "A/B fragments hold f16 or bf16");

    // bf16 inputs accumulate in f32 only.
    let a_bf = frag_type(FragKind::A, s, ScalarType::BF16, Some(Layout::Row));
    let b_bf = frag_type(FragKind::B, s, ScalarType::BF16, Some(Layout::Row));
    let f = kernel_with(&[gptr(Type::BF16), Type::U32, Type::F16], |b, p| {
        let fa = b.mma_load(a_bf, Layout::Row, p[0], p[1])?;
        let fb = b.mma_load(b_bf, Layout::Row, p[0], p[1])?;
        let fc = b.mma_fill(acc16, p[2])?;
        b.mma(fa, fb, fc).map(|_| ())
    });
    bad_inst(f, "mma", "bf16 mma accumulates in f32, got f16");

    // Shapes must agree; operand order matters.
    let b_other = frag_type(
        FragKind::B,
        MmaShape::M32N8K16,
        ScalarType::F16,
        Some(Layout::Col),
    );
    let f = kernel_with(&[hp.clone(), Type::U32, Type::F32], |b, p| {
        let fa = b.mma_load(a_row, Layout::Row, p[0], p[1])?;
        let fb = b.mma_load(b_other, Layout::Col, p[0], p[1])?;
        let fc = b.mma_fill(acc32, p[2])?;
        b.mma(fa, fb, fc).map(|_| ())
    });
    bad_inst(
        f,
        "mma",
        "mma fragments must have one shape, got m16n16k16, m32n8k16, m16n16k16",
    );
    let f = kernel_with(&[hp.clone(), Type::U32, Type::F32], |b, p| {
        let fa = b.mma_load(a_row, Layout::Row, p[0], p[1])?;
        let fb = b.mma_load(b_col, Layout::Col, p[0], p[1])?;
        let fc = b.mma_fill(acc32, p[2])?;
        b.mma(fb, fa, fc).map(|_| ())
    });
    bad_inst(f, "mma", "in that order");

    let f = kernel_with(&[hp.clone(), Type::U32], |b, p| {
        let fa = b.mma_load(a_row, Layout::Row, p[0], p[1])?;
        b.mma_store(Layout::Row, p[0], fa, p[1])
    });
    bad_inst(f, "mma.store.row", "mma.store stores accumulators");
    let f = kernel_with(&[hp.clone(), Type::F16], |b, p| {
        b.mma_fill(a_row, p[1]).map(|_| ())
    });
    bad_inst(f, "mma.fill", "mma.fill fills accumulators");
    let f = kernel_with(&[hp, Type::F16], |b, p| b.mma_fill(acc32, p[1]).map(|_| ()));
    bad_inst(f, "mma.fill", "the fill value has type f16, expected f32");
}

#[test]
fn cp_async_rules() {
    let sp = Type::ptr(AddrSpace::Shared, Type::F32);
    let f = kernel_with(&[gptr(Type::F32)], |b, p| {
        b.cp_async(16, CacheHint::Ca, p[0], p[0])
    });
    let d = bad_inst(
        f,
        "cp.async.ca.16",
        "destination must be a pointer to shared memory",
    );
    assert!(d.message.contains("ptr<global, f32>"));
    let _ = sp;
    let f = kernel_with(&[gptr(Type::F32)], |b, _| {
        let s = b.shared_alloc(Type::F32, 4)?;
        b.cp_async(16, CacheHint::Ca, s, s)
    });
    bad_inst(
        f,
        "cp.async.ca.16",
        "source must be a pointer to global memory",
    );
    let f = kernel_with(&[gptr(Type::F32)], |b, p| {
        let s = b.shared_alloc(Type::F32, 4)?;
        b.cp_async(12, CacheHint::Ca, s, p[0])
    });
    bad_inst(
        f,
        "cp.async.ca.12",
        "cp.async copies 4, 8 or 16 bytes, got 12",
    );
    let f = kernel_with(&[gptr(Type::F32)], |b, p| {
        let s = b.shared_alloc(Type::F32, 4)?;
        b.cp_async(8, CacheHint::Cg, s, p[0])
    });
    bad_inst(
        f,
        "cp.async.cg.8",
        "cp.async.cg copies 16 bytes only, got 8",
    );
    let f = kernel_with(&[], |b, _| b.cp_async_wait(40));
    bad_inst(f, "cp.async.wait", "at most 31 pending groups");
}

#[test]
fn call_rules() {
    let dev = {
        let mut d = FunctionBuilder::device("dev", &[Type::I32], &[Type::F32]);
        let x = d.param(0);
        let y = d.cast(x, Type::F32).unwrap();
        d.ret(&[y]).unwrap();
        d.finish().unwrap()
    };
    let host = {
        let mut h = FunctionBuilder::host("hostf", &[], &[]);
        h.ret(&[]).unwrap();
        h.finish().unwrap()
    };
    let kern = kernel_with(&[], |_, _| Ok(()));
    let kern = Function {
        name: "kern".into(),
        ..kern
    };

    let call_from = |kind: FunctionKind, callee: &str, args: &[Type], rets: &[Type]| {
        let mut b = FunctionBuilder::new("caller", kind, args, &[]);
        let ps = b.params();
        b.call(callee, &ps, rets).unwrap();
        b.ret(&[]).unwrap();
        let f = b.finish().unwrap();
        module(vec![dev.clone(), host.clone(), kern.clone(), f])
    };
    let k = || FunctionKind::Kernel(KernelInfo::default());
    ok(&call_from(k(), "dev", &[Type::I32], &[Type::F32]));
    ok(&call_from(FunctionKind::Host, "hostf", &[], &[]));
    let d = err(
        &call_from(k(), "nothere", &[], &[]),
        "call to @nothere, which is not in the module",
    );
    assert_eq!(d.function, "caller");
    assert_eq!(d.inst_text.as_deref(), Some("call @nothere"));
    err(
        &call_from(FunctionKind::Host, "dev", &[Type::I32], &[Type::F32]),
        "host function calls device function @dev",
    );
    err(
        &call_from(FunctionKind::Device, "hostf", &[], &[]),
        "GPU function calls host function @hostf",
    );
    err(
        &call_from(k(), "kern", &[], &[]),
        "@kern is a kernel; kernels are launched, not called",
    );
    err(
        &call_from(k(), "dev", &[], &[Type::F32]),
        "@dev takes 1 argument, got 0",
    );
    err(
        &call_from(k(), "dev", &[Type::U32], &[Type::F32]),
        "argument 0 has type u32, expected i32",
    );
    err(
        &call_from(k(), "dev", &[Type::I32], &[]),
        "@dev returns 1 value, the call has 0 results",
    );
    err(
        &call_from(k(), "dev", &[Type::I32], &[Type::F64]),
        "result 0 has type f64, expected f32",
    );
}

#[test]
fn recursion_is_allowed() {
    let mut d = FunctionBuilder::device("fact", &[Type::U32], &[Type::U32]);
    let n = d.param(0);
    let r = d.call("fact", &[n], &[Type::U32]).unwrap();
    d.ret(&r).unwrap();
    ok(&module(vec![d.finish().unwrap()]));
}

#[test]
fn no_alloc_allows_bounded_stack() {
    // A small constant alloca is bounded stack, not an allocation in the issue's sense.
    let mut d = FunctionBuilder::device("scratch", &[], &[]);
    d.alloca(Type::F32, 4).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut k = FunctionBuilder::kernel("k", &[]);
    k.constraints_mut().no_alloc = true;
    k.call("scratch", &[], &[]).unwrap();
    k.ret(&[]).unwrap();
    ok(&module(vec![dev, k.finish().unwrap()]));
}

#[test]
fn no_alloc_rejects_unbounded_stack_naming_each_site() {
    // 40 KiB here plus 40 KiB in the callee: over the 64 KiB budget.
    let mut d = FunctionBuilder::device("scratch", &[], &[]);
    d.alloca(Type::F32, 10 * 1024).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut k = FunctionBuilder::device("k", &[], &[]);
    k.constraints_mut().no_alloc = true;
    k.alloca(Type::F64, 5 * 1024).unwrap();
    k.call("scratch", &[], &[]).unwrap();
    k.ret(&[]).unwrap();
    let kf = k.finish().unwrap();
    let m = module(vec![dev, kf.clone()]);
    let d = err(
        &m,
        "no_alloc function reaches @scratch, which allocates 40960 bytes",
    );
    assert_eq!(d.function, "k");
    let d = err(
        &m,
        "alloca in a no_alloc function whose stack reaches 81920 bytes",
    );
    assert_at(&d, &kf, "alloca");
}

#[test]
fn no_alloc_rejects_reachable_recursion() {
    let mut r = FunctionBuilder::device("fact", &[Type::U32], &[Type::U32]);
    let n = r.param(0);
    let x = r.call("fact", &[n], &[Type::U32]).unwrap();
    r.ret(&x).unwrap();
    let fact = r.finish().unwrap();
    let mut k = FunctionBuilder::kernel("k", &[Type::U32]);
    k.constraints_mut().no_alloc = true;
    let n = k.param(0);
    k.call("fact", &[n], &[Type::U32]).unwrap();
    k.ret(&[]).unwrap();
    let d = err(
        &module(vec![fact, k.finish().unwrap()]),
        "no_alloc function reaches recursion, which needs unbounded stack: @fact -> @fact",
    );
    assert_eq!(d.function, "k");
}

// ------------------------------------------------------------------ kernel metadata, names

fn kernel_info(info: KernelInfo) -> Module {
    let mut f = kernel_with(&[], |_, _| Ok(()));
    f.kind = FunctionKind::Kernel(info);
    module(vec![f])
}

#[test]
fn kernel_metadata_rules() {
    let d = err(
        &kernel_info(KernelInfo {
            max_threads: Some([64, 32, 1]),
            ..Default::default()
        }),
        "a block has at most 1024 threads, this allows 2048",
    );
    assert_eq!((d.function.as_str(), d.block, d.inst), ("k", None, None));
    err(
        &kernel_info(KernelInfo {
            max_threads: Some([0, 1, 1]),
            ..Default::default()
        }),
        "every dimension must be at least 1",
    );
    err(
        &kernel_info(KernelInfo {
            max_threads: Some([1, 1, 128]),
            ..Default::default()
        }),
        "z at most 64",
    );
    err(
        &kernel_info(KernelInfo {
            min_blocks: Some(2),
            ..Default::default()
        }),
        "min_blocks needs max_threads",
    );
    err(
        &kernel_info(KernelInfo {
            max_threads: Some([32, 1, 1]),
            min_blocks: Some(0),
            ..Default::default()
        }),
        "min_blocks(0) must be in 1..=32",
    );
    err(
        &kernel_info(KernelInfo {
            max_registers: Some(0),
            ..Default::default()
        }),
        "max_registers(0) must be in 24..=255",
    );
    err(
        &kernel_info(KernelInfo {
            max_registers: Some(256),
            ..Default::default()
        }),
        "max_registers(256)",
    );
    err(
        &kernel_info(KernelInfo {
            shared_bytes: 300_000,
            ..Default::default()
        }),
        "shared_bytes(300000) exceeds",
    );
    let mut m = kernel_info(KernelInfo {
        shared_bytes: 100_000,
        ..Default::default()
    });
    m.targets = vec![Arch::Sm75];
    err(&m, "exceed sm_75's per-block maximum of 65536 bytes");
    m.targets = vec![Arch::Sm80];
    ok(&m);
    ok(&kernel_info(KernelInfo {
        max_threads: Some([256, 4, 1]),
        min_blocks: Some(2),
        max_registers: Some(64),
        shared_bytes: 4096,
        arch: Some(Arch::Sm80),
        exact_threads: None,
        cluster: None,
    }));
}

#[test]
fn kernel_parameter_types() {
    let f = kernel_with(&[Type::ptr(AddrSpace::Shared, Type::F32)], |_, _| Ok(()));
    let d = err(
        &module(vec![f]),
        "kernel parameters are scalars, vectors, tensormaps or pointers to global, generic or constant memory",
    );
    assert_eq!(d.block, Some(BlockId(0)));
    let fr = frag_type(FragKind::Acc, MmaShape::M16N16K16, ScalarType::F32, None);
    let f = kernel_with(&[Type::Frag(fr)], |_, _| Ok(()));
    err(
        &module(vec![f]),
        "kernel parameter v0 has type frag<acc, m16n16k16, f32>",
    );
    let mut h = FunctionBuilder::host("h", &[Type::Frag(fr)], &[]);
    h.ret(&[]).unwrap();
    err(
        &module(vec![h.finish().unwrap()]),
        "host functions cannot use fragment types",
    );
    let f = kernel_with(&[Type::array(Type::F32, 4)], |_, _| Ok(()));
    err(&module(vec![f]), "array [f32; 4] is not a value type");
}

#[test]
fn function_names() {
    for (name, want) in [
        ("1abc", "is not an identifier"),
        ("a-b", "is not an identifier"),
        ("", "is not an identifier"),
        ("_", "is not an identifier"),
        ("memcpy", "is reserved: the backends call"),
        ("sinf", "is reserved"),
        ("__nv_sinf", "is reserved"),
    ] {
        let mut f = saxpy();
        f.name = name.into();
        let d = err(&module(vec![f]), want);
        assert_eq!(d.function, name);
    }
    let d = err(
        &module(vec![saxpy(), saxpy()]),
        "function name @saxpy is defined more than once",
    );
    assert_eq!(d.function, "saxpy");
    let mut f = saxpy();
    f.name = "_Z3foo".into();
    ok(&module(vec![f]));
}

// ------------------------------------------------------------------ arch gating

#[test]
fn cp_async_needs_sm80() {
    let m = module_for(&[Arch::Sm75, Arch::Sm80], vec![cp_async_kernel()]);
    let d = err(
        &m,
        "cp.async needs sm_80 and PTX 7.0, but this function is compiled for sm_75 with PTX 6.4",
    );
    assert_eq!(d.inst_text.as_deref(), Some("cp.async.cg.16 v5, v6"));
    assert!(check_arch(&module(vec![cp_async_kernel()]), Arch::Sm70).is_err());
    assert!(check_arch(&module(vec![cp_async_kernel()]), Arch::Sm80).is_ok());
}

#[test]
fn bf16_needs_sm80() {
    let f = kernel_storing(Type::BF16, |b| b.fconst(Type::BF16, 1.0));
    let m = module_for(&[Arch::Sm75], vec![f.clone()]);
    // Both the entry parameter and the constant are reported.
    let e = verify_module(&m).unwrap_err();
    assert!(
        e.diagnostics.iter().any(|d| d.block == Some(BlockId(0))
            && d.inst.is_none()
            && d.message.contains("bf16 needs sm_80")),
        "{e}"
    );
    let d = err(&m, "bf16 needs sm_80");
    assert!(d.message.contains("sm_75"));
    ok(&module_for(&[Arch::Sm80], vec![f.clone()]));
    // A bf16 wmma needs sm_80 as well.
    let w = wmma_kernel(MmaShape::M16N16K16, ScalarType::BF16, ScalarType::F32);
    err(
        &module_for(&[Arch::Sm70], vec![w]),
        "wmma bf16 needs sm_80 and PTX 7.0",
    );
    // Host functions are not gated.
    let mut h = FunctionBuilder::host("h", &[Type::BF16], &[Type::BF16]);
    let x = h.param(0);
    h.ret(&[x]).unwrap();
    ok(&module_for(&[Arch::Sm70], vec![h.finish().unwrap()]));
}

#[test]
fn atomic_float_gating() {
    let f16_add = kernel_with(&[gptr(Type::F16), Type::F16], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    ok(&module_for(&[Arch::Sm70], vec![f16_add.clone()]));
    let mut m = module_for(&[Arch::Sm70], vec![f16_add]);
    m.ptx_version = Some(PtxVersion::new(6, 0));
    err(&m, "atomic add on f16 needs sm_70 and PTX 6.3, but this function is compiled for sm_70 with PTX 6.0");

    let bf_add = kernel_with(&[gptr(Type::BF16), Type::BF16], |b, p| {
        b.atomic(AtomicOp::Add, Scope::Device, p[0], p[1])
            .map(|_| ())
    });
    let d = err(
        &module_for(&[Arch::Sm80], vec![bf_add.clone()]),
        "atomic add on bf16 needs sm_90 and PTX 7.8",
    );
    assert_at(&d, &bf_add, "atomic.add.device");
    ok(&module_for(&[Arch::Sm90], vec![bf_add]));
}

#[test]
fn wmma_shape_needs_ptx61() {
    let w = wmma_kernel(MmaShape::M32N8K16, ScalarType::F16, ScalarType::F32);
    let mut m = module_for(&[Arch::Sm70], vec![w]);
    m.ptx_version = Some(PtxVersion::new(6, 0));
    err(&m, "wmma f16 m32n8k16/m8n32k16 needs sm_70 and PTX 6.1");
    m.ptx_version = Some(PtxVersion::new(6, 1));
    ok(&m);
}

#[test]
fn ptx_version_rules() {
    let mut m = module_for(&[Arch::Sm86], vec![saxpy()]);
    m.ptx_version = Some(PtxVersion::new(7, 0));
    let d = err(
        &m,
        "ptx(7.0) is too old for sm_86, which needs PTX 7.1 or newer",
    );
    assert_eq!(d.function, "");
    assert!(d.to_string().starts_with("in module: ptx(7.0)"), "{d}");
    m.ptx_version = Some(PtxVersion::new(9, 0));
    err(&m, "ptx(9.0) is not a PTX version LLVM 19 can emit");
    m.ptx_version = Some(PtxVersion::new(6, 9));
    err(&m, "ptx(6.9) is not a PTX version");
    m.ptx_version = Some(PtxVersion::new(8, 5));
    ok(&m);
    // A kernel's own arch counts as well.
    let mut f = saxpy();
    f.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm90a),
        ..Default::default()
    });
    let mut m = module(vec![f]);
    m.ptx_version = Some(PtxVersion::new(7, 8));
    err(&m, "too old for sm_90a, which needs PTX 8.0");
    assert!(check_arch(&m, Arch::Sm90a).is_err());
    assert!(check_arch(&m, Arch::Sm90).is_ok());
}

#[test]
fn kernel_arch_overrides_targets_and_reaches_device_functions() {
    // Module targets sm_90 but the kernel is compiled for sm_75 only.
    let mut k = cp_async_kernel();
    k.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm75),
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm90], vec![k]);
    err(&m, "compiled for sm_75");

    // A device function using cp.async, reached from a kernel compiled for sm_75.
    let mut d = FunctionBuilder::device(
        "stage",
        &[Type::ptr(AddrSpace::Shared, Type::F32), gptr(Type::F32)],
        &[],
    );
    let (s, g) = (d.param(0), d.param(1));
    d.cp_async(4, CacheHint::Ca, s, g).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut k = FunctionBuilder::kernel("k", &[gptr(Type::F32)]);
    let g = k.param(0);
    let s = k.shared_alloc(Type::F32, 1).unwrap();
    k.call("stage", &[s, g], &[]).unwrap();
    k.ret(&[]).unwrap();
    let mut kf = k.finish().unwrap();
    let m = module(vec![dev.clone(), kf.clone()]);
    ok(&m); // no targets: decided at compile time
    assert!(check_arch(&m, Arch::Sm75).is_err());
    kf.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm75),
        ..Default::default()
    });
    let m = module(vec![dev, kf]);
    let d = err(&m, "cp.async needs sm_80");
    assert_eq!(d.function, "stage");
}

fn explicit_ptx_feature(f: &arch::Feature) -> bool {
    [
        arch::MMA_SYNC_FP8,
        arch::CVT_FP8,
        arch::L2_HINT,
        arch::WGMMA_MIXED_INT,
    ]
    .contains(f)
}

#[test]
fn arch_table_is_consistent() {
    for a in Arch::ALL {
        assert!(arch::min_ptx(a) <= a.default_ptx(), "{a}");
        assert!(arch::ptx_supported(a.default_ptx()), "{a}");
        assert!(arch::ptx_supported(arch::min_ptx(a)), "{a}");
        assert!(arch::max_shared_bytes(a) <= 227 * 1024);
    }
    for f in arch::FEATURES {
        // A feature's own arch can express its PTX version.
        assert!(
            arch::min_ptx(f.arch) <= f.ptx || f.ptx <= f.arch.default_ptx(),
            "{f:?}"
        );
        // Every feature fits the newest target's default, except fp8 mma.sync
        // and fp8 conversions, which need an explicit ptx(8.4) / ptx(8.1) (issue 12).
        if !explicit_ptx_feature(f) {
            assert!(f.available(Arch::Sm90a, Arch::Sm90a.default_ptx()), "{f:?}");
        }
    }
    // Every default PTX covers every feature its arch has.
    for a in Arch::ALL {
        for f in arch::FEATURES {
            if a >= f.arch && !explicit_ptx_feature(f) {
                assert!(
                    f.available(a, a.default_ptx()),
                    "{a} default PTX lacks {}",
                    f.name
                );
            }
        }
    }
}

// ------------------------------------------------------------------ diagnostics

#[test]
fn all_errors_are_collected_with_locations() {
    let mut b = FunctionBuilder::kernel("k", &[Type::I32, Type::F32]);
    let (x, y) = (b.param(0), b.param(1));
    b.set_loc(Some(Loc {
        file: Some("k.py".into()),
        line: 3,
        col: 5,
    }));
    b.add(x, y).unwrap();
    b.set_loc(Some(Loc {
        file: Some("k.py".into()),
        line: 4,
        col: 9,
    }));
    b.unary(UnOp::Sqrt, x).unwrap();
    b.ret(&[]).unwrap();
    let m = module(vec![b.finish().unwrap()]);
    let e = verify_module(&m).unwrap_err();
    assert_eq!(e.diagnostics.len(), 2, "{e}");
    let first = &e.diagnostics[0];
    assert_eq!(first.loc.as_ref().map(|l| (l.line, l.col)), Some((3, 5)));
    assert_eq!(
        e.diagnostics[1].loc.as_ref().map(|l| (l.line, l.col)),
        Some((4, 9))
    );
    let text = e.to_string();
    assert!(text.contains("k.py:3:5: in @k, block0, `v2: i32 = add v0, v1`: `add` operands must have the same type"), "{text}");
    assert!(
        text.starts_with("verification failed with 2 errors"),
        "{text}"
    );
}

#[test]
fn verify_function_checks_one_function() {
    let good = saxpy();
    let mut bad = saxpy();
    bad.name = "bad".into();
    bad.blocks[2].insts.clear();
    let m = module(vec![good.clone(), bad.clone()]);
    assert!(verify_function(&m, &good).is_ok());
    let e = verify_function(&m, &bad).unwrap_err();
    assert!(e.diagnostics.iter().all(|d| d.function == "bad"));
}

#[test]
fn llvm_phi_rules() {
    // br to one block twice with different arguments.
    let mut b = FunctionBuilder::device("d", &[Type::BOOL, Type::I32, Type::I32], &[Type::I32]);
    let (c, x, y) = (b.param(0), b.param(1), b.param(2));
    let join = b.create_block(&[Type::I32]);
    b.branch(c, join, &[x], join, &[y]).unwrap();
    b.switch_to(join);
    let p = b.block_params(join).unwrap()[0];
    b.ret(&[p]).unwrap();
    let f = b.finish().unwrap();
    let d = err(
        &module(vec![f.clone()]),
        "both targets are block1 but pass different arguments",
    );
    assert_at(&d, &f, "br");
    // Same arguments are fine.
    let mut f2 = f;
    let br = find_inst(&f2, "br").1;
    f2.insts[br.index()].targets[1].args = vec![ValueId(1)];
    ok(&module(vec![f2]));

    // A block with parameters that nothing branches to.
    let mut b = FunctionBuilder::device("d", &[Type::I32], &[Type::I32]);
    let x = b.param(0);
    b.ret(&[x]).unwrap();
    let dead = b.create_block(&[Type::I32]);
    b.switch_to(dead);
    let p = b.block_params(dead).unwrap()[0];
    b.ret(&[p]).unwrap();
    let d = err(
        &module(vec![b.finish().unwrap()]),
        "block1 has parameters but no branch targets it",
    );
    assert_eq!((d.block, d.inst), (Some(BlockId(1)), None));
}

#[test]
fn kernel_parameter_space_is_bounded() {
    let params = vec![Type::Vector(ScalarType::F64, 8); 65];
    let f = kernel_with(&params, |_, _| Ok(()));
    err(
        &module(vec![f]),
        "kernel parameters take 4160 bytes; PTX allows at most 4096",
    );
    let params = vec![Type::Vector(ScalarType::F64, 8); 64];
    ok(&module(vec![kernel_with(&params, |_, _| Ok(()))]));
}

#[test]
fn huge_sizes_do_not_overflow() {
    // Found by verify_fuzz: static shared size saturates, plus u32::MAX dynamic bytes.
    let mut f = kernel_with(&[], |b, _| {
        b.shared_alloc(Type::array(Type::F64, u64::MAX / 4), 3)
            .map(|_| ())
    });
    f.kind = FunctionKind::Kernel(KernelInfo {
        shared_bytes: u32::MAX,
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm90], vec![f]);
    err(&m, "larger than 2^40 bytes");
    err(&m, "shared_bytes(4294967295) exceeds");
}

#[test]
fn host_multi_returns_fit_slots() {
    let v4 = Type::Vector(ScalarType::F32, 4);
    let mut h = FunctionBuilder::host("h", std::slice::from_ref(&v4), &[v4.clone(), Type::U64]);
    let x = h.param(0);
    let z = h.iconst(Type::U64, 0).unwrap();
    h.ret(&[x, z]).unwrap();
    let d = err(
        &module(vec![h.finish().unwrap()]),
        "return type vec<f32, 4> is larger than 8 bytes",
    );
    assert_eq!((d.function.as_str(), d.block), ("h", None));
    // One return of any size is fine.
    let mut h = FunctionBuilder::host("h", std::slice::from_ref(&v4), std::slice::from_ref(&v4));
    let x = h.param(0);
    h.ret(&[x]).unwrap();
    ok(&module(vec![h.finish().unwrap()]));
}

#[test]
fn kernel_limits_per_arch() {
    // ptxas raises register caps below 24 (with a warning).
    let m = kernel_info(KernelInfo {
        max_registers: Some(16),
        ..Default::default()
    });
    err(&m, "max_registers(16) must be in 24..=255");
    ok(&kernel_info(KernelInfo {
        max_registers: Some(24),
        ..Default::default()
    }));

    // Resident blocks per SM: 16 on sm_75 and sm_86, 24 on sm_89, 32 elsewhere.
    let occ = |x: u32, blocks: u32, arch: Arch| {
        let mut m = kernel_info(KernelInfo {
            max_threads: Some([x, 1, 1]),
            min_blocks: Some(blocks),
            ..Default::default()
        });
        m.targets = vec![arch];
        m
    };
    ok(&occ(1, 16, Arch::Sm75));
    let d = err(
        &occ(1, 17, Arch::Sm75),
        "min_blocks(17) exceeds the 16 resident blocks per SM of sm_75",
    );
    assert_eq!((d.function.as_str(), d.block), ("k", None));
    ok(&occ(1, 24, Arch::Sm89));
    err(
        &occ(1, 25, Arch::Sm89),
        "exceeds the 24 resident blocks per SM of sm_89",
    );
    ok(&occ(1, 32, Arch::Sm90));
    // Resident threads per SM, counted in whole warps: 1024 on sm_75, 1536 on sm_86/89, 2048 elsewhere.
    ok(&occ(1024, 2, Arch::Sm80));
    err(
        &occ(1024, 2, Arch::Sm75),
        "exceed the 1024 resident threads per SM of sm_75",
    );
    ok(&occ(512, 3, Arch::Sm86));
    err(
        &occ(300, 5, Arch::Sm86),
        "min_blocks(5) blocks of 300 threads (320 in whole warps) exceed the 1536 resident threads per SM of sm_86",
    );
    // check_arch applies the same limits to an arch the module does not list.
    let m = occ(1024, 2, Arch::Sm80);
    assert!(check_arch(&m, Arch::Sm80).is_ok());
    let e = check_arch(&m, Arch::Sm75).unwrap_err();
    assert!(
        e.to_string().contains("resident threads per SM of sm_75"),
        "{e}"
    );
    let mut m = kernel_info(KernelInfo {
        shared_bytes: 100_000,
        ..Default::default()
    });
    m.targets.clear();
    ok(&m);
    assert!(check_arch(&m, Arch::Sm80).is_ok());
    assert!(check_arch(&m, Arch::Sm75).is_err());
}

#[test]
fn alloca_total_is_bounded() {
    let f = kernel_with(&[], |b, _| {
        b.alloca(Type::F32, 100_000)?;
        b.alloca(Type::F32, 100_000).map(|_| ())
    });
    let d = err(
        &module(vec![f]),
        "the allocas of this function take 800000 bytes; at most 524288",
    );
    assert_eq!((d.function.as_str(), d.block), ("k", None));
}

#[test]
fn long_block_chains_verify_without_recursion() {
    // 50k blocks in a chain, each using the previous block's value: the
    // dominator walk and the DFS are iterative, so no stack overflow.
    let mut b = FunctionBuilder::device("chain", &[Type::I32], &[Type::I32]);
    let mut v = b.param(0);
    for _ in 0..50_000 {
        let next = b.create_block(&[]);
        b.jump(next, &[]).unwrap();
        b.switch_to(next);
        v = b.add(v, v).unwrap();
    }
    b.ret(&[v]).unwrap();
    let f = b.finish().unwrap();
    let start = std::time::Instant::now();
    ok(&module(vec![f]));
    // Generous bound: linear work, debug build, shared machine.
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

#[test]
fn pinned_kernels_and_device_functions_follow_lowering() {
    // A kernel pinned to sm_80 may use cp.async in a module targeting sm_75:
    // the sm_75 PTX does not hold it, so check_arch(sm_75) skips it.
    let mut k = cp_async_kernel();
    k.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm80),
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm75], vec![k, saxpy()]);
    ok(&m);
    assert!(check_arch(&m, Arch::Sm75).is_ok());
    assert!(check_arch(&m, Arch::Sm80).is_ok());

    // Every arch's PTX holds every device function: one using cp.async fails
    // when any kernel is pinned to an older arch, even if that kernel never calls it.
    let mut d = FunctionBuilder::device(
        "stage",
        &[Type::ptr(AddrSpace::Shared, Type::F32), gptr(Type::F32)],
        &[],
    );
    let (s, g) = (d.param(0), d.param(1));
    d.cp_async(4, CacheHint::Ca, s, g).unwrap();
    d.ret(&[]).unwrap();
    let dev = d.finish().unwrap();
    let mut old = saxpy();
    old.kind = FunctionKind::Kernel(KernelInfo {
        arch: Some(Arch::Sm70),
        ..Default::default()
    });
    let m = module_for(&[Arch::Sm80], vec![dev.clone(), old]);
    let d = err(&m, "cp.async needs sm_80");
    assert_eq!(d.function, "stage");
    assert!(d.message.contains("sm_70"), "{d}");
    ok(&module_for(&[Arch::Sm80], vec![dev, saxpy()]));
}
