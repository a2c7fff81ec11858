//! AOT bundles: a fatbin (or cubin) plus the JSON launch manifest beside it,
//! as `zyntax compile --emit fatbin` writes them (format: docs/aot.md).
//!
//! [`Bundle::load`] needs only the driver. Before the device is touched it
//! reads the manifest and the image as bounded regular files, checks the
//! image's size and SHA-256 against the manifest and that the fatbin's
//! records are exactly the manifest's SASS and PTX archs. It then predicts,
//! by the driver's rules, whether the driver runs SASS or JIT-compiles the
//! PTX, loads the image, and builds every kernel with the manifest's
//! signature; for SASS, each kernel's register count must be the manifest's.
//! (The manifest's own `content_sha256` is checked by the Python loader,
//! which shares its canonical JSON form.)

use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::kernel::{Kernel, ParamKind, Signature};
use crate::module::Module;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use zyntax_hir::ScalarType;

const MANIFEST_FORMAT: &str = "zyntax-bundle";
const MANIFEST_VERSION: u64 = 1;
const MAX_MANIFEST_BYTES: u64 = 16 << 20;
const MAX_IMAGE_BYTES: u64 = 1 << 30;

/// What the driver runs from a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedFrom {
    /// A cubin for a compatible arch.
    Sass,
    /// The PTX, JIT-compiled by the driver at load time.
    Ptx,
}

/// One record of a fatbin: its kind, its arch (`sm_90a` for arch-specific
/// code) and where its payload lies in the fatbin's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatbinImage {
    pub ptx: bool,
    pub arch: String,
    /// Byte offset of the payload (after the record's header).
    pub offset: usize,
    /// Payload bytes, padding included.
    pub size: usize,
}

/// A malformed or truncated fatbin (the message says what and at which byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatbinError(pub String);

impl std::fmt::Display for FatbinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FatbinError {}

fn bad(msg: impl Into<String>) -> CudaError {
    CudaError::Invalid(format!("bundle: {}", msg.into()))
}

/// The fatbin magic, little-endian in its first four bytes.
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// The file header: magic (u32), version (u16), header size (u16), payload size (u64).
const HEADER_BYTES: usize = 16;
/// Every record header holds at least kind (u16), version (u16), header size
/// (u32), padded payload size (u64), ..., SM number (u32 at 28), flags (u64 at 40).
const ENTRY_MIN_BYTES: usize = 48;
const ENTRY_ARCH_OFFSET: usize = 28;
const ENTRY_FLAGS_OFFSET: usize = 40;
/// Flag bit of arch-specific code (`sm_90a`).
const FLAG_ARCH_SPECIFIC: u64 = 1 << 20;
const KIND_PTX: u16 = 1;
const KIND_ELF: u16 = 2;

