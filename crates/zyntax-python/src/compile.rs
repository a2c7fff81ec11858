//! `compile_ptx`, `emit_llvm`, `ptxas_assemble`: the LLVM backend (crate
//! `zyntax-llvm`) for Python. Compilation releases the GIL.

use crate::errors::{guard, BuildError, CompileError, InternalError};
use crate::hir::{verify_error, HirModule};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use zyntax_hir::{Arch, OptLevel};
use zyntax_llvm as zl;

fn parse_arch(s: &str) -> PyResult<Arch> {
    crate::types::enum_name("arch", s, &Arch::ALL, Arch::from_name, Arch::name)
}

fn options(
    arch: &str,
    ptx_version: Option<&str>,
    opt_level: Option<&str>,
) -> PyResult<zl::Options> {
    let mut o = zl::Options::new(parse_arch(arch)?);
    if let Some(p) = ptx_version {
        o = o.with_ptx_version(crate::hir::parse_ptx(p)?);
    }
    if let Some(l) = opt_level {
        let l = crate::types::enum_name(
            "opt level",
            l,
            OptLevel::ALL,
            OptLevel::from_name,
            OptLevel::name,
        )?;
        o = o.with_opt_level(l);
    }
    Ok(o)
}

fn compile_error(py: Python<'_>, e: zl::CompileError) -> PyErr {
    match e {
        zl::CompileError::Verify(v) => verify_error(py, v),
        e if e.is_internal() => InternalError::new_err(e.to_string()),
        e => CompileError::new_err(e.to_string()),
    }
}

/// Compiles a module to PTX for `arch`; returns a dict with `ptx`, `llvm_ir`,
/// `arch`, `ptx_version`, `kernels` and per-stage `timings` (seconds).
#[pyfunction]
#[pyo3(signature = (module, arch, *, ptx_version=None, opt_level=None))]
pub fn compile_ptx<'py>(
    py: Python<'py>,
    module: &Bound<'py, HirModule>,
    arch: &str,
    ptx_version: Option<&str>,
    opt_level: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options(arch, ptx_version, opt_level)?;
    let m = module.get().hir()?;
    let out = guard(|| Ok(py.detach(|| zl::compile_ptx(&m, &opts))))?
        .map_err(|e| compile_error(py, e))?;
    let d = PyDict::new(py);
    d.set_item("ptx", out.ptx)?;
    d.set_item("llvm_ir", out.llvm_ir)?;
    d.set_item("arch", out.arch.name())?;
    d.set_item("ptx_version", out.ptx_version.to_string())?;
    d.set_item("kernels", out.kernels)?;
    let timings = PyDict::new(py);
    for (stage, t) in out.timings.stages() {
        timings.set_item(stage, t.as_secs_f64())?;
    }
    d.set_item("timings", timings)?;
    Ok(d)
}

/// The module's LLVM IR for `arch`, after the optimization pipeline.
#[pyfunction]
#[pyo3(signature = (module, arch, *, ptx_version=None, opt_level=None))]
pub fn emit_llvm(
    py: Python<'_>,
    module: &Bound<'_, HirModule>,
    arch: &str,
    ptx_version: Option<&str>,
    opt_level: Option<&str>,
) -> PyResult<String> {
    let opts = options(arch, ptx_version, opt_level)?;
    let m = module.get().hir()?;
    guard(|| Ok(py.detach(|| zl::emit_llvm(&m, &opts))))?.map_err(|e| compile_error(py, e))
}

/// Assembles PTX with `ptxas -Werror -v` for `arch`; returns `cubin` (bytes),
/// `log` and the `ptxas` path. `ptxas` defaults to the located one
/// (`$ZYNTAX_PTXAS`, the `nvidia-cuda-nvcc-cu12` package, `PATH`).
#[pyfunction]
#[pyo3(signature = (ptx, arch, ptxas=None))]
pub fn ptxas_assemble<'py>(
    py: Python<'py>,
    ptx: &str,
    arch: &str,
    ptxas: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let arch = parse_arch(arch)?;
    let tool = match ptxas {
        Some(p) => zl::Ptxas::at(p),
        None => zl::Ptxas::locate().map_err(|e| CompileError::new_err(e.to_string()))?,
    };
    if ptx.is_empty() {
        return Err(BuildError::new_err("empty PTX"));
    }
    let out = guard(|| Ok(py.detach(|| tool.assemble(ptx, arch))))?
        .map_err(|e| CompileError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("cubin", PyBytes::new(py, &out.cubin))?;
    d.set_item("log", out.log)?;
    d.set_item("ptxas", tool.path().to_string_lossy().into_owned())?;
    Ok(d)
}
