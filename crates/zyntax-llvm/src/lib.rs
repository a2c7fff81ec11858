//! # zyntax-llvm
//!
//! HIR → LLVM IR lowering and the NVPTX backend (PTX emission through LLVM 19,
//! `ptxas` validation).
//!
//! ```no_run
//! # #[cfg(feature = "compute")] {
//! use zyntax_hir::{parse_module, Arch};
//! use zyntax_llvm::{compile_ptx, Options};
//! let m = parse_module(&std::fs::read_to_string("saxpy.zir").unwrap()).unwrap();
//! let out = compile_ptx(&m, &Options::new(Arch::Sm80)).unwrap();
//! println!("{}", out.ptx);
//! # }
//! ```
//!
//! Pipeline of [`compile_ptx`], each stage timed in [`Timings`]:
//!
//! 1. **verify**: zyntax's HIR verifier, for the module's declared targets plus
//!    the requested arch (so arch gating is checked for what we emit); only an
//!    accepted module is lowered;
//! 2. **lower**: [`lower::lower_module`] builds LLVM IR (see `docs/lowering.md`);
//! 3. **llvm_verify**: LLVM's module verifier; a failure is a
//!    [`CompileError::LlvmVerify`] (a zyntax bug), never an abort;
//! 4. **optimize**: LLVM's `default<On>` pipeline for the effective level;
//! 5. **codegen**: the NVPTX target machine prints PTX.
//!
//! Output is deterministic: the same module and options give byte-identical PTX.
//!
//! Feature gating: the GPU half of this crate (the HIR → NVPTX lowering in
//! `lower`, the `nvptx` target, `compile_ptx`, `emit_llvm`, `ptxas`) is
//! compiled only with the `compute` feature, which is also what makes
//! `build.rs` link LLVM's NVPTX code generator. Without it the crate is the
//! CPU backend ([`host`]) alone; [`HAS_NVPTX`] says which build this is.

pub mod error;
pub mod host;
#[cfg(feature = "compute")]
pub mod lower;
#[cfg(feature = "compute")]
pub mod nvptx;
pub mod scalar;

pub use error::{CompileError, CompileResult};
#[cfg(feature = "compute")]
pub use nvptx::{KernelResources, PtxTarget, Ptxas, PtxasError, PtxasOutput, PtxasRelease};

#[cfg(feature = "compute")]
use inkwell::context::Context;
#[cfg(feature = "compute")]
use inkwell::passes::PassBuilderOptions;
#[cfg(feature = "compute")]
use inkwell::OptimizationLevel;
#[cfg(feature = "compute")]
use std::time::{Duration, Instant};
#[cfg(feature = "compute")]
use zyntax_hir::{Arch, Module, OptLevel, PtxVersion};

/// Whether this build carries the NVPTX backend (the `compute` feature).
pub const HAS_NVPTX: bool = cfg!(feature = "compute");

#[cfg(feature = "compute")]
/// What to compile for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Options {
    pub arch: Arch,
    /// PTX ISA version; default: the module's `ptx(...)`, else [`Arch::default_ptx`].
    pub ptx_version: Option<PtxVersion>,
    /// Optimization level for the whole module; default: the functions' own
    /// `opt_level` when they agree, else O3. Functions marked O0 keep `optnone`.
    pub opt_level: Option<OptLevel>,
    /// `.file`/`.loc` directives from the instructions' source locations
    /// (`nvcc -lineinfo`'s line tables, no other debug information); off by
    /// default, so that PTX does not depend on where the source lives.
    pub line_info: bool,
    /// An LLVM new-pass-manager pipeline (the text of `opt -passes=`) run
    /// instead of the level's `default<On>`; the code generator keeps the
    /// level. For comparing pipelines on the same module (benches/tiling.py);
    /// a pipeline LLVM does not parse is a [`CompileError::Internal`].
    pub passes: Option<String>,
    /// Print the optimized module into [`CompileOutput::llvm_ir`] (default);
    /// `false` leaves it empty, for callers that want only the PTX: the
    /// printing is 10-15 % of the LLVM time of an unrolled tile kernel (the
    /// bf16 4096^3 nest's 128-float structs print long lines).
    pub llvm_ir: bool,
}

