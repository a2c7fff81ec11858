//! Compile-time benchmark of the NVPTX backend: per-stage medians of
//! `compile_ptx` (verify, lower, llvm_verify, optimize, codegen) over every
//! GPU example in `examples/*.zir` and a 100-kernel generated module, next to
//! `ptxas` on the same PTX. Writes the results JSON of
//! `docs/performance.md` ("Results JSON") when given `--out DIR`.
//!
//! `cargo run --release -p zyntax-llvm --example compile_bench -- [--iters N] [--out benches/results]`

#[path = "../tests/common/random_gen.rs"]
mod random_gen;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zyntax_hir::{arch::check_arch, parse_module_named, Arch, Module};
use zyntax_llvm::{compile_ptx, Options, Ptxas};

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// Civil date (UTC) of a Unix time, without a date crate.
fn today() -> (i64, u32, u32) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let iters: usize = flag("--iters")
        .and_then(|s| s.parse().ok())
        .unwrap_or(15)
        .max(1);
    let out_dir = flag("--out").map(PathBuf::from);

    let root = std::fs::canonicalize(env!("CARGO_MANIFEST_DIR"))
        .expect("manifest")
        .join("../..");
    let mut cases: Vec<(String, Module, Arch)> = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "zir"))
        .collect();
    files.sort();
    for p in files {
        let text = std::fs::read_to_string(&p).expect("read");
        let name = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Ok(m) = parse_module_named(&text, Some(&p.display().to_string())) else {
            continue;
        };
        if !m.functions.iter().any(|f| f.kind.is_gpu()) {
            continue;
        }
        for arch in [Arch::Sm80, Arch::Sm90] {
            if zyntax_hir::verify_module(&m).is_ok() && check_arch(&m, arch).is_ok() {
                cases.push((format!("{name}/{arch}"), m.clone(), arch));
            }
        }
    }
    let mut rng = random_gen::Rng::new(42);
    let mut big = Module::new("random100");
    for k in 0..100 {
        big.functions
            .push(random_gen::random_kernel(&format!("k{k}"), &mut rng, 30).function);
    }
    cases.push(("random100/sm_80".into(), big, Arch::Sm80));

    let ptxas = Ptxas::locate().ok();
    let mut results = Vec::new();
    println!(
        "{:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8} {:>9} {:>9}",
        "case",
        "total ms",
        "verify",
        "lower",
        "llvm_ver",
        "optimize",
        "print_ir",
        "codegen",
        "ptxas"
    );
    for (name, m, arch) in &cases {
        let opts = Options::new(*arch);
        let mut stages: Vec<Vec<Duration>> =
            vec![Vec::new(); zyntax_llvm::Timings::default().stages().len()];
        let mut totals = Vec::new();
        let mut ptx = String::new();
        for i in 0..iters + 2 {
            let t = Instant::now();
            let out = match compile_ptx(m, &opts) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("{name}: {e}");
                    std::process::exit(1);
                }
            };
            let total = t.elapsed();
            if i >= 2 {
                // the first two runs warm caches
                totals.push(total);
                for (k, (_, d)) in out.timings.stages().iter().enumerate() {
                    stages[k].push(*d);
                }
            }
            ptx = out.ptx;
        }
        let ptxas_ms = ptxas.as_ref().map(|p| {
            let runs: Vec<Duration> = (0..3)
                .map(|_| {
                    let t = Instant::now();
                    let _ = p.assemble(&ptx, *arch);
                    t.elapsed()
                })
                .collect();
            median(runs)
        });
        let total = median(totals);
        let st: Vec<f64> = stages.into_iter().map(median).collect();
        println!(
            "{name:<28} {total:>9.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>8.3} {:>9.3} {:>9}",
            st[0],
            st[1],
            st[2],
            st[3],
            st[4],
            st[5],
            ptxas_ms.map_or("-".into(), |v| format!("{v:.3}"))
        );
        results.push(serde_json::json!({"case": name, "impl": "zyntax", "metric": "ms_compile_ptx", "value": total, "lower_is_better": true}));
        let names = zyntax_llvm::Timings::default().stages().map(|(n, _)| n);
        for (stage, v) in names.iter().zip(&st) {
            results.push(serde_json::json!({"case": name, "impl": "zyntax", "metric": format!("ms_stage_{stage}"), "value": v, "lower_is_better": true}));
        }
        if let Some(v) = ptxas_ms {
            results.push(serde_json::json!({"case": name, "impl": "ptxas", "metric": "ms_assemble_same_ptx", "value": v, "lower_is_better": true}));
        }
    }
    if let Some(dir) = out_dir {
        let (y, mo, d) = today();
        let commit = std::process::Command::new("git")
            .args(["-C", &root.to_string_lossy(), "rev-parse", "HEAD"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let doc = serde_json::json!({
            "bench": "compile",
            "device": cpu_name(),
            "commit": commit,
            "date": format!("{y:04}-{mo:02}-{d:02}"),
            "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
            "iterations": iters,
            "results": results,
        });
        std::fs::create_dir_all(&dir).expect("out dir");
        let path: PathBuf = Path::new(&dir).join(format!("compile-cpu-{y:04}{mo:02}{d:02}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("json")).expect("write");
        println!("wrote {}", path.display());
    }
}
