//! The NVPTX target machine: one per (arch, PTX version, optimization level).
//!
//! | arch | default PTX | LLVM CPU / features | what the arch adds (for HIR) |
//! |---|---|---|---|
//! | sm_70 | 6.4 | `sm_70` / `+ptx64,+sm_70` | shfl/vote/match `.sync`, scoped atomics, f16 wmma m16n16k16 |
//! | sm_75 | 6.4 | `sm_75` / `+ptx64,+sm_75` | (as sm_70; `tanh.approx`) |
//! | sm_80 | 7.0 | `sm_80` / `+ptx70,+sm_80` | bf16, bf16 wmma, `cp.async` |
//! | sm_86 | 7.1 | `sm_86` / `+ptx71,+sm_86` | (as sm_80) |
//! | sm_89 | 7.8 | `sm_89` / `+ptx78,+sm_89` | (as sm_80) |
//! | sm_90 | 8.0 | `sm_90` / `+ptx80,+sm_90` | bf16 atomics add, mbarrier transaction counts, `fence.proxy.async` (PTX 8.0) |
//! | sm_90a | 8.0 | `sm_90a` / `+ptx80,+sm_90a` | arch-specific Hopper features (`wgmma`) |
//!
//! The PTX version comes from [`zyntax_hir::Arch::default_ptx`] unless the
//! module states one; it is set through LLVM's target features, never by
//! editing the PTX text afterwards.

use crate::error::{CompileError, CompileResult};
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::sync::Once;
use zyntax_hir::{Arch, PtxVersion};

/// The only triple zyntax emits PTX for (64-bit addresses).
pub const TRIPLE: &str = "nvptx64-nvidia-cuda";

static INIT: Once = Once::new();

/// Register the NVPTX target with LLVM (idempotent, thread-safe).
pub fn initialize() {
    INIT.call_once(|| Target::initialize_nvptx(&InitializationConfig::default()));
}

/// What one PTX emission is for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PtxTarget {
    pub arch: Arch,
    pub ptx: PtxVersion,
}

impl PtxTarget {
    /// The arch with its default PTX version.
    pub fn new(arch: Arch) -> PtxTarget {
        PtxTarget {
            arch,
            ptx: arch.default_ptx(),
        }
    }

    pub fn with_ptx(arch: Arch, ptx: PtxVersion) -> PtxTarget {
        PtxTarget { arch, ptx }
    }

    /// LLVM CPU name: the arch, e.g. `sm_90a`.
    pub fn cpu(&self) -> &'static str {
        self.arch.name()
    }

    /// LLVM target feature string, e.g. `+ptx80,+sm_90a`.
    pub fn features(&self) -> String {
        format!("+{},+{}", self.ptx.llvm_feature(), self.arch.name())
    }

    /// Create the LLVM target machine. `opt` is the code generator's level.
    pub fn machine(&self, opt: OptimizationLevel) -> CompileResult<TargetMachine> {
        initialize();
        let triple = TargetTriple::create(TRIPLE);
        let target = Target::from_triple(&triple).map_err(|e| {
            CompileError::internal("NVPTX target lookup", e.to_string_lossy().into_owned())
        })?;
        target
            .create_target_machine(
                &triple,
                self.cpu(),
                &self.features(),
                opt,
                RelocMode::Default,
                CodeModel::Default,
            )
            .ok_or_else(|| {
                CompileError::internal(
                    "NVPTX target machine",
                    format!(
                        "LLVM refused cpu {} features {}",
                        self.cpu(),
                        self.features()
                    ),
                )
            })
    }

    /// The exact NVPTX data layout string, as the target machine reports it.
    pub fn data_layout(&self) -> CompileResult<String> {
        let tm = self.machine(OptimizationLevel::None)?;
        let td = tm.get_target_data();
        Ok(td.get_data_layout().as_str().to_string_lossy().into_owned())
    }
}

/// Emit PTX assembly for a module that already has triple and datalayout set.
pub fn emit_assembly(
    tm: &TargetMachine,
    module: &inkwell::module::Module<'_>,
) -> CompileResult<String> {
    let buf = tm
        .write_to_memory_buffer(module, FileType::Assembly)
        .map_err(|e| CompileError::internal("PTX emission", e.to_string_lossy().into_owned()))?;
    String::from_utf8(buf.as_slice().to_vec())
        .map_err(|_| CompileError::internal("PTX emission", "LLVM produced non-UTF-8 PTX"))
}
