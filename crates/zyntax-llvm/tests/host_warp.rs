//! Warp collectives (`shfl`, `vote`) natively on the CPU backend against the
//! reference interpreter, on fresh random inputs with poisoned outputs: a
//! warp reduction by `shfl.xor`, `shfl.down` then a barrier (the example
//! `reduce_sum.zir`), a ballot/popc compaction, a `shfl.up` scan in 16-lane
//! segments, partial masks with random source lanes and widths, blocks that
//! are not a whole number of warps, and the error for a mask naming a lane
//! that returned.

use zyntax_hir::parse_module;
use zyntax_interp::{Arg as IArg, Interpreter};
use zyntax_llvm::host::{self, Arg, Buffer, HostError, HostFnKind, HostOptions, Scalar};

mod fresh_rng;
use fresh_rng::Rng;

const POISON: u32 = 0xDEAD_BEEF;

/// A buffer of 32-bit words or a u32 scalar argument.
enum A {
    Words(Vec<u32>),
    U32(u32),
}

/// Launch `name` on the interpreter (`Ok(buffers)` or its error text).
fn interp(
    m: &zyntax_hir::Module,
    name: &str,
    grid: u32,
    block: u32,
    args: &[A],
) -> Result<Vec<Vec<u32>>, String> {
    let it = Interpreter::new(m).map_err(|e| e.to_string())?;
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
    it.launch(name, [grid, 1, 1], [block, 1, 1], 0, &iargs, &mut bufs)
        .map_err(|e| e.to_string())?;
    Ok(bufs
        .iter()
        .map(|b| {
            b.chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect())
}

/// Launch `name` natively on the CPU (it must compile for the CPU).
fn cpu(
    m: &zyntax_hir::Module,
    name: &str,
    grid: u32,
    block: u32,
    args: &[A],
) -> Result<Vec<Vec<u32>>, HostError> {
    let jit = host::jit(m, &HostOptions::default()).unwrap();
    assert_eq!(jit.function(name).unwrap().kind, HostFnKind::CpuKernel);
    let mut words: Vec<Vec<u32>> = args
        .iter()
        .filter_map(|a| match a {
            A::Words(w) => Some(w.clone()),
            A::U32(_) => None,
        })
        .collect();
    let params = m.function(name).unwrap().param_types();
    let mut it = words.iter_mut();
    let mut hargs = Vec::new();
    for (a, t) in args.iter().zip(&params) {
        match a {
            A::Words(_) => {
                let w = it.next().unwrap();
                let (elem, _) = host::pointee_elem(t).unwrap();
                // Words reinterpreted as the parameter's element type (4 or 8 bytes).
                let len = w.len() * 4 / elem.size_bytes() as usize;
                // SAFETY: `w` outlives the launch and holds `len` elements of `elem`.
                let buf = unsafe { Buffer::from_raw(w.as_mut_ptr().cast(), len, elem) };
                hargs.push(Arg::Buffer(buf));
            }
            A::U32(v) => hargs.push(Arg::Scalar(Scalar::UInt(u64::from(*v)))),
        }
    }
    jit.launch(name, [grid, 1, 1], [block, 1, 1], &mut hargs, 0)?;
    drop(hargs);
    Ok(words)
}

fn same(m: &zyntax_hir::Module, name: &str, grid: u32, block: u32, args: &[A]) -> Vec<Vec<u32>> {
    let want = interp(m, name, grid, block, args).unwrap_or_else(|e| panic!("interp: {e}"));
    let got = cpu(m, name, grid, block, args).unwrap_or_else(|e| panic!("cpu: {e}"));
    assert_eq!(got, want, "@{name} grid {grid} block {block}");
    got
}

/// out[gid] = the sum over the thread's warp (u32, wrapping) by a butterfly
/// of `shfl.xor`; every lane ends with the total.
const WARP_SUM: &str = r#"module "w" targets(sm_80)
kernel @warp_sum {
block0(v0: ptr<global, u32>, v1: ptr<global, u32>):
    v2: u32 = thread_idx.x
    v3: u32 = block_idx.x
    v4: u32 = block_dim.x
    v5: u32 = mul v3, v4
    v6: u32 = add v5, v2
    v7: ptr<global, u32> = ptr_add v0, v6
    v8: u32 = load v7
    v9: u32 = const 4294967295
    v10: u32 = const 16
    v11: u32 = shfl.xor v9, v8, v10 width 32
    v12: u32 = add v8, v11
    v13: u32 = const 8
    v14: u32 = shfl.xor v9, v12, v13 width 32
    v15: u32 = add v12, v14
    v16: u32 = const 4
    v17: u32 = shfl.xor v9, v15, v16 width 32
    v18: u32 = add v15, v17
    v19: u32 = const 2
    v20: u32 = shfl.xor v9, v18, v19 width 32
    v21: u32 = add v18, v20
    v22: u32 = const 1
    v23: u32 = shfl.xor v9, v21, v22 width 32
    v24: u32 = add v21, v23
    v25: ptr<global, u32> = ptr_add v1, v6
    store v25, v24
    return
}
"#;

#[test]
fn warp_sum_by_shfl_xor() {
    let m = parse_module(WARP_SUM).unwrap();
    let mut rng = Rng::new();
    let (grid, block) = (3, 128);
    let n = (grid * block) as usize;
    let x = rng.words(n);
    let got = same(
        &m,
        "warp_sum",
        grid,
        block,
        &[A::Words(x.clone()), A::Words(vec![POISON; n])],
    );
    for (i, v) in got[1].iter().enumerate() {
        let w = i / 32 * 32;
        let want = x[w..w + 32].iter().fold(0u32, |a, b| a.wrapping_add(*b));
        assert_eq!(*v, want, "thread {i}");
    }
}

#[test]
fn reduce_sum_example_shfl_down_and_barrier() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/reduce_sum.zir"
    ))
    .unwrap();
    let m = parse_module(&text).unwrap();
    let mut rng = Rng::new();
    let n = 1000usize;
    // Small integers: every partial sum is exact in f32, so the order of
    // additions cannot matter and the result is checkable exactly.
    let x: Vec<f32> = (0..n).map(|_| (rng.next() % 100) as f32).collect();
    let bits: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
    // Warp sums by shfl.down, per-warp partials through shared memory and a
    // barrier, warp 0 reduces them, and thread 0 adds the block's sum into
    // out[0] atomically.
    let (grid, block) = (4, 256);
    let got = same(
        &m,
        "block_sum",
        grid,
        block,
        &[A::Words(bits), A::Words(vec![0]), A::U32(n as u32)],
    );
    let want: f32 = x.iter().sum();
    assert_eq!(f32::from_bits(got[1][0]), want);
}

