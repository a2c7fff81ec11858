//! Running NVIDIA's `ptxas` to validate PTX (and produce a cubin).
//!
//! `ptxas` comes from the PyPI package `nvidia-cuda-nvcc-cu12` (12.9.x accepts
//! sm_70 … sm_90a). [`Ptxas::locate`] looks, in order, at `$ZYNTAX_PTXAS`, at the
//! `nvidia.cuda_nvcc` package of the embedding interpreter ([`Ptxas::set_python`]:
//! the Python extension registers `sys.executable`, so an un-activated virtual
//! environment finds its own `[compute]` extra), of `$ZYNTAX_PYTHON`, `python3`
//! and `python`, and at `ptxas` on `PATH`. A missing ptxas is an error, never a
//! silent skip.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use zyntax_hir::Arch;

/// The Python interpreter this process runs in, when embedded (see [`Ptxas::set_python`]).
static EMBEDDING_PYTHON: OnceLock<PathBuf> = OnceLock::new();

#[derive(Debug, thiserror::Error)]
pub enum PtxasError {
    /// No ptxas could be found; `tried` lists every place looked at.
    #[error(
        "ptxas not found (tried: {}); install it with `pip install nvidia-cuda-nvcc-cu12` \
         or set ZYNTAX_PTXAS to its path",
        tried.join(", ")
    )]
    NotFound { tried: Vec<String> },

    /// Running ptxas or handling its files failed.
    #[error("ptxas: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// ptxas rejected the PTX. The PTX is kept at `ptx_path` for reproduction.
    #[error(
        "ptxas rejected the PTX for {arch} (exit status {status}):\n{log}\n\
         PTX kept at {}; reproduce with: {repro}",
        ptx_path.display()
    )]
    Rejected {
        arch: Arch,
        status: String,
        log: String,
        ptx_path: PathBuf,
        repro: String,
    },
}

/// What ptxas produced for accepted PTX.
#[derive(Clone, Debug)]
pub struct PtxasOutput {
    /// The cubin (ELF) for the arch.
    pub cubin: Vec<u8>,
    /// ptxas' messages (with `-v`: registers, spills, shared memory per kernel).
    pub log: String,
}

/// Per-kernel resource usage as `ptxas -v` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub barriers: u32,
    pub stack_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// Static shared memory.
    pub shared_bytes: u32,
    /// Constant bank 0 (kernel parameters and driver data).
    pub const_bytes: u32,
}

/// The leading unsigned integer of `s` (after spaces), if any.
fn leading_u32(s: &str) -> Option<u32> {
    let s = s.trim_start();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

impl PtxasOutput {
    /// Parse the `-v` log into one record per kernel entry, in log order.
    pub fn kernels(&self) -> Vec<KernelResources> {
        let mut out: Vec<KernelResources> = Vec::new();
        // The function the next "stack frame" line belongs to, if it is an entry.
        let mut props_for: Option<usize> = None;
        for line in self.log.lines() {
            if let Some(rest) = line.split("Compiling entry function '").nth(1) {
                let name = rest.split('\'').next().unwrap_or("").to_string();
                out.push(KernelResources {
                    name,
                    ..KernelResources::default()
                });
                props_for = None;
            } else if let Some(rest) = line.split("Function properties for ").nth(1) {
                let name = rest.trim();
                props_for = out.iter().position(|k| k.name == name);
            } else if line.contains("bytes stack frame") {
                if let Some(k) = props_for.and_then(|i| out.get_mut(i)) {
                    for part in line.split(',') {
                        let v = leading_u32(part).unwrap_or(0);
                        if part.contains("stack frame") {
                            k.stack_bytes = v;
                        } else if part.contains("spill stores") {
                            k.spill_store_bytes = v;
                        } else if part.contains("spill loads") {
                            k.spill_load_bytes = v;
                        }
                    }
                }
                props_for = None;
            } else if let Some(rest) = line.split("Used ").nth(1) {
                let Some(k) = out.last_mut() else { continue };
                for part in rest.split(',') {
                    let part = part.trim().trim_start_matches("used ");
                    let v = leading_u32(part).unwrap_or(0);
                    if part.contains("registers") {
                        k.registers = v;
                    } else if part.contains("barriers") {
                        k.barriers = v;
                    } else if part.contains("smem") {
                        k.shared_bytes = v;
                    } else if part.contains("cmem[0]") {
                        k.const_bytes = v;
                    }
                }
            }
        }
        out
    }
}

/// A located `ptxas` executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ptxas {
    path: PathBuf,
}

impl fmt::Display for Ptxas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())
    }
}

