//! Warp MMA (`mma.sync`), `ldmatrix` and `stmatrix` against references written
//! from the PTX ISA's fragment tables (issue 12 items 1-2): random full
//! matrices are scattered into per-lane fragments by the PTX layout, the
//! interpreter runs the kernel and D is gathered back and compared with a
//! float64 (or exact integer) reference.

mod common;

use common::*;
use half::{bf16, f16};
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};

fn g(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

fn module(f: Function) -> Module {
    let mut m = Module::new("t");
    m.targets = vec![Arch::Sm90];
    m.ptx_version = Some(PtxVersion::new(8, 4));
    m.functions.push(f);
    m
}

/// PTX's "row/col for a_i" tables, spelled as the ISA spells them.
fn ptx_pos(elem: MmaElem, which: char, lane: u32, i: u32) -> (u32, u32) {
    let (gid, t) = (lane / 4, lane % 4);
    match (elem.shape(), which) {
        (WarpShape::M8n8k4, 'a') => (gid, t),
        (WarpShape::M8n8k4, 'b') => (t, gid),
        (WarpShape::M8n8k4, _) => (gid, t * 2 + i),
        (_, 'c') => (if i < 2 { gid } else { gid + 8 }, t * 2 + i % 2),
        (WarpShape::M16n8k16, 'a') => {
            let row = if matches!(i, 0 | 1 | 4 | 5) {
                gid
            } else {
                gid + 8
            };
            let col = if i < 4 {
                t * 2 + i % 2
            } else {
                t * 2 + i % 2 + 8
            };
            (row, col)
        }
        (WarpShape::M16n8k16, _) => (
            if i < 2 {
                t * 2 + i % 2
            } else {
                t * 2 + i % 2 + 8
            },
            gid,
        ),
        (WarpShape::M16n8k8, 'a') => {
            let row = if i.is_multiple_of(2) { gid } else { gid + 8 };
            (row, if i < 2 { t } else { t + 4 })
        }
        (WarpShape::M16n8k8, _) => (if i == 0 { t } else { t + 4 }, gid),
        (WarpShape::M16n8k32, 'a') => {
            let row = if i < 4 || (8..12).contains(&i) {
                gid
            } else {
                gid + 8
            };
            let col = if i < 8 {
                t * 4 + i % 4
            } else {
                t * 4 + i % 4 + 16
            };
            (row, col)
        }
        (WarpShape::M16n8k32, _) => (if i < 4 { t * 4 + i } else { t * 4 + i - 4 + 16 }, gid),
    }
}

fn fp8_value(b: u8, e4m3: bool) -> f64 {
    let s = if b >> 7 == 1 { -1.0 } else { 1.0 };
    let (e, m, bias, mb) = if e4m3 {
        ((b >> 3) & 15, b & 7, 7, 3)
    } else {
        ((b >> 2) & 31, b & 3, 15, 2)
    };
    let frac = f64::from(m) / f64::from(1u8 << mb);
    if e == 0 {
        s * frac * 2f64.powi(1 - bias)
    } else {
        s * (1.0 + frac) * 2f64.powi(i32::from(e) - bias)
    }
}

/// A random input element: (bits, value), exact in every format.
fn input(rng: &mut Rng, elem: MmaElem) -> (u64, f64) {
    let small = |rng: &mut Rng| (rng.below(65) as f64 - 32.0) / 8.0;
    match elem {
        MmaElem::F16 => {
            let v = small(rng);
            (u64::from(f16::from_f64(v).to_bits()), v)
        }
        MmaElem::Bf16 => {
            let v = small(rng);
            (u64::from(bf16::from_f64(v).to_bits()), v)
        }
        MmaElem::Tf32 => {
            let v = small(rng);
            (u64::from((v as f32).to_bits()), v)
        }
        MmaElem::F64 => {
            let v = small(rng);
            (v.to_bits(), v)
        }
        MmaElem::S8 => {
            let b = rng.below(256) as u8;
            (u64::from(b), f64::from(b as i8))
        }
        MmaElem::U8 => {
            let b = rng.below(256) as u8;
            (u64::from(b), f64::from(b))
        }
        MmaElem::E4m3 | MmaElem::E5m2 => loop {
            let b = rng.below(256) as u8;
            let e4 = elem == MmaElem::E4m3;
            let special = if e4 {
                b & 0x7f == 0x7f
            } else {
                (b >> 2) & 31 == 31
            };
            if !special {
                return (u64::from(b), fp8_value(b, e4));
            }
        },
    }
}

/// Pack `bits` of `w` bits each into `n` little-endian bytes.
fn pack(vals: &[u64], w: u32, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    for (i, &v) in vals.iter().enumerate() {
        for bit in 0..w as usize {
            if (v >> bit) & 1 != 0 {
                let at = i * w as usize + bit;
                out[at / 8] |= 1 << (at % 8);
            }
        }
    }
    out
}

fn unpack(bytes: &[u8], w: u32, i: usize) -> u64 {
    let mut v = 0u64;
    for bit in 0..w as usize {
        let at = i * w as usize + bit;
        if (bytes[at / 8] >> (at % 8)) & 1 != 0 {
            v |= 1 << bit;
        }
    }
    v
}

fn mma_kernel(elem: MmaElem, acc: ScalarType) -> Function {
    let [ta, tb, tc] = elem.fragment_types(acc);
    let mut b = FunctionBuilder::kernel("k", &[g(ta), g(tb), g(tc.clone()), g(tc)]);
    let (pa, pb, pc, pd) = (b.param(0), b.param(1), b.param(2), b.param(3));
    let tid = b.thread_idx(Dim::X).unwrap();
    let qa = b.ptr_add(pa, tid).unwrap();
    let qb = b.ptr_add(pb, tid).unwrap();
    let qc = b.ptr_add(pc, tid).unwrap();
    let qd = b.ptr_add(pd, tid).unwrap();
    let x = b.load(qa).unwrap();
    let y = b.load(qb).unwrap();
    let z = b.load(qc).unwrap();
    let r = b.mma_sync(elem.shape(), elem, x, y, z).unwrap();
    b.store(qd, r).unwrap();
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

fn check_mma(elem: MmaElem, acc: ScalarType, seed: u64) {
    let mut rng = Rng::new(seed);
    let (m, n, k) = elem.shape().dims();
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let a: Vec<(u64, f64)> = (0..m * k).map(|_| input(&mut rng, elem)).collect();
    let bm: Vec<(u64, f64)> = (0..k * n).map(|_| input(&mut rng, elem)).collect();
    let c: Vec<(u64, f64)> = (0..m * n)
        .map(|_| match acc {
            ScalarType::I32 => {
                let v = rng.u32() as i32;
                (u64::from(v as u32), f64::from(v))
            }
            ScalarType::F16 => {
                let v = (rng.below(257) as f64 - 128.0) / 4.0;
                (u64::from(f16::from_f64(v).to_bits()), v)
            }
            ScalarType::F32 => {
                let v = (rng.below(257) as f64 - 128.0) / 4.0;
                (u64::from((v as f32).to_bits()), v)
            }
            _ => {
                let v = (rng.below(257) as f64 - 128.0) / 4.0;
                (v.to_bits(), v)
            }
        })
        .collect();
    let [ta, tb, tc] = elem.fragment_types(acc);
    let (sa, sb, sc) = (
        ta.size_bytes().unwrap() as usize,
        tb.size_bytes().unwrap() as usize,
        tc.size_bytes().unwrap() as usize,
    );
    let (w, cw) = (
        match elem {
            MmaElem::F16 | MmaElem::Bf16 => 16,
            MmaElem::Tf32 => 32,
            MmaElem::F64 => 64,
            _ => 8,
        },
        acc.bits(),
    );
    let (na, nb, nc) = (
        (m * k / 32) as u32,
        (k * n / 32) as u32,
        (m * n / 32) as u32,
    );
    let mut bufs = vec![Vec::new(), Vec::new(), Vec::new(), vec![0xa5u8; 32 * sc]];
    for lane in 0..32u32 {
        let fa: Vec<u64> = (0..na)
            .map(|i| {
                let (r, col) = ptx_pos(elem, 'a', lane, i);
                a[r as usize * k + col as usize].0
            })
            .collect();
        let fb: Vec<u64> = (0..nb)
            .map(|i| {
                let (r, col) = ptx_pos(elem, 'b', lane, i);
                bm[r as usize * n + col as usize].0
            })
            .collect();
        let fc: Vec<u64> = (0..nc)
            .map(|i| {
                let (r, col) = ptx_pos(elem, 'c', lane, i);
                c[r as usize * n + col as usize].0
            })
            .collect();
        bufs[0].extend(pack(&fa, w, sa));
        bufs[1].extend(pack(&fb, w, sb));
        bufs[2].extend(pack(&fc, cw, sc));
    }
    let md = module(mma_kernel(elem, acc));
    let it = Interpreter::new(&md).unwrap();
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Buffer(3),
    ];
    it.launch("k", [1, 1, 1], [32, 1, 1], 0, &args, &mut bufs)
        .unwrap();
    for lane in 0..32u32 {
        let frag = &bufs[3][lane as usize * sc..][..sc];
        for i in 0..nc {
            let (r, col) = ptx_pos(elem, 'c', lane, i);
            let (r, col) = (r as usize, col as usize);
            let exact: f64 = c[r * n + col].1
                + (0..k)
                    .map(|kk| a[r * k + kk].1 * bm[kk * n + col].1)
                    .sum::<f64>();
            let got = unpack(frag, cw, i as usize);
            let want = match acc {
                ScalarType::I32 => u64::from((exact as i64) as u32),
                ScalarType::F16 => u64::from(f16::from_f64(exact).to_bits()),
                ScalarType::F32 => u64::from((exact as f32).to_bits()),
                _ => exact.to_bits(),
            };
            assert_eq!(
                got, want,
                "{elem} -> {acc}: lane {lane} d{i} = D[{r}][{col}] (exact {exact})"
            );
        }
    }
}

#[test]
fn mma_sync_matches_the_float64_reference_for_every_type() {
    for (s, elem) in MmaElem::ALL.iter().copied().enumerate() {
        for &acc in elem.accumulators() {
            for seed in 0..3 {
                check_mma(elem, acc, 100 * s as u64 + seed);
            }
        }
    }
}

/// out[tid] = ldmatrix(rows of `src` in shared memory), row `r` of matrix
/// `i` at `(i*8 + r) * 8` elements, as lane `i*8 + r` supplies it.
fn ldmatrix_kernel(num: u32, trans: bool, store_back: bool) -> Function {
    let regs = if num == 1 {
        Type::U32
    } else {
        Type::Vector(ScalarType::U32, num)
    };
    let mut b = FunctionBuilder::kernel("k", &[g(Type::U16), g(regs), g(Type::U16)]);
    let (src, out, back) = (b.param(0), b.param(1), b.param(2));
    let sh = b.shared_alloc(Type::U16, 256).unwrap();
    let sh2 = b.shared_alloc(Type::U16, 256).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let eight = b.iconst(Type::U32, 8).unwrap();
    let row = b.mul(tid, eight).unwrap();
    // Every thread copies its row of 8 elements to shared memory.
    for j in 0..8 {
        let jj = b.iconst(Type::U32, j).unwrap();
        let e = b.add(row, jj).unwrap();
        let ps = b.ptr_add(src, e).unwrap();
        let x = b.load(ps).unwrap();
        let pd = b.ptr_add(sh, e).unwrap();
        b.store(pd, x).unwrap();
        // Rows stmatrix leaves alone (x1, x2) read back as zero.
        let z = b.iconst(Type::U16, 0).unwrap();
        let pz = b.ptr_add(sh2, e).unwrap();
        b.store(pz, z).unwrap();
    }
    b.barrier().unwrap();
    let rp = b.ptr_add(sh, row).unwrap();
    let v = b.ldmatrix(num, trans, rp).unwrap();
    let po = b.ptr_add(out, tid).unwrap();
    b.store(po, v).unwrap();
    if store_back {
        let rp2 = b.ptr_add(sh2, row).unwrap();
        b.stmatrix(num, trans, rp2, v).unwrap();
        b.barrier().unwrap();
        for j in 0..8 {
            let jj = b.iconst(Type::U32, j).unwrap();
            let e = b.add(row, jj).unwrap();
            let ps = b.ptr_add(sh2, e).unwrap();
            let x = b.load(ps).unwrap();
            let pd = b.ptr_add(back, e).unwrap();
            b.store(pd, x).unwrap();
        }
    }
    b.ret(&[]).unwrap();
    b.finish().unwrap()
}

#[test]
fn ldmatrix_and_stmatrix_follow_the_ptx_fragment_layout() {
    let mut rng = Rng::new(7);
    for num in [1u32, 2, 4] {
        for trans in [false, true] {
            let src: Vec<u16> = (0..256).map(|_| rng.u32() as u16).collect();
            let md = module(ldmatrix_kernel(num, trans, true));
            let it = Interpreter::new(&md).unwrap();
            let mut bufs = vec![
                src.iter().flat_map(|x| x.to_le_bytes()).collect(),
                vec![0x5au8; 32 * 4 * num as usize],
                vec![0u8; 512],
            ];
            let args = [Arg::Buffer(0), Arg::Buffer(1), Arg::Buffer(2)];
            it.launch("k", [1, 1, 1], [32, 1, 1], 0, &args, &mut bufs)
                .unwrap();
            for lane in 0..32usize {
                for i in 0..num as usize {
                    // Matrix i is rows i*8..i*8+8 of src (8 elements each).
                    let at = |row: usize, col: usize| u32::from(src[(i * 8 + row) * 8 + col]);
                    let (gid, t) = (lane / 4, lane % 4);
                    let want = if trans {
                        at(2 * t, gid) | (at(2 * t + 1, gid) << 16)
                    } else {
                        at(gid, 2 * t) | (at(gid, 2 * t + 1) << 16)
                    };
                    let o = (lane * num as usize + i) * 4;
                    let got = u32::from_le_bytes(bufs[1][o..o + 4].try_into().unwrap());
                    assert_eq!(got, want, "x{num} trans={trans} lane {lane} r{i}");
                }
            }
            // stmatrix of what ldmatrix gave restores the matrices it read.
            let rows = num as usize * 8 * 8 * 2;
            assert_eq!(bufs[2][..rows], bufs[0][..rows], "x{num} trans={trans}");
        }
    }
}

fn verify_error(m: &Module) -> String {
    verify_module(m).expect_err("must not verify").to_string()
}

#[test]
fn bad_warp_mma_input_is_a_typed_error_naming_the_instruction() {
    // mma.sync on sm_75: the error names the instruction and sm_80.
    let mut m = module(mma_kernel(MmaElem::F16, ScalarType::F32));
    m.targets = vec![Arch::Sm75];
    m.ptx_version = None;
    let e = verify_error(&m);
    assert!(e.contains("mma.sync") && e.contains("sm_80"), "{e}");
    // fp8 on sm_80.
    let mut m = module(mma_kernel(MmaElem::E4m3, ScalarType::F32));
    m.targets = vec![Arch::Sm80];
    let e = verify_error(&m);
    assert!(e.contains("e4m3") && e.contains("sm_89"), "{e}");
    // stmatrix before sm_90.
    let mut m = module(ldmatrix_kernel(4, false, true));
    m.targets = vec![Arch::Sm89];
    let e = verify_error(&m);
    assert!(e.contains("stmatrix") && e.contains("sm_90"), "{e}");
    // A fragment of the wrong shape.
    let mut b = FunctionBuilder::kernel(
        "k",
        &[
            g(Type::Vector(ScalarType::U32, 2)),
            g(Type::Vector(ScalarType::F32, 4)),
        ],
    );
    let (pa, pc) = (b.param(0), b.param(1));
    let x = b.load(pa).unwrap();
    let z = b.load(pc).unwrap();
    let r = b
        .mma_sync(WarpShape::M16n8k16, MmaElem::F16, x, x, z)
        .unwrap();
    b.store(pc, r).unwrap();
    b.ret(&[]).unwrap();
    let e = verify_error(&module(b.finish().unwrap()));
    assert!(
        e.contains("mma.sync.m16n8k16.f16")
            && e.contains("fragment a")
            && e.contains("vec<u32, 4>"),
        "{e}"
    );
    // ldmatrix through a global pointer.
    let mut b = FunctionBuilder::kernel("k", &[g(Type::U16), g(Type::U32)]);
    let (p, q) = (b.param(0), b.param(1));
    let v = b.ldmatrix(1, false, p).unwrap();
    b.store(q, v).unwrap();
    b.ret(&[]).unwrap();
    let e = verify_error(&module(b.finish().unwrap()));
    assert!(
        e.contains("ldmatrix.x1 needs a pointer to shared memory") && e.contains("block0"),
        "{e}"
    );
}

#[test]
fn warp_mma_text_round_trips() {
    for f in [
        mma_kernel(MmaElem::E5m2, ScalarType::F32),
        mma_kernel(MmaElem::F64, ScalarType::F64),
        ldmatrix_kernel(4, true, true),
        ldmatrix_kernel(2, false, false),
    ] {
        let m = module(f);
        let text = print_module(&m);
        let back = parse_module(&text).unwrap();
        assert_eq!(print_module(&back), text);
        verify_module(&back).unwrap();
    }
    let text = print_module(&module(ldmatrix_kernel(4, true, true)));
    assert!(text.contains("ldmatrix.x4.trans") && text.contains("stmatrix.x4.trans"));
}

#[test]
fn approx_math_is_the_correctly_rounded_value() {
    let mut rng = Rng::new(3);
    for op in ApproxOp::ALL.iter().copied() {
        let mut b = FunctionBuilder::kernel("k", &[g(Type::F32)]);
        let p = b.param(0);
        let tid = b.thread_idx(Dim::X).unwrap();
        let q = b.ptr_add(p, tid).unwrap();
        let x = b.load(q).unwrap();
        let y = b.approx(op, x).unwrap();
        b.store(q, y).unwrap();
        b.ret(&[]).unwrap();
        let m = module(b.finish().unwrap());
        let text = print_module(&m);
        assert!(text.contains(&format!("{op}.approx")), "{text}");
        assert_eq!(parse_module(&text).unwrap(), m);
        let xs: Vec<f32> = (0..64).map(|_| rng.f32(-20.0, 20.0)).collect();
        let mut bufs = vec![f32_bytes(&xs)];
        Interpreter::new(&m)
            .unwrap()
            .launch("k", [1, 1, 1], [64, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
            .unwrap();
        for (x, got) in xs.iter().zip(bytes_f32(&bufs[0])) {
            let x = f64::from(*x);
            let want = match op {
                ApproxOp::Ex2 | ApproxOp::Ex2Ftz => x.exp2(),
                ApproxOp::Rcp => 1.0 / x,
                ApproxOp::Tanh => x.tanh(),
            } as f32;
            assert_eq!(got.to_bits(), want.to_bits(), "{op}.approx {x}");
        }
    }
    // ex2_ftz flushes subnormal results (2^-127 .. 2^-149) to zero; ex2 keeps them.
    for (op, keeps) in [(ApproxOp::Ex2, true), (ApproxOp::Ex2Ftz, false)] {
        let mut b = FunctionBuilder::kernel("k", &[g(Type::F32)]);
        let p = b.param(0);
        let tid = b.thread_idx(Dim::X).unwrap();
        let q = b.ptr_add(p, tid).unwrap();
        let x = b.load(q).unwrap();
        let y = b.approx(op, x).unwrap();
        b.store(q, y).unwrap();
        b.ret(&[]).unwrap();
        let m = module(b.finish().unwrap());
        let xs = [-127.5f32, -130.0, -149.0, -126.0];
        let mut bufs = vec![f32_bytes(&xs)];
        Interpreter::new(&m)
            .unwrap()
            .launch("k", [1, 1, 1], [4, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
            .unwrap();
        let got = bytes_f32(&bufs[0]);
        for (x, y) in xs[..3].iter().zip(&got) {
            assert_eq!(*y != 0.0, keeps, "{op}.approx {x} gave {y}");
        }
        assert_eq!(got[3], 2f32.powi(-126), "{op}.approx -126 is normal");
    }
    // f64 operands are a typed error.
    let mut b = FunctionBuilder::kernel("k", &[g(Type::F64)]);
    let p = b.param(0);
    let x = b.load(p).unwrap();
    let _ = b.approx(ApproxOp::Ex2, x).unwrap();
    b.ret(&[]).unwrap();
    let e = verify_error(&module(b.finish().unwrap()));
    assert!(e.contains("ex2.approx") && e.contains("f32"), "{e}");
}