/// Stream compaction per warp: the lanes whose value is odd write it to
/// out[warp*32 + rank], rank = popc(ballot & lanes below); count[warp] =
/// popc(ballot); any/all of the predicate go to flags[gid] (any + 2*all).
const COMPACT: &str = r#"module "c" targets(sm_80)
kernel @compact {
block0(v0: ptr<global, u32>, v1: ptr<global, u32>, v2: ptr<global, u32>, v3: ptr<global, u32>):
    v4: u32 = thread_idx.x
    v5: u32 = block_idx.x
    v6: u32 = block_dim.x
    v7: u32 = mul v5, v6
    v8: u32 = add v7, v4
    v9: ptr<global, u32> = ptr_add v0, v8
    v10: u32 = load v9
    v11: u32 = const 1
    v12: u32 = and v10, v11
    v13: u32 = const 0
    v14: bool = cmp.ne v12, v13
    v15: u32 = const 4294967295
    v16: u32 = vote.ballot v15, v14
    v17: bool = vote.any v15, v14
    v18: bool = vote.all v15, v14
    v19: u32 = const 31
    v20: u32 = and v8, v19
    v21: u32 = shl v11, v20
    v22: u32 = sub v21, v11
    v23: u32 = and v16, v22
    v24: u32 = popc v23
    v25: u32 = sub v8, v20
    v26: u32 = select v17, v11, v13
    v27: u32 = const 2
    v28: u32 = select v18, v27, v13
    v29: u32 = add v26, v28
    v30: ptr<global, u32> = ptr_add v3, v8
    store v30, v29
    v31: bool = cmp.eq v20, v13
    br v31, block1, block2
block1:
    v32: u32 = const 5
    v33: u32 = shr v8, v32
    v34: ptr<global, u32> = ptr_add v2, v33
    v35: u32 = popc v16
    store v34, v35
    jump block2
block2:
    br v14, block3, block4
block3:
    v36: u32 = add v25, v24
    v37: ptr<global, u32> = ptr_add v1, v36
    store v37, v10
    jump block4
block4:
    return
}
"#;

