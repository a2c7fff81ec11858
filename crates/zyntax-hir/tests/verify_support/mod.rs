//! Helpers and fixtures shared by the verifier tests (`verify.rs`, `verify_gpu.rs`).

#![allow(dead_code)] // each test file uses a subset

use zyntax_hir::*;

// ------------------------------------------------------------------ helpers

pub fn gptr(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

pub fn module(fs: Vec<Function>) -> Module {
    let mut m = Module::new("t");
    m.functions = fs;
    m
}

pub fn module_for(targets: &[Arch], fs: Vec<Function>) -> Module {
    let mut m = module(fs);
    m.targets = targets.to_vec();
    m
}

pub fn ok(m: &Module) {
    if let Err(e) = verify_module(m) {
        panic!(
            "expected the module to verify, got: {e}\n{}",
            print_module(m)
        );
    }
}

/// The diagnostic whose message contains `fragment`; fails listing all otherwise.
pub fn err(m: &Module, fragment: &str) -> Diagnostic {
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
pub fn kernel_storing(
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
pub fn kernel_with(
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
pub fn find_inst(f: &Function, mn: &str) -> (BlockId, InstId) {
    f.insts_in_order()
        .find(|(_, i)| f.inst(*i).op.mnemonic() == mn)
        .unwrap_or_else(|| panic!("no `{mn}` in\n{f}"))
}

pub fn assert_at(d: &Diagnostic, f: &Function, mn: &str) {
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
pub fn bad_inst(f: Function, mn: &str, fragment: &str) -> Diagnostic {
    let m = module_for(&[Arch::Sm90], vec![f.clone()]);
    let d = err(&m, fragment);
    assert_at(&d, &f, mn);
    d
}

// ------------------------------------------------------------------ valid modules

pub fn saxpy() -> Function {
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
pub fn loop_and_call() -> Vec<Function> {
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

pub fn host_fn() -> Function {
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

pub fn f16_frag(
    kind: FragKind,
    shape: MmaShape,
    elem: ScalarType,
    layout: Option<Layout>,
) -> FragType {
    frag_type(kind, shape, elem, layout)
}

/// A full wmma tile: load A (row), B (col), C (fill), mma, store.
pub fn wmma_kernel(shape: MmaShape, inp: ScalarType, acc: ScalarType) -> Function {
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

pub fn cp_async_kernel() -> Function {
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
