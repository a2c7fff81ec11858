//! A DSL embedding zyntax from Rust, end to end: a tiny text nest language
//! (`zyntax_opt::nest_tile::parse`, files in `examples/nests/`) is parsed
//! into a `NestSpec`, recognised and lowered to a tile program
//! (`nest_tile::lower`), then either printed (the report, the HIR kernel,
//! the launch) or run on the reference interpreter against the nest
//! evaluated in f64. No Python anywhere.
//!
//! ```text
//! cargo run -p zyntax-opt --example nest_dsl -- FILE [--size M=64 ...] [--arch sm_90]
//!     [--emit report|hir|launch|check] [--out DIR]
//! ```
//!
//! `--emit check` (the default) runs the kernel on the interpreter (use
//! small `--size`s); `--out DIR` writes `<nest>.zir` (the HIR module: any
//! zyntax backend compiles it, e.g. `zyntax.cuda.load_hir(
//! zyntax.hir.parse_zir(text))`) and `<nest>.launch.json` (grid, block,
//! and per kernel view its buffer, offset, extents and strides).

use std::process::ExitCode;
use zyntax_hir::{Arch, Type};
// The launch the nest tests use (views, TMA tensor maps, a persistent grid).
#[path = "../tests/common/interp_launch.rs"]
mod interp_launch;
use interp_launch::interp_launch;
use zyntax_opt::nest_tile::{self, NestKernel, NestSpec, NestTileOptions};

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nest_dsl: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Options {
    file: String,
    sizes: Vec<(String, u64)>,
    arch: Arch,
    emit: String,
    out: Option<String>,
}

fn options(args: Vec<String>) -> Result<Options, String> {
    let mut o = Options {
        file: String::new(),
        sizes: Vec::new(),
        arch: Arch::Sm80,
        emit: "check".into(),
        out: None,
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| it.next().ok_or(format!("{a} needs {what}"));
        match a.as_str() {
            "--size" => {
                let v = value("NAME=VALUE")?;
                let (n, x) = v
                    .split_once('=')
                    .ok_or(format!("--size {v}: expected NAME=VALUE"))?;
                let x = x
                    .parse()
                    .map_err(|_| format!("--size {v}: {x} is not an integer"))?;
                o.sizes.push((n.to_string(), x));
            }
            "--arch" => {
                let v = value("an arch")?;
                o.arch = Arch::from_name(&v).ok_or(format!("unknown arch {v}"))?;
            }
            "--emit" => o.emit = value("report, hir, launch or check")?,
            "--out" => o.out = Some(value("a directory")?),
            _ if o.file.is_empty() && !a.starts_with("--") => o.file = a,
            _ => return Err(format!("unexpected argument {a}")),
        }
    }
    if o.file.is_empty() {
        return Err("usage: nest_dsl FILE [--size NAME=V ...] [--arch sm_80] [--emit report|hir|launch|check] [--out DIR]".into());
    }
    Ok(o)
}

fn run(args: Vec<String>) -> Result<(), String> {
    let o = options(args)?;
    let src = std::fs::read_to_string(&o.file).map_err(|e| format!("{}: {e}", o.file))?;
    let sizes: Vec<(&str, u64)> = o.sizes.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let spec = nest_tile::parse_with(&src, &sizes).map_err(|e| format!("{}:{e}", o.file))?;
    println!("{}", nest_tile::tiling_report(&spec));
    let options = NestTileOptions {
        arch: o.arch,
        schedule: None,
        ..NestTileOptions::default()
    };
    let nk = nest_tile::lower(&spec, &options).map_err(|e| e.to_string())?;
    if !nk.pipeline.is_empty() {
        println!("{}: {}", spec.name, nk.pipeline);
    }
    if let Some(dir) = &o.out {
        write_out(dir, &spec, &nk)?;
    }
    match o.emit.as_str() {
        "report" => {}
        "hir" => print!("{}", zyntax_hir::print_module(&nk.kernel.module)),
        "launch" => println!("{}", launch_json(&spec, &nk)),
        "check" => check(&spec, &nk)?,
        e => return Err(format!("--emit {e}: expected report, hir, launch or check")),
    }
    Ok(())
}

