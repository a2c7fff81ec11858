//! Links LLVM 19 statically.
//!
//! llvm-sys' own static linking asks `llvm-config --link-static --libnames`,
//! which on Debian lists `libPolly.a`/`libPollyISL.a` that Debian does not ship,
//! and `--system-libs` adds `libz3.so` and `libxml2`. We therefore tell
//! llvm-sys not to link (`no-llvm-linking`) and link here: every LLVM
//! component archive except Polly, plus zlib/zstd statically where an archive
//! exists. z3 (only used by LLVM's SMT solver glue) and libxml2 (only used by
//! the Windows manifest merger) are never referenced by our code paths, so
//! archive semantics keep them out and no shared LLVM-related library appears
//! in `ldd`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn llvm_config(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{} {:?} failed: {}",
        bin.display(),
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("llvm-config output is UTF-8")
        .trim()
        .to_string()
}

fn main() {
    println!("cargo:rerun-if-env-changed=LLVM_SYS_191_PREFIX");
    println!("cargo:rerun-if-changed=build.rs");
    // Without the `compute` feature the crate has no GPU backend, and the
    // NVPTX code generator stays out of the link. (`cfg!`, not the
    // CARGO_FEATURE_COMPUTE variable: a feature change must recompile this
    // script, or cargo reuses the other configuration's output.)
    let nvptx = cfg!(feature = "compute");
    let prefix = env::var_os("LLVM_SYS_191_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/llvm-19"));
    let bin = prefix.join("bin").join("llvm-config");
    let version = llvm_config(&bin, &["--version"]);
    assert!(
        version.starts_with("19."),
        "zyntax-llvm needs LLVM 19, {} reports {version}",
        bin.display()
    );
    // The C++ shim for what LLVM's C API lacks (CPU and feature tables);
    // compiled before the LLVM archives are listed so that it links ahead of them.
    println!("cargo:rerun-if-changed=src/host/subtarget.cpp");
    let include = llvm_config(&bin, &["--includedir"]);
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include(include)
        .flag("-fno-exceptions")
        .define("__STDC_CONSTANT_MACROS", None)
        .define("__STDC_FORMAT_MACROS", None)
        .define("__STDC_LIMIT_MACROS", None)
        .warnings(false)
        .cpp_link_stdlib(None)
        .file("src/host/subtarget.cpp")
        .compile("zyntax_subtarget");

    let libdir = llvm_config(&bin, &["--libdir"]);
    println!("cargo:rustc-link-search=native={libdir}");

    let names = llvm_config(&bin, &["--link-static", "--libnames"]);
    for name in names.split_whitespace() {
        let Some(stem) = name.strip_prefix("lib").and_then(|n| n.strip_suffix(".a")) else {
            panic!("unexpected llvm-config library name {name}");
        };
        if stem.starts_with("Polly") || (!nvptx && stem.starts_with("LLVMNVPTX")) {
            continue;
        }
        if !Path::new(&libdir).join(name).exists() {
            panic!("{name} listed by llvm-config is missing from {libdir}");
        }
        println!("cargo:rustc-link-lib=static={stem}");
    }

    let sys_dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"];
    for dir in sys_dirs {
        if Path::new(dir).is_dir() {
            println!("cargo:rustc-link-search=native={dir}");
        }
    }
    let has_archive = |lib: &str| {
        sys_dirs
            .iter()
            .any(|d| Path::new(d).join(format!("lib{lib}.a")).exists())
    };
    // LLVM's interpreter (pulled in through inkwell) calls libffi; inkwell's own
    // dynamic -lffi is disabled (`no-libffi-linking`) in favour of the PIC archive.
    if has_archive("ffi_pic") {
        println!("cargo:rustc-link-lib=static:-bundle=ffi_pic");
    } else {
        println!("cargo:rustc-link-lib=dylib=ffi");
    }
    for lib in ["zstd", "z"] {
        // zlib/zstd back LLVM's section compression; static keeps them out of ldd.
        if has_archive(lib) {
            println!("cargo:rustc-link-lib=static:-bundle={lib}");
        } else {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    for lib in ["rt", "dl", "m", "stdc++"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
}