#[cfg(feature = "compute")]
impl Options {
    pub fn new(arch: Arch) -> Options {
        Options {
            arch,
            ptx_version: None,
            opt_level: None,
            line_info: false,
            passes: None,
            llvm_ir: true,
        }
    }
    pub fn with_llvm_ir(mut self, on: bool) -> Options {
        self.llvm_ir = on;
        self
    }
    pub fn with_passes(mut self, passes: impl Into<String>) -> Options {
        self.passes = Some(passes.into());
        self
    }
    pub fn with_line_info(mut self, on: bool) -> Options {
        self.line_info = on;
        self
    }
    pub fn with_opt_level(mut self, level: OptLevel) -> Options {
        self.opt_level = Some(level);
        self
    }
    pub fn with_ptx_version(mut self, ptx: PtxVersion) -> Options {
        self.ptx_version = Some(ptx);
        self
    }
}

#[cfg(feature = "compute")]
/// Wall-clock time per stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    pub verify: Duration,
    /// Target machine and LLVM context creation, then the HIR → LLVM lowering.
    pub lower: Duration,
    pub llvm_verify: Duration,
    pub optimize: Duration,
    /// Printing the optimized IR into `llvm_ir` (before code generation,
    /// whose IR passes change the module); zero with `Options::llvm_ir` off.
    pub print_ir: Duration,
    /// NVPTX code generation: PTX emission.
    pub codegen: Duration,
}