/// The launch as JSON: the program's grid, block, schedule, the pipeline,
/// the kernel's views (buffer, offset, extents, strides and the element
/// type of each view parameter) and, for a warp-specialised kernel, the
/// TMA tensor maps to build after them (the view each is over, its inner
/// and outer dim and box) and whether it is persistent (then it takes the
/// program's grid as two u32 after the maps and runs about one CTA per SM).
fn launch_json(spec: &NestSpec, nk: &NestKernel) -> String {
    let views: Vec<String> = nk
        .args
        .iter()
        .map(|a| {
            let b = &spec.buffers[a.buffer];
            format!(
                "{{\"buffer\": {}, \"name\": \"{}\", \"dtype\": \"{}\", \"offset\": {}, \"extents\": {:?}, \"strides\": {:?}, \"align\": {}}}",
                a.buffer, b.name, b.elem, a.offset, a.extents, a.strides, a.align
            )
        })
        .collect();
    let maps: Vec<String> = nk
        .kernel
        .launch
        .tensor_maps
        .iter()
        .zip(nk.tensor_map_views())
        .map(|(m, v)| {
            format!(
                "{{\"view\": {v}, \"inner_dim\": {}, \"outer_dim\": {}, \"box\": {:?}}}",
                m.inner_dim, m.outer_dim, m.box_dims
            )
        })
        .collect();
    format!(
        "{{\"kernel\": \"{}\", \"grid\": {:?}, \"block\": {:?}, \"schedule\": \"{:?}\", \"pipeline\": \"{}\", \"views\": [{}], \"tensor_maps\": [{}], \"persistent\": {}}}",
        nk.kernel.name,
        nk.grid,
        nk.kernel.launch.block,
        nk.schedule,
        nk.pipeline.replace('"', "'"),
        views.join(", "),
        maps.join(", "),
        nk.kernel.launch.persistent
    )
}

fn write_out(dir: &str, spec: &NestSpec, nk: &NestKernel) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    let base = format!("{dir}/{}", spec.name);
    let zir = zyntax_hir::print_module(&nk.kernel.module);
    std::fs::write(format!("{base}.zir"), zir).map_err(|e| format!("{base}.zir: {e}"))?;
    std::fs::write(format!("{base}.launch.json"), launch_json(spec, nk) + "\n")
        .map_err(|e| format!("{base}.launch.json: {e}"))?;
    println!("wrote {base}.zir and {base}.launch.json");
    Ok(())
}

/// Runs the kernel on the interpreter over random inputs (the output
/// poisoned with NaN) and compares with `nest_tile::evaluate` in f64.
fn check(spec: &NestSpec, nk: &NestKernel) -> Result<(), String> {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0
    };
    let mut values = Vec::new();
    let mut bytes = Vec::new();
    for (i, b) in spec.buffers.iter().enumerate() {
        let n: u64 = b.shape.iter().product();
        let poison = i == spec.output.buffer;
        let vals: Vec<f64> = (0..n)
            .map(|_| {
                if poison {
                    f64::NAN
                } else {
                    round(rand(), &b.elem)
                }
            })
            .collect();
        bytes.push(
            vals.iter()
                .flat_map(|&v| encode(v, &b.elem))
                .collect::<Vec<u8>>(),
        );
        values.push(vals);
    }
    let want = nest_tile::evaluate(spec, &values).map_err(|e| e.to_string())?;
    interp_launch(spec, nk, &mut bytes)?;
    let out = &spec.buffers[spec.output.buffer];
    let got = decode(&bytes[spec.output.buffer], &out.elem);
    // f32 accumulation, then rounding to the output type.
    let tol = match out.elem {
        Type::BF16 => 1e-2,
        Type::F16 => 2e-3,
        _ => 1e-4,
    };
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let e = (g - w).abs() / w.abs().max(1.0);
        // NaN (a poisoned element never written) fails too.
        if e.is_nan() || e > tol {
            return Err(format!("element {i}: got {g}, want {w}"));
        }
        worst = worst.max(e);
    }
    println!(
        "interpreter matches the f64 evaluation ({} elements, max relative error {worst:.2e})",
        got.len()
    );
    Ok(())
}

fn round(v: f64, t: &Type) -> f64 {
    match *t {
        Type::BF16 => half::bf16::from_f64(v).to_f64(),
        Type::F16 => half::f16::from_f64(v).to_f64(),
        Type::F32 => f64::from(v as f32),
        _ => v,
    }
}

fn encode(v: f64, t: &Type) -> Vec<u8> {
    match *t {
        Type::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        Type::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        Type::F64 => v.to_le_bytes().to_vec(),
        _ => (v as f32).to_le_bytes().to_vec(),
    }
}

fn decode(bytes: &[u8], t: &Type) -> Vec<f64> {
    match *t {
        Type::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Type::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Type::F64 => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    }
}