#[test]
fn ballot_compaction() {
    let m = parse_module(COMPACT).unwrap();
    let mut rng = Rng::new();
    let (grid, block) = (2, 96);
    let n = (grid * block) as usize;
    let mut x = rng.words(n);
    // One warp all odd, one all even: vote.all and vote.any at both ends.
    for v in &mut x[0..32] {
        *v |= 1;
    }
    for v in &mut x[32..64] {
        *v &= !1;
    }
    let args = [
        A::Words(x.clone()),
        A::Words(vec![POISON; n]),
        A::Words(vec![POISON; n / 32]),
        A::Words(vec![POISON; n]),
    ];
    let got = same(&m, "compact", grid, block, &args);
    for w in 0..n / 32 {
        let odd: Vec<u32> = x[w * 32..w * 32 + 32]
            .iter()
            .copied()
            .filter(|v| v & 1 == 1)
            .collect();
        assert_eq!(got[1][w * 32..w * 32 + odd.len()], odd[..], "warp {w}");
        assert_eq!(got[2][w] as usize, odd.len());
        let flags = u32::from(!odd.is_empty()) + 2 * u32::from(odd.len() == 32);
        assert!(got[3][w * 32..w * 32 + 32].iter().all(|f| *f == flags));
    }
}

/// Inclusive prefix sum in segments of 16 lanes by `shfl.up` with width 16:
/// for k in 1, 2, 4, 8 { y = shfl.up(v, k); if seg_lane >= k { v += y } }.
const SCAN: &str = r#"module "s" targets(sm_80)
kernel @scan {
block0(v0: ptr<global, u32>, v1: ptr<global, u32>):
    v2: u32 = thread_idx.x
    v3: ptr<global, u32> = ptr_add v0, v2
    v4: u32 = load v3
    v5: u32 = const 15
    v6: u32 = and v2, v5
    v7: u32 = const 4294967295
    v8: u32 = const 0
    v9: u32 = const 1
    v10: u32 = shfl.up v7, v4, v9 width 16
    v11: bool = cmp.ge v6, v9
    v12: u32 = select v11, v10, v8
    v13: u32 = add v4, v12
    v14: u32 = const 2
    v15: u32 = shfl.up v7, v13, v14 width 16
    v16: bool = cmp.ge v6, v14
    v17: u32 = select v16, v15, v8
    v18: u32 = add v13, v17
    v19: u32 = const 4
    v20: u32 = shfl.up v7, v18, v19 width 16
    v21: bool = cmp.ge v6, v19
    v22: u32 = select v21, v20, v8
    v23: u32 = add v18, v22
    v24: u32 = const 8
    v25: u32 = shfl.up v7, v23, v24 width 16
    v26: bool = cmp.ge v6, v24
    v27: u32 = select v26, v25, v8
    v28: u32 = add v23, v27
    v29: ptr<global, u32> = ptr_add v1, v2
    store v29, v28
    return
}
"#;

#[test]
fn shfl_up_segmented_scan() {
    let m = parse_module(SCAN).unwrap();
    let mut rng = Rng::new();
    let n = 128usize;
    let x = rng.words(n);
    let got = same(
        &m,
        "scan",
        1,
        n as u32,
        &[A::Words(x.clone()), A::Words(vec![POISON; n])],
    );
    for i in 0..n {
        let lo = i / 16 * 16;
        let want = x[lo..=i].iter().fold(0u32, |a, b| a.wrapping_add(*b));
        assert_eq!(got[1][i], want, "thread {i}");
    }
}