/// The images of a fatbin, read from its container format with no NVIDIA
/// library: a 16-byte header (magic, version, header size, payload size)
/// then one record per image (kind, header size, padded payload size, SM
/// number, flags). This is zyntax's one fatbin parser (`zyntax.fatbin.parse`
/// calls it). Every size is checked against `data` before it is used, so a
/// truncated or corrupted fatbin is an error, never read past.
pub fn parse_fatbin(data: &[u8]) -> std::result::Result<Vec<FatbinImage>, FatbinError> {
    let err = |msg: String| Err(FatbinError(msg));
    // Callers check the bounds before reading.
    let u16_at = |p: usize| u16::from_le_bytes([data[p], data[p + 1]]);
    let u32_at = |p: usize| u32::from_le_bytes([data[p], data[p + 1], data[p + 2], data[p + 3]]);
    let u64_at = |p: usize| u64::from(u32_at(p)) | (u64::from(u32_at(p + 4)) << 32);
    if data.len() < HEADER_BYTES {
        return err(format!(
            "{} bytes is shorter than a fatbin header",
            data.len()
        ));
    }
    let magic = u32_at(0);
    if magic != FATBIN_MAGIC {
        return err(format!(
            "bad magic 0x{magic:08x} (a fatbin starts with 0x{FATBIN_MAGIC:08x})"
        ));
    }
    let hsize = u16_at(6) as usize;
    let fsize = u64_at(8);
    let end = (hsize as u64).saturating_add(fsize);
    if hsize < HEADER_BYTES || end > data.len() as u64 {
        return err(format!(
            "header says {hsize} + {fsize} bytes, the file has {} (truncated?)",
            data.len()
        ));
    }
    let end = end as usize;
    let mut pos = hsize;
    let mut out = Vec::new();
    while pos < end {
        if end - pos < ENTRY_MIN_BYTES {
            return err(format!("entry at byte {pos} is cut short"));
        }
        let kind = u16_at(pos);
        if kind != KIND_PTX && kind != KIND_ELF {
            return err(format!("entry at byte {pos} has unknown kind {kind}"));
        }
        let ehsize = u32_at(pos + 4) as usize;
        let padded = u64_at(pos + 8);
        let sm = u32_at(pos + ENTRY_ARCH_OFFSET);
        let specific = u64_at(pos + ENTRY_FLAGS_OFFSET) & FLAG_ARCH_SPECIFIC != 0;
        let next = (pos as u64)
            .saturating_add(ehsize as u64)
            .saturating_add(padded);
        if ehsize < ENTRY_MIN_BYTES || next > end as u64 {
            return err(format!(
                "entry at byte {pos} runs past the end of the fatbin"
            ));
        }
        out.push(FatbinImage {
            ptx: kind == KIND_PTX,
            arch: format!("sm_{sm}{}", if specific { "a" } else { "" }),
            offset: pos + ehsize,
            size: padded as usize,
        });
        pos = next as usize;
    }
    if out.is_empty() {
        return err("the fatbin holds no image".into());
    }
    Ok(out)
}

fn split_arch(arch: &str) -> Option<(u32, u32, bool)> {
    let num = arch.strip_prefix("sm_")?;
    let specific = num.ends_with('a');
    let num: u32 = num.trim_end_matches('a').parse().ok()?;
    Some((num / 10, num % 10, specific))
}

/// Whether an image for `arch` runs on compute capability `cc` (SASS: same
/// major, equal or lower minor; PTX: equal or older; `a` code: its arch only).
pub fn runs_on(arch: &str, cc: (u32, u32), sass: bool) -> bool {
    match split_arch(arch) {
        Some((ma, mi, true)) => (ma, mi) == cc,
        Some((ma, mi, false)) if sass => ma == cc.0 && mi <= cc.1,
        Some((ma, mi, false)) => (ma, mi) <= cc,
        None => false,
    }
}

/// What the driver runs from `sass` cubins and an optional `ptx` on `cc`.
pub fn choose(sass: &[String], ptx: Option<&str>, cc: (u32, u32)) -> Option<(LoadedFrom, String)> {
    let best = sass
        .iter()
        .filter(|a| runs_on(a, cc, true))
        .max_by_key(|a| split_arch(a).map(|(_, mi, sp)| (mi, sp)));
    if let Some(a) = best {
        return Some((LoadedFrom::Sass, a.clone()));
    }
    ptx.filter(|p| runs_on(p, cc, false))
        .map(|p| (LoadedFrom::Ptx, p.to_owned()))
}

/// Reads a regular file (never through a symlink, never a FIFO or device) of at most `limit` bytes.
fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    if !meta.file_type().is_file() {
        return Err(bad(format!("{} is not a regular file", path.display())));
    }
    let f = std::fs::File::open(path)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    let mut data = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    if data.len() as u64 > limit {
        return Err(bad(format!("{} is over {limit} bytes", path.display())));
    }
    Ok(data)
}

/// A kernel parameter's `.zir` type (scalars and pointers) to its kind.
fn param_kind(t: &str) -> Result<ParamKind> {
    let t = t.trim();
    if let Some(inner) = t.strip_prefix("ptr<").and_then(|s| s.strip_suffix('>')) {
        let elem = inner.rsplit(',').next().unwrap_or("").trim();
        return Ok(ParamKind::Ptr {
            elem: ScalarType::from_name(elem),
        });
    }
    ScalarType::from_name(t)
        .map(ParamKind::Scalar)
        .ok_or_else(|| bad(format!("parameter type `{t}` is not a scalar or pointer")))
}

