//! Warpgroup MMA (issue 13 item 1) against a float64 / exact-integer reference:
//! random A (64 x K) and B (N x K) are laid out by the test in shared-memory
//! images for each swizzle and majorness (written from the PTX ISA's pictures:
//! 8-row groups of 16-byte chunks, the chunk index XORed with the row), copied
//! into shared memory by the kernel, multiplied through descriptors, and the
//! per-lane accumulator fragments compared element by element.

mod common;

use common::*;
use zyntax_hir::*;
use zyntax_interp::{warp_mma, Arg, Interpreter};

fn g(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

/// Where the B image starts in shared memory (A's starts at 0).
const B_AT: u64 = 32 * 1024;

#[derive(Copy, Clone)]
struct Case {
    elem: MmaElem,
    acc: ScalarType,
    n: u32,
    swizzle: Swizzle,
    /// MN-major (transposed) A and B.
    trans: bool,
    /// A from registers instead of shared memory.
    a_regs: bool,
}

fn eb(e: MmaElem) -> u64 {
    u64::from(e.bits() / 8)
}

/// Leading and stride byte offsets of the image layout of [`offset`].
fn lbo_sbo(c: &Case) -> (u64, u64) {
    let w = width(c.swizzle);
    match (c.trans, c.swizzle) {
        // K-major, no swizzle: 8x16-byte core matrices; K neighbours 128 B
        // apart, 8-row groups 256 B apart.
        (false, Swizzle::None) => (128, 256),
        // K-major swizzled: rows of `w` bytes, 8-row groups 8w apart (LBO unused).
        (false, _) => (16, 8 * w),
        // MN-major, no swizzle: core matrices of 8 K-rows x 16 bytes of MN;
        // next MN core matrix 128 B (SBO), next 8 K-rows (LBO) after all of MN.
        (true, Swizzle::None) => (16 * 128, 128),
        // MN-major swizzled: K-rows of `w` bytes of MN; next MN block (LBO)
        // after 16 K-rows (the instruction's K); next 8 K-rows (SBO) 8w apart.
        (true, _) => (16 * w, 8 * w),
    }
}

fn width(s: Swizzle) -> u64 {
    match s {
        Swizzle::None => 16,
        Swizzle::B32 => 32,
        Swizzle::B64 => 64,
        Swizzle::B128 => 128,
    }
}

/// Byte offset of element (mn, k) in the image, spelled as the PTX ISA draws
/// it: 16-byte chunks in rows, chunk index XOR (row mod 8) / (8 / chunks per row).
fn offset(c: &Case, mn: u64, k: u64) -> u64 {
    let e = eb(c.elem);
    let w = width(c.swizzle);
    let (lbo, sbo) = lbo_sbo(c);
    let (row, within_row, row_base) = if !c.trans {
        // A row is one M (or N) index; K runs along it.
        if c.swizzle == Swizzle::None {
            let t = 16 / e;
            return (mn / 8) * sbo + (k / t) * lbo + (mn % 8) * 16 + (k % t) * e;
        }
        (mn % 8, k * e, (mn / 8) * sbo)
    } else {
        // A row is one K index; MN runs along it.
        if c.swizzle == Swizzle::None {
            let t = 16 / e;
            return (mn / t) * sbo + (k / 8) * lbo + (k % 8) * 16 + (mn % t) * e;
        }
        let per_row = w / e;
        (
            k % 8,
            (mn % per_row) * e,
            (k / 8) * sbo + (mn / per_row) * lbo,
        )
    };
    let chunks = w / 16;
    let chunk = (within_row / 16) ^ (row / (8 / chunks));
    row_base + row * w + chunk * 16 + within_row % 16
}

/// Random input bits of `elem`, finite.
fn input(rng: &mut Rng, elem: MmaElem) -> u64 {
    match elem {
        MmaElem::F16 => u64::from(half::f16::from_f32(rng.f32(-2.0, 2.0)).to_bits()),
        MmaElem::Bf16 => u64::from(half::bf16::from_f32(rng.f32(-2.0, 2.0)).to_bits()),
        MmaElem::Tf32 => u64::from(rng.f32(-2.0, 2.0).to_bits() & !0x1fff),
        MmaElem::E4m3 | MmaElem::E5m2 => {
            let b = rng.below(256) as u8;
            // Keep exponents moderate (no NaN/inf): clear the top exponent bit.
            u64::from(b & 0xbf)
        }
        _ => u64::from(rng.below(256)),
    }
}

/// Copy `words` u32s from global to dynamic shared memory, then one wgmma.
fn kernel(c: &Case) -> Module {
    let lanes = c.n / 2;
    let mut b = FunctionBuilder::kernel(
        "k",
        &[
            g(Type::U32),
            g(Type::Vector(ScalarType::U32, 4)),
            g(Type::Scalar(c.acc)),
            Type::U32,
        ],
    );
    let (img, afrag, out, words) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let smem = b.dyn_shared(Type::U32).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let step = b.iconst(Type::U32, 128).unwrap();
    let lp = b.begin_for(tid, words, step, &[]).unwrap();
    let src = b.ptr_add(img, lp.iv).unwrap();
    let x = b.load(src).unwrap();
    let dst = b.ptr_add(smem, lp.iv).unwrap();
    b.store(dst, x).unwrap();
    b.end_for(lp, &[]).unwrap();
    b.fence_proxy_async().unwrap();
    b.barrier().unwrap();
    let (lbo, sbo) = lbo_sbo(c);
    let lbo = b.iconst(Type::U32, lbo as i64).unwrap();
    let sbo = b.iconst(Type::U32, sbo as i64).unwrap();
    let bw = b.iconst(Type::U32, (B_AT / 4) as i64).unwrap();
    let bsm = b.ptr_add(smem, bw).unwrap();
    let da = b.wgmma_desc(c.swizzle, smem, lbo, sbo).unwrap();
    let db = b.wgmma_desc(c.swizzle, bsm, lbo, sbo).unwrap();
    let a = if c.a_regs {
        let p = b.ptr_add(afrag, tid).unwrap();
        b.load(p).unwrap()
    } else {
        da
    };
    let z = b.wgmma_zero(Type::Vector(c.acc, lanes)).unwrap();
    let no = b.bconst(false).unwrap();
    let form = Wgmma {
        n: c.n,
        a: c.elem,
        b: c.elem,
        trans_a: c.trans && !c.a_regs,
        trans_b: c.trans,
        neg_a: false,
        neg_b: false,
    };
    b.wgmma_fence().unwrap();
    let d = b.wgmma(form, z, a, db, no).unwrap();
    b.wgmma_commit_group().unwrap();
    b.wgmma_wait_group(0).unwrap();
    let n2 = b.iconst(Type::U32, i64::from(lanes)).unwrap();
    let base = b.mul(tid, n2).unwrap();
    let base = b.ptr_add(out, base).unwrap();
    for i in 0..lanes {
        let x = b.extract(d, i).unwrap();
        let ii = b.iconst(Type::U32, i64::from(i)).unwrap();
        let p = b.ptr_add(base, ii).unwrap();
        b.store(p, x).unwrap();
    }
    b.ret(&[]).unwrap();
    let mut m = Module::new("wgmma");
    m.targets = vec![Arch::Sm90a];
    m.functions.push(b.finish().unwrap());
    verify_module(&m).unwrap();
    m
}

/// (row, col) of D held by accumulator element `i` of thread `tid`: warp w
/// of the warpgroup holds rows 16w..16w+15; within it the m16n8 C layout
/// repeats along N every 4 elements.
fn d_pos(tid: u32, i: u32) -> (u64, u64) {
    let (w, lane) = (tid / 32, tid % 32);
    let (gid, t) = (lane / 4, lane % 4);
    let row = 16 * w + gid + if i % 4 >= 2 { 8 } else { 0 };
    let col = 8 * (i / 4) + 2 * t + i % 2;
    (u64::from(row), u64::from(col))
}

/// The A register fragment of `tid` (4 u32s), by the mma.sync A tables
/// applied to the warp's 16 rows.
fn a_fragment(c: &Case, a: &[u64], k: u64, tid: u32) -> [u32; 4] {
    let (w, lane) = (tid / 32, tid % 32);
    let (gid, t) = (u64::from(lane / 4), u64::from(lane % 4));
    let bits = c.elem.bits() as u64;
    let per_reg = 32 / bits;
    let mut regs = [0u32; 4];
    for (r, reg) in regs.iter_mut().enumerate() {
        let r = r as u64;
        for j in 0..per_reg {
            // Registers 0/2 hold rows gid, 1/3 rows gid + 8; 2/3 the upper K half.
            let row = u64::from(16 * w) + gid + 8 * (r % 2);
            let col = (k / 2) * (r / 2) + t * per_reg + j;
            let v = a[(row * k + col) as usize];
            *reg |= (v as u32) << (j * bits);
        }
    }
    regs
}

fn run(c: Case, seed: u64) {
    let mut rng = Rng::new(seed);
    let k = u64::from(256 / c.elem.bits());
    let n = u64::from(c.n);
    let a: Vec<u64> = (0..64 * k).map(|_| input(&mut rng, c.elem)).collect();
    let bm: Vec<u64> = (0..n * k).map(|_| input(&mut rng, c.elem)).collect();
    let mut img = vec![0u8; (2 * B_AT) as usize];
    let e = eb(c.elem);
    for (base, rows, m) in [(0, 64, &a), (B_AT, n, &bm)] {
        for r in 0..rows {
            for kk in 0..k {
                let at = (base + offset(&c, r, kk)) as usize;
                let v = m[(r * k + kk) as usize].to_le_bytes();
                img[at..at + e as usize].copy_from_slice(&v[..e as usize]);
            }
        }
    }
    let mut frag = Vec::new();
    for tid in 0..128 {
        frag.extend(
            a_fragment(&c, &a, k, tid)
                .iter()
                .flat_map(|r| r.to_le_bytes()),
        );
    }
    let lanes = c.n / 2;
    let ab = c.acc.bits() as usize / 8;
    let mut bufs = vec![img, frag, vec![0xa5u8; 128 * lanes as usize * ab]];
    let words = (bufs[0].len() / 4) as i128;
    let m = kernel(&c);
    let it = Interpreter::new(&m).unwrap();
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(words),
    ];
    it.launch("k", [1, 1, 1], [128, 1, 1], 2 * B_AT, &args, &mut bufs)
        .unwrap();
    let val = |x: u64| warp_mma::input_value(c.elem, x);
    for tid in 0..128u32 {
        for i in 0..lanes {
            let (r, col) = d_pos(tid, i);
            let exact: f64 = (0..k)
                .map(|kk| val(a[(r * k + kk) as usize]) * val(bm[(col * k + kk) as usize]))
                .sum();
            let at = (tid * lanes + i) as usize * ab;
            let got = &bufs[2][at..at + ab];
            let want: Vec<u8> = match c.acc {
                ScalarType::I32 => ((exact as i64) as i32).to_le_bytes().to_vec(),
                ScalarType::F16 => half::f16::from_f64(exact).to_le_bytes().to_vec(),
                _ => (exact as f32).to_le_bytes().to_vec(),
            };
            assert_eq!(
                got,
                &want[..],
                "{} {:?} N={} trans={} a_regs={}: thread {tid} d{i} = D[{r}][{col}] (exact {exact})",
                c.elem,
                c.swizzle,
                c.n,
                c.trans,
                c.a_regs
            );
        }
    }
}

