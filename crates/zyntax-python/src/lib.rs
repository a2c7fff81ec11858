//! `zyntax._native`: the PyO3 extension module behind the `zyntax` package.
//!
//! The Python-facing contract lives in `python/zyntax/` (façade, stubs);
//! this crate only maps Rust APIs and errors onto Python objects. Every
//! entry point runs inside [`errors::guard`] so that no Rust panic reaches
//! Python as `PanicException`.

mod checked;
#[cfg(feature = "compute")]
mod compile;
#[cfg(feature = "cuda")]
mod cuda;
mod errors;
mod fusion;
mod hir;
#[cfg(feature = "llvm")]
mod host;
#[cfg(feature = "interp")]
mod interp;
mod loc;
mod nest_tile;
#[cfg(feature = "cuda")]
mod program;
mod targets;
mod tile;
mod tiling;
mod tuning;
mod types;

use pyo3::prelude::*;

/// Native core of zyntax (HIR builder, verifier, compilers).
#[pymodule(gil_used = false)]
mod _native {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::errors::{
        ArgumentError, BuildError, CompileError, CudaError, InternalError, LaunchError, ParseError,
        TrapError, VerifyError, ZyntaxError,
    };

    #[pymodule_export]
    use crate::types::{array, frag, ptr, vec, PyHirType};

    #[pymodule_export]
    use crate::hir::{
        parse_zir, ForRange, FunctionBuilder, HirModule, IfBranch, IfElse, IfScope, Loop, PyBlock,
        PyValue, PyVar,
    };

    #[pymodule_export]
    use super::build_info;

    #[pymodule_export]
    use crate::{
        fusion::fusion_plan,
        tiling::{
            nest_block_shape, nest_launch_grid, tiling_begin, tiling_limits, tiling_plan,
            NativeTiledNest,
        },
    };

    #[pymodule_export]
    use crate::targets::{arch_for_capability, target_table};

    #[pymodule_export]
    use crate::tuning::{
        tune_bucket, tune_check_config, tune_check_db, tune_check_record, tune_config_name,
        tune_db_mac, tune_nearest, tune_occupancy, tune_prune, tune_read_db, tune_record_key,
        tune_search, tune_table_lookup, tune_tuned_config, tune_write_db,
    };

    #[pymodule_export]
    use crate::tile::{
        tile_gemm_schedule, tile_gemv_schedule, tile_heuristic, tile_swapped_schedule, TileBuilder,
        TileSchedule,
    };

    #[pymodule_export]
    use crate::nest_tile::{nest_fuse, nest_tile, nest_tiling_report};

    #[cfg(feature = "cli")]
    #[pymodule_export]
    use super::cli_main;

    #[cfg(feature = "llvm")]
    #[pymodule_export]
    use crate::host::{cpu_compile, cpu_emit, cpu_target, CpuFunction, CpuModule};

    #[cfg(feature = "compute")]
    #[pymodule_export]
    use crate::compile::{compile_ptx, emit_llvm, ptxas_assemble, ptxas_info};

    #[cfg(feature = "interp")]
    #[pymodule_export]
    use crate::interp::{interp_call, interp_launch, interp_tensor_map_check};

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("build_profile", super::build_profile())?;
        m.add("FULL_MASK", crate::hir::FULL_MASK)?;
        m.add("FORMAT_VERSION", zyntax_hir::FORMAT_VERSION)?;
        crate::types::add_scalars(m)?;
        crate::loc::remember_module(m);
        // ptxas of the `[compute]` extra is found through this interpreter, not `python3` on PATH.
        #[cfg(feature = "compute")]
        if let Ok(exe) = m
            .py()
            .import("sys")?
            .getattr("executable")?
            .extract::<String>()
        {
            if !exe.is_empty() {
                zyntax_llvm::Ptxas::set_python(exe);
            }
        }
        #[cfg(feature = "cuda")]
        crate::cuda::register(m)?;
        Ok(())
    }
}

fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Describes how this extension was built: version, profile and which
/// optional components (LLVM backend, interpreter, CLI) are compiled in.
#[pyfunction]
fn build_info(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    errors::guard(|| {
        let d = pyo3::types::PyDict::new(py);
        d.set_item("version", env!("CARGO_PKG_VERSION"))?;
        d.set_item("profile", build_profile())?;
        d.set_item("target", std::env::consts::ARCH)?;
        d.set_item("hir", true)?;
        d.set_item("llvm", cfg!(feature = "llvm"))?;
        d.set_item("interp", cfg!(feature = "interp"))?;
        d.set_item("cli", cfg!(feature = "cli"))?;
        // Part of every kernel cache key (see build.rs).
        d.set_item("build_id", env!("ZYNTAX_BUILD_ID"))?;
        d.set_item("llvm_version", env!("ZYNTAX_LLVM_VERSION"))?;
        d.set_item("compute", cfg!(feature = "compute"))?;
        Ok(d)
    })
}

/// Runs the `zyntax` command line (crate `zyntax-cli`) with `argv` (including
/// the program name) and returns its exit status. Output goes straight to the
/// process's stdout/stderr; the GIL is released meanwhile.
#[cfg(feature = "cli")]
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<checked::Text>) -> PyResult<i32> {
    let argv: Vec<String> = argv.into_iter().map(|a| a.0).collect();
    errors::guard(|| Ok(py.detach(|| zyntax_cli::run(argv))))
}