/// Partial masks: only the lanes of the random mask `m` take part; each
/// shuffles its value with `shfl.MODE` from a random lane operand (the
/// upper bits too), with width `W`, and stores the result (lanes outside
/// the mask leave the poison).
fn partial(mode: &str, width: u32) -> String {
    format!(
        r#"module "p" targets(sm_80)
kernel @partial {{
block0(v0: ptr<global, u32>, v1: ptr<global, u32>, v2: ptr<global, u32>, v3: u32):
    v4: u32 = thread_idx.x
    v5: u32 = const 31
    v6: u32 = and v4, v5
    v7: u32 = shr v3, v6
    v8: u32 = const 1
    v9: u32 = and v7, v8
    v10: u32 = const 0
    v11: bool = cmp.ne v9, v10
    br v11, block1, block2
block1:
    v12: ptr<global, u32> = ptr_add v0, v4
    v13: u32 = load v12
    v14: ptr<global, u32> = ptr_add v1, v4
    v15: u32 = load v14
    v16: u32 = shfl.{mode} v3, v13, v15 width {width}
    v17: ptr<global, u32> = ptr_add v2, v4
    store v17, v16
    jump block2
block2:
    return
}}
"#
    )
}

#[test]
fn partial_masks_every_mode_and_width() {
    let mut rng = Rng::new();
    for mode in ["idx", "up", "down", "xor"] {
        for width in [1, 2, 4, 8, 16, 32] {
            let m = parse_module(&partial(mode, width)).unwrap();
            // 80 threads: the last warp has 16 lanes.
            let n = 80usize;
            let x = rng.words(n);
            let lanes: Vec<u32> = (0..n).map(|_| (rng.next() % 40) as u32).collect();
            for mask in [u32::MAX, rng.next() as u32, (rng.next() as u32) & 0xFFFF] {
                let args = [
                    A::Words(x.clone()),
                    A::Words(lanes.clone()),
                    A::Words(vec![POISON; n]),
                    A::U32(mask),
                ];
                let got = same(&m, "partial", 1, n as u32, &args);
                for (i, v) in got[2].iter().enumerate() {
                    if mask >> (i % 32) & 1 == 0 {
                        assert_eq!(*v, POISON, "{mode} width {width} thread {i}");
                    }
                }
            }
        }
    }
}

/// A full mask reached by only half the lanes of a warp (the others
/// returned): the interpreter reports it, the CPU too.
#[test]
fn mask_naming_a_returned_lane_is_an_error() {
    let m = parse_module(&partial("idx", 32)).unwrap();
    let n = 32usize;
    let args = [
        A::Words(vec![1; n]),
        A::Words(vec![0; n]),
        A::Words(vec![POISON; n]),
        A::U32(u32::MAX),
    ];
    // Every lane takes part: fine.
    same(&m, "partial", 1, n as u32, &args);
    let text = partial("idx", 32).replace(
        "v16: u32 = shfl.idx v3,",
        "v99: u32 = const 4294967295\n    v16: u32 = shfl.idx v99,",
    );
    let m = parse_module(&text).unwrap();
    let args = [
        A::Words(vec![1; n]),
        A::Words(vec![0; n]),
        A::Words(vec![POISON; n]),
        A::U32(0xFFFF),
    ];
    assert!(interp(&m, "partial", 1, n as u32, &args).is_err());
    match cpu(&m, "partial", 1, n as u32, &args) {
        Err(HostError::Runtime(r)) => {
            assert_eq!(r.code, host::warp::ERR_COLLECTIVE, "{}", r.message);
            assert!(
                r.message.contains("divergent warp collective: lane 16"),
                "{}",
                r.message
            );
        }
        other => panic!("expected the divergent-collective error, got {other:?}"),
    }
}

