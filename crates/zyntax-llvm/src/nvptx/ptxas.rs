//! Running NVIDIA's `ptxas` to validate PTX (and produce a cubin).
//!
//! Two generations of ptxas are supported: CUDA 12 (PyPI `nvidia-cuda-nvcc-cu12`,
//! the `[compute]` extra; 12.9 assembles sm_70 … sm_90a) and CUDA 13 (PyPI
//! `nvidia-cuda-nvcc` 13.x, whose ptxas lives in `nvidia/cu13/bin`, or a CUDA 13
//! toolkit), which dropped sm_50 … sm_72. [`Ptxas::locate`] looks, in order, at
//! `$ZYNTAX_PTXAS` (set but unusable is an error, never skipped), at the
//! `nvidia.cuda_nvcc` and `nvidia.cu13` packages of the embedding interpreter
//! ([`Ptxas::set_python`]: the Python extension registers `sys.executable`, so an
//! un-activated virtual environment finds its own `[compute]` extra), of
//! `$ZYNTAX_PYTHON`, `python3` and `python`, at a CUDA toolkit (`$CUDA_HOME`,
//! `$CUDA_PATH`, `/usr/local/cuda`) and at `ptxas` on `PATH`. Every candidate's
//! `ptxas --version` is checked: another major release is passed over (and named
//! in the error if nothing else is found). A missing ptxas is an error, never a
//! silent skip; so is an arch the found ptxas cannot assemble for.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;
use zyntax_hir::Arch;

/// The Python interpreter this process runs in, when embedded (see [`Ptxas::set_python`]).
static EMBEDDING_PYTHON: OnceLock<PathBuf> = OnceLock::new();

/// What a user installs to get ptxas and nvFatbin: this project's `[compute]` extra.
pub const COMPUTE_EXTRA_INSTALL: &str = "pip install 'zyntax-compiler[compute]'";

/// Prints the directories of the nvcc wheels, CUDA 12's first, one a line:
/// `nvidia-cuda-nvcc-cu12` installs `nvidia/cuda_nvcc/bin/ptxas`, CUDA 13's
/// `nvidia-cuda-nvcc` `nvidia/cu13/bin/ptxas` (namespace packages: `__path__`, no `__file__`).
const FIND_NVCC_DIRS: &str = r#"
import importlib
for name in ("nvidia.cuda_nvcc", "nvidia.cu13"):
    try:
        print(*importlib.import_module(name).__path__, sep="\n")
    except ImportError:
        pass
"#;

/// The ptxas major releases zyntax drives (the flags and archs it uses are theirs).
pub const SUPPORTED_MAJORS: [u32; 2] = [12, 13];

#[derive(Debug, thiserror::Error)]
pub enum PtxasError {
    /// No usable ptxas could be found; `tried` lists every place looked at.
    #[error(
        "ptxas not found (tried: {}); install it with `{COMPUTE_EXTRA_INSTALL}` \
         (CUDA 12's ptxas), `pip install nvidia-cuda-nvcc` (CUDA 13), a CUDA toolkit, \
         or set ZYNTAX_PTXAS to its path",
        tried.join(", ")
    )]
    NotFound { tried: Vec<String> },

    /// `$ZYNTAX_PTXAS` (or an explicitly given path) names no file.
    #[error("{what}={} is not a file; point it at a ptxas executable or unset it", path.display())]
    NotAFile { what: String, path: PathBuf },

    /// The executable's `--version` names no CUDA release zyntax supports.
    #[error(
        "{} is not a supported ptxas ({found}); zyntax drives ptxas of CUDA {}",
        path.display(),
        SUPPORTED_MAJORS.map(|m| format!("{m}.x")).join(" or ")
    )]
    Unsupported { path: PathBuf, found: String },

    /// The ptxas found has no code generator for the arch.
    #[error(
        "ptxas {release} ({}) cannot assemble for {arch}: CUDA 13 dropped sm_50 … sm_72; \
         use a newer arch or CUDA 12's ptxas (`{COMPUTE_EXTRA_INSTALL}`, or ZYNTAX_PTXAS)",
        path.display(),
        arch = arch.name()
    )]
    ArchUnsupported {
        arch: Arch,
        release: PtxasRelease,
        path: PathBuf,
    },

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