fn case(elem: MmaElem, acc: ScalarType, n: u32, swizzle: Swizzle) -> Case {
    Case {
        elem,
        acc,
        n,
        swizzle,
        trans: false,
        a_regs: false,
    }
}

#[test]
fn bf16_through_every_swizzle() {
    for (i, sw) in Swizzle::ALL.iter().enumerate() {
        run(case(MmaElem::Bf16, ScalarType::F32, 64, *sw), 1 + i as u64);
    }
}

#[test]
fn wide_and_narrow_n() {
    run(case(MmaElem::Bf16, ScalarType::F32, 256, Swizzle::B128), 11);
    run(case(MmaElem::F16, ScalarType::F32, 8, Swizzle::B128), 12);
    run(case(MmaElem::F16, ScalarType::F16, 24, Swizzle::B64), 13);
}

#[test]
fn transposed_operands() {
    for (i, sw) in Swizzle::ALL.iter().enumerate() {
        let mut c = case(MmaElem::F16, ScalarType::F32, 64, *sw);
        c.trans = true;
        run(c, 20 + i as u64);
    }
}

#[test]
fn a_from_registers() {
    for (i, elem) in [MmaElem::Bf16, MmaElem::Tf32, MmaElem::E4m3, MmaElem::S8]
        .into_iter()
        .enumerate()
    {
        let acc = if elem == MmaElem::S8 {
            ScalarType::I32
        } else {
            ScalarType::F32
        };
        let mut c = case(elem, acc, 32, Swizzle::B128);
        c.a_regs = true;
        run(c, 30 + i as u64);
    }
}

