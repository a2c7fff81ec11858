//! `compile_ptx`, `emit_llvm`, `ptxas_assemble`, `ptxas_info`: the LLVM backend (crate
//! `zyntax-llvm`) for Python. Compilation releases the GIL.

use crate::checked::{Flag, Text};
use crate::errors::{guard, BuildError, CompileError, InternalError};
use crate::hir::{module_arg, verify_error};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use zyntax_hir::{Arch, OptLevel};
use zyntax_llvm as zl;

fn parse_arch(s: &str) -> PyResult<Arch> {
    crate::types::enum_name("arch", s, &Arch::ALL, Arch::from_name, Arch::name)
}

fn options(
    arch: &Text,
    ptx_version: Option<&Text>,
    opt_level: Option<&Text>,
    passes: Option<&Text>,
    line_info: Flag,
) -> PyResult<zl::Options> {
    let mut o = zl::Options::new(parse_arch(&arch.0)?).with_line_info(line_info.0);
    if let Some(p) = ptx_version {
        o = o.with_ptx_version(crate::hir::parse_ptx(&p.0)?);
    }
    if let Some(l) = opt_level {
        let l = crate::types::enum_name(
            "opt level",
            &l.0,
            OptLevel::ALL,
            OptLevel::from_name,
            OptLevel::name,
        )?;
        o = o.with_opt_level(l);
    }
    if let Some(p) = passes {
        o = o.with_passes(p.0.clone());
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
/// `line_info=True` writes `.file`/`.loc` lines from the instructions'
/// source locations (nvcc's `-lineinfo`). `passes` (the text of LLVM's
/// `opt -passes=`) replaces the level's optimization pipeline.
/// `llvm_ir=False` skips printing the optimized IR (`llvm_ir` is then "").
#[pyfunction]
#[pyo3(signature = (module, arch, *, ptx_version=None, opt_level=None, line_info=Flag(false), passes=None, llvm_ir=Flag(true)),
    text_signature = "(module, arch, *, ptx_version=None, opt_level=None, line_info=False, passes=None, llvm_ir=True)")]
#[allow(clippy::too_many_arguments)]
pub fn compile_ptx<'py>(
    py: Python<'py>,
    module: &Bound<'py, PyAny>,
    arch: Text,
    ptx_version: Option<Text>,
    opt_level: Option<Text>,
    line_info: Flag,
    passes: Option<Text>,
    llvm_ir: Flag,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options(
        &arch,
        ptx_version.as_ref(),
        opt_level.as_ref(),
        passes.as_ref(),
        line_info,
    )?
    .with_llvm_ir(llvm_ir.0);
    let m = module_arg(module)?;
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
#[pyo3(signature = (module, arch, *, ptx_version=None, opt_level=None, line_info=Flag(false), passes=None),
    text_signature = "(module, arch, *, ptx_version=None, opt_level=None, line_info=False, passes=None)")]
pub fn emit_llvm(
    py: Python<'_>,
    module: &Bound<'_, PyAny>,
    arch: Text,
    ptx_version: Option<Text>,
    opt_level: Option<Text>,
    line_info: Flag,
    passes: Option<Text>,
) -> PyResult<String> {
    let opts = options(
        &arch,
        ptx_version.as_ref(),
        opt_level.as_ref(),
        passes.as_ref(),
        line_info,
    )?;
    let m = module_arg(module)?;
    guard(|| Ok(py.detach(|| zl::emit_llvm(&m, &opts))))?.map_err(|e| compile_error(py, e))
}

/// `ptxas` (a path) checked, or the located one (`zyntax_llvm::Ptxas::locate`:
/// `$ZYNTAX_PTXAS`, the nvcc wheels of CUDA 12 and 13, a CUDA toolkit, `PATH`).
fn ptxas_tool(py: Python<'_>, ptxas: Option<Text>) -> PyResult<zl::Ptxas> {
    guard(|| {
        Ok(py.detach(|| match ptxas {
            Some(p) => zl::Ptxas::at(p.0),
            None => zl::Ptxas::locate(),
        }))
    })?
    .map_err(|e| CompileError::new_err(e.to_string()))
}

/// The ptxas that `ptxas_assemble` uses: `ptxas` checked, else the located one.
/// Returns `path`, `version` (the `release` line of `ptxas --version`),
/// `release` (`"13.0"`) and `archs` (the archs it assembles for).
#[pyfunction]
#[pyo3(signature = (ptxas=None))]
pub fn ptxas_info(py: Python<'_>, ptxas: Option<Text>) -> PyResult<Bound<'_, PyDict>> {
    let tool = ptxas_tool(py, ptxas)?;
    let d = PyDict::new(py);
    d.set_item("path", tool.path().to_string_lossy().into_owned())?;
    d.set_item("version", tool.release().line.clone())?;
    d.set_item("release", tool.release().to_string())?;
    let archs: Vec<&str> = tool.release().archs().iter().map(|a| a.name()).collect();
    d.set_item("archs", archs)?;
    Ok(d)
}

/// Assembles PTX with `ptxas -Werror -v` for `arch`; returns `cubin` (bytes),
/// `log` and the `ptxas` path. `ptxas` defaults to the located one (see
/// `ptxas_info`); an arch the ptxas lacks (CUDA 13: sm_70) is a CompileError.
#[pyfunction]
#[pyo3(signature = (ptx, arch, ptxas=None))]
pub fn ptxas_assemble<'py>(
    py: Python<'py>,
    ptx: Text,
    arch: Text,
    ptxas: Option<Text>,
) -> PyResult<Bound<'py, PyDict>> {
    let (ptx, arch) = (ptx.0, parse_arch(&arch.0)?);
    let tool = ptxas_tool(py, ptxas)?;
    if ptx.is_empty() {
        return Err(BuildError::new_err("empty PTX"));
    }
    let out = guard(|| Ok(py.detach(|| tool.assemble(&ptx, arch))))?
        .map_err(|e| CompileError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("cubin", PyBytes::new(py, &out.cubin))?;
    d.set_item("log", out.log)?;
    d.set_item("ptxas", tool.path().to_string_lossy().into_owned())?;
    Ok(d)
}
