//! Loading PTX / cubin / fatbin images, the per-process module cache, and
//! kernel lookup.

use crate::device::Device;
use crate::error::{check, describe, CudaError, Result};
use crate::kernel::{Kernel, ParamKind, Signature};
use cudarc::driver::sys::{self, CUjit_option, CUmodule, CUresult};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Copy)]
pub(crate) struct RawModule(pub(crate) CUmodule);
// SAFETY: module handles may be used from any thread.
unsafe impl Send for RawModule {}
unsafe impl Sync for RawModule {}

/// What kind of image was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Ptx,
    Cubin,
    Fatbin,
}

pub(crate) struct ModuleInner {
    pub(crate) raw: RawModule,
    pub(crate) device: Device,
    image: Arc<[u8]>,
    kind: ImageKind,
    /// Kernel entry parameter lists parsed from PTX (empty for binaries).
    entries: HashMap<String, Vec<ParamKind>>,
    info_log: String,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: we loaded it; kernels hold an Arc to the module, so none is alive.
            unsafe {
                let _ = sys::cuModuleUnload(self.raw.0);
            }
        }
    }
}

/// A loaded module. Cheap to clone; kernels keep it alive.
#[derive(Clone)]
pub struct Module {
    pub(crate) inner: Arc<ModuleInner>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Module({:?}, {} bytes, device {})",
            self.inner.kind,
            self.inner.image.len(),
            self.inner.device.ordinal()
        )
    }
}

type CacheKey = (u32, u64);

fn cache() -> &'static Mutex<HashMap<CacheKey, Vec<Module>>> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Vec<Module>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Hash of an image; cache hits are confirmed by comparing bytes, so a
/// collision can only cost a reload, never return the wrong module.
pub fn image_hash(image: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    image.hash(&mut h);
    h.finish()
}

