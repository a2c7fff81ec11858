//! Warp collectives (every shuffle mode and width, vote, match), atomics and
//! MMA fragments against references written from the CUDA/PTX definitions.

mod common;

use common::*;
use half::{bf16, f16};
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};

const FULL: i64 = 0xffff_ffff;

fn g(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

fn module(f: Function, targets: &[Arch]) -> Module {
    let mut m = Module::new("t");
    m.targets = targets.to_vec();
    m.functions.push(f);
    m
}

/// out[tid] = shfl.<mode>(mask, vals[tid], lanes[tid], width)
fn shfl_kernel(mode: ShflMode, width: u32) -> Function {
    let mut b = FunctionBuilder::kernel("k", &[g(Type::U32), g(Type::U32), g(Type::U32)]);
    let (out, vals, lns) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let pv = b.ptr_add(vals, tid).unwrap();
    let v = b.load(pv).unwrap();
    let pl = b.ptr_add(lns, tid).unwrap();
    let l = b.load(pl).unwrap();
    let mask = b.iconst(Type::U32, FULL).unwrap();
    let r = b.shfl(mode, mask, v, l, width).unwrap();
    let po = b.ptr_add(out, tid).unwrap();
    b.store(po, r).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

/// The CUDA definition of `__shfl*_sync(full, v, b, width)`; `b` uses its low 5 bits as PTX does.
fn shfl_ref(mode: ShflMode, width: usize, vals: &[u32], b: &[u32]) -> Vec<u32> {
    (0..32)
        .map(|lane| {
            let d = (b[lane] & 31) as usize;
            let start = lane / width * width;
            let end = start + width - 1;
            let src = match mode {
                ShflMode::Idx => start + d % width,
                ShflMode::Up => {
                    if lane >= d && lane - d >= start {
                        lane - d
                    } else {
                        lane
                    }
                }
                ShflMode::Down => {
                    if lane + d <= end {
                        lane + d
                    } else {
                        lane
                    }
                }
                // Earlier segments are reachable, later ones give the own value.
                ShflMode::Xor => {
                    if lane ^ d <= end {
                        lane ^ d
                    } else {
                        lane
                    }
                }
            };
            vals[src]
        })
        .collect()
}

#[test]
fn shuffle_every_mode_and_width() {
    let mut rng = Rng::new(11);
    for &mode in ShflMode::ALL {
        for width in [32u32, 16, 8, 4, 2, 1] {
            let m = module(shfl_kernel(mode, width), &[]);
            let it = Interpreter::new(&m).unwrap();
            for round in 0..4 {
                let vals: Vec<u32> = (0..32).map(|_| rng.u32()).collect();
                // Round 0: the same delta everywhere (the common use); then random, beyond 31 too.
                let lns: Vec<u32> = if round == 0 {
                    vec![1 + rng.below(16); 32]
                } else {
                    (0..32).map(|_| rng.below(40)).collect()
                };
                let mut bufs = vec![vec![0u8; 128], u32_bytes(&vals), u32_bytes(&lns)];
                it.launch(
                    "k",
                    [1, 1, 1],
                    [32, 1, 1],
                    0,
                    &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
                    &mut bufs,
                )
                .unwrap();
                assert_eq!(
                    bytes_u32(&bufs[0]),
                    shfl_ref(mode, width as usize, &vals, &lns),
                    "mode {mode} width {width} lanes {lns:?}"
                );
            }
        }
    }
}

#[test]
fn shuffle_with_partial_mask_and_64_bit_values() {
    // Even lanes shuffle among themselves (mask 0x55555555): a source lane that
    // does not take part gives the lane's own value.
    let mut b = FunctionBuilder::kernel("k", &[g(Type::U64), g(Type::U64), g(Type::U32)]);
    let (out, vals, lns) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let pv = b.ptr_add(vals, tid).unwrap();
    let v = b.load(pv).unwrap();
    let pl = b.ptr_add(lns, tid).unwrap();
    let l = b.load(pl).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let odd = b.binary(BinOp::And, tid, one).unwrap();
    let zero = b.iconst(Type::U32, 0).unwrap();
    let even = b.cmp(CmpOp::Eq, odd, zero).unwrap();
    let fr = b.begin_if(even, &[]).unwrap();
    let mask = b.iconst(Type::U32, 0x5555_5555).unwrap();
    let r = b.shfl(ShflMode::Idx, mask, v, l, 32).unwrap();
    let po = b.ptr_add(out, tid).unwrap();
    b.store(po, r).unwrap();
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    let m = module(b.finish().unwrap(), &[]);
    let it = Interpreter::new(&m).unwrap();
    let mut rng = Rng::new(12);
    let vals: Vec<u64> = (0..32).map(|_| rng.next_u64()).collect();
    let lns: Vec<u32> = (0..32).map(|_| rng.below(32)).collect();
    let mut bufs = vec![vec![0u8; 256], u64_bytes(&vals), u32_bytes(&lns)];
    it.launch(
        "k",
        [1, 1, 1],
        [32, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
        &mut bufs,
    )
    .unwrap();
    let got = bytes_u64(&bufs[0]);
    for lane in 0..32 {
        let want = if lane % 2 == 1 {
            0
        } else if lns[lane] & 1 == 0 {
            vals[lns[lane] as usize]
        } else {
            vals[lane]
        };
        assert_eq!(got[lane], want, "lane {lane}");
    }
}

/// Runs ballot/any/all and match.any/match.all for the lanes below `active`
/// (with the mask of those lanes) and returns per lane:
/// [ballot, any, all, match_any, match_all_mask, match_all_pred].
fn vote_match(vals: &[u32], active: u32) -> Vec<[u32; 6]> {
    let mut b = FunctionBuilder::kernel("k", &[g(Type::U32), g(Type::U32), Type::U32]);
    let (out, vals_p, act) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let inb = b.cmp(CmpOp::Lt, tid, act).unwrap();
    let fr = b.begin_if(inb, &[]).unwrap();
    let pv = b.ptr_add(vals_p, tid).unwrap();
    let v = b.load(pv).unwrap();
    // mask = active == 32 ? ~0 : (1 << active) - 1
    let one = b.iconst(Type::U32, 1).unwrap();
    let sh = b.binary(BinOp::Shl, one, act).unwrap();
    let mask = b.sub(sh, one).unwrap();
    let three = b.iconst(Type::U32, 3).unwrap();
    let bit = b.binary(BinOp::And, v, one).unwrap();
    let pred = b.cmp(CmpOp::Eq, bit, one).unwrap();
    let key = b.binary(BinOp::And, v, three).unwrap();
    let ballot = b.vote(VoteMode::Ballot, mask, pred).unwrap();
    let any = b.vote(VoteMode::Any, mask, pred).unwrap();
    let all = b.vote(VoteMode::All, mask, pred).unwrap();
    let many = b.match_(MatchMode::Any, mask, key).unwrap();
    let mall = b.match_(MatchMode::All, mask, v).unwrap();
    let six = b.iconst(Type::U32, 6).unwrap();
    let base = b.mul(tid, six).unwrap();
    let anyu = b.cast(any, Type::U32).unwrap();
    let allu = b.cast(all, Type::U32).unwrap();
    let mallp = b.cast(mall[1], Type::U32).unwrap();
    for (k, x) in [ballot, anyu, allu, many[0], mall[0], mallp]
        .into_iter()
        .enumerate()
    {
        let kk = b.iconst(Type::U32, k as i64).unwrap();
        let idx = b.add(base, kk).unwrap();
        let p = b.ptr_add(out, idx).unwrap();
        b.store(p, x).unwrap();
    }
    b.end_if(fr, &[]).unwrap();
    b.ret(&[]).unwrap();
    let m = module(b.finish().unwrap(), &[]);
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![vec![0u8; 32 * 6 * 4], u32_bytes(vals)];
    // active == 32 would make `1 << 32` clamp to 0 and the mask 0xffffffff: exactly the full mask.
    it.launch(
        "k",
        [1, 1, 1],
        [32, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Int(active.into())],
        &mut bufs,
    )
    .unwrap();
    bytes_u32(&bufs[0])
        .chunks(6)
        .map(|c| [c[0], c[1], c[2], c[3], c[4], c[5]])
        .collect()
}

#[test]
fn vote_and_match() {
    let mut rng = Rng::new(13);
    for active in [32u32, 20, 1] {
        for round in 0..4 {
            let vals: Vec<u32> = match round {
                0 => vec![7; 32], // all agree, all predicates true
                1 => vec![6; 32], // all predicates false
                _ => (0..32).map(|_| rng.below(8)).collect(),
            };
            let got = vote_match(&vals, active);
            let mask: u32 = if active == 32 {
                u32::MAX
            } else {
                (1 << active) - 1
            };
            let mut ballot = 0u32;
            for (l, v) in vals.iter().enumerate().take(active as usize) {
                if v & 1 == 1 {
                    ballot |= 1 << l;
                }
            }
            for l in 0..active as usize {
                let mut same_key = 0u32;
                let mut same_val = 0u32;
                for j in 0..active as usize {
                    if vals[j] & 3 == vals[l] & 3 {
                        same_key |= 1 << j;
                    }
                    if vals[j] == vals[l] {
                        same_val |= 1 << j;
                    }
                }
                let all_same = same_val == mask;
                let want = [
                    ballot,
                    u32::from(ballot != 0),
                    u32::from(ballot == mask),
                    same_key,
                    if all_same { mask } else { 0 },
                    u32::from(all_same),
                ];
                assert_eq!(got[l], want, "active {active} lane {l} vals {vals:?}");
            }
            for (l, g) in got.iter().enumerate().skip(active as usize) {
                assert_eq!(*g, [0; 6], "inactive lane {l} wrote");
            }
        }
    }
}

/// p[0] = atomic op(p[0], vals[gid]); olds[gid] = old.
fn atomic_kernel(op: AtomicOp, ty: Type) -> Module {
    let mut b = FunctionBuilder::kernel("k", &[g(ty.clone()), g(ty.clone()), g(ty.clone())]);
    let (p, vals, olds) = (b.param(0), b.param(1), b.param(2));
    let tid = b.thread_idx(Dim::X).unwrap();
    let bid = b.block_idx(Dim::X).unwrap();
    let bd = b.block_dim(Dim::X).unwrap();
    let base = b.mul(bid, bd).unwrap();
    let gid = b.add(base, tid).unwrap();
    let pv = b.ptr_add(vals, gid).unwrap();
    let v = b.load(pv).unwrap();
    let old = b.atomic(op, Scope::Device, p, v).unwrap();
    let po = b.ptr_add(olds, gid).unwrap();
    b.store(po, old).unwrap();
    b.ret(&[]).unwrap();
    module(b.finish().unwrap(), &[Arch::from_name("sm_90").unwrap()])
}

fn apply_u64(op: AtomicOp, bits: u32, signed: bool, old: u64, v: u64) -> u64 {
    let m = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let sx = |x: u64| {
        if signed {
            ((x << (64 - bits)) as i64) >> (64 - bits)
        } else {
            x as i64
        }
    };
    let r = match op {
        AtomicOp::Add => old.wrapping_add(v),
        AtomicOp::Sub => old.wrapping_sub(v),
        AtomicOp::Min => {
            if (signed && sx(v) < sx(old)) || (!signed && v < old) {
                v
            } else {
                old
            }
        }
        AtomicOp::Max => {
            if (signed && sx(v) > sx(old)) || (!signed && v > old) {
                v
            } else {
                old
            }
        }
        AtomicOp::And => old & v,
        AtomicOp::Or => old | v,
        AtomicOp::Xor => old ^ v,
        AtomicOp::Exch => v,
        AtomicOp::Inc => {
            if old >= v {
                0
            } else {
                old + 1
            }
        }
        AtomicOp::Dec => {
            if old == 0 || old > v {
                v
            } else {
                old - 1
            }
        }
    };
    r & m
}

#[test]
fn every_atomic_op_on_integers() {
    let mut rng = Rng::new(14);
    let n = 3 * 96usize; // three blocks of three warps: lanes, warps and blocks all interleave
    let mut tested = Vec::new();
    for &op in AtomicOp::ALL {
        for (ty, bits, signed) in [
            (Type::U32, 32u32, false),
            (Type::I32, 32, true),
            (Type::U64, 64, false),
            (Type::I64, 64, true),
        ] {
            let m = atomic_kernel(op, ty.clone());
            if verify_module(&m).is_err() {
                continue; // PTX lacks this op/type combination
            }
            tested.push(format!("{op}.{ty}"));
            let it = Interpreter::new(&m).unwrap();
            let limit = 1 + u64::from(rng.below(50));
            let vals: Vec<u64> = (0..n)
                .map(|_| match op {
                    AtomicOp::Inc | AtomicOp::Dec => limit,
                    _ => rng.next_u64() & if bits == 32 { 0xffff_ffff } else { u64::MAX },
                })
                .collect();
            let init = match op {
                AtomicOp::Inc | AtomicOp::Dec => u64::from(rng.below(limit as u32)),
                _ => rng.next_u64() & if bits == 32 { 0xffff_ffff } else { u64::MAX },
            };
            let enc = |v: &[u64]| -> Vec<u8> {
                if bits == 32 {
                    u32_bytes(&v.iter().map(|x| *x as u32).collect::<Vec<_>>())
                } else {
                    u64_bytes(v)
                }
            };
            let dec = |b: &[u8]| -> Vec<u64> {
                if bits == 32 {
                    bytes_u32(b).into_iter().map(u64::from).collect()
                } else {
                    bytes_u64(b)
                }
            };
            let mut bufs = vec![enc(&[init]), enc(&vals), enc(&vec![0; n])];
            it.launch(
                "k",
                [3, 1, 1],
                [96, 1, 1],
                0,
                &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
                &mut bufs,
            )
            .unwrap();
            // Atomics of one launch apply in thread order (blocks, then warps, then lanes).
            let mut cur = init;
            let mut olds = Vec::new();
            for v in &vals {
                olds.push(cur);
                cur = apply_u64(op, bits, signed, cur, *v);
            }
            assert_eq!(dec(&bufs[0])[0], cur, "{op} {ty}");
            assert_eq!(dec(&bufs[2]), olds, "{op} {ty} old values");
        }
    }
    for must in [
        "add.u32", "add.u64", "min.i32", "max.u32", "and.u32", "or.u64", "xor.u32", "exch.u32",
        "inc.u32", "dec.u32",
    ] {
        assert!(
            tested.iter().any(|t| t == must),
            "{must} not tested; tested {tested:?}"
        );
    }
}

#[test]
fn float_atomics_and_cas() {
    let mut rng = Rng::new(15);
    // f32 add: the exact sum of small integers.
    let m = atomic_kernel(AtomicOp::Add, Type::F32);
    let it = Interpreter::new(&m).unwrap();
    let vals: Vec<f32> = (0..192).map(|_| (rng.below(64) + 1) as f32).collect();
    let mut bufs = vec![f32_bytes(&[0.5]), f32_bytes(&vals), vec![0u8; 192 * 4]];
    it.launch(
        "k",
        [2, 1, 1],
        [96, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
        &mut bufs,
    )
    .unwrap();
    assert_eq!(bytes_f32(&bufs[0])[0], 0.5 + vals.iter().sum::<f32>());

    // CAS: thread gid swaps gid -> gid+1, so in thread order every CAS succeeds once;
    // a second CAS with a stale expected value fails and returns the current value.
    let mut b = FunctionBuilder::kernel("cas", &[g(Type::U32), g(Type::U32)]);
    let (p, olds) = (b.param(0), b.param(1));
    let tid = b.thread_idx(Dim::X).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    let next = b.add(tid, one).unwrap();
    let old = b.atomic_cas(Scope::Device, p, tid, next).unwrap();
    let zero = b.iconst(Type::U32, 0).unwrap();
    let stale = b.atomic_cas(Scope::Device, p, zero, zero).unwrap();
    let two = b.iconst(Type::U32, 2).unwrap();
    let i = b.mul(tid, two).unwrap();
    let po = b.ptr_add(olds, i).unwrap();
    b.store(po, old).unwrap();
    let i1 = b.add(i, one).unwrap();
    let po1 = b.ptr_add(olds, i1).unwrap();
    b.store(po1, stale).unwrap();
    b.ret(&[]).unwrap();
    let m = module(b.finish().unwrap(), &[]);
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![u32_bytes(&[0]), vec![0u8; 64 * 8]];
    it.launch(
        "cas",
        [1, 1, 1],
        [64, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1)],
        &mut bufs,
    )
    .unwrap();
    // Lanes run each instruction together: all 64 first CASes, then the stale ones.
    assert_eq!(bytes_u32(&bufs[0])[0], 64);
    let olds = bytes_u32(&bufs[1]);
    for t in 0..64u32 {
        assert_eq!(olds[2 * t as usize], t);
        // Warp 0 runs both CASes before warp 1 starts: it sees 32, warp 1 sees 64.
        assert_eq!(olds[2 * t as usize + 1], if t < 32 { 32 } else { 64 });
    }
}

/// A kernel computing D = A*B + C with one warp for one tile of `shape`.
fn mma_kernel(
    shape: MmaShape,
    elem: ScalarType,
    acc: ScalarType,
    la: Layout,
    lb: Layout,
    lc: Layout,
) -> Module {
    let (mm, nn, kk) = shape.dims();
    let mut b = FunctionBuilder::kernel(
        "mma",
        &[
            g(Type::Scalar(elem)),
            g(Type::Scalar(elem)),
            g(Type::Scalar(acc)),
            g(Type::Scalar(acc)),
        ],
    );
    let ps = b.params();
    let ld =
        |l: Layout, rows: u32, cols: u32| i64::from(if l == Layout::Row { cols } else { rows });
    let fa = frag_type(FragKind::A, shape, elem, Some(la));
    let fb = frag_type(FragKind::B, shape, elem, Some(lb));
    let fc = frag_type(FragKind::Acc, shape, acc, None);
    let lda = b.iconst(Type::U32, ld(la, mm, kk)).unwrap();
    let ldb = b.iconst(Type::U32, ld(lb, kk, nn)).unwrap();
    let ldc = b.iconst(Type::U32, ld(lc, mm, nn)).unwrap();
    let a = b.mma_load(fa, la, ps[0], lda).unwrap();
    let bb = b.mma_load(fb, lb, ps[1], ldb).unwrap();
    let c = b.mma_load(fc, lc, ps[2], ldc).unwrap();
    let d = b.mma(a, bb, c).unwrap();
    b.mma_store(lc, ps[3], d, ldc).unwrap();
    b.ret(&[]).unwrap();
    module(b.finish().unwrap(), &[Arch::from_name("sm_80").unwrap()])
}

fn idx(l: Layout, i: usize, j: usize, rows: usize, cols: usize) -> usize {
    if l == Layout::Row {
        i * cols + j
    } else {
        j * rows + i
    }
}

#[test]
fn mma_every_shape_layout_and_type_vs_f64() {
    let mut rng = Rng::new(16);
    let mut count = 0;
    for &shape in &MmaShape::ALL {
        for (elem, acc) in [
            (ScalarType::F16, ScalarType::F32),
            (ScalarType::F16, ScalarType::F16),
            (ScalarType::BF16, ScalarType::F32),
        ] {
            for la in [Layout::Row, Layout::Col] {
                for lb in [Layout::Row, Layout::Col] {
                    for lc in [Layout::Row, Layout::Col] {
                        let m = mma_kernel(shape, elem, acc, la, lb, lc);
                        if let Err(e) = verify_module(&m) {
                            panic!("{shape:?} {elem} {acc}: {e}");
                        }
                        let it = Interpreter::new(&m).unwrap();
                        let (mm, nn, kk) = shape.dims();
                        let (mm, nn, kk) = (mm as usize, nn as usize, kk as usize);
                        let q = |x: f32, t: ScalarType| -> f64 {
                            match t {
                                ScalarType::F16 => f16::from_f32(x).to_f64(),
                                ScalarType::BF16 => bf16::from_f32(x).to_f64(),
                                _ => f64::from(x),
                            }
                        };
                        let enc = |v: &[f64], t: ScalarType| -> Vec<u8> {
                            v.iter()
                                .flat_map(|x| match t {
                                    ScalarType::F16 => f16::from_f64(*x).to_le_bytes().to_vec(),
                                    ScalarType::BF16 => bf16::from_f64(*x).to_le_bytes().to_vec(),
                                    _ => (*x as f32).to_le_bytes().to_vec(),
                                })
                                .collect()
                        };
                        let a: Vec<f64> =
                            (0..mm * kk).map(|_| q(rng.f32(-2.0, 2.0), elem)).collect();
                        let bm: Vec<f64> =
                            (0..kk * nn).map(|_| q(rng.f32(-2.0, 2.0), elem)).collect();
                        let c: Vec<f64> =
                            (0..mm * nn).map(|_| q(rng.f32(-1.0, 1.0), acc)).collect();
                        let esz = if acc == ScalarType::F32 { 4 } else { 2 };
                        let mut bufs = vec![
                            enc(&a, elem),
                            enc(&bm, elem),
                            enc(&c, acc),
                            vec![0u8; mm * nn * esz],
                        ];
                        it.launch(
                            "mma",
                            [1, 1, 1],
                            [32, 1, 1],
                            0,
                            &[
                                Arg::Buffer(0),
                                Arg::Buffer(1),
                                Arg::Buffer(2),
                                Arg::Buffer(3),
                            ],
                            &mut bufs,
                        )
                        .unwrap();
                        for i in 0..mm {
                            for j in 0..nn {
                                let mut s = c[idx(lc, i, j, mm, nn)];
                                for k in 0..kk {
                                    s += a[idx(la, i, k, mm, kk)] * bm[idx(lb, k, j, kk, nn)];
                                }
                                let off = idx(lc, i, j, mm, nn) * esz;
                                let got = if acc == ScalarType::F32 {
                                    f64::from(f32::from_le_bytes(
                                        bufs[3][off..off + 4].try_into().unwrap(),
                                    ))
                                } else {
                                    f16::from_le_bytes(bufs[3][off..off + 2].try_into().unwrap())
                                        .to_f64()
                                };
                                // Computed in f64, rounded once to the accumulator type.
                                let want = if acc == ScalarType::F32 {
                                    f64::from(s as f32)
                                } else {
                                    f16::from_f64(s).to_f64()
                                };
                                assert_eq!(
                                    got, want,
                                    "{shape:?} {elem}/{acc} {la:?}{lb:?}{lc:?} ({i},{j})"
                                );
                                let tol = if acc == ScalarType::F32 { 1e-5 } else { 2e-2 };
                                assert!((got - s).abs() <= tol * (1.0 + s.abs()));
                            }
                        }
                        count += 1;
                    }
                }
            }
        }
    }
    assert_eq!(count, 3 * 3 * 8);
}
