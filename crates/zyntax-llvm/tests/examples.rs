//! Every `examples/*.zir` of the repository parses, verifies, compiles and
//! passes `ptxas -Werror` on every arch its instructions allow (at least its
//! declared targets), and the PTX is byte-identical across two compiles.

mod common;

use common::*;
use std::path::PathBuf;
use zyntax_hir::{arch::check_arch, parse_module_named, Arch};

fn examples_dir() -> PathBuf {
    // Resolve symlinks: the crate may be reached through one.
    let manifest = std::fs::canonicalize(env!("CARGO_MANIFEST_DIR")).expect("manifest dir");
    manifest.join("../../examples")
}

#[test]
fn every_example_compiles_on_every_applicable_arch() {
    let dir = examples_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "zir"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .zir examples in {}", dir.display());
    let mut compiled = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let name = path.display().to_string();
        let m = parse_module_named(&text, Some(&name)).unwrap_or_else(|e| panic!("{e}"));
        zyntax_hir::verify_module(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        let has_gpu = m.functions.iter().any(|f| f.kind.is_gpu());
        if !has_gpu {
            continue; // host-only examples belong to the host backend
        }
        let mut archs = Vec::new();
        for arch in Arch::ALL {
            match check_arch(&m, arch) {
                Ok(()) => archs.push(arch),
                Err(e) => assert!(
                    !m.targets.contains(&arch),
                    "{name}: declared target {arch} rejected: {e}"
                ),
            }
        }
        assert!(!archs.is_empty(), "{name}: no arch accepts it");
        for arch in archs {
            let ptx = compile_checked(&m, arch);
            let again = compile(&m, arch).ptx;
            assert_eq!(ptx, again, "{name} for {arch}: PTX is not deterministic");
            for k in m.kernels() {
                assert!(
                    ptx.contains(&format!(".entry {}(", k.name)),
                    "{name}: no entry {}",
                    k.name
                );
            }
            compiled += 1;
        }
    }
    assert!(compiled > 0);
}

/// Compiles run concurrently (the Python binding releases the GIL) and still
/// give the same bytes.
#[test]
fn concurrent_compiles_agree() {
    let text = std::fs::read_to_string(examples_dir().join("reduce_sum.zir")).unwrap();
    let m = zyntax_hir::parse_module(&text).unwrap();
    let reference = compile(&m, Arch::Sm80).ptx;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let m = &m;
                s.spawn(move || {
                    let arch = if i % 2 == 0 { Arch::Sm80 } else { Arch::Sm90 };
                    (arch, compile(m, arch).ptx)
                })
            })
            .collect();
        for h in handles {
            let (arch, ptx) = h.join().unwrap();
            if arch == Arch::Sm80 {
                assert_eq!(ptx, reference);
            } else {
                assert!(ptx.contains(".target sm_90"));
            }
        }
    });
}