#[cfg(feature = "compute")]
impl Timings {
    pub fn total(&self) -> Duration {
        self.stages().iter().map(|(_, d)| *d).sum()
    }
    /// `(stage name, duration)` in pipeline order.
    pub fn stages(&self) -> [(&'static str, Duration); 6] {
        [
            ("verify", self.verify),
            ("lower", self.lower),
            ("llvm_verify", self.llvm_verify),
            ("optimize", self.optimize),
            ("print_ir", self.print_ir),
            ("codegen", self.codegen),
        ]
    }
}

#[cfg(feature = "compute")]
/// The result of [`compile_ptx`].
#[derive(Clone, Debug)]
pub struct CompileOutput {
    /// PTX assembly text.
    pub ptx: String,
    /// The LLVM IR that went into code generation (after optimization).
    pub llvm_ir: String,
    pub arch: Arch,
    pub ptx_version: PtxVersion,
    /// Kernel entry points in the PTX, in module order.
    pub kernels: Vec<String>,
    pub timings: Timings,
}

#[cfg(feature = "compute")]
/// The PTX version a compile uses: the option, else the module's, else the arch default.
fn ptx_version(m: &Module, opts: &Options) -> PtxVersion {
    opts.ptx_version
        .or(m.ptx_version)
        .unwrap_or_else(|| opts.arch.default_ptx())
}

#[cfg(feature = "compute")]
/// The resolved target and optimization level of a compile.
fn resolve(m: &Module, opts: &Options) -> CompileResult<(PtxTarget, OptLevel)> {
    let arch = opts.arch;
    let ptx = ptx_version(m, opts);
    if ptx < zyntax_hir::arch::min_ptx(arch) || !zyntax_hir::arch::ptx_supported(ptx) {
        return Err(CompileError::Unsupported(format!(
            "PTX {ptx} cannot target {arch}: LLVM 19 emits PTX 6.0-6.5, 7.0-7.8 and 8.0-8.5, \
             and {arch} needs at least PTX {}",
            zyntax_hir::arch::min_ptx(arch)
        )));
    }
    let target = PtxTarget::with_ptx(arch, ptx);
    let level = match opts.opt_level {
        Some(l) => l,
        None => {
            let mut levels = lower::selected_functions(m, &target).map(|f| f.constraints.opt_level);
            match levels.next() {
                Some(first) if levels.all(|l| l == first) => first,
                _ => OptLevel::O3,
            }
        }
    };
    Ok((target, level))
}

/// The GPU pipeline of O1, for kernels that arrive blocked, unrolled and
/// scheduled (tile programs, the nests lowered to them): the thread and
/// block index ranges (`nvvm-intr-range`, which LLVM's default pipelines get
/// from the NVPTX target; without it a wide softmax row kernel spilled 108
/// bytes), scalar replacement, CSE, one InstCombine, CFG cleanup, loop
/// invariants hoisted (without `licm` ptxas spilled on the f32 FFMA nest)
/// and alignment inferred (without it the code generator's load/store
/// vectorizer left two thirds of the 16-byte accesses scalar). Over the
/// library corpus of `benches/llvm_pipelines.py --static` it costs half of
/// `default<O3>`'s CPU time with no spill and as many 16-byte accesses
/// (docs/lowering.md). The code generator runs at LLVM's `Default` level
/// (O3's is `Aggressive`). The CPU
/// backend's O1 stays `default<O1>`.
#[cfg(feature = "compute")]
pub const KERNEL_PIPELINE: &str = "function(nvvm-intr-range,sroa,early-cse,\
     instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(licm),infer-alignment)";

#[cfg(feature = "compute")]
fn pipeline(level: OptLevel) -> (&'static str, OptimizationLevel) {
    match level {
        OptLevel::O0 => ("default<O0>", OptimizationLevel::None),
        // The code generator one level down from O3's: NVPTX's IR passes then
        // clean up with EarlyCSE where Aggressive runs GVN twice (the costly
        // difference); ptxas optimises the PTX again anyway.
        // Same PTX, to the byte, for the nests and the library's WS matmul;
        // codegen of the f32 nest a third shorter (docs/lowering.md).
        OptLevel::O1 => (KERNEL_PIPELINE, OptimizationLevel::Default),
        OptLevel::O2 => ("default<O2>", OptimizationLevel::Default),
        OptLevel::Os => ("default<Os>", OptimizationLevel::Aggressive),
        OptLevel::O3 | OptLevel::Olatency => ("default<O3>", OptimizationLevel::Aggressive),
    }
}

#[cfg(feature = "compute")]
/// Run zyntax's verifier on the module, then its arch gating for the arch
/// and PTX version being compiled (which need not be a declared target).
fn verify_for(m: &Module, opts: &Options) -> CompileResult<()> {
    zyntax_hir::verify_module(m)?;
    if opts.ptx_version.is_some_and(|p| Some(p) != m.ptx_version) {
        let mut copy = m.clone();
        copy.ptx_version = opts.ptx_version;
        zyntax_hir::arch::check_arch(&copy, opts.arch)?;
    } else {
        zyntax_hir::arch::check_arch(m, opts.arch)?;
    }
    Ok(())
}

/// LLVM's module verifier as a [`CompileError::LlvmVerify`] (never an abort).
pub fn verify_llvm(
    module: &inkwell::module::Module<'_>,
    name: &str,
    context: &str,
) -> CompileResult<()> {
    module.verify().map_err(|e| CompileError::LlvmVerify {
        module: name.to_string(),
        message: format!("{context}{}", e.to_string_lossy()),
    })
}

/// A module with a basic block of more LLVM instructions than this is
/// optimized with `default<O1>`: the SLP vectorizer of the higher levels
/// spends time quadratic in a block's length on memory operations that may
/// alias (straight-line load-add-store code: 41.6 s for 2,000 groups, 175 s
/// for 4,000; see docs/performance.md). Code generation keeps its level.
#[cfg(feature = "compute")]
pub const SLP_MAX_BLOCK_INSTS: usize = 4096;

/// Instructions in the largest basic block of the module.
#[cfg(feature = "compute")]
fn largest_block(module: &inkwell::module::Module<'_>) -> usize {
    module
        .get_functions()
        .flat_map(|f| f.get_basic_blocks())
        .map(|b| b.get_instructions().count())
        .max()
        .unwrap_or(0)
}

#[cfg(feature = "compute")]
struct Compiled {
    llvm_ir: String,
    ptx: Option<String>,
    target: PtxTarget,
    timings: Timings,
}

#[cfg(feature = "compute")]
fn compile_inner(m: &Module, opts: &Options, emit_ptx: bool) -> CompileResult<Compiled> {
    let mut timings = Timings::default();
    let t = Instant::now();
    verify_for(m, opts)?;
    timings.verify = t.elapsed();

    let t = Instant::now();
    let (target, level) = resolve(m, opts)?;
    let (passes, cg_level) = pipeline(level);
    let tm = target.machine(cg_level)?;
    let ctx = Context::create();
    let setup = t.elapsed();

    let t = Instant::now();
    let module = lower::lower_module(&ctx, m, &target, &tm, opts.line_info)?;
    timings.lower = setup + t.elapsed();

    let t = Instant::now();
    verify_llvm(&module, &m.name, "")?;
    timings.llvm_verify = t.elapsed();

    let t = Instant::now();
    // LLVM's SLP vectorizer (in `default<O2>`, `<O3>` and `<Os>`) is
    // quadratic in the length of a basic block; `default<O1>` has none.
    let passes = if let Some(p) = &opts.passes {
        p.as_str()
    } else if !matches!(level, OptLevel::O0 | OptLevel::O1)
        && largest_block(&module) > SLP_MAX_BLOCK_INSTS
    {
        "default<O1>"
    } else {
        passes
    };
    module
        .run_passes(passes, &tm, PassBuilderOptions::create())
        .map_err(|e| {
            let e = e.to_string_lossy().into_owned();
            match &opts.passes {
                // the caller's text: a bad request, not a zyntax bug
                Some(p) => CompileError::Unsupported(format!("LLVM pass pipeline {p:?}: {e}")),
                None => CompileError::internal("optimizer", e),
            }
        })?;
    verify_llvm(&module, &m.name, "after optimization: ")?;
    timings.optimize = t.elapsed();

    let t = Instant::now();
    let llvm_ir = if opts.llvm_ir || !emit_ptx {
        module.print_to_string().to_string_lossy().into_owned()
    } else {
        String::new()
    };
    timings.print_ir = t.elapsed();

    let t = Instant::now();
    // Code generation runs even when only the IR is wanted: LLVM 19's NVPTX
    // keeps the `nvvm.annotations` it has read (max threads, kernel-ness) in
    // a process-wide cache keyed by the module's address, which only the PTX
    // printer clears. A module dropped without it left its launch bounds to
    // the next module allocated at the same address: `.maxntid` and tid
    // ranges of another kernel, and code folded by them.
    let ptx = nvptx::emit_assembly(&tm, &module)?;
    let ptx = emit_ptx.then(|| nvptx::annotations::add_cluster_directives(ptx, m));
    timings.codegen = t.elapsed();
    Ok(Compiled {
        llvm_ir,
        ptx,
        target,
        timings,
    })
}

#[cfg(feature = "compute")]
/// Compile a module to PTX for `opts.arch`.
pub fn compile_ptx(m: &Module, opts: &Options) -> CompileResult<CompileOutput> {
    let c = compile_inner(m, opts, true)?;
    let target = c.target;
    let kernels = lower::selected_functions(m, &target)
        .filter(|f| f.is_kernel())
        .map(|f| f.name.clone())
        .collect();
    Ok(CompileOutput {
        ptx: c.ptx.unwrap_or_default(),
        llvm_ir: c.llvm_ir,
        arch: target.arch,
        ptx_version: target.ptx,
        kernels,
        timings: c.timings,
    })
}

#[cfg(feature = "compute")]
/// The module's LLVM IR for `opts.arch`, after the optimization pipeline
/// (use `opt_level: Some(O0)` to see the direct lowering).
pub fn emit_llvm(m: &Module, opts: &Options) -> CompileResult<String> {
    Ok(compile_inner(m, opts, false)?.llvm_ir)
}

#[cfg(feature = "compute")]
/// Compile and check the PTX with `ptxas -Werror` for the same arch.
pub fn compile_and_validate(
    m: &Module,
    opts: &Options,
    ptxas: &Ptxas,
) -> CompileResult<(CompileOutput, PtxasOutput)> {
    let out = compile_ptx(m, opts)?;
    let cubin = ptxas.assemble(&out.ptx, out.arch)?;
    Ok((out, cubin))
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;

    /// Broken IR (a block without a terminator) is reported, not aborted on.
    #[test]
    fn llvm_verifier_failure_is_an_internal_error() {
        let ctx = Context::create();
        let module = ctx.create_module("broken");
        let f = module.add_function("f", ctx.void_type().fn_type(&[], false), None);
        ctx.append_basic_block(f, "entry");
        let err = verify_llvm(&module, "broken", "").unwrap_err();
        assert!(err.is_internal());
        let text = err.to_string();
        assert!(
            text.contains("internal compiler error") && text.contains("broken"),
            "{text}"
        );
        assert!(
            text.contains("terminator") || text.contains("well formed"),
            "{text}"
        );
    }

    #[cfg(feature = "compute")]
    #[test]
    fn pipeline_levels() {
        assert_eq!(pipeline(OptLevel::O0).0, "default<O0>");
        assert_eq!(pipeline(OptLevel::Olatency).0, "default<O3>");
        assert_eq!(pipeline(OptLevel::Os).0, "default<Os>");
        assert_eq!(pipeline(OptLevel::O1).0, KERNEL_PIPELINE);
        // O1's code generator one level below O3's (no GVN in NVPTX's IR passes)
        assert_eq!(pipeline(OptLevel::O1).1, OptimizationLevel::Default);
        assert_eq!(pipeline(OptLevel::O3).1, OptimizationLevel::Aggressive);
    }
}