/// A manifest's `[x, y, z]` (None unless three numbers that fit a u32).
fn dim3(v: &Value) -> Option<[u32; 3]> {
    let d: Vec<u32> = v
        .as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
        .collect::<Option<_>>()?;
    d.try_into().ok()
}

fn signature(name: &str, k: &Value) -> Result<Signature> {
    let params = k["params"]
        .as_array()
        .ok_or_else(|| bad(format!("kernel {name} has no parameter list")))?;
    let kinds = params
        .iter()
        .map(|p| param_kind(p["type"].as_str().unwrap_or("?")))
        .collect::<Result<Vec<_>>>()?;
    let mut sig = Signature::from_params(kinds);
    sig.max_threads = dim3(&k["max_threads"]);
    sig.cluster = dim3(&k["cluster_dims"]);
    sig.grid_sync = k["grid_sync"].as_bool().unwrap_or(false);
    sig.shared_bytes = k["dynamic_shared_bytes"].as_u64().unwrap_or(0) as u32;
    Ok(sig)
}

/// SHA-256 of the manifest's image (RustCrypto `sha2`).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A loaded bundle.
pub struct Bundle {
    pub path: PathBuf,
    pub module: Module,
    pub loaded_from: LoadedFrom,
    /// The arch of the image the driver runs (`sm_90a` SASS, `sm_80` PTX, ...).
    pub image_arch: String,
    pub device_arch: String,
    pub manifest: Value,
    kernels: BTreeMap<String, Kernel>,
}

/// The checked manifest and image of a bundle (no device needed).
pub fn read_bundle(path: &Path) -> Result<(PathBuf, Value, Vec<u8>)> {
    let manifest_path = path.with_extension("json");
    let raw = read_bounded(&manifest_path, MAX_MANIFEST_BYTES)?;
    // serde_json bounds nesting (128) itself.
    let m: Value = serde_json::from_slice(&raw)
        .map_err(|e| bad(format!("manifest {}: {e}", manifest_path.display())))?;
    if m["format"] != MANIFEST_FORMAT || m["version"].as_u64() != Some(MANIFEST_VERSION) {
        return Err(bad(format!(
            "{} is not a version {MANIFEST_VERSION} zyntax bundle manifest",
            manifest_path.display()
        )));
    }
    let file = m["image"]["file"]
        .as_str()
        .filter(|f| !f.contains('/'))
        .ok_or_else(|| bad("manifest has no image file name"))?;
    let image_path = manifest_path.with_file_name(file);
    let image = read_bounded(&image_path, MAX_IMAGE_BYTES)?;
    check_image(&m, &image)?;
    Ok((image_path, m, image))
}

