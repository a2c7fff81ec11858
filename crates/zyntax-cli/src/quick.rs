//! `--backend cuda`: compile for the device and run one kernel once
//! (`zyntax_cuda::quick_run_with`), with arguments given on the command line.

use crate::{error_lines, one, write_stdout, CliResult, CompileArgs};
use half::{bf16, f16};
use zyntax_cuda::{QuickArg, QuickRunOptions, Signature};
use zyntax_hir::{Arch, Function, Module, ScalarType, Type};
use zyntax_llvm::Options;

/// Elements shown per buffer after the run.
const SHOWN: usize = 8;

/// A kernel argument as written on the command line, checked against the
/// kernel's parameter type.
enum Arg {
    Buffer { elem: ScalarType, n: usize },
    Scalar,
}

pub(crate) fn run_kernel(args: &CompileArgs, module: &Module, display: &str) -> CliResult {
    // Option combinations were checked by `usage_error`.
    let kernel = pick_kernel(module, args.kernel.as_deref(), display)?;
    let params = kernel.param_types();
    if args.kernel_args.len() != params.len() {
        return Err(one(format!(
            "kernel `{}` takes {} argument(s) ({}), {} given",
            kernel.name,
            params.len(),
            params
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            args.kernel_args.len()
        )));
    }
    let mut rng = SplitMix64(args.seed);
    let mut quick = Vec::with_capacity(params.len());
    let mut shapes = Vec::with_capacity(params.len());
    for (i, (text, ty)) in args.kernel_args.iter().zip(&params).enumerate() {
        let (q, shape) = parse_arg(text, ty, &mut rng)
            .map_err(|e| one(format!("argument {} (`{text}`, {ty}): {e}", i + 1)))?;
        quick.push(q);
        shapes.push(shape);
    }
    let signature = Signature::from_function(kernel).map_err(one)?;

    // Only now touch the GPU, so argument mistakes are reported without one.
    let arch = match args.arch {
        Some(a) => a,
        None => device_arch(args.device)?,
    };
    let mut opts = Options::new(arch);
    opts.ptx_version = args.ptx;
    opts.opt_level = args.opt;
    let out = zyntax_llvm::compile_ptx(module, &opts).map_err(|e| error_lines(display, e))?;
    let run_opts = QuickRunOptions {
        device: args.device,
        shared_bytes: args.shared.unwrap_or(signature.shared_bytes),
        signature: Some(signature),
    };
    let report = zyntax_cuda::quick_run_with(
        &out.ptx,
        &kernel.name,
        args.grid,
        args.block,
        &run_opts,
        &mut quick,
    )
    .map_err(|e| one(first_line(&e.to_string())))?;

    let mut text = format!(
        "kernel {} on {} ({}): grid {:?}, block {:?}: {:.4} ms\n",
        kernel.name,
        report.device_name,
        arch.name(),
        args.grid,
        args.block,
        report.kernel_ms
    );
    for (i, (q, shape)) in quick.iter().zip(&shapes).enumerate() {
        if let (QuickArg::Buffer(bytes), Arg::Buffer { elem, n }) = (q, shape) {
            text.push_str(&describe_buffer(i + 1, *elem, *n, bytes));
            text.push('\n');
        }
    }
    write_stdout(text.as_bytes())
}

/// JIT logs and driver messages can span lines; the CLI prints one.
fn first_line(s: &str) -> String {
    let mut lines = s.lines();
    let first = lines.next().unwrap_or("").to_string();
    let rest: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
    if rest.is_empty() {
        format!("cuda: {first}")
    } else {
        format!("cuda: {first} ({})", rest.join("; "))
    }
}

fn pick_kernel<'m>(
    module: &'m Module,
    name: Option<&str>,
    display: &str,
) -> Result<&'m Function, Vec<String>> {
    let kernels: Vec<&Function> = module.functions.iter().filter(|f| f.is_kernel()).collect();
    let names = || {
        kernels
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(n) => kernels
            .iter()
            .copied()
            .find(|f| f.name == n)
            .ok_or_else(|| one(format!("{display}: no kernel `{n}` (kernels: {})", names()))),
        None if kernels.len() == 1 => Ok(kernels[0]),
        None if kernels.is_empty() => Err(one(format!("{display}: the module has no kernel"))),
        None => Err(one(format!(
            "{display}: several kernels ({}); choose one with --kernel NAME",
            names()
        ))),
    }
}