#[test]
fn every_input_type() {
    let cases = [
        (MmaElem::Tf32, ScalarType::F32, 16),
        (MmaElem::E4m3, ScalarType::F32, 48),
        (MmaElem::E5m2, ScalarType::F16, 40),
        (MmaElem::S8, ScalarType::I32, 48),
        (MmaElem::U8, ScalarType::I32, 24),
    ];
    for (i, (elem, acc, n)) in cases.into_iter().enumerate() {
        for (j, sw) in [Swizzle::B128, Swizzle::None].into_iter().enumerate() {
            run(case(elem, acc, n, sw), 40 + 2 * i as u64 + j as u64);
        }
    }
}

/// A descriptor with the wrong swizzle reads other bytes: wrong numbers, as on hardware.
#[test]
fn a_wrong_swizzle_gives_wrong_numbers() {
    let c = case(MmaElem::Bf16, ScalarType::F32, 64, Swizzle::B128);
    assert_eq!(mismatches(c, Swizzle::B128, 98), 0);
    let bad = mismatches(c, Swizzle::B64, 99);
    assert!(
        bad > 1000,
        "a 64B descriptor over a 128B image: {bad} of 4096 wrong"
    );
}

/// How many of D's 64 x 64 elements differ from the reference when the image
/// is laid out for `c.swizzle` but the descriptors say `desc`.
fn mismatches(c: Case, desc: Swizzle, seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let k = 16u64;
    let a: Vec<u64> = (0..64 * k).map(|_| input(&mut rng, c.elem)).collect();
    let bm: Vec<u64> = (0..64 * k).map(|_| input(&mut rng, c.elem)).collect();
    let mut img = vec![0u8; (2 * B_AT) as usize];
    for (base, m) in [(0, &a), (B_AT, &bm)] {
        for r in 0..64 {
            for kk in 0..k {
                let at = (base + offset(&c, r, kk)) as usize;
                let v = m[(r * k + kk) as usize].to_le_bytes();
                img[at..at + 2].copy_from_slice(&v[..2]);
            }
        }
    }
    let mut kc = c;
    kc.swizzle = desc;
    let mut bufs = vec![img, vec![0u8; 128 * 16], vec![0xa5u8; 128 * 32 * 4]];
    let words = (bufs[0].len() / 4) as i128;
    let m = kernel(&kc);
    let it = Interpreter::new(&m).unwrap();
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(words),
    ];
    it.launch("k", [1, 1, 1], [128, 1, 1], 2 * B_AT, &args, &mut bufs)
        .unwrap();
    let val = |x: u64| warp_mma::input_value(c.elem, x);
    let mut bad = 0;
    for tid in 0..128u32 {
        for i in 0..32 {
            let (r, col) = d_pos(tid, i);
            let exact: f64 = (0..k)
                .map(|kk| val(a[(r * k + kk) as usize]) * val(bm[(col * k + kk) as usize]))
                .sum();
            let at = (tid * 32 + i) as usize * 4;
            if bufs[2][at..at + 4] != (exact as f32).to_le_bytes() {
                bad += 1;
            }
        }
    }
    bad
}
