//! The `zyntax` binary end to end: outputs, exit codes, error format.

use std::path::PathBuf;
use std::process::Command;

fn zyntax() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zyntax"))
}

fn example(name: &str) -> PathBuf {
    let manifest = std::fs::canonicalize(env!("CARGO_MANIFEST_DIR")).unwrap();
    manifest.join("../../examples").join(name)
}

fn tmp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("zyntax-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn compiles_example_to_ptx_file_and_validates() {
    let out = std::env::temp_dir().join(format!("zyntax-saxpy-{}.ptx", std::process::id()));
    let st = zyntax()
        .args([
            "compile",
            "--backend",
            "nvptx",
            "--arch",
            "sm_90a",
            "--validate",
        ])
        .arg(example("saxpy.zir"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let ptx = std::fs::read_to_string(&out).unwrap();
    assert!(ptx.contains(".target sm_90a"), "{ptx}");
    assert!(ptx.contains(".version 8.0"), "{ptx}");
    assert!(ptx.contains(".visible .entry saxpy("), "{ptx}");
    let _ = std::fs::remove_file(out);
}

#[test]
fn emits_nvptx_llvm_ir() {
    let o = zyntax()
        .args([
            "compile",
            "--backend",
            "nvptx",
            "--emit",
            "llvm",
            "--arch",
            "sm_80",
            "--opt",
            "O0",
        ])
        .arg(example("saxpy.zir"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ir = String::from_utf8(o.stdout).unwrap();
    assert!(
        ir.contains("target triple = \"nvptx64-nvidia-cuda\""),
        "{ir}"
    );
    assert!(ir.contains("define ptx_kernel void @saxpy"), "{ir}");
    assert!(ir.contains("!nvvm.annotations"), "{ir}");
}

#[test]
fn llvm_backend_compiles_host_code_for_the_cpu() {
    let o = zyntax()
        .args(["compile", "--backend", "llvm"])
        .arg(example("critical_host.zir"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ir = String::from_utf8(o.stdout).unwrap();
    assert!(ir.contains("target triple = \"x86_64"), "{ir}");
    let o = zyntax()
        .args([
            "compile",
            "--backend",
            "llvm",
            "--emit",
            "asm",
            "--cpu",
            "generic",
        ])
        .arg(example("critical_host.zir"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(".text"));
    let obj = std::env::temp_dir().join(format!("zyntax-host-{}.o", std::process::id()));
    let st = zyntax()
        .args(["compile", "--backend", "llvm", "--emit", "obj", "-o"])
        .arg(&obj)
        .arg(example("critical_host.zir"))
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(&obj).unwrap();
    assert!(bytes.starts_with(b"\x7fELF"));
    let _ = std::fs::remove_file(obj);
    // Binary output needs -o; nvptx-only flags are refused.
    for args in [
        &["--emit", "obj"][..],
        &["--arch", "sm_80"][..],
        &["--emit", "ptx"][..],
    ] {
        let o = zyntax()
            .args(["compile", "--backend", "llvm"])
            .args(args)
            .arg(example("critical_host.zir"))
            .output()
            .unwrap();
        // Options that do not go together: a usage error.
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: "));
    }
}

#[test]
fn parse_error_is_one_line_with_location() {
    let p = tmp(
        "bad.zir",
        "module \"x\"\nkernel @k {\nblock0(v0: u32):\n    v1: u32 = frob v0\n    return\n}\n",
    );
    let o = zyntax().arg("compile").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("{}:4:15: error:", p.display())),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn verify_error_names_the_instruction_location() {
    let o = zyntax()
        .args(["compile", "--arch", "sm_75"])
        .arg(example("cp_async_copy.zir"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    let first = err.lines().next().unwrap();
    assert!(first.contains("cp_async_copy.zir:"), "{err}");
    assert!(
        first.contains(": error: ") && first.contains("cp.async needs sm_80"),
        "{err}"
    );
}

#[test]
fn missing_input_and_bad_arch_fail_cleanly() {
    let o = zyntax()
        .args(["compile", "/nonexistent/x.zir"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: /nonexistent/x.zir"));
    let o = zyntax()
        .args(["compile", "--arch", "sm_99", "x.zir"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown arch `sm_99`"));
    let o = zyntax()
        .args(["compile", "--backend", "nvptx", "--emit", "obj"])
        .arg(example("saxpy.zir"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--backend nvptx emits ptx or llvm"));
}

#[test]
fn help_documents_every_option() {
    let o = zyntax().args(["compile", "--help"]).output().unwrap();
    let h = String::from_utf8(o.stdout).unwrap();
    for opt in [
        "--backend",
        "--arch",
        "--emit",
        "--ptx",
        "--opt",
        "--validate",
        "--timings",
        "--output",
    ] {
        assert!(h.contains(opt), "help lacks {opt}:\n{h}");
    }
    let o = zyntax().arg("archs").output().unwrap();
    let a = String::from_utf8(o.stdout).unwrap();
    assert!(
        a.contains("sm_70") && a.contains("sm_90a") && a.contains("PTX 8.0"),
        "{a}"
    );
}

#[test]
fn reads_standard_input() {
    use std::io::Write;
    let text = std::fs::read_to_string(example("saxpy.zir")).unwrap();
    let mut child = zyntax()
        .args(["compile", "--arch", "sm_70", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains(".target sm_70"));
}

#[test]
fn ptx_is_byte_identical_across_processes() {
    let run = || {
        let o = zyntax()
            .args(["compile", "--arch", "sm_80"])
            .arg(example("mma_tile.zir"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let (a, b) = (run(), run());
    assert!(!a.is_empty());
    assert_eq!(a, b);
}

#[test]
fn binary_links_llvm_statically() {
    let o = Command::new("ldd")
        .arg(env!("CARGO_BIN_EXE_zyntax"))
        .output()
        .expect("ldd");
    let libs = String::from_utf8_lossy(&o.stdout);
    for bad in [
        "libLLVM", "libz3", "libxml2", "libffi", "libzstd", "libz.so",
    ] {
        assert!(!libs.contains(bad), "{bad} is dynamically linked:\n{libs}");
    }
}

#[test]
fn line_info_names_the_zir_lines() {
    let path = example("saxpy.zir");
    let o = zyntax()
        .args(["compile", "--arch", "sm_80", "--validate", "--line-info"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ptx = String::from_utf8(o.stdout).unwrap();
    assert!(ptx.contains(".file\t1 \""), "{ptx}");
    // `v14: f32 = fma v1, v12, v13` is line 17 of saxpy.zir.
    let src = std::fs::read_to_string(&path).unwrap();
    let line = 1 + src.lines().position(|l| l.contains("= fma ")).unwrap();
    let at = ptx
        .find(&format!(".loc\t1 {line} 5"))
        .unwrap_or_else(|| panic!("{ptx}"));
    assert!(
        ptx[at..].lines().nth(1).unwrap().contains("fma.rn.f32"),
        "{ptx}"
    );
    // Off by default.
    let o = zyntax()
        .args(["compile", "--arch", "sm_80"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!String::from_utf8(o.stdout).unwrap().contains(".loc"));
}

#[test]
fn resources_report_registers_per_kernel() {
    let o = zyntax()
        .args(["compile", "--arch", "sm_80", "--resources"])
        .arg(example("reduce_sum.zir"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8(o.stderr).unwrap();
    let line = err
        .lines()
        .find(|l| l.contains(" registers, "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("barriers"), "{line}");
}

#[test]
fn report_prints_the_optimizer_report() {
    // To stderr while the code goes to stdout...
    let o = zyntax()
        .args(["compile", "--backend", "llvm", "--report"])
        .arg(example("critical_host.zir"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.starts_with("optimization report for module `critical_host`"),
        "{err}"
    );
    assert!(
        err.contains("@push_and_average (host, Olatency; constraints: critical_path, no_alloc)"),
        "{err}"
    );
    assert!(err.contains("[no_alloc] proved allocation-free"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("define"));
    // ...and to stdout, as JSON, when the code goes to a file.
    let ll = std::env::temp_dir().join(format!("zyntax-report-{}.ll", std::process::id()));
    let o = zyntax()
        .args(["compile", "--backend", "llvm", "--report=json", "-o"])
        .arg(&ll)
        .arg(example("critical_host.zir"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.trim_start().starts_with('{'), "{out}");
    assert!(out.contains("\"module\": \"critical_host\""), "{out}");
    assert!(out.contains("\"name\": \"risk_check\""), "{out}");
    assert!(std::fs::read_to_string(&ll).unwrap().contains("define"));
    let _ = std::fs::remove_file(ll);
    // Only the CPU backend has a report.
    let o = zyntax()
        .args(["compile", "--report"])
        .arg(example("saxpy.zir"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--backend llvm only"));
    let h = zyntax().args(["compile", "--help"]).output().unwrap();
    let h = String::from_utf8(h.stdout).unwrap();
    for opt in [
        "--report", "--kernel", "--grid", "--block", "--shared", "--seed", "rand:N", "range:N",
        "fill:N:V",
    ] {
        assert!(h.contains(opt), "help lacks {opt}:\n{h}");
    }
}

#[test]
fn python_input_points_to_the_pip_command() {
    let o = zyntax()
        .args(["compile", "--backend", "nvptx"])
        .arg(example("kernels/vector_add.py"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("python -m zyntax.cli"), "{err}");
}

/// `--backend cuda` argument mistakes are caught before any GPU is needed.
#[test]
fn cuda_backend_checks_arguments_first() {
    let cases: &[(&[&str], &str)] = &[
        (&["1000", "2.5", "rand:1000"], "takes 4 argument(s)"),
        (
            &["1000", "2.5", "rand:1000", "ones:5"],
            "argument 4 (`ones:5`",
        ),
        (
            &["-1", "2.5", "rand:1000", "range:1000"],
            "-1 does not fit u32",
        ),
        (
            &["rand:9", "2.5", "rand:1000", "range:1000"],
            "expected an integer",
        ),
        (
            &["--kernel", "nope", "1", "2", "3", "4"],
            "no kernel `nope` (kernels: saxpy)",
        ),
    ];
    for (args, want) in cases {
        let o = zyntax()
            .args(["compile", "--backend", "cuda"])
            .arg(example("saxpy.zir"))
            .args(*args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let o = zyntax()
        .args(["compile", "--backend", "cuda", "--grid", "0"])
        .arg(example("saxpy.zir"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // Kernel arguments belong to --backend cuda; --emit does not: usage errors.
    let o = zyntax()
        .arg("compile")
        .arg(example("saxpy.zir"))
        .arg("1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--backend cuda only"));
    let o = zyntax()
        .args(["compile", "--backend", "cuda", "--emit", "ptx"])
        .arg(example("saxpy.zir"))
        .args(["1", "2", "3", "4"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("writes no code"));
}

/// `zyntax compile --backend cuda` on saxpy (y = 3 * 2 + i, so the sum is
/// 3 * 2 * 1000 + 999 * 1000 / 2).
fn run_saxpy_on_cuda() -> (std::process::Output, String, String) {
    let o = zyntax()
        .args([
            "compile",
            "--backend",
            "cuda",
            "--grid",
            "4",
            "--block",
            "256",
        ])
        .arg(example("saxpy.zir"))
        .args(["1000", "3", "fill:1000:2", "range:1000"])
        .output()
        .unwrap();
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    let err = String::from_utf8(o.stderr.clone()).unwrap();
    (o, out, err)
}

/// Without a CUDA driver or device, `--backend cuda` is one clear line and
/// status 1. (With a GPU this test checks the same as the GPU test below: one
/// outcome per environment, never "either".)
#[test]
fn cuda_backend_without_a_gpu_fails_with_one_line() {
    if zyntax_cuda::is_available() {
        return cuda_backend_runs_saxpy_on_the_gpu();
    }
    let (o, out, err) = run_saxpy_on_cuda();
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cuda: ")
            && (err.contains("CUDA driver not available") || err.contains("no CUDA device")),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
}

/// Runs saxpy on the GPU; run on a GPU machine with `-- --ignored`.
#[test]
#[ignore = "needs a GPU"]
fn cuda_backend_runs_saxpy_on_the_gpu() {
    let (o, out, err) = run_saxpy_on_cuda();
    assert!(o.status.success(), "{err}");
    assert!(out.starts_with("kernel saxpy on "), "{out}");
    assert!(out.contains(" ms\n"), "{out}");
    assert!(
        out.contains("arg 4 (f32[1000]): [6, 7, 8, 9, 10, 11, 12, 13, ...] sum=505500 "),
        "{out}"
    );
    assert!(out.contains("arg 3 (f32[1000]): [2, 2, 2"), "{out}");
}

/// `zyntax --help` and docs/cli.md show the same exit-status table.
#[test]
fn exit_status_table_is_in_help_and_docs() {
    let docs = std::fs::read_to_string(
        std::fs::canonicalize(env!("CARGO_MANIFEST_DIR"))
            .unwrap()
            .join("../../docs/cli.md"),
    )
    .unwrap();
    for args in [&["--help"][..], &["compile", "--help"][..]] {
        let o = zyntax().args(args).output().unwrap();
        assert!(o.status.success());
        let help = String::from_utf8(o.stdout).unwrap();
        let table = help
            .split("Exit status:\n")
            .nth(1)
            .expect("an exit-status table");
        let rows: Vec<&str> = table.lines().take_while(|l| !l.is_empty()).collect();
        assert_eq!(rows.len(), 3, "{table}");
        for row in rows {
            let (code, meaning) = row.trim().split_once("  ").unwrap();
            let doc_row = format!("| {code} | {} |", meaning.trim());
            assert!(docs.contains(&doc_row), "docs/cli.md lacks `{doc_row}`");
        }
    }
}

/// Usage errors exit 2 with exactly one line on stderr and nothing on stdout.
#[test]
fn usage_errors_are_one_line_and_status_2() {
    let saxpy = example("saxpy.zir");
    let saxpy = saxpy.to_str().unwrap();
    for args in [
        &["compile", "--bogus", saxpy][..],
        &["compile"][..],
        &["compile", "--backend", "metal", saxpy][..],
        &["compile", "--grid", "0", "--backend", "cuda", saxpy][..],
        &["compile", "--report", saxpy][..],
        &["compile", "--backend", "llvm", "--timings", saxpy][..],
        &["compile", "--backend", "llvm", "--resources", saxpy][..],
        &["frobnicate"][..],
    ] {
        let o = zyntax().args(args).output().unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(o.stdout.is_empty());
    }
}

/// `-o` naming the input (by any spelling) is refused and the input kept.
#[test]
fn output_naming_the_input_is_refused() {
    let text = std::fs::read_to_string(example("saxpy.zir")).unwrap();
    let input = tmp("keep.zir", &text);
    let dir = input.parent().unwrap();
    let other_spelling = dir
        .join("..")
        .join(dir.file_name().unwrap())
        .join("keep.zir");
    for (backend, out) in [
        ("nvptx", input.clone()),
        ("nvptx", other_spelling.clone()),
        ("llvm", other_spelling),
    ] {
        let o = zyntax()
            .args(["compile", "--backend", backend])
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("names the input file"), "{err}");
        assert_eq!(std::fs::read_to_string(&input).unwrap(), text);
    }
}

/// The command compiles in a worker process: when the worker aborts (here by
/// the test hook, as LLVM does on a fatal error) the command prints one error
/// line and exits with status 1 instead of dying by the signal.
#[test]
fn an_abort_in_the_worker_is_one_error_line() {
    let o = zyntax()
        .arg("compile")
        .arg(example("saxpy.zir"))
        .env("ZYNTAX_WORKER_TEST_ABORT", "1")
        .output()
        .unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: the compiler worker process was killed by signal 6 (SIGABRT)"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

/// `zyntax --help` lists every command, `cache` too; `compile --help` every
/// `--emit` value, the bundles (`cubin`, `fatbin`) too.
#[test]
fn help_lists_every_command_and_emit_value() {
    let o = zyntax().arg("--help").output().unwrap();
    let help = String::from_utf8(o.stdout).unwrap();
    let commands: Vec<&str> = help
        .split("Commands:\n")
        .nth(1)
        .expect("a command list")
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(commands, ["compile", "archs", "cache", "help"], "{help}");
    let o = zyntax().args(["compile", "--help"]).output().unwrap();
    let help = String::from_utf8(o.stdout).unwrap();
    for value in ["ptx", "llvm", "asm", "obj", "so", "cubin", "fatbin"] {
        assert!(
            help.contains(&format!("- {value}:")),
            "no --emit {value}:\n{help}"
        );
    }
}

/// The cache commands and AOT bundles come with the pip-installed command:
/// this binary says so in one line (status 2) instead of a parse error.
#[test]
fn cache_and_bundles_point_to_the_pip_command() {
    let saxpy = example("saxpy.zir");
    let saxpy = saxpy.to_str().unwrap();
    for args in [
        &["cache", "list"][..],
        &["cache", "--help"][..],
        &["compile", "--emit", "fatbin", "--arch", "sm_80", saxpy][..],
        &[
            "compile",
            "--emit",
            "cubin",
            saxpy,
            "-o",
            "never-written.cubin",
        ][..],
    ] {
        let o = zyntax().args(args).output().unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains("pip-installed"),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
    assert!(!std::path::Path::new("never-written.cubin").exists());
}

/// A module of host functions has nothing for --backend nvptx: one error
/// line, and no empty PTX file.
#[test]
fn a_module_without_kernels_is_an_error_for_nvptx() {
    let out = std::env::temp_dir().join(format!("zyntax-nokernel-{}.ptx", std::process::id()));
    for emit in ["ptx", "llvm"] {
        let o = zyntax()
            .args(["compile", "--emit", emit])
            .arg(example("host_latency.zir"))
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("error: module `host_latency` has no kernel") && err.contains("llvm"),
            "{err}"
        );
        assert!(!out.exists());
    }
}

/// `--arch` and `--ptx` are for the GPU backends (nvptx and cuda, as
/// docs/cli.md says); with llvm the refusal names both.
#[test]
fn arch_and_ptx_name_the_backends_that_take_them() {
    for option in [["--arch", "sm_80"], ["--ptx", "7.8"]] {
        let o = zyntax()
            .args(["compile", "--backend", "llvm"])
            .args(option)
            .arg(example("critical_host.zir"))
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(option[0]) && err.contains("nvptx and cuda"),
            "{err}"
        );
    }
}