/// The newest arch zyntax targets that the device runs (portable, not `sm_90a`).
fn device_arch(ordinal: u32) -> Result<Arch, Vec<String>> {
    let dev = zyntax_cuda::Device::get(ordinal).map_err(|e| one(first_line(&e.to_string())))?;
    let (major, minor) = dev.props().compute_capability;
    Arch::from_compute_capability(major, minor).ok_or_else(|| {
        one(format!(
            "device arch {} is older than sm_70, which zyntax needs",
            dev.arch_name()
        ))
    })
}

fn parse_arg(text: &str, ty: &Type, rng: &mut SplitMix64) -> Result<(QuickArg, Arg), String> {
    match ty {
        Type::Ptr(_, pointee) => {
            let elem = match &**pointee {
                Type::Array(e, _) => e.elem_scalar(),
                other => other.elem_scalar(),
            }
            .ok_or("the pointee is not a scalar type, so no buffer syntax applies")?;
            let (n, bytes) = buffer(text, elem, rng)?;
            Ok((QuickArg::Buffer(bytes), Arg::Buffer { elem, n }))
        }
        Type::Scalar(s) => Ok((scalar(text, *s)?, Arg::Scalar)),
        _ => Err("only scalar and pointer parameters can be given on the command line".into()),
    }
}

fn scalar(text: &str, s: ScalarType) -> Result<QuickArg, String> {
    if s == ScalarType::Bool {
        return match text {
            "true" | "1" => Ok(QuickArg::Bool(true)),
            "false" | "0" => Ok(QuickArg::Bool(false)),
            _ => Err("expected true, false, 1 or 0".into()),
        };
    }
    if s.is_float() {
        return text
            .parse::<f64>()
            .map(QuickArg::Float)
            .map_err(|_| "expected a number".into());
    }
    let v: i128 = text
        .parse()
        .map_err(|_| "expected an integer".to_string())?;
    let bits = s.size_bytes() * 8;
    let (lo, hi) = if s.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    if v < lo || v > hi {
        return Err(format!("{v} does not fit {s}"));
    }
    Ok(QuickArg::Int(v))
}

/// `rand:N`, `range:N` or `fill:N:VALUE` → element count and bytes.
fn buffer(text: &str, elem: ScalarType, rng: &mut SplitMix64) -> Result<(usize, Vec<u8>), String> {
    let mut parts = text.splitn(3, ':');
    let kind = parts.next().unwrap_or("");
    let n: usize = parts
        .next()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .ok_or("a buffer is rand:N, range:N or fill:N:VALUE with N > 0")?;
    let value = parts.next();
    let width = elem.size_bytes() as usize;
    let total = n
        .checked_mul(width)
        .filter(|&b| b <= 1 << 34)
        .ok_or("buffer too large (16 GiB at most)")?;
    let mut bytes = Vec::with_capacity(total);
    match (kind, value) {
        ("rand", None) => {
            for _ in 0..n {
                let r = rng.next();
                let v = if elem.is_float() {
                    Num::F((r >> 11) as f64 / (1u64 << 53) as f64)
                } else if elem == ScalarType::Bool {
                    Num::I((r >> 63) as i128)
                } else {
                    Num::I((r % 100) as i128)
                };
                encode(elem, v, &mut bytes);
            }
        }
        ("range", None) => {
            for i in 0..n {
                let v = if elem.is_float() {
                    Num::F(i as f64)
                } else {
                    Num::I(i as i128)
                };
                encode(elem, v, &mut bytes);
            }
        }
        ("fill", Some(v)) => {
            let v = match scalar(v, elem)? {
                QuickArg::Float(f) => Num::F(f),
                QuickArg::Int(i) => Num::I(i),
                QuickArg::Bool(b) => Num::I(i128::from(b)),
                QuickArg::Buffer(_) => return Err("bad fill value".into()),
            };
            for _ in 0..n {
                encode(elem, v, &mut bytes);
            }
        }
        _ => return Err("a buffer is rand:N, range:N or fill:N:VALUE".into()),
    }
    Ok((n, bytes))
}

#[derive(Copy, Clone)]
enum Num {
    I(i128),
    F(f64),
}