/// Checks that `image` is the one manifest `m` describes: its size and
/// SHA-256, and for a fatbin that its records are exactly the manifest's
/// SASS and PTX archs (a cubin must be ELF). The native loader and
/// `zyntax.bundle.check_image` both use it.
pub fn check_image(m: &Value, image: &[u8]) -> Result<()> {
    let file = m["image"]["file"].as_str().unwrap_or("the image");
    if m["image"]["bytes"].as_u64() != Some(image.len() as u64) {
        return Err(bad(format!(
            "{file} is {} bytes, its manifest says {} (truncated or replaced?)",
            image.len(),
            m["image"]["bytes"]
        )));
    }
    if m["image"]["sha256"].as_str() != Some(hex(&sha256(image)).as_str()) {
        return Err(bad(format!("{file} does not match its manifest's SHA-256")));
    }
    if m["image"]["kind"] == "fatbin" {
        let recs = parse_fatbin(image).map_err(|e| bad(format!("{file}: {e}")))?;
        let mut sass: Vec<String> = recs
            .iter()
            .filter(|r| !r.ptx)
            .map(|r| r.arch.clone())
            .collect();
        let ptx: Vec<String> = recs
            .iter()
            .filter(|r| r.ptx)
            .map(|r| r.arch.clone())
            .collect();
        sass.sort();
        let mut want = strings(&m["sass"]);
        want.sort();
        let want_ptx: Vec<String> = m["ptx"]
            .as_str()
            .map(|p| vec![p.to_owned()])
            .unwrap_or_default();
        if sass != want || ptx != want_ptx {
            return Err(bad(format!(
                "{file} holds SASS {sass:?} and PTX {ptx:?}; its manifest says SASS {want:?} and PTX {want_ptx:?}"
            )));
        }
    } else if !image.starts_with(b"\x7fELF") {
        return Err(bad(format!("{file} is not a cubin (ELF)")));
    }
    Ok(())
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl Bundle {
    /// Loads the bundle at `path` (the image or its `.json` manifest) on `device`.
    pub fn load(device: &Device, path: &Path) -> Result<Bundle> {
        let (image_path, m, image) = read_bundle(path)?;
        let fat = m["image"]["kind"] == "fatbin";
        let sass = strings(&m["sass"]);
        let ptx = if fat { m["ptx"].as_str() } else { None };
        let cc = device.props().compute_capability;
        let device_arch = format!("sm_{}{}", cc.0, cc.1);
        let (loaded_from, image_arch) = choose(&sass, ptx, cc).ok_or_else(|| {
            CudaError::Invalid(format!(
                "bundle {} cannot run on {device_arch}: it holds SASS for {}{}",
                image_path.display(),
                sass.join(", "),
                ptx.map(|p| format!(" + PTX {p}"))
                    .unwrap_or_else(|| " (no PTX)".into())
            ))
        })?;
        let module = Module::load(device, &image)?;
        let mut kernels = BTreeMap::new();
        let decl = m["kernels"]
            .as_object()
            .ok_or_else(|| bad("manifest has no kernels"))?;
        for (name, k) in decl {
            let kernel = match module.kernel(name, Some(signature(name, k)?)) {
                Err(CudaError::KernelNotFound { .. }) => {
                    return Err(bad(format!(
                        "manifest names kernel {name}, which {} lacks",
                        image_path.display()
                    )))
                }
                other => other?,
            };
            let want = k["resources"][&image_arch]["registers"].as_u64();
            if let (LoadedFrom::Sass, Some(want)) = (loaded_from, want) {
                if u64::from(kernel.attrs().num_regs) != want {
                    return Err(bad(format!(
                        "kernel {name}: the {image_arch} SASS uses {} registers, the manifest says {want}",
                        kernel.attrs().num_regs
                    )));
                }
            }
            kernels.insert(name.clone(), kernel);
        }
        Ok(Bundle {
            path: image_path,
            module,
            loaded_from,
            image_arch,
            device_arch,
            manifest: m,
            kernels,
        })
    }

    pub fn kernel(&self, name: &str) -> Result<&Kernel> {
        self.kernels
            .get(name)
            .ok_or_else(|| CudaError::KernelNotFound {
                name: name.to_owned(),
                hint: format!(
                    " (the bundle has: {})",
                    self.kernels.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            })
    }

    pub fn kernel_names(&self) -> Vec<String> {
        self.kernels.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_answers() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let long = vec![b'a'; 1000];
        assert_eq!(
            hex(&sha256(&long)),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    #[test]
    fn arch_rules() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            choose(&s(&["sm_80", "sm_90a"]), Some("sm_80"), (9, 0)),
            Some((LoadedFrom::Sass, "sm_90a".into()))
        );
        assert_eq!(
            choose(&s(&["sm_80"]), Some("sm_80"), (9, 0)),
            Some((LoadedFrom::Ptx, "sm_80".into()))
        );
        assert_eq!(
            choose(&s(&["sm_80", "sm_86"]), None, (8, 9)),
            Some((LoadedFrom::Sass, "sm_86".into()))
        );
        assert_eq!(choose(&s(&["sm_90a"]), None, (10, 0)), None);
        assert_eq!(choose(&s(&["sm_70"]), Some("sm_90"), (8, 9)), None);
    }

    /// A fatbin of `records` (kind, SM number, arch-specific, payload bytes)
    /// laid out as nvFatbin writes them: 64-byte record headers.
    fn fatbin(records: &[(u16, u32, bool, usize)]) -> Vec<u8> {
        let mut body = Vec::new();
        for &(kind, sm, specific, n) in records {
            let mut h = vec![0u8; 64];
            h[0..2].copy_from_slice(&kind.to_le_bytes());
            h[4..8].copy_from_slice(&64u32.to_le_bytes());
            h[8..16].copy_from_slice(&(n as u64).to_le_bytes());
            h[28..32].copy_from_slice(&sm.to_le_bytes());
            let flags: u64 = if specific { FLAG_ARCH_SPECIFIC } else { 0 } | 1;
            h[40..48].copy_from_slice(&flags.to_le_bytes());
            body.extend_from_slice(&h);
            body.extend((0..n).map(|i| i as u8));
        }
        let mut out = FATBIN_MAGIC.to_le_bytes().to_vec();
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn fatbin_records_and_their_payloads() {
        let data = fatbin(&[(2, 80, false, 24), (2, 90, true, 40), (1, 90, false, 8)]);
        let recs = parse_fatbin(&data).unwrap();
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.ptx, r.arch.as_str(), r.offset, r.size))
            .collect();
        assert_eq!(
            got,
            [
                (false, "sm_80", 16 + 64, 24),
                (false, "sm_90a", 16 + 64 + 24 + 64, 40),
                (true, "sm_90", 16 + 2 * 64 + 24 + 40 + 64, 8),
            ]
        );
        assert_eq!(recs[2].offset + recs[2].size, data.len());
    }

    #[test]
    fn fatbin_header_errors() {
        assert!(parse_fatbin(b"").is_err());
        let e = parse_fatbin(&[0u8; 64]).unwrap_err().to_string();
        assert!(e.contains("magic"), "{e}");
        let mut hdr = vec![0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0];
        hdr.extend_from_slice(&1000u64.to_le_bytes());
        let e = parse_fatbin(&hdr).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        // Header size and payload size near u64::MAX must not wrap around.
        hdr[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse_fatbin(&hdr).is_err());
        assert!(parse_fatbin(&fatbin(&[]))
            .unwrap_err()
            .0
            .contains("no image"));
    }

    #[test]
    fn damaged_fatbins_are_errors_never_read_past() {
        let data = fatbin(&[(2, 80, false, 24), (1, 86, false, 8)]);
        // Every proper prefix: the header's size no longer fits.
        for n in 0..data.len() {
            assert!(parse_fatbin(&data[..n]).is_err(), "prefix of {n} bytes");
        }
        // Every byte of the headers flipped: parsed or rejected, never a panic;
        // what is parsed lies inside the data.
        for i in (0..16)
            .chain(16..16 + 64)
            .chain(16 + 64 + 24..16 + 2 * 64 + 24)
        {
            let mut d = data.clone();
            d[i] ^= 0xff;
            if let Ok(recs) = parse_fatbin(&d) {
                assert!(
                    recs.iter().all(|r| r.offset + r.size <= d.len()),
                    "byte {i}"
                );
            }
        }
        let mut kind = data.clone();
        kind[16] = 7;
        let e = parse_fatbin(&kind).unwrap_err().0;
        assert!(e.contains("unknown kind 7"), "{e}");
        let mut long = data.clone();
        long[16 + 8..16 + 16].copy_from_slice(&1000u64.to_le_bytes());
        let e = parse_fatbin(&long).unwrap_err().0;
        assert!(e.contains("runs past the end"), "{e}");
    }

    #[test]
    fn launch_dims_of_the_manifest() {
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert_eq!(dim3(&v("[128, 2, 1]")), Some([128, 2, 1]));
        assert_eq!(dim3(&Value::Null), None);
        assert_eq!(dim3(&v("[128, 2]")), None);
        assert_eq!(dim3(&v("[128, 2, -1]")), None);
        assert_eq!(dim3(&v("[4294967296, 1, 1]")), None); // was truncated to 0
    }

    #[test]
    fn param_types() {
        assert_eq!(
            param_kind("ptr<global, f32>").unwrap(),
            ParamKind::Ptr {
                elem: Some(ScalarType::F32)
            }
        );
        assert_eq!(
            param_kind("u32").unwrap(),
            ParamKind::Scalar(ScalarType::U32)
        );
        assert!(param_kind("vec<4, f32>").is_err());
    }
}
