//! Build facts for `zyntax.build_info()`, which the kernel caches put in their keys:
//!
//! * `ZYNTAX_BUILD_ID`: a hash of the sources that turn HIR into PTX (`zyntax-opt`,
//!   `zyntax-llvm`), so two builds of one version with different code generation
//!   never share a cache entry, while rebuilding the same sources keeps the id.
//! * `ZYNTAX_LLVM_VERSION`: `llvm-config --version` of the LLVM linked in.

use std::hash::Hasher;
use std::path::{Path, PathBuf};

/// FNV-1a over (relative path, contents) of every file under `dir`, in sorted order.
fn hash_tree(root: &Path, dir: &Path, h: &mut Fnv) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            hash_tree(root, &p, h);
        } else if let Ok(bytes) = std::fs::read(&p) {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            h.write(rel.to_string_lossy().as_bytes());
            h.write(&[0]);
            h.write(&bytes);
        }
    }
}

struct Fnv(u64);
impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}

fn main() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    for c in ["zyntax-opt", "zyntax-llvm"] {
        let src = crates.join(c).join("src");
        println!("cargo:rerun-if-changed={}", src.display());
        hash_tree(&crates, &src, &mut h);
    }
    println!("cargo:rustc-env=ZYNTAX_BUILD_ID={:016x}", h.finish());

    println!("cargo:rerun-if-env-changed=LLVM_SYS_191_PREFIX");
    let prefix = std::env::var("LLVM_SYS_191_PREFIX").unwrap_or_else(|_| "/usr/lib/llvm-19".into());
    let version = std::process::Command::new(Path::new(&prefix).join("bin").join("llvm-config"))
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "19".to_owned());
    println!("cargo:rustc-env=ZYNTAX_LLVM_VERSION={version}");
}