/// Little-endian bytes of one element; integers wrap to the element's width
/// (`range:N` past the type's range wraps like a C cast).
fn encode(elem: ScalarType, v: Num, out: &mut Vec<u8>) {
    let (i, f) = match v {
        Num::I(i) => (i, i as f64),
        Num::F(f) => (f as i128, f),
    };
    match elem {
        ScalarType::Bool => out.push(u8::from(i != 0)),
        ScalarType::F16 => out.extend_from_slice(&f16::from_f64(f).to_le_bytes()),
        ScalarType::BF16 => out.extend_from_slice(&bf16::from_f64(f).to_le_bytes()),
        ScalarType::F32 => out.extend_from_slice(&(f as f32).to_le_bytes()),
        ScalarType::F64 => out.extend_from_slice(&f.to_le_bytes()),
        _ => {
            let w = elem.size_bytes() as usize;
            out.extend_from_slice(&i.to_le_bytes()[..w]);
        }
    }
}

/// The element values of a buffer as f64 (exact for every integer up to 2^53).
fn decode(elem: ScalarType, bytes: &[u8]) -> Vec<f64> {
    let w = elem.size_bytes() as usize;
    bytes
        .chunks_exact(w)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..w].copy_from_slice(c);
            let u = u64::from_le_bytes(b);
            match elem {
                ScalarType::Bool => f64::from(u8::from(u != 0)),
                ScalarType::F16 => f16::from_bits(u as u16).to_f64(),
                ScalarType::BF16 => bf16::from_bits(u as u16).to_f64(),
                ScalarType::F32 => f64::from(f32::from_bits(u as u32)),
                ScalarType::F64 => f64::from_bits(u),
                _ if elem.is_signed() => {
                    // Sign-extend from the element's width.
                    let shift = 64 - 8 * w as u32;
                    (((u << shift) as i64) >> shift) as f64
                }
                _ => u as f64,
            }
        })
        .collect()
}

fn describe_buffer(index: usize, elem: ScalarType, n: usize, bytes: &[u8]) -> String {
    let vals = decode(elem, bytes);
    let shown: Vec<String> = vals.iter().take(SHOWN).map(|v| format!("{v}")).collect();
    let more = if n > SHOWN { ", ..." } else { "" };
    let sum: f64 = vals.iter().sum();
    format!(
        "arg {index} ({elem}[{n}]): [{}{more}] sum={sum} fnv1a64={:016x}",
        shown.join(", "),
        fnv1a(bytes)
    )
}

/// A checksum of the buffer's bytes, to compare runs exactly.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// SplitMix64: a tiny, well-mixed generator, so `--seed` reproduces buffers
/// without pulling in a random-number crate.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_encode_and_decode() {
        let mut rng = SplitMix64(1);
        let (n, b) = buffer("range:5", ScalarType::I16, &mut rng).unwrap();
        assert_eq!((n, b.len()), (5, 10));
        assert_eq!(decode(ScalarType::I16, &b), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        let (_, b) = buffer("fill:3:-2.5", ScalarType::F16, &mut rng).unwrap();
        assert_eq!(decode(ScalarType::F16, &b), vec![-2.5; 3]);
        let (_, b) = buffer("fill:2:-7", ScalarType::I8, &mut rng).unwrap();
        assert_eq!(decode(ScalarType::I8, &b), vec![-7.0; 2]);
        let (_, b) = buffer("rand:1000", ScalarType::F32, &mut rng).unwrap();
        let v = decode(ScalarType::F32, &b);
        assert!(v.iter().all(|x| (0.0..1.0).contains(x)));
        assert!(v.iter().any(|x| *x != v[0]));
        let (_, b) = buffer("rand:1000", ScalarType::U32, &mut rng).unwrap();
        assert!(decode(ScalarType::U32, &b)
            .iter()
            .all(|x| (0.0..100.0).contains(x)));
        for bad in ["rand", "rand:0", "rand:x", "fill:3", "ones:3", "fill:2:300"] {
            assert!(buffer(bad, ScalarType::U8, &mut rng).is_err(), "{bad}");
        }
    }

    #[test]
    fn seeds_reproduce() {
        let a = buffer("rand:64", ScalarType::F64, &mut SplitMix64(7)).unwrap();
        let b = buffer("rand:64", ScalarType::F64, &mut SplitMix64(7)).unwrap();
        let c = buffer("rand:64", ScalarType::F64, &mut SplitMix64(8)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn scalars_are_range_checked() {
        assert_eq!(scalar("-128", ScalarType::I8), Ok(QuickArg::Int(-128)));
        assert!(scalar("128", ScalarType::I8).is_err());
        assert!(scalar("-1", ScalarType::U32).is_err());
        assert_eq!(scalar("2.5", ScalarType::F32), Ok(QuickArg::Float(2.5)));
        assert_eq!(scalar("true", ScalarType::Bool), Ok(QuickArg::Bool(true)));
        assert!(scalar("x", ScalarType::F64).is_err());
    }
}
