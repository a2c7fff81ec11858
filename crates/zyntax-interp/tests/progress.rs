//! Forward progress as on sm_70+ (independent thread scheduling): a spin lock
//! between lanes of one warp and a spin-wait between warps of one block
//! finish instead of hanging.

mod common;

use common::*;
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};

fn g(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

#[test]
fn spin_lock_between_lanes_of_a_warp() {
    // while (atomicCAS(lock, 0, 1) != 0) {}  *counter += 1;  atomicExch(lock, 0);
    let mut b = FunctionBuilder::kernel("locked_inc", &[g(Type::U32), g(Type::U32)]);
    let (lock, counter) = (b.param(0), b.param(1));
    let spin = b.create_block(&[]);
    let crit = b.create_block(&[]);
    b.jump(spin, &[]).unwrap();
    b.switch_to(spin);
    let zero = b.iconst(Type::U32, 0).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let old = b.atomic_cas(Scope::Device, lock, zero, one).unwrap();
    let got = b.cmp(CmpOp::Eq, old, zero).unwrap();
    b.branch(got, crit, &[], spin, &[]).unwrap();
    b.switch_to(crit);
    let v = b.load(counter).unwrap();
    let one2 = b.iconst(Type::U32, 1).unwrap();
    let v1 = b.add(v, one2).unwrap();
    b.store(counter, v1).unwrap();
    b.fence(Scope::Device).unwrap();
    let zero2 = b.iconst(Type::U32, 0).unwrap();
    b.atomic(AtomicOp::Exch, Scope::Device, lock, zero2)
        .unwrap();
    b.ret(&[]).unwrap();
    let mut m = Module::new("lock");
    m.functions.push(b.finish().unwrap());
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![vec![0u8; 4], vec![0u8; 4]];
    it.launch(
        "locked_inc",
        [2, 1, 1],
        [64, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1)],
        &mut bufs,
    )
    .unwrap();
    assert_eq!(bytes_u32(&bufs[1])[0], 128);
    assert_eq!(bytes_u32(&bufs[0])[0], 0, "lock released");
}

#[test]
fn spin_wait_between_warps() {
    // Warp 0 waits for a flag that warp 1 sets after writing data[0..32].
    let mut b = FunctionBuilder::kernel("handoff", &[g(Type::U32), g(Type::U32), g(Type::U32)]);
    let (flag, data, out) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let c32 = b.iconst(Type::U32, 32).unwrap();
    let producer = b.cmp(CmpOp::Ge, tid, c32).unwrap();
    let mut fr = b.begin_if(producer, &[]).unwrap();
    let lane = b.sub(tid, c32).unwrap();
    let pd = b.ptr_add(data, lane).unwrap();
    let k = b.iconst(Type::U32, 1000).unwrap();
    let val = b.add(lane, k).unwrap();
    b.store(pd, val).unwrap();
    b.fence(Scope::Device).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    b.atomic(AtomicOp::Add, Scope::Device, flag, one).unwrap();
    b.begin_else(&mut fr, &[]).unwrap();
    let spin = b.create_block(&[]);
    let done = b.create_block(&[]);
    b.jump(spin, &[]).unwrap();
    b.switch_to(spin);
    let zero = b.iconst(Type::U32, 0).unwrap();
    let f = b.atomic(AtomicOp::Add, Scope::Device, flag, zero).unwrap();
    let ready = b.cmp(CmpOp::Eq, f, c32).unwrap();
    b.branch(ready, done, &[], spin, &[]).unwrap();
    b.switch_to(done);
    let pd = b.ptr_add(data, tid).unwrap();
    let v = b.load(pd).unwrap();
    let po = b.ptr_add(out, tid).unwrap();
    b.store(po, v).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    let mut m = Module::new("handoff");
    m.functions.push(b.finish().unwrap());
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![vec![0u8; 4], vec![0u8; 128], vec![0u8; 128]];
    it.launch(
        "handoff",
        [1, 1, 1],
        [64, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
        &mut bufs,
    )
    .unwrap();
    let want: Vec<u32> = (1000..1032).collect();
    assert_eq!(bytes_u32(&bufs[2]), want);
}