/// Drops every cached module (modules still referenced stay loaded).
pub fn clear_module_cache() {
    cache().lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// Number of modules in the per-process cache.
pub fn module_cache_len() -> usize {
    cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .map(Vec::len)
        .sum()
}

fn detect(image: &[u8]) -> ImageKind {
    if image.starts_with(b"\x7fELF") {
        ImageKind::Cubin
    } else if image.starts_with(&[0x50, 0xED, 0x55, 0xBA]) {
        ImageKind::Fatbin
    } else {
        ImageKind::Ptx
    }
}

const LOG_BYTES: usize = 64 * 1024;

impl Module {
    /// Loads PTX text (JIT-compiled by the driver for this device).
    pub fn load_ptx(device: &Device, ptx: &str) -> Result<Module> {
        Module::load(device, ptx.as_bytes())
    }

    /// Loads an image: PTX text, a cubin (ELF) or a fatbin, detected by its
    /// first bytes. Served from the process-wide cache when the same image
    /// was loaded on this device before.
    pub fn load(device: &Device, image: &[u8]) -> Result<Module> {
        if image.is_empty() {
            return Err(CudaError::Invalid("empty module image".to_owned()));
        }
        let key = (device.ordinal(), image_hash(image));
        {
            let c = cache().lock().unwrap_or_else(|p| p.into_inner());
            if let Some(m) = c
                .get(&key)
                .and_then(|v| v.iter().find(|m| &*m.inner.image == image))
            {
                crate::profile::instant("module", "module cache hit", Vec::new());
                return Ok(m.clone());
            }
        }
        let mut span = crate::profile::span("module", || "module load".to_owned());
        if let Some(s) = span.as_mut() {
            s.arg("bytes", crate::profile::ArgValue::Int(image.len() as i64));
        }
        let m = Module::load_uncached(device, image)?;
        drop(span);
        cache()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default()
            .push(m.clone());
        Ok(m)
    }

    /// Loads without consulting or filling the cache.
    pub fn load_uncached(device: &Device, image: &[u8]) -> Result<Module> {
        let kind = detect(image);
        let mut owned: Vec<u8>;
        let data: &[u8] = if kind == ImageKind::Ptx {
            // The driver reads PTX as a C string.
            if image.contains(&0) && image.last() != Some(&0) {
                return Err(CudaError::Invalid(
                    "PTX text contains a NUL byte before its end".to_owned(),
                ));
            }
            owned = image.to_vec();
            if owned.last() != Some(&0) {
                owned.push(0);
            }
            &owned
        } else {
            image
        };
        let entries = if kind == ImageKind::Ptx {
            let text = std::str::from_utf8(image)
                .map_err(|e| CudaError::Invalid(format!("PTX is not UTF-8: {e}")))?;
            parse_ptx_entries(text.trim_end_matches('\0'))
        } else {
            HashMap::new()
        };
        device.bind()?;
        let mut err_log = vec![0u8; LOG_BYTES];
        let mut info_log = vec![0u8; LOG_BYTES];
        let mut opts = [
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        ];
        // Size options are passed by value in the pointer slot (driver convention).
        let mut vals: [*mut std::ffi::c_void; 4] = [
            err_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut std::ffi::c_void,
            info_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut std::ffi::c_void,
        ];
        let mut raw: CUmodule = std::ptr::null_mut();
        // SAFETY: `data` is a NUL-terminated PTX string or a binary image; the
        // log buffers are LOG_BYTES long as declared and outlive the call.
        let rc = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                data.as_ptr().cast(),
                opts.len() as u32,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        let log_text = |buf: &[u8]| {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).trim_end().to_owned()
        };
        if rc != CUresult::CUDA_SUCCESS {
            let (name, message) = describe(rc);
            let mut log = log_text(&err_log);
            if log.is_empty() {
                log = "(the driver gave no log)".to_owned();
            }
            return Err(CudaError::Jit {
                code: rc as u32,
                name,
                message,
                log,
            });
        }
        Ok(Module {
            inner: Arc::new(ModuleInner {
                raw: RawModule(raw),
                device: device.clone(),
                image: Arc::from(image),
                kind,
                entries,
                info_log: log_text(&info_log),
            }),
        })
    }

    pub fn device(&self) -> &Device {
        &self.inner.device
    }
    pub fn kind(&self) -> ImageKind {
        self.inner.kind
    }
    /// The JIT's informational log (register usage etc.; PTX only).
    pub fn info_log(&self) -> &str {
        &self.inner.info_log
    }
    /// Kernel names declared in the PTX (`.entry`), sorted; empty for binaries.
    pub fn kernel_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inner.entries.keys().cloned().collect();
        v.sort();
        v
    }
    /// Parameter layout of an entry as the PTX declares it.
    pub fn ptx_params(&self, name: &str) -> Option<&[ParamKind]> {
        self.inner.entries.get(name).map(Vec::as_slice)
    }

    /// Looks up kernel `name`. With `signature` (from the HIR function, see
    /// [`Signature::from_function`]) arguments are checked against the HIR
    /// types; without one, against the PTX parameter list. A signature that
    /// disagrees with the PTX is an error.
    pub fn kernel(&self, name: &str, signature: Option<Signature>) -> Result<Kernel> {
        let ptx = self.inner.entries.get(name);
        let sig = match (signature, ptx) {
            (Some(s), Some(p)) => {
                let sizes = |v: &[ParamKind]| v.iter().map(ParamKind::size).collect::<Vec<_>>();
                if sizes(&s.params) != sizes(p) {
                    return Err(CudaError::Invalid(format!(
                        "signature of `{name}` ({}) does not match its PTX parameters ({})",
                        describe_params(&s.params),
                        describe_params(p)
                    )));
                }
                s
            }
            (Some(s), None) => s,
            (None, Some(p)) => Signature::from_params(p.clone()),
            (None, None) if self.inner.kind == ImageKind::Ptx => {
                return Err(self.not_found(name));
            }
            (None, None) => {
                return Err(CudaError::Invalid(format!(
                    "kernel `{name}`: a cubin/fatbin does not describe its parameters; \
                     pass the kernel's signature"
                )))
            }
        };
        let cname = std::ffi::CString::new(name)
            .map_err(|_| CudaError::Invalid("kernel name contains a NUL byte".to_owned()))?;
        self.inner.device.bind()?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: valid module; writes one handle.
        let rc = unsafe { sys::cuModuleGetFunction(&mut f, self.inner.raw.0, cname.as_ptr()) };
        if rc == CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(self.not_found(name));
        }
        check(rc, "cuModuleGetFunction")?;
        Kernel::new(self.clone(), name.to_owned(), f, sig)
    }

    /// The module-level variable `name` (a `__constant__` or `__device__`
    /// global, `cuModuleGetGlobal`). Cached modules are shared: every loader
    /// of the same image sees the same globals.
    pub fn global(&self, name: &str) -> Result<Global> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| CudaError::Invalid("global name contains a NUL byte".to_owned()))?;
        self.inner.device.bind()?;
        let (mut ptr, mut bytes): (sys::CUdeviceptr, usize) = (0, 0);
        // SAFETY: valid module; writes an address and a size.
        let rc = unsafe {
            sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.inner.raw.0, cname.as_ptr())
        };
        if rc == CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(CudaError::Invalid(format!(
                "the module has no global `{name}`"
            )));
        }
        check(rc, "cuModuleGetGlobal")?;
        Ok(Global {
            module: self.clone(),
            name: name.to_owned(),
            ptr,
            bytes: bytes as u64,
        })
    }

    fn not_found(&self, name: &str) -> CudaError {
        let names = self.kernel_names();
        CudaError::KernelNotFound {
            name: name.to_owned(),
            hint: if names.is_empty() {
                String::new()
            } else {
                format!(" (it has: {})", names.join(", "))
            },
        }
    }
}

