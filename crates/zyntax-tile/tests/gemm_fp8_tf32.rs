//! The tile GEMM with fp8 (e4m3 / e5m2 bytes in `u8` views) and tf32 (f32
//! views read as tf32) operands, `dot_as(.., DotInputs::E4m3 | E5m2 |
//! Tf32)`: on the warp-specialised TMA pipeline and the `cp.async` pipeline
//! on sm_90a (wgmma `.e4m3`/`.e5m2` k32 and `.tf32` k8, both operands
//! K-major: `a` row-major, `b` a transposed view of an `[N, K]` matrix), and
//! on the FFMA path of sm_80 (the bytes decoded with integer arithmetic).
//! Run on the interpreter against an f64 reference of the values the
//! hardware reads (fp8 decoded by the interpreter's own decoder, tf32 with
//! the low 13 mantissa bits dropped), `c` poisoned (NaN) first, tails in M,
//! N and K. The sm_90a kernels go through ptxas when it is installed.

mod common;
use common::*;
use zyntax_hir::tensormap::{Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc};
use zyntax_hir::{Arch, ScalarType, Type};
use zyntax_interp::tma::InterpTensorMap;
use zyntax_interp::warp_mma::fp8_to_f64;
use zyntax_interp::{Arg, Interpreter};
use zyntax_tile::{DotInputs, Schedule, TileBuilder, TileKernel, TileResult};

/// The operand element type of `inputs`.
fn elem(inputs: DotInputs) -> Type {
    match inputs {
        DotInputs::Tf32 | DotInputs::Native => Type::F32,
        DotInputs::E4m3 | DotInputs::E5m2 => Type::U8,
    }
}

fn elem_bytes(inputs: DotInputs) -> u32 {
    if inputs.is_fp8() {
        1
    } else {
        4
    }
}

/// `c = a @ b`: a `[M, K]` unit-stride along K, b `[K, N]` unit-stride
/// along K (a transposed view), both 16-byte aligned.
fn gemm(schedule: Schedule, inputs: DotInputs, b_unit: usize) -> TileResult<TileKernel> {
    let (bm, bn, bk) = (schedule.block[0], schedule.block[1], schedule.k);
    let mut t = TileBuilder::new("gemm", schedule);
    let a = t.view_param_aligned("a", elem(inputs), 2, 1, 16);
    let b = t.view_param_aligned("b", elem(inputs), 2, b_unit, 16);
    let c = t.view_param_aligned("c", Type::F32, 2, 1, 16);
    let (pm, pn) = (t.program_id(0), t.program_id(1));
    let (cbm, cbn, cbk, zero) = (t.index(bm), t.index(bn), t.index(bk), t.index(0));
    let (m0, n0) = (t.scalar_mul(pm, cbm), t.scalar_mul(pn, cbn));
    let k = t.dim(a, 1);
    let acc0 = t.full(&[bm, bn], Type::F32, 0.0);
    let acc = t.for_range(zero, k, cbk, &[acc0.into()], |t, k0, carried| {
        let x = t.load(a, &[m0, k0], &[bm, bk]);
        let y = t.load(b, &[k0, n0], &[bk, bn]);
        vec![t.dot_as(x, y, carried[0].tile(), inputs).into()]
    });
    t.store(c, &[m0, n0], acc[0].tile());
    t.finish()
}

/// Random operand bytes and the values the hardware reads from them. fp8:
/// every byte but the NaNs (and e5m2's infinities), exponents kept within
/// a few octaves of 1 (`narrow`) or the whole range (subnormals included);
/// tf32: f32 values with random low bits, read truncated.
fn operand(rng: &mut Rng, n: usize, inputs: DotInputs, narrow: bool) -> (Vec<u8>, Vec<f64>) {
    match inputs {
        DotInputs::E4m3 | DotInputs::E5m2 => {
            let e4m3 = inputs == DotInputs::E4m3;
            let mut bytes = Vec::with_capacity(n);
            while bytes.len() < n {
                let r = (rng.next() + 2.0) / 4.0; // [0, 1)
                let mut byte = (r * 256.0) as u8;
                if narrow {
                    // Exponent field around the bias: values in [1/4, 8).
                    let (mb, bias) = if e4m3 { (3, 7) } else { (2, 15) };
                    let e = bias - 2 + u8::from(byte & 0x40 != 0) * 2 + (byte & 1);
                    byte = (byte & 0x80) | (e << mb) | ((byte >> 1) & ((1 << mb) - 1));
                }
                if fp8_to_f64(u64::from(byte), e4m3).is_finite() {
                    bytes.push(byte);
                }
            }
            let vals = bytes
                .iter()
                .map(|&b| fp8_to_f64(u64::from(b), e4m3))
                .collect();
            (bytes, vals)
        }
        _ => {
            let v = rng.vec(n);
            let read = v
                .iter()
                .map(|x| f64::from(f32::from_bits(x.to_bits() & !0x1fff)))
                .collect();
            (bytes(&v), read)
        }
    }
}