/// A ptxas release, from the `release` line of `ptxas --version`
/// (`Cuda compilation tools, release 13.0, V13.0.88`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxasRelease {
    pub major: u32,
    pub minor: u32,
    /// The whole `release` line (cache keys and manifests record it).
    pub line: String,
}

impl fmt::Display for PtxasRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl PtxasRelease {
    /// Parses `ptxas --version` output; None when it has no `release X.Y` line.
    pub fn parse(version_output: &str) -> Option<PtxasRelease> {
        let line = version_output
            .lines()
            .find(|l| l.contains("release "))?
            .trim();
        let number = line.split("release ").nth(1)?.split([',', ' ']).next()?;
        let (major, minor) = number.split_once('.')?;
        Some(PtxasRelease {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
            line: line.to_string(),
        })
    }

    pub fn is_supported(&self) -> bool {
        SUPPORTED_MAJORS.contains(&self.major)
    }

    /// Whether this release assembles for `arch` (CUDA 13 removed sm_50 … sm_72).
    pub fn supports(&self, arch: Arch) -> bool {
        self.major < 13 || arch.compute_capability() >= (7, 5)
    }

    /// The archs of [`Arch::ALL`] this release assembles for.
    pub fn archs(&self) -> Vec<Arch> {
        Arch::ALL
            .iter()
            .copied()
            .filter(|&a| self.supports(a))
            .collect()
    }
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

/// A located `ptxas` executable of a supported release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ptxas {
    path: PathBuf,
    release: PtxasRelease,
}

impl fmt::Display for Ptxas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())
    }
}

/// `ptxas --version` per executable, keyed by path, size and mtime: a build
/// assembles hundreds of kernels with the same ptxas.
type ReleaseCache = HashMap<PathBuf, (u64, Option<SystemTime>, PtxasRelease)>;
static RELEASES: OnceLock<Mutex<ReleaseCache>> = OnceLock::new();

