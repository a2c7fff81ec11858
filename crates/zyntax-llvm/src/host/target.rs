//! Validation of CPU names and feature strings before LLVM sees them.
//!
//! LLVM only warns about an unknown CPU or feature (on stderr, then ignores
//! it), and aborts the process on some combinations (`-64bit-mode`, `-sse2`,
//! a 32-bit-only CPU such as `i386` for an x86-64 triple). So every CPU name
//! and feature, from `HostOptions`, the CLI or `ZYNTAX_CPU` /
//! `ZYNTAX_CPU_FEATURES`, is checked against LLVM's own tables
//! (`subtarget.cpp`), and on x86-64 the rule that keeps the host ABI:
//!
//! - the mode features (`16bit-mode`, `32bit-mode`, `64bit-mode`) and
//!   `soft-float` may not be named at all (they change how code is encoded or
//!   how floats are passed);
//! - after LLVM applies the CPU and features with their implications, `64bit`,
//!   `sse` and `sse2` must still be enabled (the x86-64 psABI passes floats
//!   in SSE registers).
//!
//! Anything else an x86-64 CPU has may be added or removed.

use super::{CpuTarget, HostError, HostResult};
use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

type NameCb = unsafe extern "C" fn(ctx: *mut c_void, name: *const c_char, len: usize);

extern "C" {
    fn zyntax_subtarget_names(
        triple: *const c_char,
        features: c_int,
        cb: NameCb,
        ctx: *mut c_void,
    ) -> c_int;
    fn zyntax_subtarget_has(
        triple: *const c_char,
        cpu: *const c_char,
        features: *const c_char,
        check: *const c_char,
    ) -> c_int;
}

/// Features that may not appear in a feature string on x86-64.
const X86_FORBIDDEN: [&str; 4] = ["16bit-mode", "32bit-mode", "64bit-mode", "soft-float"];
/// Features the x86-64 ABI needs, which the result must keep.
const X86_REQUIRED: &str = "+64bit,+sse,+sse2";

unsafe extern "C" fn collect(ctx: *mut c_void, name: *const c_char, len: usize) {
    // SAFETY: ctx is the &mut BTreeSet passed below; name points at len bytes of a static table.
    let set = unsafe { &mut *(ctx as *mut BTreeSet<String>) };
    let bytes = unsafe { std::slice::from_raw_parts(name as *const u8, len) };
    set.insert(String::from_utf8_lossy(bytes).into_owned());
}

/// LLVM's CPU names (`features == false`) or feature names of a target.
fn names(triple: &str, features: bool) -> HostResult<BTreeSet<String>> {
    let t = cstr(triple)?;
    let mut set = BTreeSet::new();
    // SAFETY: valid C string; the callback only touches `set` during the call.
    let rc = unsafe {
        zyntax_subtarget_names(
            t.as_ptr(),
            c_int::from(features),
            collect,
            &mut set as *mut BTreeSet<String> as *mut c_void,
        )
    };
    if rc != 0 {
        return Err(bad(format!("LLVM has no target for triple `{triple}`")));
    }
    Ok(set)
}

fn cstr(s: &str) -> HostResult<CString> {
    CString::new(s).map_err(|_| bad(format!("`{}` contains a NUL byte", s.escape_debug())))
}

fn bad(message: String) -> HostError {
    HostError::Target(message)
}

/// LLVM's CPU names and feature names of one triple.
type Tables = (BTreeSet<String>, BTreeSet<String>);

/// The tables of the host triple, read once.
fn host_tables(triple: &str) -> HostResult<&'static Tables> {
    static TABLES: OnceLock<Result<Tables, String>> = OnceLock::new();
    let r = TABLES.get_or_init(|| {
        let cpus = names(triple, false).map_err(|e| e.to_string())?;
        let feats = names(triple, true).map_err(|e| e.to_string())?;
        Ok((cpus, feats))
    });
    r.as_ref().map_err(|e| bad(e.clone()))
}

/// A short list of the valid names that start like `name`, for the message.
fn suggest(name: &str, all: &BTreeSet<String>) -> String {
    let prefix: String = name.chars().take(3).collect();
    let near: Vec<&str> = all
        .iter()
        .filter(|n| n.starts_with(&prefix))
        .take(12)
        .map(String::as_str)
        .collect();
    if near.is_empty() {
        format!("{} names are known", all.len())
    } else {
        format!("similar: {}", near.join(", "))
    }
}

/// Check `t`'s CPU name and feature string (see the module docs).
pub fn validate(t: &CpuTarget) -> HostResult<()> {
    super::initialize()?;
    let (cpus, feats) = host_tables(&t.triple)?;
    if !t.cpu.is_empty() && !cpus.contains(&t.cpu) {
        return Err(bad(format!(
            "unknown CPU `{}` for {} (LLVM 19; `generic` is portable; {})",
            t.cpu.escape_debug(),
            t.triple,
            suggest(&t.cpu, cpus)
        )));
    }
    let x86 = t.triple.starts_with("x86_64");
    for item in t
        .features
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let name = item.strip_prefix(['+', '-']).unwrap_or(item);
        if !feats.contains(name) {
            return Err(bad(format!(
                "unknown CPU feature `{}` in `{}` (features are `+name` or `-name`, comma-separated; {})",
                item.escape_debug(),
                t.features.escape_debug(),
                suggest(name, feats)
            )));
        }
        if x86 && X86_FORBIDDEN.contains(&name) {
            return Err(bad(format!(
                "CPU feature `{item}` changes the x86-64 ABI and may not be set (forbidden: {})",
                X86_FORBIDDEN.join(", ")
            )));
        }
    }
    if x86 {
        let (tr, cpu, fs, req) = (
            cstr(&t.triple)?,
            cstr(&t.cpu)?,
            cstr(&t.features)?,
            cstr(X86_REQUIRED)?,
        );
        // SAFETY: valid C strings; names were validated above (no LLVM warnings).
        let has =
            unsafe { zyntax_subtarget_has(tr.as_ptr(), cpu.as_ptr(), fs.as_ptr(), req.as_ptr()) };
        if has != 1 {
            return Err(bad(format!(
                "CPU `{}` with features `{}` lacks what the x86-64 ABI needs ({X86_REQUIRED}): \
                 choose a 64-bit CPU and do not disable these",
                t.cpu, t.features
            )));
        }
    }
    Ok(())
}