fn map_of(
    kernel: &TileKernel,
    i: usize,
    buffer: usize,
    ext: &[u32],
    str: &[u32],
    inputs: DotInputs,
) -> InterpTensorMap {
    let m = &kernel.launch.tensor_maps[i];
    assert_eq!(str[m.inner_dim], 1);
    let dtype = if inputs.is_fp8() {
        ScalarType::U8
    } else {
        ScalarType::F32
    };
    InterpTensorMap {
        buffer,
        offset: 0,
        desc: TensorMapDesc {
            dtype,
            dims: vec![ext[m.inner_dim].into(), ext[m.outer_dim].into()],
            strides: vec![u64::from(str[m.outer_dim] * elem_bytes(inputs))],
            box_dims: m.box_dims.to_vec(),
            elem_strides: vec![1, 1],
            swizzle: Swizzle::B128,
            interleave: Interleave::None,
            oob_fill: OobFill::Zero,
            l2_promotion: L2Promotion::None,
        },
    }
}

/// Runs `c = a @ b` for `m x n x k` on the interpreter and checks it: `a`
/// stored m x k, `b` stored n x k (read as its transposed view); rows
/// padded to 16 bytes as TMA needs. A persistent kernel gets `ctas` CTAs.
fn check(schedule: Schedule, inputs: DotInputs, (m, n, k): (u32, u32, u32), ctas: u32) {
    let mut rng = Rng::new();
    let kernel = gemm(schedule.clone(), inputs, 0).unwrap();
    let text = zyntax_hir::print_module(&kernel.module);
    let ws = schedule.warp_specialize;
    if schedule.arch == Arch::Sm90a {
        let form = match inputs {
            DotInputs::E4m3 => "e4m3.e4m3",
            DotInputs::E5m2 => "e5m2.e5m2",
            _ => "tf32.tf32",
        };
        assert!(text.contains(form), "{schedule:?}: no wgmma {form}\n{text}");
        assert_eq!(text.contains("tma.load"), ws, "{schedule:?}");
    } else {
        assert!(!text.contains("wgmma") && !text.contains("mma"), "{text}");
    }
    let per16 = 16 / elem_bytes(inputs);
    let ld = k.div_ceil(per16) * per16;
    let narrow = schedule.arch == Arch::Sm90a;
    let (ab, a64) = operand(&mut rng, (m * ld) as usize, inputs, narrow);
    let (bb, b64) = operand(&mut rng, (n * ld) as usize, inputs, narrow);
    let mut bufs = vec![ab, bb, bytes(&vec![f32::NAN; (m * n) as usize])];
    let (a_str, b_str) = (vec![ld, 1], vec![1, ld]);
    let mut args = Vec::new();
    for (buf, ext, str) in [
        (0usize, vec![m, k], a_str.clone()),
        (1, vec![k, n], b_str.clone()),
        (2, vec![m, n], vec![n, 1]),
    ] {
        args.push(Arg::Buffer(buf));
        args.extend(ext.iter().map(|&s| Arg::Int(s.into())));
        args.extend(str.iter().map(|&s| Arg::Int(s.into())));
    }
    let mut it = Interpreter::new(&kernel.module).unwrap();
    let program_grid = schedule.grid(&[m.into(), n.into()]).unwrap();
    let mut grid = program_grid;
    if ws {
        assert_eq!(kernel.launch.tensor_maps.len(), 2);
        it.tensor_maps
            .push(map_of(&kernel, 0, 0, &[m, k], &a_str, inputs));
        it.tensor_maps
            .push(map_of(&kernel, 1, 1, &[k, n], &b_str, inputs));
        args.extend([Arg::TensorMap(0), Arg::TensorMap(1)]);
        if schedule.persistent {
            args.extend([
                Arg::Int(program_grid[0].into()),
                Arg::Int(program_grid[1].into()),
            ]);
            grid = [ctas, 1, 1];
        }
    }
    if let Err(e) = it.launch(&kernel.name, grid, kernel.launch.block, 0, &args, &mut bufs) {
        panic!("{schedule:?}: {e}");
    }
    let (ku, lu) = (k as usize, ld as usize);
    let what = format!("{inputs:?} {m}x{n}x{k} {schedule:?}");
    let got = floats(&bufs[2]);
    for (e, &g) in got.iter().enumerate() {
        let (i, j) = (e / n as usize, e % n as usize);
        let terms = (0..ku).map(|kk| a64[i * lu + kk] * b64[j * lu + kk]);
        let (want, size) = terms.fold((0.0, 0.0), |(s, a), t| (s + t, a + f64::abs(t)));
        // f32 accumulation of K exact products: K roundings of at most the
        // running magnitude (the full fp8 range cancels a lot).
        let tol = f64::from(k) * 1.2e-7 * f64::max(size, 1.0);
        let err = (f64::from(g) - want).abs();
        assert!(err <= tol, "{what}: element {e}: got {g}, want {want}");
    }
}