impl Ptxas {
    /// Use a specific ptxas binary.
    pub fn at(path: impl Into<PathBuf>) -> Ptxas {
        Ptxas { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Registers the interpreter of the Python process that embeds zyntax
    /// (`sys.executable`): [`Ptxas::locate`] asks it first for the
    /// `nvidia-cuda-nvcc-cu12` package, since `python3` on `PATH` may be another
    /// environment's. The first registration wins.
    pub fn set_python(executable: impl Into<PathBuf>) {
        let _ = EMBEDDING_PYTHON.set(executable.into());
    }

    /// Find ptxas (see the module docs for the search order).
    pub fn locate() -> Result<Ptxas, PtxasError> {
        let mut tried = Vec::new();
        if let Some(p) = std::env::var_os("ZYNTAX_PTXAS") {
            let p = PathBuf::from(p);
            if p.is_file() {
                return Ok(Ptxas { path: p });
            }
            tried.push(format!("$ZYNTAX_PTXAS={}", p.display()));
        }
        let mut pythons: Vec<PathBuf> = Vec::new();
        if let Some(py) = EMBEDDING_PYTHON.get() {
            pythons.push(py.clone());
        }
        if let Some(py) = std::env::var_os("ZYNTAX_PYTHON") {
            pythons.push(py.into());
        }
        pythons.push("python3".into());
        pythons.push("python".into());
        // `nvidia.cuda_nvcc` is a namespace package: it has `__path__` but no `__file__`.
        let script = "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])";
        for py in &pythons {
            let out = Command::new(py).args(["-c", script]).output();
            match out {
                Ok(o) if o.status.success() => {
                    let dir = String::from_utf8_lossy(&o.stdout).trim().to_string();
                    let p = Path::new(&dir).join("bin").join("ptxas");
                    if p.is_file() {
                        return Ok(Ptxas { path: p });
                    }
                    tried.push(p.display().to_string());
                }
                _ => tried.push(format!("{} -c 'import nvidia.cuda_nvcc'", py.display())),
            }
        }
        if let Some(paths) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&paths) {
                let p = dir.join("ptxas");
                if p.is_file() {
                    return Ok(Ptxas { path: p });
                }
            }
        }
        tried.push("ptxas on PATH".into());
        Err(PtxasError::NotFound { tried })
    }

    /// `ptxas --version`, last line (e.g. `Build cuda_12.9.r12.9/compiler.36037853_0`).
    pub fn version(&self) -> Result<String, PtxasError> {
        let out = Command::new(&self.path)
            .arg("--version")
            .output()
            .map_err(|source| PtxasError::Io {
                context: format!("running {} --version", self.path.display()),
                source,
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text
            .lines()
            .find(|l| l.contains("release"))
            .unwrap_or_else(|| text.lines().last().unwrap_or(""))
            .trim()
            .to_string())
    }

    /// Assemble `ptx` for `arch` with `-Werror` (warnings are errors) and `-v`.
    /// On rejection the PTX is kept in a fresh temporary directory and its path
    /// is part of the error.
    pub fn assemble(&self, ptx: &str, arch: Arch) -> Result<PtxasOutput, PtxasError> {
        let dir = tempfile::Builder::new()
            .prefix("zyntax-ptxas-")
            .tempdir()
            .map_err(|source| PtxasError::Io {
                context: "creating a temp dir".into(),
                source,
            })?;
        let ptx_path = dir.path().join("module.ptx");
        let cubin_path = dir.path().join("module.cubin");
        std::fs::write(&ptx_path, ptx).map_err(|source| PtxasError::Io {
            context: format!("writing {}", ptx_path.display()),
            source,
        })?;
        let arch_flag = format!("-arch={}", arch.name());
        let out = Command::new(&self.path)
            .arg(&arch_flag)
            .arg("-Werror")
            .arg("-v")
            .arg(&ptx_path)
            .arg("-o")
            .arg(&cubin_path)
            .output()
            .map_err(|source| PtxasError::Io {
                context: format!("running {}", self.path.display()),
                source,
            })?;
        let mut log = String::from_utf8_lossy(&out.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            let kept = dir.keep();
            let ptx_path = kept.join("module.ptx");
            let repro = format!(
                "{} {arch_flag} -Werror {} -o /dev/null",
                self.path.display(),
                ptx_path.display()
            );
            return Err(PtxasError::Rejected {
                arch,
                status: out.status.to_string(),
                log,
                ptx_path,
                repro,
            });
        }
        let cubin = std::fs::read(&cubin_path).map_err(|source| PtxasError::Io {
            context: format!("reading {}", cubin_path.display()),
            source,
        })?;
        Ok(PtxasOutput { cubin, log })
    }
}