/// The release of the executable at `path` (not yet checked for support).
fn release_of(path: &Path) -> Result<PtxasRelease, PtxasError> {
    let meta = std::fs::metadata(path).map_err(|source| PtxasError::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    let stamp = (meta.len(), meta.modified().ok());
    let cache = RELEASES.get_or_init(Default::default);
    if let Some((len, mtime, r)) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(path) {
        if (*len, *mtime) == stamp {
            return Ok(r.clone());
        }
    }
    let out = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|source| PtxasError::Io {
            context: format!("running {} --version", path.display()),
            source,
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let release = match PtxasRelease::parse(&text) {
        Some(r) if out.status.success() => r,
        _ => {
            let said = text
                .lines()
                .chain(String::from_utf8_lossy(&out.stderr).lines())
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no output")
                .to_string();
            return Err(PtxasError::Unsupported {
                path: path.to_path_buf(),
                found: format!("`--version` gave {}: {said}", out.status),
            });
        }
    };
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(path.to_path_buf(), (stamp.0, stamp.1, release.clone()));
    Ok(release)
}

/// The variables [`Ptxas::locate`]'s search depends on (besides `$ZYNTAX_PTXAS`).
fn search_env() -> Vec<Option<std::ffi::OsString>> {
    let vars = [
        "ZYNTAX_PYTHON",
        "PYTHONPATH",
        "PYTHONHOME",
        "VIRTUAL_ENV",
        "CUDA_HOME",
        "CUDA_PATH",
        "PATH",
    ];
    vars.iter().map(std::env::var_os).collect()
}

/// What [`Ptxas::locate`] found, per [`search_env`]: the search starts Python
/// interpreters (tens of milliseconds each) and a build locates once per bundle.
/// A ptxas installed later with the same environment is seen after a restart.
static LOCATED: OnceLock<Mutex<HashMap<Vec<Option<std::ffi::OsString>>, PathBuf>>> =
    OnceLock::new();

impl Ptxas {
    /// The ptxas at `path`, checked: it must be a file whose `--version` is a
    /// supported release ([`SUPPORTED_MAJORS`]).
    pub fn at(path: impl Into<PathBuf>) -> Result<Ptxas, PtxasError> {
        Ptxas::checked(path.into(), "ptxas")
    }

    /// [`Ptxas::at`], naming the path's origin (`what`) when it is no file.
    fn checked(path: PathBuf, what: &str) -> Result<Ptxas, PtxasError> {
        if !path.is_file() {
            return Err(PtxasError::NotAFile {
                what: what.to_string(),
                path,
            });
        }
        let release = release_of(&path)?;
        if !release.is_supported() {
            return Err(PtxasError::Unsupported {
                path,
                found: release.line,
            });
        }
        Ok(Ptxas { path, release })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn release(&self) -> &PtxasRelease {
        &self.release
    }

    /// Registers the interpreter of the Python process that embeds zyntax
    /// (`sys.executable`): [`Ptxas::locate`] asks it first for the nvcc
    /// packages, since `python3` on `PATH` may be another environment's. The
    /// first registration wins.
    pub fn set_python(executable: impl Into<PathBuf>) {
        let _ = EMBEDDING_PYTHON.set(executable.into());
    }

    /// Find ptxas (see the module docs for the search order).
    pub fn locate() -> Result<Ptxas, PtxasError> {
        if let Some(p) = std::env::var_os("ZYNTAX_PTXAS") {
            // An explicit choice: used as it is or refused, never passed over.
            return Ptxas::checked(PathBuf::from(p), "$ZYNTAX_PTXAS");
        }
        let key = search_env();
        let cached = LOCATED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        // Checked again (still a file, same release): it may have been uninstalled.
        if let Some(found) = cached.and_then(|p| Ptxas::checked(p, "ptxas").ok()) {
            return Ok(found);
        }
        let found = Ptxas::search()?;
        LOCATED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, found.path.clone());
        Ok(found)
    }

    /// [`Ptxas::locate`] past `$ZYNTAX_PTXAS`, without the cache.
    fn search() -> Result<Ptxas, PtxasError> {
        let mut tried = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // The first supported ptxas among `paths`; other releases are named in `tried`.
        let mut first_usable = |paths: Vec<PathBuf>, tried: &mut Vec<String>| {
            for p in paths {
                if !seen.insert(p.clone()) || !p.is_file() {
                    continue;
                }
                match Ptxas::checked(p, "ptxas") {
                    Ok(found) => return Some(found),
                    Err(e) => tried.push(e.to_string()),
                }
            }
            None
        };
        let mut pythons: Vec<PathBuf> = Vec::new();
        if let Some(py) = EMBEDDING_PYTHON.get() {
            pythons.push(py.clone());
        }
        if let Some(py) = std::env::var_os("ZYNTAX_PYTHON") {
            pythons.push(py.into());
        }
        pythons.push("python3".into());
        pythons.push("python".into());
        for py in &pythons {
            let paths: Vec<PathBuf> = match Command::new(py).args(["-c", FIND_NVCC_DIRS]).output() {
                Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|d| !d.trim().is_empty())
                    .map(|d| Path::new(d.trim()).join("bin").join("ptxas"))
                    .collect(),
                _ => {
                    tried.push(format!("{} (did not run)", py.display()));
                    continue;
                }
            };
            if paths.is_empty() {
                tried.push(format!("the nvidia-cuda-nvcc packages of {}", py.display()));
            }
            tried.extend(
                paths
                    .iter()
                    .filter(|p| !p.is_file())
                    .map(|p| p.display().to_string()),
            );
            if let Some(found) = first_usable(paths, &mut tried) {
                return Ok(found);
            }
        }
        let mut paths: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
            .iter()
            .filter_map(std::env::var_os)
            .map(|root| Path::new(&root).join("bin").join("ptxas"))
            .collect();
        paths.push("/usr/local/cuda/bin/ptxas".into());
        if let Some(dirs) = std::env::var_os("PATH") {
            paths.extend(std::env::split_paths(&dirs).map(|d| d.join("ptxas")));
        }
        if let Some(found) = first_usable(paths, &mut tried) {
            return Ok(found);
        }
        tried.push("$CUDA_HOME, $CUDA_PATH, /usr/local/cuda and PATH".into());
        Err(PtxasError::NotFound { tried })
    }

    /// The `release` line of `ptxas --version` (e.g. `Cuda compilation tools,
    /// release 12.9, V12.9.86`).
    pub fn version(&self) -> Result<String, PtxasError> {
        Ok(self.release.line.clone())
    }

    /// Whether this ptxas assembles for `arch`.
    pub fn supports(&self, arch: Arch) -> bool {
        self.release.supports(arch)
    }

    /// Assemble `ptx` for `arch` with `-Werror` (warnings are errors) and `-v`;
    /// an arch this release lacks is [`PtxasError::ArchUnsupported`]. On
    /// rejection the PTX is kept in a fresh temporary directory and its path is
    /// part of the error.
    pub fn assemble(&self, ptx: &str, arch: Arch) -> Result<PtxasOutput, PtxasError> {
        if !self.supports(arch) {
            return Err(PtxasError::ArchUnsupported {
                arch,
                release: self.release.clone(),
                path: self.path.clone(),
            });
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const V12: &str = "ptxas: NVIDIA (R) Ptx optimizing assembler\nCopyright (c) 2005-2025 NVIDIA Corporation\n\
                       Built on Tue_May_27_02:19:41_PDT_2025\nCuda compilation tools, release 12.9, V12.9.86\n\
                       Build cuda_12.9.r12.9/compiler.36037853_0\n";
    const V13: &str = "ptxas: NVIDIA (R) Ptx optimizing assembler\n\
                       Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";

    #[test]
    fn release_lines_of_both_generations_parse() {
        let r12 = PtxasRelease::parse(V12).unwrap();
        assert_eq!((r12.major, r12.minor), (12, 9));
        assert_eq!(r12.line, "Cuda compilation tools, release 12.9, V12.9.86");
        let r13 = PtxasRelease::parse(V13).unwrap();
        assert_eq!(
            (r13.major, r13.minor, r13.to_string()),
            (13, 0, "13.0".into())
        );
        assert!(r12.is_supported() && r13.is_supported());
        let r11 = PtxasRelease::parse("Cuda compilation tools, release 11.8, V11.8.89").unwrap();
        assert!(!r11.is_supported());
        assert_eq!(PtxasRelease::parse("ptxas fatal: bad"), None);
        assert_eq!(PtxasRelease::parse("release x.y"), None);
    }

    #[test]
    fn cuda_13_has_no_volta() {
        let r12 = PtxasRelease::parse(V12).unwrap();
        let r13 = PtxasRelease::parse(V13).unwrap();
        assert_eq!(r12.archs(), Arch::ALL.to_vec());
        assert!(!r13.supports(Arch::Sm70));
        assert_eq!(r13.archs(), Arch::ALL[1..].to_vec());
    }

    /// A stand-in ptxas that prints `version` for `--version`.
    fn fake_ptxas(dir: &Path, name: &str, version: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\nprintf '%s' '{version}'\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn at_checks_the_file_and_its_release() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = Ptxas::at(&missing).unwrap_err();
        assert!(matches!(e, PtxasError::NotAFile { .. }), "{e}");
        assert!(e.to_string().contains("is not a file"), "{e}");

        let old = fake_ptxas(
            dir.path(),
            "ptxas11",
            "Cuda compilation tools, release 11.8, V11.8.89\n",
        );
        let e = Ptxas::at(&old).unwrap_err();
        assert!(matches!(e, PtxasError::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("release 11.8") && e.to_string().contains("12.x or 13.x"));

        let junk = fake_ptxas(dir.path(), "notptxas", "hello\n");
        assert!(matches!(
            Ptxas::at(&junk),
            Err(PtxasError::Unsupported { .. })
        ));

        let p13 = Ptxas::at(fake_ptxas(dir.path(), "ptxas13", V13)).unwrap();
        assert_eq!(p13.release().major, 13);
        assert_eq!(
            p13.version().unwrap(),
            "Cuda compilation tools, release 13.0, V13.0.88"
        );
        // Refused before ptxas runs: the message names the arch and the release.
        let e = p13.assemble(".version 8.0\n", Arch::Sm70).unwrap_err();
        assert!(
            matches!(
                e,
                PtxasError::ArchUnsupported {
                    arch: Arch::Sm70,
                    ..
                }
            ),
            "{e}"
        );
        let msg = e.to_string();
        assert!(msg.contains("sm_70") && msg.contains("ptxas 13.0"), "{msg}");
    }

    #[test]
    fn not_found_names_the_compute_extra() {
        let e = PtxasError::NotFound {
            tried: vec!["PATH".into()],
        };
        assert!(e.to_string().contains(COMPUTE_EXTRA_INSTALL), "{e}");
    }
}
