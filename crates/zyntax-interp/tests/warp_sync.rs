//! Issue 12 (warp-sync) instructions on the interpreter: the bit ops against
//! references written from the PTX ISA definitions on random inputs, and the
//! reductions, packed half atomics and ordered accesses of
//! `tests/data/warp_sync.zir` against their expected totals.

mod common;

use common::*;
use half::f16;
use zyntax_hir::Module;
use zyntax_interp::{Arg, Interpreter};

fn module() -> Module {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/warp_sync.zir");
    let text = std::fs::read_to_string(&p).unwrap();
    zyntax_hir::parse_module(&text).unwrap()
}

/// Low `n` bits set (n <= 64).
fn ones(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// PTX `bfe`: the field [pos, pos+len) clipped to the width, zero- or sign-extended
/// from the highest bit taken (an empty field is 0; a field past the top is the sign).
fn bfe_ref(a: u64, pos: u32, len: u32, w: u32, signed: bool) -> u64 {
    // 64-bit operands use the whole u32 values (as the hardware does), 32-bit their low 8 bits.
    let (pos, len) = if w == 64 {
        (pos, len)
    } else {
        (pos & 0xff, len & 0xff)
    };
    if len == 0 {
        return 0;
    }
    if pos >= w {
        let sign = signed && (a >> (w - 1)) & 1 == 1;
        return if sign { ones(w) } else { 0 };
    }
    let e = len.min(w - pos);
    let field = (a >> pos) & ones(e);
    if signed && (field >> (e - 1)) & 1 == 1 {
        (field | !ones(e)) & ones(w)
    } else {
        field
    }
}

/// PTX `bfi`: b with bits [pos, pos+len) (clipped to the width) taken from a's low bits.
fn bfi_ref(a: u64, b: u64, pos: u32, len: u32, w: u32) -> u64 {
    // 64-bit operands use the whole u32 values (as the hardware does), 32-bit their low 8 bits.
    let (pos, len) = if w == 64 {
        (pos, len)
    } else {
        (pos & 0xff, len & 0xff)
    };
    if len == 0 || pos >= w {
        return b;
    }
    let m = ones(len.min(w - pos)) << pos;
    (b & !m) | ((a << pos) & m)
}

/// PTX `prmt` default mode: byte k of d is byte (sel_k & 7) of b:a, or its sign if sel_k & 8.
fn prmt_ref(a: u32, b: u32, sel: u32) -> u32 {
    let bytes: Vec<u8> = a.to_le_bytes().into_iter().chain(b.to_le_bytes()).collect();
    let mut out = [0u8; 4];
    for (k, o) in out.iter_mut().enumerate() {
        let s = (sel >> (4 * k)) & 0xf;
        let byte = bytes[(s & 7) as usize];
        *o = if s & 8 == 0 {
            byte
        } else if byte & 0x80 != 0 {
            0xff
        } else {
            0
        };
    }
    u32::from_le_bytes(out)
}

/// PTX `shf.{l,r}`: the funnel of hi:lo shifted by n (already wrapped or clamped).
fn shf_ref(left: bool, lo: u32, hi: u32, n: u32) -> u32 {
    match (left, n) {
        (true, 0) => hi,
        (true, 32) => lo,
        (true, n) => (hi << n) | (lo >> (32 - n)),
        (false, 0) => lo,
        (false, 32) => hi,
        (false, n) => (lo >> n) | (hi << (32 - n)),
    }
}

/// Positions and lengths mostly inside the word, sometimes past it or up to 255.
fn small(r: &mut Rng) -> u32 {
    match r.below(8) {
        0 => r.u32(),
        1 => r.below(256),
        _ => r.below(70),
    }
}

#[test]
fn bit_ops_32_match_the_ptx_definitions() {
    let m = module();
    let it = Interpreter::new(&m).unwrap();
    let n = 256usize;
    let mut r = Rng::new(12);
    for _round in 0..4 {
        let a: Vec<u32> = (0..n).map(|_| r.u32()).collect();
        let b: Vec<u32> = (0..n).map(|_| r.u32()).collect();
        let c: Vec<u32> = (0..n).map(|_| small(&mut r)).collect();
        let d: Vec<u32> = (0..n).map(|_| small(&mut r)).collect();
        let e: Vec<u32> = (0..n).map(|_| r.u32()).collect();
        let poison: Vec<u32> = (0..8 * n).map(|_| r.u32()).collect();
        let mut bufs = vec![
            u32_bytes(&a),
            u32_bytes(&b),
            u32_bytes(&c),
            u32_bytes(&d),
            u32_bytes(&e),
            u32_bytes(&poison),
        ];
        let args: Vec<Arg> = (0..6).map(Arg::Buffer).collect();
        it.launch("bits32", [1, 1, 1], [n as u32, 1, 1], 0, &args, &mut bufs)
            .unwrap();
        let out = bytes_u32(&bufs[5]);
        for t in 0..n {
            let want = [
                bfe_ref(a[t].into(), c[t], d[t], 32, false) as u32,
                bfe_ref(a[t].into(), c[t], d[t], 32, true) as u32,
                bfi_ref(a[t].into(), b[t].into(), c[t], d[t], 32) as u32,
                prmt_ref(a[t], b[t], e[t]),
                shf_ref(true, a[t], b[t], e[t] & 31),
                shf_ref(true, a[t], b[t], d[t].min(32)),
                shf_ref(false, a[t], b[t], e[t] & 31),
                shf_ref(false, a[t], b[t], d[t].min(32)),
            ];
            for (k, w) in want.iter().enumerate() {
                assert_eq!(
                    out[k * n + t],
                    *w,
                    "op {k}, a={:#x} b={:#x} c={} d={} e={:#x}",
                    a[t],
                    b[t],
                    c[t],
                    d[t],
                    e[t]
                );
            }
        }
    }
}

#[test]
fn bit_ops_64_match_the_ptx_definitions() {
    let m = module();
    let it = Interpreter::new(&m).unwrap();
    let n = 256usize;
    let mut r = Rng::new(64);
    let a: Vec<u64> = (0..n).map(|_| r.next_u64()).collect();
    let b: Vec<u64> = (0..n).map(|_| r.next_u64()).collect();
    let c: Vec<u32> = (0..n).map(|_| small(&mut r) + r.below(2) * 30).collect();
    let d: Vec<u32> = (0..n).map(|_| small(&mut r)).collect();
    let poison: Vec<u64> = (0..3 * n).map(|_| r.next_u64()).collect();
    let mut bufs = vec![
        u64_bytes(&a),
        u64_bytes(&b),
        u32_bytes(&c),
        u32_bytes(&d),
        u64_bytes(&poison),
    ];
    let args: Vec<Arg> = (0..5).map(Arg::Buffer).collect();
    it.launch("bits64", [1, 1, 1], [n as u32, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    let out = bytes_u64(&bufs[4]);
    for t in 0..n {
        assert_eq!(out[t], bfe_ref(a[t], c[t], d[t], 64, false), "bfe.u64 {t}");
        assert_eq!(
            out[n + t],
            bfe_ref(a[t], c[t], d[t], 64, true),
            "bfe.s64 {t}"
        );
        assert_eq!(
            out[2 * n + t],
            bfi_ref(a[t], b[t], c[t], d[t], 64),
            "bfi.b64 {t}"
        );
    }
}

#[test]
fn reductions_and_ordered_accesses() {
    let m = module();
    let it = Interpreter::new(&m).unwrap();
    let (blocks, threads) = (3usize, 64usize);
    let total = blocks * threads;
    let mut r = Rng::new(5);
    let cnt0: Vec<u32> = (0..5).map(|_| r.below(1 << 20)).collect();
    // Quarter-integers: every order of additions gives the same f32 sum.
    let vals: Vec<f32> = (0..threads)
        .map(|_| (r.below(400) as f32 - 200.0) / 4.0)
        .collect();
    let fs0 = [(r.below(100) as f32) / 4.0, 1000.0];
    // Small integers: f16 sums exact.
    let hv: Vec<f16> = (0..2 * threads)
        .map(|_| f16::from_f32(r.below(9) as f32 - 4.0))
        .collect();
    let h0 = [
        f16::from_f32(r.below(16) as f32),
        f16::from_f32(-(r.below(16) as f32)),
    ];
    let data: Vec<u32> = (0..threads).map(|_| r.u32()).collect();
    let olds: Vec<u32> = (0..threads).map(|_| r.u32()).collect();
    let mut bufs = vec![
        u32_bytes(&cnt0),
        f32_bytes(&fs0),
        f32_bytes(&vals),
        f16_bytes(&h0),
        f16_bytes(&hv),
        u32_bytes(&data),
        u32_bytes(&olds),
    ];
    let args: Vec<Arg> = (0..7).map(Arg::Buffer).collect();
    it.launch(
        "memory_model",
        [blocks as u32, 1, 1],
        [threads as u32, 1, 1],
        0,
        &args,
        &mut bufs,
    )
    .unwrap();
    let cnt = bytes_u32(&bufs[0]);
    let tid_sum: u32 = (0..threads as u32).sum();
    assert_eq!(cnt[0], cnt0[0] + total as u32, "red.add");
    assert_eq!(cnt[1], cnt0[1].max(threads as u32 - 1), "red.max");
    // inc wraps at 1000: from c it counts up to 1000, then restarts at 0.
    let mut inc = cnt0[2];
    for _ in 0..total {
        inc = if inc >= 1000 { 0 } else { inc + 1 };
    }
    assert_eq!(cnt[2], inc, "red.inc");
    assert_eq!(cnt[3], cnt0[3].wrapping_sub(2 * total as u32), "red.sub");
    assert_eq!(cnt[4], tid_sum, "red.add on shared memory");
    let fs = bytes_f32(&bufs[1]);
    let vsum: f32 = vals.iter().sum();
    assert_eq!(fs[0], fs0[0] + blocks as f32 * vsum, "red.add f32");
    let vmin = vals.iter().copied().fold(f32::INFINITY, f32::min);
    assert_eq!(fs[1], vmin.min(fs0[1]), "red.min f32 (CAS loop)");
    let h = &bufs[3];
    for lane in 0..2 {
        let got = f16::from_le_bytes([h[2 * lane], h[2 * lane + 1]]).to_f32();
        let s: f32 = (0..threads).map(|t| hv[2 * t + lane].to_f32()).sum();
        assert_eq!(
            got,
            h0[lane].to_f32() + 2.0 * blocks as f32 * s,
            "f16x2 lane {lane}"
        );
    }
    let out = bytes_u32(&bufs[5]);
    for (t, v) in out.iter().enumerate() {
        assert_eq!(*v, 3 * t as u32 + 1, "release/acquire round trip {t}");
    }
}

/// The message-passing litmus kernel: every reader sees all 32 words its writer released.
#[test]
fn litmus_message_passing() {
    let m = module();
    let it = Interpreter::new(&m).unwrap();
    let pairs = 6usize;
    let mut r = Rng::new(77);
    let seed = r.u32();
    let data: Vec<u32> = (0..32 * pairs).map(|_| r.u32()).collect();
    let out: Vec<u32> = (0..pairs).map(|_| r.u32() | 1).collect();
    let mut bufs = vec![
        u32_bytes(&data),
        u32_bytes(&vec![0; pairs]),
        u32_bytes(&out),
    ];
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(i128::from(seed)),
    ];
    it.launch(
        "litmus_mp",
        [2 * pairs as u32, 1, 1],
        [1, 1, 1],
        0,
        &args,
        &mut bufs,
    )
    .unwrap();
    assert_eq!(bytes_u32(&bufs[2]), vec![0; pairs]);
    assert_eq!(bytes_u32(&bufs[1]), vec![1; pairs]);
    let words = bytes_u32(&bufs[0]);
    for (i, w) in words.iter().enumerate() {
        assert_eq!(*w, i as u32 ^ seed);
    }
}

/// redux.sync: each lane gets the reduction over the lanes of its mask.
#[test]
fn redux_over_masks() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/redux.zir");
    let m = zyntax_hir::parse_module(&std::fs::read_to_string(p).unwrap()).unwrap();
    let it = Interpreter::new(&m).unwrap();
    let n = 128usize;
    let mut r = Rng::new(80);
    let vals: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let mut bufs = vec![
        u32_bytes(&vals),
        u32_bytes(&(0..10 * n).map(|_| r.u32()).collect::<Vec<_>>()),
    ];
    it.launch(
        "redux_ops",
        [1, 1, 1],
        [n as u32, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1)],
        &mut bufs,
    )
    .unwrap();
    let out = bytes_u32(&bufs[1]);
    for t in 0..n {
        let w = &vals[t / 32 * 32..t / 32 * 32 + 32];
        let h = if t % 32 < 16 { &w[..16] } else { &w[16..] };
        let want = [
            w.iter().fold(0u32, |a, x| a.wrapping_add(*x)),
            *w.iter().min().unwrap(),
            *w.iter().max().unwrap(),
            w.iter().fold(u32::MAX, |a, x| a & x),
            w.iter().fold(0, |a, x| a | x),
            w.iter().fold(0, |a, x| a ^ x),
            w.iter().map(|x| *x as i32).min().unwrap() as u32,
            w.iter().map(|x| *x as i32).max().unwrap() as u32,
            h.iter().fold(0u32, |a, x| a.wrapping_add(*x)),
            h.iter().map(|x| *x as i32).min().unwrap() as u32,
        ];
        for (k, v) in want.iter().enumerate() {
            assert_eq!(out[k * n + t], *v, "op {k} thread {t}");
        }
    }
}