fn sm90(block: [u32; 2], warps: u32, stages: u32, inputs: DotInputs) -> Schedule {
    Schedule::block(&block)
        .k(128 / elem_bytes(inputs))
        .warps(warps)
        .stages(stages)
        .arch(Arch::Sm90a)
}

const FORMATS: [DotInputs; 3] = [DotInputs::E4m3, DotInputs::E5m2, DotInputs::Tf32];

#[test]
fn ws_pipeline_fp8_and_tf32() {
    for inputs in FORMATS {
        // Tails in M, N and K (the last K step partly past K: TMA's zero
        // fill), the ring wrapping (5 K steps over 3 stages).
        let k = 4 * 128 / elem_bytes(inputs) + 40;
        let s = sm90([64, 64], 4, 3, inputs).warp_specialize(true);
        check(s, inputs, (72, 70, k), 0);
    }
    // Persistent over 2 CTAs, 128x128 over 8 consumer warps, a wgmma group
    // in flight.
    let s = sm90([128, 128], 8, 2, DotInputs::E4m3)
        .warp_specialize(true)
        .persistent(true)
        .wgmma_in_flight(1);
    check(s, DotInputs::E4m3, (130, 200, 300), 2);
}

#[test]
fn cp_async_pipeline_fp8_and_tf32() {
    for inputs in FORMATS {
        let k = 2 * 128 / elem_bytes(inputs) + 8;
        check(sm90([64, 64], 4, 3, inputs), inputs, (70, 65, k), 0);
    }
}

#[test]
fn ffma_fp8_decodes_every_byte_and_tf32_truncates() {
    // sm_80: no tensor cores for these inputs; the whole byte range
    // (subnormals, zeros, the largest values) through the FFMA decode.
    for inputs in FORMATS {
        let s = Schedule::block(&[32, 32]).k(32).warps(4);
        check(s, inputs, (33, 17, 100), 0);
    }
}

#[test]
fn fp8_needs_k_major_operands_on_wgmma() {
    // b unit-stride along N: wgmma cannot read 8-bit (or tf32) operands
    // N-major; with dot_path wgmma that is a typed schedule error naming why.
    for inputs in FORMATS {
        let s = sm90([64, 64], 4, 2, inputs).dot_path(zyntax_tile::DotPath::Wgmma);
        let e = gemm(s, inputs, 1).unwrap_err().to_string();
        assert!(e.contains("K-major"), "{e}");
    }
    // The dtype must match the format.
    let mut t = TileBuilder::new("bad", Schedule::block(&[16, 16]));
    let x = t.full(&[16, 16], Type::BF16, 1.0);
    let acc = t.full(&[16, 16], Type::F32, 0.0);
    t.dot_as(x, x, acc, DotInputs::E4m3);
    let e = t.finish().unwrap_err().to_string();
    assert!(e.contains("u8"), "{e}");
}

/// With `--features compute`: the fp8 and tf32 WS kernels at the library's
/// tile shapes compile to PTX with `wgmma ... .e4m3.e4m3` / `.tf32.tf32` and
/// pass ptxas without spills or serialised wgmmas.
#[cfg(feature = "compute")]
#[test]
fn fp8_tf32_pass_ptxas() {
    use zyntax_llvm::{compile_ptx, Options, Ptxas};
    let ptxas = Ptxas::locate().unwrap_or_else(|e| panic!("{e}"));
    for inputs in FORMATS {
        let s = sm90([128, 256], 8, 4, inputs)
            .warp_specialize(true)
            .persistent(true)
            .wgmma_in_flight(1);
        let kernel = gemm(s.clone(), inputs, 0).unwrap();
        let ptx = compile_ptx(&kernel.module, &Options::new(Arch::Sm90a))
            .unwrap_or_else(|e| panic!("{s:?}: {e}"))
            .ptx;
        let form = match inputs {
            DotInputs::E4m3 => "k32.f32.e4m3.e4m3",
            DotInputs::E5m2 => "k32.f32.e5m2.e5m2",
            _ => "k8.f32.tf32.tf32",
        };
        assert!(ptx.contains(form), "{inputs:?}: missing `{form}`");
        let out = ptxas
            .assemble(&ptx, Arch::Sm90a)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert!(
            !out.log.contains("bytes spill stores") || out.log.contains(" 0 bytes spill stores"),
            "{s:?}: spills\n{}",
            out.log
        );
        assert!(!out.log.contains("C7514"), "{s:?}: {}", out.log);
    }
}