/// Shuffles of 64-bit values (f64 and i64: the whole slot) and 32-bit ones
/// with narrower widths (f32 in segments of 8, u32 of 16), by `shfl.idx`
/// from a random lane.
const TYPED: &str = r#"module "t" targets(sm_80)
kernel @typed {
block0(v0: ptr<global, f64>, v1: ptr<global, i64>, v2: ptr<global, u32>, v3: ptr<global, f64>, v4: ptr<global, i64>, v5: ptr<global, u32>):
    v6: u32 = thread_idx.x
    v7: ptr<global, u32> = ptr_add v2, v6
    v8: u32 = load v7
    v9: u32 = const 4294967295
    v10: ptr<global, f64> = ptr_add v0, v6
    v11: f64 = load v10
    v12: f64 = shfl.idx v9, v11, v8 width 32
    v13: ptr<global, f64> = ptr_add v3, v6
    store v13, v12
    v14: ptr<global, i64> = ptr_add v1, v6
    v15: i64 = load v14
    v16: i64 = shfl.idx v9, v15, v8 width 32
    v17: ptr<global, i64> = ptr_add v4, v6
    store v17, v16
    v18: f32 = cast v8
    v19: f32 = shfl.idx v9, v18, v8 width 8
    v20: u32 = cast v19
    v21: u32 = const 1
    v22: u32 = and v8, v21
    v25: u32 = shfl.idx v9, v22, v8 width 16
    v26: u32 = const 256
    v27: u32 = mul v25, v26
    v28: u32 = add v20, v27
    v29: ptr<global, u32> = ptr_add v5, v6
    store v29, v28
    return
}
"#;

#[test]
fn shuffles_of_64_bit_values_and_narrow_widths() {
    let m = parse_module(TYPED).unwrap();
    let mut rng = Rng::new();
    let n = 64usize;
    // Each 64-bit element as two words (little-endian).
    let f: Vec<u32> = (0..n)
        .flat_map(|_| {
            let v = (rng.next() % 1_000_000) as f64 / 7.0 - 5000.0;
            let b = v.to_bits();
            [b as u32, (b >> 32) as u32]
        })
        .collect();
    let i: Vec<u32> = rng.words(2 * n);
    let lanes: Vec<u32> = (0..n).map(|_| (rng.next() % 200) as u32).collect();
    let args = [
        A::Words(f.clone()),
        A::Words(i.clone()),
        A::Words(lanes.clone()),
        A::Words(vec![POISON; 2 * n]),
        A::Words(vec![POISON; 2 * n]),
        A::Words(vec![POISON; n]),
    ];
    let got = same(&m, "typed", 1, n as u32, &args);
    for t in 0..n {
        let src = t / 32 * 32 + (lanes[t] & 31) as usize;
        assert_eq!(
            got[3][2 * t..2 * t + 2],
            f[2 * src..2 * src + 2],
            "f64 thread {t}"
        );
        assert_eq!(
            got[4][2 * t..2 * t + 2],
            i[2 * src..2 * src + 2],
            "i64 thread {t}"
        );
    }
}

/// `warp_sync` (every lane of the warp must reach it) and `elect.sync`
/// (true in exactly the lowest lane of each warp), under thread-dependent
/// control flow before them: out[gid] = x[gid] * 2 + elected. 80 threads:
/// the last warp is partial.
const SYNC_ELECT: &str = r#"module "se" targets(sm_90)
kernel @sync_elect {
block0(v0: ptr<global, u32>, v1: ptr<global, u32>):
    v3: u32 = thread_idx.x
    v4: ptr<global, u32> = ptr_add v0, v3
    v5: u32 = load v4
    v8: u32 = const 1
    v20: u32 = and v5, v8
    v21: bool = cmp.eq v20, v8
    br v21, block1(v5), block2(v5)
block1(v22: u32):
    v23: u32 = xor v22, v8
    jump block2(v23)
block2(v24: u32):
    v7: u32 = const 4294967295
    warp_sync v7
    v15: bool = elect.sync
    v16: u32 = cast v15
    v17: u32 = shl v5, v8
    v18: u32 = add v17, v16
    v25: u32 = xor v24, v5
    v26: u32 = add v18, v25
    v19: ptr<global, u32> = ptr_add v1, v3
    store v19, v26
    return
}
"#;