pub(crate) fn describe_params(p: &[ParamKind]) -> String {
    p.iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses the `.entry` declarations of PTX text into parameter lists.
///
/// Understands what LLVM's NVPTX backend emits: `.param .u64 .ptr .global
/// .align 4 name`, `.param .f32 name`, and by-value aggregates
/// `.param .align 8 .b8 name[16]`.
pub fn parse_ptx_entries(ptx: &str) -> HashMap<String, Vec<ParamKind>> {
    let mut out = HashMap::new();
    let mut rest = ptx;
    while let Some(pos) = rest.find(".entry") {
        let after = &rest[pos + ".entry".len()..];
        // `.entry` must be a whole directive (not e.g. `.entryfoo`).
        if !after.starts_with(|c: char| c.is_whitespace()) {
            rest = after;
            continue;
        }
        let after = after.trim_start();
        let name_end = after
            .find(|c: char| c.is_whitespace() || c == '(')
            .unwrap_or(after.len());
        let name = after[..name_end].to_owned();
        let body = &after[name_end..];
        let trimmed = body.trim_start();
        let mut params = Vec::new();
        if let Some(list) = trimmed.strip_prefix('(') {
            let close = list.find(')').unwrap_or(list.len());
            for decl in list[..close].split(',') {
                if let Some(k) = parse_param_decl(decl) {
                    params.push(k);
                }
            }
            rest = &list[close..];
        } else {
            rest = body;
        }
        if !name.is_empty() {
            out.insert(name, params);
        }
    }
    out
}

fn parse_param_decl(decl: &str) -> Option<ParamKind> {
    let toks: Vec<&str> = decl.split_whitespace().collect();
    if !toks.contains(&".param") {
        return None;
    }
    let is_ptr = toks.contains(&".ptr");
    let ty = toks.iter().find(|t| {
        matches!(
            **t,
            ".b8"
                | ".u8"
                | ".s8"
                | ".b16"
                | ".u16"
                | ".s16"
                | ".f16"
                | ".bf16"
                | ".b32"
                | ".u32"
                | ".s32"
                | ".f32"
                | ".b64"
                | ".u64"
                | ".s64"
                | ".f64"
                | ".pred"
        )
    })?;
    let last = toks.last()?;
    // Aggregate by value: `name[16]`.
    if let Some(open) = last.find('[') {
        let n: u32 = last[open + 1..].trim_end_matches(']').parse().ok()?;
        let elem = bits_of(ty)? / 8;
        return Some(ParamKind::Bytes(n * elem));
    }
    let bits = bits_of(ty)?;
    if is_ptr {
        return Some(ParamKind::Ptr { elem: None });
    }
    Some(ParamKind::Raw {
        bytes: bits / 8,
        float: ty.starts_with(".f") || *ty == ".bf16",
    })
}

fn bits_of(ty: &str) -> Option<u32> {
    let digits: String = ty.chars().filter(char::is_ascii_digit).collect();
    if ty == ".pred" {
        return Some(8);
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_llvm_nvptx_entries() {
        let ptx = r#"
.version 8.0
.target sm_90
.address_size 64
.visible .entry saxpy(
	.param .u64 .ptr .global .align 4 saxpy_param_0,
	.param .u64 .ptr .global .align 4 saxpy_param_1,
	.param .f32 saxpy_param_2,
	.param .u32 saxpy_param_3
)
{ ret; }
.visible .entry empty()
{ ret; }
.entry agg(.param .align 8 .b8 agg_param_0[24], .param .b16 agg_param_1, .param .u64 agg_param_2)
{ ret; }
"#;
        let e = parse_ptx_entries(ptx);
        assert_eq!(e.len(), 3);
        assert_eq!(
            e["saxpy"],
            vec![
                ParamKind::Ptr { elem: None },
                ParamKind::Ptr { elem: None },
                ParamKind::Raw {
                    bytes: 4,
                    float: true
                },
                ParamKind::Raw {
                    bytes: 4,
                    float: false
                },
            ]
        );
        assert!(e["empty"].is_empty());
        assert_eq!(
            e["agg"],
            vec![
                ParamKind::Bytes(24),
                ParamKind::Raw {
                    bytes: 2,
                    float: false
                },
                ParamKind::Raw {
                    bytes: 8,
                    float: false
                },
            ]
        );
    }

    #[test]
    fn detects_image_kinds() {
        assert_eq!(detect(b"\x7fELF\x02"), ImageKind::Cubin);
        assert_eq!(detect(&[0x50, 0xED, 0x55, 0xBA, 1]), ImageKind::Fatbin);
        assert_eq!(detect(b".version 8.0"), ImageKind::Ptx);
    }
}

/// A module global's device memory: valid while its module is loaded (the
/// handle keeps the module alive). Reads and writes are whole-variable and
/// synchronous: they wait for the device to finish earlier work first, so a
/// write is seen by every later launch and a read sees every earlier one.
#[derive(Clone)]
pub struct Global {
    module: Module,
    name: String,
    ptr: sys::CUdeviceptr,
    bytes: u64,
}

impl std::fmt::Debug for Global {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Global({}, {} bytes)", self.name, self.bytes)
    }
}

impl Global {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Device address of the variable.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn check_len(&self, len: usize, what: &str) -> Result<()> {
        if len as u64 != self.bytes {
            return Err(CudaError::Invalid(format!(
                "global `{}` has {} bytes; {what} has {len}",
                self.name, self.bytes
            )));
        }
        Ok(())
    }

    /// Overwrites the whole variable with `src` (exactly its size).
    pub fn write(&self, src: &[u8]) -> Result<()> {
        self.check_len(src.len(), "the data written")?;
        let device = &self.module.inner.device;
        device.synchronize()?;
        // SAFETY: `ptr..ptr+bytes` is the symbol's memory, `src` has that many bytes.
        check(
            unsafe { sys::cuMemcpyHtoD_v2(self.ptr, src.as_ptr().cast(), src.len()) },
            "cuMemcpyHtoD",
        )
    }

    /// Reads the whole variable into `dst` (exactly its size).
    pub fn read(&self, dst: &mut [u8]) -> Result<()> {
        self.check_len(dst.len(), "the destination")?;
        let device = &self.module.inner.device;
        device.synchronize()?;
        // SAFETY: as for `write`.
        check(
            unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), self.ptr, dst.len()) },
            "cuMemcpyDtoH",
        )
    }
}