/// A kernel declaring `exact_threads` runs only with that block shape.
#[test]
fn exact_threads_is_enforced_at_launch() {
    let text = "module \"x\"\nkernel @k exact_threads(64, 1, 1) {\nblock0(v0: ptr<global, u32>):\n    v1: u32 = thread_idx.x\n    v2: ptr<global, u32> = ptr_add v0, v1\n    store v2, v1\n    return\n}\n";
    let m = zyntax_hir::parse_module(text).unwrap();
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![u32_bytes(&[7u32; 64])];
    let e = it
        .launch("k", [1, 1, 1], [32, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("differs from the kernel's exact_threads [64, 1, 1]"),
        "{e}"
    );
    it.launch("k", [1, 1, 1], [64, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap();
    assert_eq!(bytes_u32(&bufs[0]), (0..64).collect::<Vec<u32>>());
}

// --- issue 12 (rest): named barriers and packed conversions

fn data_module(name: &str) -> Module {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(name);
    zyntax_hir::parse_module(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Producer warps hand a shared buffer to consumer warps through named
/// barriers 1 (full) and 2 (empty), two rounds, several blocks.
#[test]
fn named_barrier_producer_consumer() {
    let m = data_module("named_barrier.zir");
    let it = Interpreter::new(&m).unwrap();
    let blocks = 3usize;
    let mut r = Rng::new(91);
    let input: Vec<u32> = (0..64 * blocks).map(|_| r.u32()).collect();
    let mut bufs = vec![
        u32_bytes(&input),
        u32_bytes(&(0..128 * blocks).map(|_| r.u32()).collect::<Vec<_>>()),
    ];
    it.launch(
        "producer_consumer",
        [blocks as u32, 1, 1],
        [128, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1)],
        &mut bufs,
    )
    .unwrap();
    let out = bytes_u32(&bufs[1]);
    for b in 0..blocks {
        for round in 0..2u32 {
            for j in 0..64 {
                let want = input[b * 64 + 63 - j].wrapping_mul(3).wrapping_add(round);
                assert_eq!(
                    out[b * 128 + round as usize * 64 + j],
                    want,
                    "block {b} round {round} j {j}"
                );
            }
        }
    }
}

/// A named barrier whose count is never reached is a deadlock trap, not a hang.
#[test]
fn named_barrier_deadlock_traps() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/named_barrier.zir"),
    )
    .unwrap()
    .replace("bar.sync 1, 128", "bar.sync 1, 96");
    let m = zyntax_hir::parse_module(&text).unwrap();
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![u32_bytes(&[1u32; 64]), u32_bytes(&[0u32; 128])];
    let e = it
        .launch(
            "producer_consumer",
            [1, 1, 1],
            [128, 1, 1],
            0,
            &[Arg::Buffer(0), Arg::Buffer(1)],
            &mut bufs,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("named barrier 1"), "{e}");
}

/// Reference of PTX `cvt.rn.satfinite.{e4m3,e5m2}.f32`, independent of the
/// interpreter's: the nearest of all finite codes (ties to the even code),
/// clamped to the largest finite value.
fn fp8_ref(x: f32, e5m2: bool) -> u8 {
    let (mb, emin, bias_max) = if e5m2 {
        (2, -14, 0x7bu8)
    } else {
        (3, -6, 0x7eu8)
    };
    let value = |c: u8| -> f64 {
        let e = i32::from(c >> mb);
        let m = f64::from(c & ((1 << mb) - 1));
        if e == 0 {
            m * 2f64.powi(emin - mb)
        } else {
            (1.0 + m / f64::from(1 << mb)) * 2f64.powi(e - 1 + emin)
        }
    };
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let a = f64::from(x.abs());
    let mut best = 0u8;
    for c in 0..=bias_max {
        let (d, db) = ((value(c) - a).abs(), (value(best) - a).abs());
        if d < db || (d == db && c % 2 == 0) {
            best = c;
        }
    }
    sign | best
}

#[test]
fn cvt_pack_rounds_to_nearest_even() {
    let m = data_module("cvt_pack.zir");
    let it = Interpreter::new(&m).unwrap();
    let n = 256usize;
    let mut r = Rng::new(93);
    // Wide magnitudes (fp8 subnormals to beyond every max), both signs, and exact ties.
    let draw = |r: &mut Rng| -> f32 {
        let e = r.below(40) as i32 - 20;
        let v = r.f32(1.0, 2.0) * 2f32.powi(e);
        if r.below(2) == 0 {
            -v
        } else {
            v
        }
    };
    let mut a: Vec<f32> = (0..n).map(|_| draw(&mut r)).collect();
    let b: Vec<f32> = (0..n).map(|_| draw(&mut r)).collect();
    a[0] = 1.0625; // e4m3 tie: to 1.0
    a[1] = 1.0 + 2f32.powi(-11); // f16 tie: to 1.0
    a[2] = 1e6; // saturates in both fp8 formats
    let mut bufs = vec![
        f32_bytes(&a),
        f32_bytes(&b),
        u32_bytes(&(0..6 * n).map(|_| r.u32()).collect::<Vec<_>>()),
    ];
    it.launch(
        "cvt_all",
        [2, 1, 1],
        [n as u32 / 2, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
        &mut bufs,
    )
    .unwrap();
    let out = bytes_u32(&bufs[2]);
    let h = |x: f32| u32::from(f16::from_f32(x).to_bits());
    let bf = |x: f32| u32::from(half::bf16::from_f32(x).to_bits());
    for i in 0..n {
        let (lo, hi) = (a[i], b[i]);
        assert_eq!(out[i], h(lo) | h(hi) << 16, "f16x2 {lo} {hi}");
        assert_eq!(out[n + i], bf(lo) | bf(hi) << 16, "bf16x2 {lo} {hi}");
        for (k, e5) in [(2, false), (3, true)] {
            let (pl, ph) = (fp8_ref(lo, e5), fp8_ref(hi, e5));
            assert_eq!(
                out[k * n + i],
                u32::from(pl) | u32::from(ph) << 8,
                "fp8 e5m2={e5} {lo} {hi}"
            );
            // Widening back is exact: the f16 of the fp8 value.
            let back = |c: u8| h(fp8_value(c, e5));
            assert_eq!(
                out[(k + 2) * n + i],
                back(pl) | back(ph) << 16,
                "unpack e5m2={e5}"
            );
        }
    }
    assert_eq!(out[2 * n] & 0xff, 0x38);
    assert_eq!(out[1] & 0xffff, 0x3c00);
    assert_eq!(out[2 * n + 2] & 0xff, 0x7e);
    assert_eq!(out[3 * n + 2] & 0xff, 0x7b);
}

/// The value of a finite fp8 code, for the widening check.
fn fp8_value(c: u8, e5m2: bool) -> f32 {
    let (mb, emin) = if e5m2 { (2, -14) } else { (3, -6) };
    let mag = c & 0x7f;
    let e = i32::from(mag >> mb);
    let m = f32::from(mag & ((1 << mb) - 1));
    let v = if e == 0 {
        m * 2f32.powi(emin - mb)
    } else {
        (1.0 + m / (1 << mb) as f32) * 2f32.powi(e - 1 + emin)
    };
    if c & 0x80 != 0 {
        -v
    } else {
        v
    }
}

/// Packed half arithmetic on the interpreter: each lane rounded once (RNE), as
/// the f16x2 instructions do.
#[test]
fn packed_half_arithmetic_rounds_each_lane() {
    let text = "module \"p\" version(2)\nkernel @k {\nblock0(v0: ptr<global, vec<f16, 2>>, v1: ptr<global, vec<f16, 2>>, v2: ptr<global, vec<f16, 2>>):\n    v3: u32 = thread_idx.x\n    v4: ptr<global, vec<f16, 2>> = ptr_add v0, v3\n    v5: vec<f16, 2> = load v4\n    v6: ptr<global, vec<f16, 2>> = ptr_add v1, v3\n    v7: vec<f16, 2> = load v6\n    v8: vec<f16, 2> = fma v5, v7, v5\n    v9: vec<f16, 2> = mul v5, v7\n    v10: vec<f16, 2> = min v8, v9\n    v11: ptr<global, vec<f16, 2>> = ptr_add v2, v3\n    store v11, v10\n    return\n}\n";
    let m = zyntax_hir::parse_module(text).unwrap();
    zyntax_hir::verify_module(&m).unwrap();
    let it = Interpreter::new(&m).unwrap();
    let n = 64usize;
    let mut r = Rng::new(95);
    let a: Vec<f16> = (0..2 * n)
        .map(|_| f16::from_f32(r.f32(-8.0, 8.0)))
        .collect();
    let b: Vec<f16> = (0..2 * n)
        .map(|_| f16::from_f32(r.f32(-8.0, 8.0)))
        .collect();
    let bytes =
        |v: &[f16]| -> Vec<u8> { v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect() };
    let mut bufs = vec![bytes(&a), bytes(&b), vec![0x7e; 4 * n]];
    it.launch(
        "k",
        [1, 1, 1],
        [n as u32, 1, 1],
        0,
        &[Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)],
        &mut bufs,
    )
    .unwrap();
    for i in 0..2 * n {
        let (x, y) = (a[i].to_f64(), b[i].to_f64());
        let fma = f16::from_f64(x.mul_add(y, x));
        let mul = f16::from_f64(x * y);
        let want = if fma.to_f64() < mul.to_f64() {
            fma
        } else {
            mul
        };
        let got = f16::from_bits(u16::from_le_bytes([bufs[2][2 * i], bufs[2][2 * i + 1]]));
        assert_eq!(got.to_bits(), want.to_bits(), "lane {i}: {x} {y}");
    }
}

/// Lanes that exited before a named barrier do not hold their warp back.
#[test]
fn named_barrier_ignores_exited_lanes() {
    let text = "module \"x\" version(2)\nkernel @k {\nblock0(v0: ptr<global, u32>):\n    v1: u32 = thread_idx.x\n    v2: u32 = const 60\n    v3: bool = cmp.lt v1, v2\n    br v3, block1, block2\nblock1:\n    v4: u32 = const 32\n    v5: bool = cmp.lt v1, v4\n    br v5, block3, block4\nblock3:\n    v6: ptr<global, u32> = ptr_add v0, v1\n    store v6, v1\n    bar.arrive 5, 64\n    return\nblock4:\n    bar.sync 5, 64\n    v7: u32 = sub v1, v4\n    v8: ptr<global, u32> = ptr_add v0, v7\n    v9: u32 = load v8\n    v10: u32 = add v1, v9\n    v11: ptr<global, u32> = ptr_add v8, v4\n    store v11, v10\n    return\nblock2:\n    return\n}\n";
    let m = zyntax_hir::parse_module(text).unwrap();
    zyntax_hir::verify_module(&m).unwrap();
    let it = Interpreter::new(&m).unwrap();
    let mut bufs = vec![u32_bytes(&[7u32; 64])];
    it.launch("k", [1, 1, 1], [64, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap();
    let out = bytes_u32(&bufs[0]);
    for t in 32..60u32 {
        assert_eq!(out[t as usize], t + (t - 32), "thread {t}");
    }
    assert_eq!(out[60..], [7; 4], "threads 60..64 exited");
}