#[test]
fn warp_sync_and_elect_sync() {
    let m = parse_module(SYNC_ELECT).unwrap();
    let mut rng = Rng::new();
    let n = 80usize;
    let x = rng.words(n);
    let got = same(
        &m,
        "sync_elect",
        1,
        n as u32,
        &[A::Words(x.clone()), A::Words(vec![POISON; n])],
    );
    for (t, v) in got[1].iter().enumerate() {
        let elected = u32::from(t % 32 == 0);
        let flip = x[t] & 1; // odd values were flipped, then xor-ed back in
        let want = x[t]
            .wrapping_shl(1)
            .wrapping_add(elected)
            .wrapping_add(flip);
        assert_eq!(*v, want, "thread {t}");
    }
}

/// `redux` (add, min, max, and, or, xor; u32 and i32; full and half-warp
/// masks): the kernel of tests/data/redux.zir natively against the
/// interpreter and Rust, two warps.
#[test]
fn redux_every_op() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/redux.zir"
    ))
    .unwrap();
    let m = parse_module(&text).unwrap();
    let mut rng = Rng::new();
    let n = 64usize;
    let x = rng.words(n);
    let got = same(
        &m,
        "redux_ops",
        1,
        n as u32,
        &[A::Words(x.clone()), A::Words(vec![POISON; 10 * n])],
    );
    for t in 0..n {
        let w = &x[t / 32 * 32..t / 32 * 32 + 32];
        let half = if t % 32 < 16 { &w[..16] } else { &w[16..] };
        let s = |v: &[u32]| v.iter().fold(0u32, |a, b| a.wrapping_add(*b));
        let want = [
            s(w),
            *w.iter().min().unwrap(),
            *w.iter().max().unwrap(),
            w.iter().fold(u32::MAX, |a, b| a & b),
            w.iter().fold(0, |a, b| a | b),
            w.iter().fold(0, |a, b| a ^ b),
            w.iter().map(|v| *v as i32).min().unwrap() as u32,
            w.iter().map(|v| *v as i32).max().unwrap() as u32,
            s(half),
            half.iter().map(|v| *v as i32).min().unwrap() as u32,
        ];
        for (k, v) in want.iter().enumerate() {
            assert_eq!(got[1][k * n + t], *v, "op {k} thread {t}");
        }
    }
}

/// `match.any` on u32 keys (full mask) and on u64 values (even and odd lanes
/// in separate masks): each lane gets the lanes of its mask holding an equal
/// value (80 threads: a partial warp).
const MATCH_ANY: &str = r#"module "ma" targets(sm_80)
kernel @match_any {
block0(v0: ptr<global, u32>, v1: ptr<global, u32>):
    v2: u32 = thread_idx.x
    v3: ptr<global, u32> = ptr_add v0, v2
    v4: u32 = load v3
    v5: u32 = const 3
    v6: u32 = and v4, v5
    v7: u32 = const 4294967295
    v8: u32 = match.any v7, v6
    v9: u64 = cast v6
    v10: u64 = const 4294967296
    v11: u64 = mul v9, v10
    v18: u32 = const 1
    v19: u32 = and v2, v18
    v20: bool = cmp.eq v19, v18
    v21: u32 = const 2863311530
    v22: u32 = const 1431655765
    v12: u32 = select v20, v21, v22
    v14: u32 = match.any v12, v11
    v15: ptr<global, u32> = ptr_add v1, v2
    store v15, v8
    v16: u32 = block_dim.x
    v17: ptr<global, u32> = ptr_add v15, v16
    store v17, v14
    return
}
"#;

#[test]
fn match_any_u32_and_u64() {
    let m = parse_module(MATCH_ANY).unwrap();
    let mut rng = Rng::new();
    let n = 80usize;
    let x = rng.words(n);
    let got = same(
        &m,
        "match_any",
        1,
        n as u32,
        &[A::Words(x.clone()), A::Words(vec![POISON; 2 * n])],
    );
    for (t, v) in got[1][..n].iter().enumerate() {
        let base = t / 32 * 32;
        let warp = &x[base..(base + 32).min(n)];
        let full = warp
            .iter()
            .enumerate()
            .filter(|(_, k)| *k & 3 == x[t] & 3)
            .fold(0u32, |m, (l, _)| m | 1 << l);
        assert_eq!(*v, full, "u32 thread {t}");
    }
}
