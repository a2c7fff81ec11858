//! Kernels with barriers and shared memory on the CPU backend against the
//! reference interpreter, on fresh random inputs: a tree reduction (barrier
//! in a uniform loop), a tiled transpose, a histogram with shared atomics,
//! barriers under thread-dependent control flow, and the divergent-barrier
//! error.

use zyntax_hir::*;
use zyntax_interp::{Arg as IArg, Interpreter};
use zyntax_llvm::host::{self, Arg, Buffer, HostError, HostFnKind, HostOptions, Scalar};

mod fresh_rng;
use fresh_rng::Rng;

fn gptr(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

/// A 32-bit word buffer or a u32 scalar argument, for both engines.
enum A {
    Words(Vec<u32>),
    U32(u32),
}

/// Run `name` on the interpreter and on the CPU with the same arguments;
/// returns the word buffers after each run (interpreter, CPU).
fn both(
    m: &Module,
    name: &str,
    grid: [u32; 3],
    block: [u32; 3],
    args: &[A],
) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    both_with(m, name, grid, block, args, &HostOptions::default())
}

/// [`both`] with the CPU backend's options.
fn both_with(
    m: &Module,
    name: &str,
    grid: [u32; 3],
    block: [u32; 3],
    args: &[A],
    opts: &HostOptions,
) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let interp = Interpreter::new(m).unwrap();
    let mut bufs = Vec::new();
    let mut iargs = Vec::new();
    for a in args {
        match a {
            A::Words(w) => {
                iargs.push(IArg::Buffer(bufs.len()));
                bufs.push(w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
            }
            A::U32(v) => iargs.push(IArg::Int(i128::from(*v))),
        }
    }
    interp
        .launch(name, grid, block, 0, &iargs, &mut bufs)
        .unwrap_or_else(|e| panic!("interpreter @{name}: {e}"));
    let want: Vec<Vec<u32>> = bufs
        .iter()
        .map(|b| {
            b.chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect();
    let jit = host::jit(m, opts).unwrap();
    assert_eq!(jit.function(name).unwrap().kind, HostFnKind::CpuKernel);
    let mut words: Vec<Vec<u32>> = args
        .iter()
        .filter_map(|a| match a {
            A::Words(w) => Some(w.clone()),
            A::U32(_) => None,
        })
        .collect();
    {
        let mut it = words.iter_mut();
        let mut hargs = Vec::new();
        let params = m.function(name).unwrap().param_types();
        for (a, t) in args.iter().zip(&params) {
            match a {
                A::Words(_) => {
                    // Words reinterpreted as the parameter's 32-bit element type.
                    let w = it.next().unwrap();
                    let (elem, _) = host::pointee_elem(t).unwrap();
                    // SAFETY: `w` outlives the launch; every element type here is 4 bytes.
                    let buf = unsafe { Buffer::from_raw(w.as_mut_ptr().cast(), w.len(), elem) };
                    hargs.push(Arg::Buffer(buf));
                }
                A::U32(v) => hargs.push(Arg::Scalar(Scalar::UInt(u64::from(*v)))),
            }
        }
        jit.launch(name, grid, block, &mut hargs, 0)
            .unwrap_or_else(|e| panic!("cpu @{name}: {e}"));
    }
    (want, words)
}

/// `base[i]`: a load through `ptr_add`.
fn load_at(b: &mut FunctionBuilder, base: ValueId, i: ValueId) -> ValueId {
    let p = b.ptr_add(base, i).unwrap();
    b.load(p).unwrap()
}

/// `base[i] = v`: a store through `ptr_add`.
fn store_at(b: &mut FunctionBuilder, base: ValueId, i: ValueId, v: ValueId) {
    let p = b.ptr_add(base, i).unwrap();
    b.store(p, v).unwrap();
}

/// `x * k + y`.
fn mul_add(b: &mut FunctionBuilder, x: ValueId, k: ValueId, y: ValueId) -> ValueId {
    let p = b.mul(x, k).unwrap();
    b.add(p, y).unwrap()
}

/// `a.0 < a.1 && c.0 < c.1`.
fn both_lt(b: &mut FunctionBuilder, a: (ValueId, ValueId), c: (ValueId, ValueId)) -> ValueId {
    let x = b.cmp(CmpOp::Lt, a.0, a.1).unwrap();
    let y = b.cmp(CmpOp::Lt, c.0, c.1).unwrap();
    b.and(x, y).unwrap()
}

fn module(f: Function) -> Module {
    let mut m = Module::new("barriers");
    m.targets = vec![Arch::Sm80];
    m.functions.push(f);
    m
}

/// out[block] = sum of x[block*256 .. +256] (u32 wrapping, or f32 bits),
/// by a tree in shared memory: `for k in 0..8 { s = 128 >> k; if tid < s
/// { sh[tid] += sh[tid + s] }; barrier }` — a barrier in a uniform loop.
fn tree_reduce(float: bool) -> Function {
    let t = if float { Type::F32 } else { Type::U32 };
    let mut b = FunctionBuilder::kernel("reduce", &[gptr(t.clone()), gptr(t.clone())]);
    let (x, out) = (b.param(0), b.param(1));
    let sh = b.shared_alloc(t, 256).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let c256 = b.iconst(Type::U32, 256).unwrap();
    let gi = mul_add(&mut b, bid, c256, tid);
    let v = load_at(&mut b, x, gi);
    store_at(&mut b, sh, tid, v);
    b.barrier().unwrap();
    let (z, eight, one) = (
        b.iconst(Type::U32, 0).unwrap(),
        b.iconst(Type::U32, 8).unwrap(),
        b.iconst(Type::U32, 1).unwrap(),
    );
    let fr = b.begin_for(z, eight, one, &[]).unwrap();
    let c128 = b.iconst(Type::U32, 128).unwrap();
    let s = b.shr(c128, fr.iv).unwrap();
    let act = b.cmp(CmpOp::Lt, tid, s).unwrap();
    let iff = b.begin_if(act, &[]).unwrap();
    let j = b.add(tid, s).unwrap();
    let pj = b.ptr_add(sh, j).unwrap();
    let pt = b.ptr_add(sh, tid).unwrap();
    let (a, c) = (b.load(pt).unwrap(), b.load(pj).unwrap());
    let sum = b.add(a, c).unwrap();
    b.store(pt, sum).unwrap();
    b.end_if(iff, &[]).unwrap();
    b.barrier().unwrap();
    b.end_for(fr, &[]).unwrap();
    let first = b.cmp(CmpOp::Eq, tid, z).unwrap();
    let iff = b.begin_if(first, &[]).unwrap();
    let r = b.load(sh).unwrap();
    store_at(&mut b, out, bid, r);
    b.end_if(iff, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn tree_reduction_in_shared_memory_matches_the_interpreter() {
    let mut rng = Rng::new();
    for float in [false, true] {
        let m = module(tree_reduce(float));
        let blocks = 3 + rng.below(20) as u32;
        let n = blocks as usize * 256;
        let x: Vec<u32> = (0..n)
            .map(|_| {
                if float {
                    ((rng.below(1 << 20) as f32 - 5e5) / 1e3).to_bits()
                } else {
                    rng.next() as u32
                }
            })
            .collect();
        // The float tree as SIMD lanes (regions::fast_runner), the u32 one not.
        let opts = HostOptions {
            vector_threads: Some(float),
            ..HostOptions::default()
        };
        let (want, got) = both_with(
            &m,
            "reduce",
            [blocks, 1, 1],
            [256, 1, 1],
            &[A::Words(x.clone()), A::Words(vec![7; blocks as usize])],
            &opts,
        );
        // Same tree, same order: bit-exact for floats too.
        assert_eq!(got[1], want[1]);
        for (k, r) in got[1].iter().enumerate() {
            let part = &x[k * 256..(k + 1) * 256];
            if float {
                let exact: f64 = part.iter().map(|w| f64::from(f32::from_bits(*w))).sum();
                let v = f64::from(f32::from_bits(*r));
                assert!(
                    (v - exact).abs() <= 1e-3 * (1.0 + exact.abs()),
                    "{v} vs {exact}"
                );
            } else {
                assert_eq!(*r, part.iter().fold(0u32, |a, w| a.wrapping_add(*w)));
            }
        }
    }
}

/// out[c * h + r] = in[r * w + c] through a 16x17 shared tile, 16x16 blocks.
fn transpose() -> Function {
    let mut b = FunctionBuilder::kernel(
        "transpose",
        &[gptr(Type::U32), gptr(Type::U32), Type::U32, Type::U32],
    );
    let (inp, out, w, h) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let tile = b.shared_alloc(Type::U32, 16 * 17).unwrap();
    let (tx, ty) = (b.thread_idx(Dim::X).unwrap(), b.thread_idx(Dim::Y).unwrap());
    let (bx, by) = (b.block_idx(Dim::X).unwrap(), b.block_idx(Dim::Y).unwrap());
    let (c16, c17) = (
        b.iconst(Type::U32, 16).unwrap(),
        b.iconst(Type::U32, 17).unwrap(),
    );
    let bx16 = b.mul(bx, c16).unwrap();
    let by16 = b.mul(by, c16).unwrap();
    // Load: row by16+ty, column bx16+tx.
    let (r, c) = (b.add(by16, ty).unwrap(), b.add(bx16, tx).unwrap());
    let ok = both_lt(&mut b, (r, h), (c, w));
    let iff = b.begin_if(ok, &[]).unwrap();
    let i = mul_add(&mut b, r, w, c);
    let v = load_at(&mut b, inp, i);
    let si = mul_add(&mut b, ty, c17, tx);
    store_at(&mut b, tile, si, v);
    b.end_if(iff, &[]).unwrap();
    b.barrier().unwrap();
    // Store: output row bx16+ty (an input column), column by16+tx (an input row).
    let (orow, ocol) = (b.add(bx16, ty).unwrap(), b.add(by16, tx).unwrap());
    let ok = both_lt(&mut b, (orow, w), (ocol, h));
    let iff = b.begin_if(ok, &[]).unwrap();
    let si = mul_add(&mut b, tx, c17, ty);
    let v = load_at(&mut b, tile, si);
    let o = mul_add(&mut b, orow, h, ocol);
    store_at(&mut b, out, o, v);
    b.end_if(iff, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn tiled_transpose_through_shared_memory_matches_the_interpreter() {
    let mut rng = Rng::new();
    let m = module(transpose());
    let (w, h) = (17 + rng.below(60) as u32, 9 + rng.below(60) as u32);
    let x: Vec<u32> = (0..w * h).map(|_| rng.next() as u32).collect();
    let grid = [w.div_ceil(16), h.div_ceil(16), 1];
    let (want, got) = both(
        &m,
        "transpose",
        grid,
        [16, 16, 1],
        &[
            A::Words(x.clone()),
            A::Words(vec![0; (w * h) as usize]),
            A::U32(w),
            A::U32(h),
        ],
    );
    assert_eq!(got[1], want[1]);
    for r in 0..h {
        for c in 0..w {
            assert_eq!(got[1][(c * h + r) as usize], x[(r * w + c) as usize]);
        }
    }
}

/// hist[v % 64] += 1 for every v of x: per-block bins in shared memory
/// (zeroed by a thread-dependent loop, filled by shared atomics in a
/// grid-stride loop, added to the global bins with global atomics).
fn histogram() -> Function {
    let mut b = FunctionBuilder::kernel("hist", &[gptr(Type::U32), Type::U32, gptr(Type::U32)]);
    let (x, n, hist) = (b.param(0), b.param(1), b.param(2));
    let bins = b.shared_alloc(Type::U32, 64).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let gd = b.grid_dim(Dim::X).unwrap();
    let (z, c64, one) = (
        b.iconst(Type::U32, 0).unwrap(),
        b.iconst(Type::U32, 64).unwrap(),
        b.iconst(Type::U32, 1).unwrap(),
    );
    let fr = b.begin_for(tid, c64, bd, &[]).unwrap();
    store_at(&mut b, bins, fr.iv, z);
    b.end_for(fr, &[]).unwrap();
    b.barrier().unwrap();
    let start = mul_add(&mut b, bid, bd, tid);
    let stride = b.mul(gd, bd).unwrap();
    let fr = b.begin_for(start, n, stride, &[]).unwrap();
    let v = load_at(&mut b, x, fr.iv);
    let k = b.rem(v, c64).unwrap();
    let pb = b.ptr_add(bins, k).unwrap();
    b.atomic(AtomicOp::Add, Scope::Block, pb, one).unwrap();
    b.end_for(fr, &[]).unwrap();
    b.barrier().unwrap();
    let fr = b.begin_for(tid, c64, bd, &[]).unwrap();
    let c = load_at(&mut b, bins, fr.iv);
    let ph = b.ptr_add(hist, fr.iv).unwrap();
    b.atomic(AtomicOp::Add, Scope::Device, ph, c).unwrap();
    b.end_for(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn histogram_with_shared_atomics_matches_the_interpreter() {
    let mut rng = Rng::new();
    let m = module(histogram());
    let n = 500 + rng.below(5000) as u32;
    let x: Vec<u32> = (0..n).map(|_| rng.next() as u32).collect();
    let mut h = vec![0u32; 64];
    for v in &x {
        h[(v % 64) as usize] += 1;
    }
    // Its counting loop is interchanged; rows as SIMD lanes or thread by thread.
    for affine in [false, true] {
        let opts = HostOptions {
            affine_rows: Some(affine),
            ..HostOptions::default()
        };
        let blocks = 1 + rng.below(9) as u32;
        let threads = 32 * (1 + rng.below(4) as u32);
        let (want, got) = both_with(
            &m,
            "hist",
            [blocks, 1, 1],
            [threads, 1, 1],
            &[A::Words(x.clone()), A::U32(n), A::Words(vec![0; 64])],
            &opts,
        );
        assert_eq!(got[1], want[1]);
        assert_eq!(got[1], h);
    }
}

/// Every kind of read-modify-write the CPU lowers without `lock` on shared
/// memory (the block's, which one worker runs from start to end), with the
/// old values used: per block, thread 0 sets six shared words and an f32, every
/// thread applies `add 1` (its old value: a ticket), `sub v`, `and`, `or`,
/// `xor`, `xchg tid` and an f32 `add` to them, and after a barrier thread 0
/// copies the words out. `tick[gid]`, `xold[gid]`: the old values of `add`
/// and `xchg`; `res[block * 8 + k]`: the final words.
fn shared_rmw() -> Function {
    let g = gptr(Type::U32);
    let mut b = FunctionBuilder::kernel("rmw", &[g.clone(), g.clone(), g.clone(), g]);
    let (x, tick, xold, res) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let sh = b.shared_alloc(Type::U32, 6).unwrap();
    let shf = b.shared_alloc(Type::F32, 1).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let gid = mul_add(&mut b, bid, bd, tid);
    let z = b.iconst(Type::U32, 0).unwrap();
    let first = b.eq(tid, z).unwrap();
    let iff = b.begin_if(first, &[]).unwrap();
    for (k, v) in [0u32, 4_000_000_000, 0xffff_ffff, 0, 0x5a5a_5a5a, 7]
        .iter()
        .enumerate()
    {
        let kk = b.iconst(Type::U32, k as i64).unwrap();
        let p = b.ptr_add(sh, kk).unwrap();
        let c = b.iconst(Type::U32, i64::from(*v)).unwrap();
        b.store(p, c).unwrap();
    }
    let f0 = b.fconst(Type::F32, 0.5).unwrap();
    b.store(shf, f0).unwrap();
    b.end_if(iff, &[]).unwrap();
    b.barrier().unwrap();
    let v = load_at(&mut b, x, gid);
    let at = |b: &mut FunctionBuilder, k: i64| {
        let kk = b.iconst(Type::U32, k).unwrap();
        b.ptr_add(sh, kk).unwrap()
    };
    let one = b.iconst(Type::U32, 1).unwrap();
    let p0 = at(&mut b, 0);
    let t = b.atomic(AtomicOp::Add, Scope::Block, p0, one).unwrap();
    store_at(&mut b, tick, gid, t);
    let c255 = b.iconst(Type::U32, 255).unwrap();
    let small = b.and(v, c255).unwrap();
    let p1 = at(&mut b, 1);
    b.atomic(AtomicOp::Sub, Scope::Block, p1, small).unwrap();
    let c31 = b.iconst(Type::U32, 31).unwrap();
    let bit = b.and(tid, c31).unwrap();
    let m = b.shl(one, bit).unwrap();
    let nm = b.not(m).unwrap();
    let p2 = at(&mut b, 2);
    b.atomic(AtomicOp::And, Scope::Block, p2, nm).unwrap();
    let p3 = at(&mut b, 3);
    b.atomic(AtomicOp::Or, Scope::Block, p3, m).unwrap();
    let p4 = at(&mut b, 4);
    b.atomic(AtomicOp::Xor, Scope::Block, p4, v).unwrap();
    let p5 = at(&mut b, 5);
    let o = b.atomic(AtomicOp::Exch, Scope::Block, p5, tid).unwrap();
    store_at(&mut b, xold, gid, o);
    let fv = b.cast(small, Type::F32).unwrap();
    b.atomic(AtomicOp::Add, Scope::Block, shf, fv).unwrap();
    b.barrier().unwrap();
    let iff = b.begin_if(first, &[]).unwrap();
    let c8 = b.iconst(Type::U32, 8).unwrap();
    let rb = b.mul(bid, c8).unwrap();
    for k in 0..6 {
        let p = at(&mut b, k);
        let w = b.load(p).unwrap();
        let kk = b.iconst(Type::U32, k).unwrap();
        let ri = b.add(rb, kk).unwrap();
        store_at(&mut b, res, ri, w);
    }
    let fw = b.load(shf).unwrap();
    let fb = b.bitcast(fw, Type::U32).unwrap();
    let c7 = b.iconst(Type::U32, 7).unwrap();
    let ri = b.add(rb, c7).unwrap();
    store_at(&mut b, res, ri, fb);
    b.end_if(iff, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn shared_read_modify_writes_match_the_interpreter() {
    let mut rng = Rng::new();
    let m = module(shared_rmw());
    // Shared memory only: plain loads and stores, no `lock`ed instruction.
    let p = host::prepare(&m, &HostOptions::default()).unwrap();
    assert!(!p.ir.contains("atomicrmw"), "a shared atomic stayed atomic");
    let blocks = 1 + rng.below(5) as u32;
    let threads = 1 + rng.below(256) as u32;
    let n = (blocks * threads) as usize;
    let x: Vec<u32> = (0..n).map(|_| rng.next() as u32).collect();
    let poison = vec![0xdead_beef; n];
    let (want, got) = both(
        &m,
        "rmw",
        [blocks, 1, 1],
        [threads, 1, 1],
        &[
            A::Words(x.clone()),
            A::Words(poison.clone()),
            A::Words(poison),
            A::Words(vec![0xdead_beef; 8 * blocks as usize]),
        ],
    );
    // Final words: the same in any order of the threads.
    assert_eq!(got[3], want[3]);
    for (blk, xs) in x.chunks(threads as usize).enumerate() {
        let r = &got[3][blk * 8..blk * 8 + 8];
        let small: u32 = xs.iter().map(|v| v & 255).sum();
        let mask = (0..threads).fold(0u32, |a, t| a | 1 << (t % 32));
        assert_eq!(r[0], threads);
        assert_eq!(r[1], 4_000_000_000u32.wrapping_sub(small));
        assert_eq!(r[2], !mask);
        assert_eq!(r[3], mask);
        assert_eq!(r[4], xs.iter().fold(0x5a5a_5a5a, |a, v| a ^ v));
        assert_eq!(f32::from_bits(r[7]), 0.5 + small as f32);
        // Tickets: each of 0..threads once; xchg: the old values and the
        // final word are the initial 7 and every thread index, once each.
        let mut t: Vec<u32> = got[1][blk * threads as usize..][..threads as usize].to_vec();
        t.sort_unstable();
        assert!(t.iter().copied().eq(0..threads));
        let mut o: Vec<u32> = got[2][blk * threads as usize..][..threads as usize].to_vec();
        o.push(r[5]);
        o.sort_unstable();
        let mut w: Vec<u32> = (0..threads).chain([7]).collect();
        w.sort_unstable();
        assert_eq!(o, w);
    }
}

/// Threads below `k` run `rounds` rounds of "barrier, then add the left
/// neighbour's shared value"; the others return at once (they no longer
/// take part in barriers, as in the interpreter). With `split`, threads
/// below `k` wait at one barrier and the others at another: an error.
fn partial(split: bool) -> Function {
    let mut b = FunctionBuilder::kernel("partial", &[gptr(Type::U32), Type::U32, Type::U32]);
    let (io, k, rounds) = (b.param(0), b.param(1), b.param(2));
    let sh = b.shared_alloc(Type::U32, 1024).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let p = b.ptr_add(io, tid).unwrap();
    let v = b.load(p).unwrap();
    let ps = b.ptr_add(sh, tid).unwrap();
    b.store(ps, v).unwrap();
    let low = b.cmp(CmpOp::Lt, tid, k).unwrap();
    let mut iff = b.begin_if(low, &[]).unwrap();
    let (z, one) = (
        b.iconst(Type::U32, 0).unwrap(),
        b.iconst(Type::U32, 1).unwrap(),
    );
    let fr = b.begin_for(z, rounds, one, &[v]).unwrap();
    b.barrier().unwrap();
    let left = b.cmp(CmpOp::Gt, tid, z).unwrap();
    let t1 = b.sub(tid, one).unwrap();
    let j = b.select(left, t1, tid).unwrap();
    let lv = load_at(&mut b, sh, j);
    let acc = b.add(fr.carried[0], lv).unwrap();
    b.barrier().unwrap();
    b.store(ps, acc).unwrap();
    let res = b.end_for(fr, &[acc]).unwrap();
    b.store(p, res[0]).unwrap();
    if split {
        b.begin_else(&mut iff, &[]).unwrap();
        b.barrier().unwrap();
    }
    b.end_if(iff, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn barriers_under_thread_dependent_control_flow() {
    let mut rng = Rng::new();
    let m = module(partial(false));
    let threads = 64 + rng.below(200) as u32;
    let k = 1 + rng.below(u64::from(threads)) as u32;
    let rounds = 1 + rng.below(6) as u32;
    let x: Vec<u32> = (0..threads).map(|_| rng.below(1000) as u32).collect();
    let (want, got) = both(
        &m,
        "partial",
        [2, 1, 1],
        [threads, 1, 1],
        &[A::Words(x), A::U32(k), A::U32(rounds)],
    );
    assert_eq!(got[0], want[0]);

    // Threads waiting at two different barriers: a typed run-time error on
    // the CPU, as on the interpreter.
    let m = module(partial(true));
    let interp = Interpreter::new(&m).unwrap();
    let mut bufs = vec![vec![0u8; 4 * 64]];
    assert!(interp
        .launch(
            "partial",
            [1, 1, 1],
            [64, 1, 1],
            0,
            &[IArg::Buffer(0), IArg::Int(5), IArg::Int(2)],
            &mut bufs,
        )
        .is_err());
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    let mut io = vec![0u32; 64];
    let e = jit
        .launch(
            "partial",
            [3, 1, 1],
            [64, 1, 1],
            &mut [
                Arg::Buffer(Buffer::new(&mut io)),
                Arg::Scalar(Scalar::UInt(5)),
                Arg::Scalar(Scalar::UInt(2)),
            ],
            0,
        )
        .unwrap_err();
    match e {
        HostError::Runtime(r) => {
            assert_eq!(r.code, host::regions::ERR_BARRIER);
            assert!(r.message.contains("divergent barrier"), "{}", r.message);
            // Threads 0-4 wait at one barrier, 5-63 at the other: the runner
            // names the first thread that differs from thread 0.
            assert!(r.message.contains("thread 5 of a block"), "{}", r.message);
        }
        e => panic!("expected a run-time error, got {e}"),
    }
}

#[test]
fn barrier_kernels_report_and_bounds_errors() {
    let m = module(tree_reduce(false));
    let jit = host::jit(&m, &HostOptions::default()).unwrap();
    assert!(jit
        .report
        .to_string()
        .contains("each barrier splits the block's threads into regions"));
    let reduce = |grid: [u32; 3], block: [u32; 3], x: &mut [u32], out: &mut [u32]| {
        let mut args = [Arg::Buffer(Buffer::new(x)), Arg::Buffer(Buffer::new(out))];
        jit.launch("reduce", grid, block, &mut args, 0).unwrap_err()
    };
    // Too small an output: a bounds error from inside a region, frames freed.
    let mut x = vec![1u32; 4 * 256];
    let mut out = vec![0u32; 2];
    let e = reduce([4, 1, 1], [256, 1, 1], &mut x, &mut out);
    assert!(e.to_string().contains("out of bounds"), "{e}");
    // More threads than a GPU block may have: an argument error.
    let e = reduce([1, 1, 1], [256, 8, 1], &mut x, &mut out);
    assert!(matches!(e, HostError::Argument(_)), "{e}");
}

#[test]
fn barrier_kernels_at_o0_and_ahead_of_time() {
    let mut rng = Rng::new();
    let m = module(tree_reduce(false));
    let opts = HostOptions {
        opt_level: Some(OptLevel::O0),
        ..HostOptions::default()
    };
    let jit = host::jit(&m, &opts).unwrap();
    let blocks = 2 + rng.below(5) as usize;
    let mut x: Vec<u32> = (0..blocks * 256).map(|_| rng.next() as u32).collect();
    let mut out = vec![0u32; blocks];
    let want: Vec<u32> = x
        .chunks(256)
        .map(|c| c.iter().fold(0u32, |a, w| a.wrapping_add(*w)))
        .collect();
    jit.launch(
        "reduce",
        [blocks as u32, 1, 1],
        [256, 1, 1],
        &mut [
            Arg::Buffer(Buffer::new(&mut x)),
            Arg::Buffer(Buffer::new(&mut out)),
        ],
        0,
    )
    .unwrap();
    assert_eq!(out, want);
    let obj = host::emit(&m, &HostOptions::default(), host::Emit::Object).unwrap();
    assert!(obj.symbols.iter().any(|s| s == "reduce.zx_block"));
}

/// Every example module compiles for the CPU (kernels with barriers are now
/// lowered, so LLVM must accept their coroutine form): no internal errors.
#[test]
fn every_example_compiles_for_the_cpu() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut barrier_kernels = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "zir") {
            continue;
        }
        let Ok(m) = parse_module(&std::fs::read_to_string(&p).unwrap()) else {
            continue;
        };
        match host::jit(&m, &HostOptions::default()) {
            Ok(jit) => {
                for f in &m.functions {
                    if f.is_kernel()
                        && host::regions::has_suspend(f)
                        && jit.function(&f.name).unwrap().kind == HostFnKind::CpuKernel
                    {
                        barrier_kernels += 1;
                    }
                }
            }
            Err(e) => assert!(
                !matches!(e, HostError::Internal { .. }),
                "{}: {e}",
                p.display()
            ),
        }
    }
    assert!(barrier_kernels > 0);
}

/// Barrier-only kernels are split at their barriers (one thread loop per
/// region, no coroutine); a kernel with a warp collective stays a coroutine.
#[test]
fn barrier_kernels_are_split_into_region_loops() {
    let m = module(tree_reduce(true));
    let p = host::prepare(&m, &HostOptions::default()).unwrap();
    assert!(p.ir.contains("zx.resume"), "no region dispatch");
    assert!(!p.ir.contains("presplitcoroutine"), "still a coroutine");
    assert!(p.report.to_string().contains("region fission"));
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/reduce_sum.zir");
    let m = parse_module(&std::fs::read_to_string(dir).unwrap()).unwrap();
    let p = host::prepare(&m, &HostOptions::default()).unwrap();
    assert!(
        p.ir.contains("presplitcoroutine"),
        "shuffles need the coroutine"
    );
}

/// Values of every kind live across barriers of a split kernel: a pointer
/// with its bounds-check offset, a bool and a loaded word from region 0 used
/// after the last barrier, a loop-carried value across two barriers per
/// iteration, and a value defined inside the loop used only in the same
/// region (not saved).
fn relay() -> Function {
    let mut b = FunctionBuilder::kernel("relay", &[gptr(Type::U32), Type::U32, Type::U32]);
    let (io, k, rounds) = (b.param(0), b.param(1), b.param(2));
    let sh = b.shared_alloc(Type::U32, 1024).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let n = b.block_dim(Dim::X).unwrap();
    let gi = mul_add(&mut b, bid, n, tid);
    let p = b.ptr_add(io, gi).unwrap();
    let v = b.load(p).unwrap();
    let flag = b.cmp(CmpOp::Lt, tid, k).unwrap();
    let ps = b.ptr_add(sh, tid).unwrap();
    b.store(ps, v).unwrap();
    b.barrier().unwrap();
    let (z, one) = (
        b.iconst(Type::U32, 0).unwrap(),
        b.iconst(Type::U32, 1).unwrap(),
    );
    let t1 = b.add(tid, one).unwrap();
    let j = b.binary(BinOp::Rem, t1, n).unwrap();
    let w = load_at(&mut b, sh, j);
    b.barrier().unwrap();
    let fr = b.begin_for(z, rounds, one, &[w]).unwrap();
    b.store(ps, fr.carried[0]).unwrap();
    b.barrier().unwrap();
    let tr = b.add(tid, fr.iv).unwrap();
    let jr = b.binary(BinOp::Rem, tr, n).unwrap();
    let nb = load_at(&mut b, sh, jr);
    let mixed = b.binary(BinOp::Xor, fr.carried[0], nb).unwrap();
    let acc = b.add(mixed, fr.iv).unwrap();
    b.barrier().unwrap();
    let res = b.end_for(fr, &[acc]).unwrap();
    let out = b.select(flag, res[0], v).unwrap();
    b.store(p, out).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn values_live_across_barriers_match_the_interpreter() {
    let mut rng = Rng::new();
    let m = module(relay());
    let p = host::prepare(&m, &HostOptions::default()).unwrap();
    assert!(p.ir.contains("zx.resume") && !p.ir.contains("presplitcoroutine"));
    for it in 0..4 {
        let threads = 1 + rng.below(300) as u32;
        let blocks = 1 + rng.below(4) as u32;
        let words: Vec<u32> = (0..threads * blocks).map(|_| rng.next() as u32).collect();
        let k = rng.below(u64::from(threads) + 1) as u32;
        let rounds = rng.below(6) as u32;
        // Threads one after another, and as SIMD lanes (regions::fast_runner).
        let vector = HostOptions {
            vector_threads: Some(it % 2 == 1),
            ..HostOptions::default()
        };
        let (want, got) = both_with(
            &m,
            "relay",
            [blocks, 1, 1],
            [threads, 1, 1],
            &[A::Words(words), A::U32(k), A::U32(rounds)],
            &vector,
        );
        assert_eq!(
            got, want,
            "{threads} threads, {blocks} blocks, k {k}, {rounds} rounds"
        );
    }
}

/// Per-thread strided walks that the CPU backend interchanges with the
/// thread loop (`host/interchange.rs`): a grid-stride loop (`float`: an f32
/// sum of squares, else a u32 wrapping sum of `x * i`), whose trip count
/// differs between threads when `n` is not a multiple of the grid; with
/// `early`, a thread that meets a word above `limit` stores its index and
/// returns from inside the loop. out[gid] = the thread's result.
fn grid_stride(float: bool, early: bool) -> Function {
    let t = if float { Type::F32 } else { Type::U32 };
    let mut b = FunctionBuilder::kernel(
        "gs",
        &[
            gptr(t.clone()),
            Type::U32,
            Type::U32,
            gptr(Type::U32),
            gptr(t.clone()),
        ],
    );
    let (x, n, limit, hit, out) = (b.param(0), b.param(1), b.param(2), b.param(3), b.param(4));
    let tid = b.thread_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let gd = b.grid_dim(Dim::X).unwrap();
    let gid = mul_add(&mut b, bid, bd, tid);
    let stride = b.mul(gd, bd).unwrap();
    let zero = if float {
        b.fconst(Type::F32, 0.0).unwrap()
    } else {
        b.iconst(Type::U32, 0).unwrap()
    };
    let fr = b.begin_for(gid, n, stride, &[zero]).unwrap();
    let v = load_at(&mut b, x, fr.iv);
    if early {
        let bits = if float {
            b.bitcast(v, Type::U32).unwrap()
        } else {
            v
        };
        let big = b.cmp(CmpOp::Gt, bits, limit).unwrap();
        let iff = b.begin_if(big, &[]).unwrap();
        store_at(&mut b, hit, gid, fr.iv);
        b.ret(&[]).unwrap();
        b.end_if(iff, &[]).unwrap();
    }
    let term = if float {
        b.mul(v, v).unwrap()
    } else {
        b.mul(v, fr.iv).unwrap()
    };
    let acc = b.add(fr.carried[0], term).unwrap();
    let res = b.end_for(fr, &[acc]).unwrap();
    store_at(&mut b, out, gid, res[0]);
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// A grid-stride loop then a barrier: per block, the sum (f32) of what its
/// threads' grid-stride walks over `x` (n words) add up, the partials
/// through shared memory, thread 0 adding them in order.
fn block_sums() -> Function {
    let mut b = FunctionBuilder::kernel("rows", &[gptr(Type::F32), Type::U32, gptr(Type::F32)]);
    let (x, n, out) = (b.param(0), b.param(1), b.param(2));
    let sh = b.shared_alloc(Type::F32, 256).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let gd = b.grid_dim(Dim::X).unwrap();
    let gid = mul_add(&mut b, bid, bd, tid);
    let stride = b.mul(gd, bd).unwrap();
    let zero = b.fconst(Type::F32, 0.0).unwrap();
    let fr = b.begin_for(gid, n, stride, &[zero]).unwrap();
    let v = load_at(&mut b, x, fr.iv);
    let acc = b.add(fr.carried[0], v).unwrap();
    let s = b.end_for(fr, &[acc]).unwrap();
    store_at(&mut b, sh, tid, s[0]);
    b.barrier().unwrap();
    let z = b.iconst(Type::U32, 0).unwrap();
    let first = b.cmp(CmpOp::Eq, tid, z).unwrap();
    let iff = b.begin_if(first, &[]).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let fr = b.begin_for(z, bd, one, &[zero]).unwrap();
    let v = load_at(&mut b, sh, fr.iv);
    let acc = b.add(fr.carried[0], v).unwrap();
    let tot = b.end_for(fr, &[acc]).unwrap();
    store_at(&mut b, out, bid, tot[0]);
    b.end_if(iff, &[]).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

fn interchanged(m: &Module, opts: &HostOptions) -> bool {
    let p = host::prepare(m, opts).unwrap();
    p.report
        .to_string()
        .contains("interchanged with the thread loop")
}

/// An interchanged loop's rows of threads get a second entry that rebuilds
/// the loop's index (and the other affine values) from the thread index,
/// and LLVM makes that row loop SIMD code: vector types in the optimized
/// block runner: the sum of squares as a vector `fadd`. Without
/// `affine_rows` the entry is not there.
#[test]
fn interchanged_rows_are_simd_lanes() {
    let m = module(grid_stride(true, false));
    let off = HostOptions {
        affine_rows: Some(false),
        ..HostOptions::default()
    };
    let p = host::prepare(&m, &off).unwrap();
    assert!(
        !p.ir.contains("zx.resumeA"),
        "affine entry without affine rows"
    );
    let on = HostOptions {
        affine_rows: Some(true),
        ..HostOptions::default()
    };
    let p = host::prepare(&m, &on).unwrap();
    assert!(p.ir.contains("zx.resumeA"), "no affine entry");
    let art = host::emit(&m, &on, host::Emit::LlvmIr).unwrap();
    let ir = String::from_utf8(art.bytes).unwrap();
    let runner = ir
        .split("\ndefine ")
        .find(|f| f.contains("@gs.zx_block("))
        .expect("no block runner");
    assert!(
        runner.contains("fadd <"),
        "the interchanged row loop is not vectorized"
    );
}

/// Interchanged loops give the interpreter's results bit for bit (each
/// thread's accumulator keeps its own order), with and without SIMD lanes:
/// trip counts that differ between threads, threads returning from inside
/// the loop, a barrier after the loop, random grids and block sizes; a
/// thread stopping at the loop's header every iteration, and every K-th
/// (`HostOptions::iterations`, K random up to 64: trip counts below, at
/// and above K).
#[test]
fn interchanged_loops_match_the_interpreter() {
    let mut rng = Rng::new();
    let modes = [(false, false), (false, true), (true, false), (true, true)];
    let ks = [1, 1u32 << (1 + rng.below(6))];
    for ((vector, affine), iters) in modes.iter().flat_map(|m| ks.iter().map(move |k| (*m, *k))) {
        let opts = HostOptions {
            vector_threads: Some(vector),
            affine_rows: Some(affine),
            iterations: Some(iters),
            ..HostOptions::default()
        };
        for (float, early) in [(false, false), (true, false), (false, true), (true, true)] {
            let m = module(grid_stride(float, early));
            assert!(interchanged(&m, &opts), "grid-stride loop not interchanged");
            // The header's stop counter is there only when K > 1.
            let ir = host::prepare(&m, &opts).unwrap().ir;
            assert_eq!(ir.contains("zx.go"), iters > 1, "iterations {iters}");
            let blocks = 1 + rng.below(6) as u32;
            let threads = 1 + rng.below(200) as u32;
            let total = (blocks * threads) as usize;
            let n = rng.below(20 * total as u64) as u32;
            let x: Vec<u32> = (0..n.max(1))
                .map(|_| {
                    if float {
                        (rng.next() as f32 / u64::MAX as f32 * 2.0).to_bits()
                    } else {
                        rng.next() as u32
                    }
                })
                .collect();
            // Early exits in a few percent of the words.
            let limit = if float {
                0x3FF0_0000
            } else {
                u32::MAX - u32::MAX / 32
            };
            let (want, got) = both_with(
                &m,
                "gs",
                [blocks, 1, 1],
                [threads, 1, 1],
                &[
                    A::Words(x),
                    A::U32(n),
                    A::U32(limit),
                    A::Words(vec![0xDEAD_BEEF; total]),
                    A::Words(vec![0xA5A5_A5A5; total]),
                ],
                &opts,
            );
            assert_eq!(
                got, want,
                "float {float} early {early} vector {vector} affine {affine} iterations {iters}"
            );
        }
        let m = module(block_sums());
        assert!(interchanged(&m, &opts), "grid-stride loop not interchanged");
        let rows = 1 + rng.below(5) as u32;
        let threads = 1 + rng.below(256) as u32;
        let n = rng.below(u64::from(rows * threads) * 9) as u32 + 1;
        let x: Vec<u32> = (0..n)
            .map(|_| (rng.next() as f32 / u64::MAX as f32 - 0.5).to_bits())
            .collect();
        let (want, got) = both_with(
            &m,
            "rows",
            [rows, 1, 1],
            [threads, 1, 1],
            &[
                A::Words(x),
                A::U32(n),
                A::Words(vec![0xA5A5_A5A5; rows as usize]),
            ],
            &opts,
        );
        assert_eq!(got, want, "block sums, vector {vector} iterations {iters}");
    }
}

/// Loops that stay per-thread: one with an atomic whose old value is read
/// or that adds floats (its results depend on the order of the threads), one
/// whose addresses do not depend on the thread (every thread walks the same
/// words: nothing to make contiguous). The histogram's counting loop (an
/// integer add whose old value nobody reads: the same memory in any order)
/// is taken.
#[test]
fn loops_with_atomics_or_uniform_addresses_are_not_interchanged() {
    let opts = HostOptions::default();
    // Its grid-stride loop counts with an order-free atomic (taken); its
    // other loops walk the shared bins at stride blockDim (they stay in
    // cache: not taken).
    let hs = host::interchange::headers(&histogram());
    assert_eq!(hs.len(), 1, "{hs:?}");
    for (float, read) in [(false, true), (true, false)] {
        let t = if float { Type::F32 } else { Type::U32 };
        let mut b = FunctionBuilder::kernel("tick", &[gptr(t.clone()), Type::U32, gptr(t.clone())]);
        let (x, n, out) = (b.param(0), b.param(1), b.param(2));
        let sh = b.shared_alloc(t, 1).unwrap();
        let tid = b.thread_idx(Dim::X).unwrap();
        let bd = b.block_dim(Dim::X).unwrap();
        let gd = b.grid_dim(Dim::X).unwrap();
        let stride = b.mul(gd, bd).unwrap();
        let fr = b.begin_for(tid, n, stride, &[]).unwrap();
        let v = load_at(&mut b, x, fr.iv);
        let old = b.atomic(AtomicOp::Add, Scope::Block, sh, v).unwrap();
        if read {
            store_at(&mut b, out, fr.iv, old);
        }
        b.end_for(fr, &[]).unwrap();
        b.ret(&[]).unwrap();
        let hs = host::interchange::headers(&b.finish().unwrap());
        assert!(hs.is_empty(), "float {float}, read {read}: {hs:?}");
    }
    let mut b = FunctionBuilder::kernel("same", &[gptr(Type::U32), Type::U32, gptr(Type::U32)]);
    let (x, n, out) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let (z, one) = (
        b.iconst(Type::U32, 0).unwrap(),
        b.iconst(Type::U32, 1).unwrap(),
    );
    let fr = b.begin_for(z, n, one, &[z]).unwrap();
    let v = load_at(&mut b, x, fr.iv);
    let w = b.mul(v, tid).unwrap();
    let acc = b.add(fr.carried[0], w).unwrap();
    let r = b.end_for(fr, &[acc]).unwrap();
    store_at(&mut b, out, tid, r[0]);
    b.ret(&[]).unwrap();
    let m = module(b.finish().unwrap());
    assert!(!interchanged(&m, &opts));
}

/// Values computed from the thread's context, the parameters and constants
/// only (`fission::hoisted`): every op kind the lowering recomputes before
/// the region dispatch rather than saving — 2-D thread and block indices,
/// `grid_dim`, `add`/`sub`/`mul`, `shl` and signed `shr` by a parameter
/// (amounts past the width), `min`/`max`, `xor`, signed and unsigned casts
/// (widening, narrowing), `and`, `cmp` and `select` — mixed into a word
/// that each thread stores after two barriers, in a loop with a barrier
/// (`rounds` iterations), next to a shared value saved across them.
/// Returns the kernel and the values that must not be saved.
fn context_mix() -> (Function, Vec<ValueId>) {
    let mut b = FunctionBuilder::kernel("ctxmix", &[gptr(Type::U32), Type::U32, Type::U32]);
    let (io, sh_amt, rounds) = (b.param(0), b.param(1), b.param(2));
    let sh = b.shared_alloc(Type::U32, 1024).unwrap();
    let tx = b.thread_idx(Dim::X).unwrap();
    let ty = b.thread_idx(Dim::Y).unwrap();
    let nx = b.block_dim(Dim::X).unwrap();
    let ny = b.block_dim(Dim::Y).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let gx = b.grid_dim(Dim::X).unwrap();
    let tid = mul_add(&mut b, ty, nx, tx);
    let nt = b.mul(nx, ny).unwrap();
    let gi = mul_add(&mut b, bid, nt, tid);
    let s1 = b.shl(gi, sh_amt).unwrap();
    let ti = b.cast(tid, Type::I32).unwrap();
    let c5 = b.iconst(Type::I32, 5).unwrap();
    let neg = b.sub(c5, ti).unwrap();
    let amt = b.cast(sh_amt, Type::I32).unwrap();
    let s2 = b.shr(neg, amt).unwrap();
    let mn = b.min(ti, c5).unwrap();
    let mx = b.binary(BinOp::Max, neg, mn).unwrap();
    let wide = b.cast(mx, Type::I64).unwrap();
    let g64 = b.cast(gx, Type::U64).unwrap();
    let w2 = b.mul(wide, wide).unwrap();
    let w3 = b.cast(w2, Type::U64).unwrap();
    let w4 = b.add(w3, g64).unwrap();
    let narrow = b.cast(w4, Type::U8).unwrap();
    let nb = b.cast(narrow, Type::U32).unwrap();
    let (zero0, one0) = (
        b.iconst(Type::U32, 0).unwrap(),
        b.iconst(Type::U32, 1).unwrap(),
    );
    let low = b.binary(BinOp::And, tx, one0).unwrap();
    let odd = b.cmp(CmpOp::Ne, low, zero0).unwrap();
    let lt = b.cmp(CmpOp::Lt, neg, mn).unwrap();
    let s2u = b.cast(s2, Type::U32).unwrap();
    let pick = b.select(lt, s1, s2u).unwrap();
    let pick2 = b.select(odd, pick, nb).unwrap();
    let mix = b.binary(BinOp::Xor, pick2, nb).unwrap();
    // Not hoisted: a value read from memory, saved across the barriers.
    let p = b.ptr_add(io, gi).unwrap();
    let v = b.load(p).unwrap();
    let ps = b.ptr_add(sh, tid).unwrap();
    b.store(ps, v).unwrap();
    b.barrier().unwrap();
    let (z, one) = (
        b.iconst(Type::U32, 0).unwrap(),
        b.iconst(Type::U32, 1).unwrap(),
    );
    let fr = b.begin_for(z, rounds, one, &[v]).unwrap();
    let t1 = b.add(tid, fr.iv).unwrap();
    let j = b.binary(BinOp::Rem, t1, nt).unwrap();
    let w = load_at(&mut b, sh, j);
    let acc = b.add(fr.carried[0], w).unwrap();
    let acc = b.binary(BinOp::Xor, acc, mix).unwrap();
    b.barrier().unwrap();
    b.store(ps, acc).unwrap();
    b.barrier().unwrap();
    let res = b.end_for(fr, &[acc]).unwrap();
    let out = b.add(res[0], mix).unwrap();
    b.store(p, out).unwrap();
    b.ret(&[]).unwrap();
    let f = b.finish().unwrap();
    (
        f,
        vec![tx, ty, tid, gi, s1, s2, mx, w4, nb, odd, lt, pick2, mix],
    )
}

/// Context-only values are recomputed in every region rather than saved at
/// the barriers (no per-thread slot in the lowered kernel), and the results
/// equal the interpreter's bit for bit: random 2-D blocks, grids and shift
/// amounts (past the width included), threads one after another and as
/// SIMD lanes.
#[test]
fn context_values_are_recomputed_not_saved() {
    let mut rng = Rng::new();
    let (f, hoisted) = context_mix();
    let m = module(f);
    let p = host::prepare(&m, &HostOptions::default()).unwrap();
    assert!(p.ir.contains("zx.resume") && !p.ir.contains("presplitcoroutine"));
    for v in &hoisted {
        assert!(
            !p.ir.contains(&format!("%v{}.a = alloca", v.0)),
            "v{} is saved across barriers\n{}",
            v.0,
            p.ir
        );
    }
    for it in 0..6 {
        let (bx, by) = (1 + rng.below(40) as u32, 1 + rng.below(8) as u32);
        let blocks = 1 + rng.below(4) as u32;
        let n = bx * by * blocks;
        let words: Vec<u32> = (0..n).map(|_| rng.next() as u32).collect();
        let amt = rng.below(40) as u32;
        let rounds = rng.below(5) as u32;
        let opts = HostOptions {
            vector_threads: Some(it % 2 == 1),
            ..HostOptions::default()
        };
        let (want, got) = both_with(
            &m,
            "ctxmix",
            [blocks, 1, 1],
            [bx, by, 1],
            &[A::Words(words), A::U32(amt), A::U32(rounds)],
            &opts,
        );
        assert_eq!(
            got, want,
            "{bx}x{by} threads, {blocks} blocks, shift {amt}, {rounds} rounds"
        );
    }
}
