//! The CPU backend's per-kernel choice of how a block's threads run
//! (`host/mode.rs`), on the kernels of `benches/cpu_kernels.py`
//! (`tests/data/cpu_bench_kernels.zir`): SIMD-lane threads only where no
//! region holds a loop, rows of SIMD lanes for an interchanged accumulation,
//! K iterations per stop for an interchanged scatter, all of it only with
//! AVX-512; forced settings still win. Lowering only (`host::prepare`): the
//! AVX-512 target need not be this machine. That each form computes what
//! the interpreter does is tested in `host_barriers.rs`
//! (`interchanged_loops_match_the_interpreter`: every combination of the
//! three settings) and `tests/python/test_cpu_interchange.py`.

use zyntax_hir::parse_module;
use zyntax_llvm::host::{self, HostOptions};

fn bench_kernels() -> zyntax_hir::Module {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/cpu_bench_kernels.zir"
    );
    parse_module(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Kernel name -> the report's `mode` line.
fn modes(opts: &HostOptions) -> Vec<(String, String)> {
    let p = host::prepare(&bench_kernels(), opts).unwrap();
    let json: serde_json::Value = serde_json::from_str(&p.report.to_json()).unwrap();
    let mut out = Vec::new();
    for f in json["functions"].as_array().unwrap() {
        for a in f["actions"].as_array().unwrap() {
            if a["pass"] == "mode" {
                let what = a["what"].as_str().unwrap().to_string();
                out.push((f["name"].as_str().unwrap().to_string(), what));
            }
        }
    }
    out
}

fn avx512() -> HostOptions {
    HostOptions {
        cpu: Some("skylake-avx512".into()),
        features: Some("+avx512f".into()),
        ..HostOptions::default()
    }
}

#[test]
fn modes_are_chosen_per_kernel_with_avx512() {
    let got = modes(&avx512());
    let lanes = "threads as SIMD lanes";
    let serial = "threads one after another";
    let rows = format!(
        "interchanged loops as rows of SIMD lanes, {} iteration(s) per pass",
        host::mode::ROW_ITERS
    );
    let want: &[(&str, String)] = &[
        // No barrier, no interchanged loop: SIMD lanes, with per-thread
        // loops too (the scan's chunks, n-body's walk).
        ("saxpy", lanes.into()),
        ("stencil", lanes.into()),
        ("scan_chunks", lanes.into()),
        ("scan_offsets", lanes.into()),
        ("scan_apply", lanes.into()),
        ("nbody", lanes.into()),
        // Split, `for k in range(0, 32, 8)`: 4 iterations, unrolled by LLVM.
        ("transpose", lanes.into()),
        // The grid-stride sum as rows; its tree's loop holds barriers.
        ("reduce_sum", format!("{lanes}; {rows}")),
        // A scatter (shared atomics): K = 8 per stop (unrolled by LLVM).
        (
            "histogram",
            format!("{lanes}; interchanged loops 8 iterations per stop"),
        ),
        // Row walks as rows; threads one after another (the trees).
        ("layernorm", format!("{serial}; {rows}")),
        ("softmax", format!("{serial}; {rows}")),
        // The k-loop and its tail: loops inside a region.
        ("mm", serial.into()),
    ];
    for (name, mode) in want {
        let m = got
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no mode for @{name}"));
        assert_eq!(&m.1, mode, "@{name}");
    }
}

#[test]
fn without_avx512_threads_run_one_after_another() {
    let opts = HostOptions {
        cpu: Some("x86-64-v3".into()),
        features: Some("+avx2,-avx512f".into()),
        ..HostOptions::default()
    };
    for (name, mode) in modes(&opts) {
        assert!(
            mode.starts_with("threads one after another"),
            "@{name}: {mode}"
        );
        assert!(!mode.contains("rows"), "@{name}: {mode}");
    }
}

#[test]
fn forced_settings_apply_to_every_kernel() {
    let opts = HostOptions {
        vector_threads: Some(true),
        affine_rows: Some(false),
        iterations: Some(4),
        ..avx512()
    };
    for (name, mode) in modes(&opts) {
        assert!(mode.starts_with("threads as SIMD lanes"), "@{name}: {mode}");
        assert!(!mode.contains("rows"), "@{name}: {mode}");
        if mode.contains("interchanged") {
            assert!(mode.contains("4 iterations"), "@{name}: {mode}");
        }
    }
}
