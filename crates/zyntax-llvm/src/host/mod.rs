//! The CPU backend: HIR host functions (and kernels, barriers included: see
//! [`regions`]) to native
//! code for this machine through LLVM, driven by the critical-path optimizer
//! (`zyntax-opt`).
//!
//! ```no_run
//! use zyntax_hir::*;
//! use zyntax_llvm::host::{self, Arg, HostOptions, Scalar};
//! let mut b = FunctionBuilder::host("axpy1", &[Type::F64, Type::F64, Type::F64], &[Type::F64]);
//! let (a, x, y) = (b.param(0), b.param(1), b.param(2));
//! let r = b.fma(a, x, y).unwrap();
//! b.ret(&[r]).unwrap();
//! let mut m = Module::new("demo");
//! m.functions.push(b.finish().unwrap());
//! let jit = host::jit(&m, &HostOptions::default()).unwrap();
//! let out = jit.call("axpy1", &mut [Arg::Scalar(Scalar::Float(2.0)), Arg::Scalar(Scalar::Float(3.0)), Arg::Scalar(Scalar::Float(1.0))]).unwrap();
//! assert_eq!(out, vec![Scalar::Float(7.0)]);
//! ```
//!
//! Pipeline ([`prepare`]): HIR verifier → `zyntax_opt::optimize` (constraint
//! proofs, inlining, DCE, plans) → [`lower`] (textual LLVM IR with the
//! plan's attributes, loop metadata, prefetches and bounds checks) → LLVM
//! parse + verify → `default<Ox>` (+ the latency pipeline for `Olatency`) with
//! a target machine for the host CPU → MCJIT ([`jit`]) or an object / shared
//! library ([`emit`]).
//!
//! CPU features: [`CpuTarget::detect`] asks LLVM for the host CPU name and
//! features; `HostOptions::cpu`/`features` or the environment variables
//! `ZYNTAX_CPU` / `ZYNTAX_CPU_FEATURES` override them (for AOT to another
//! machine, or `generic` for portable code).

pub mod fission;
pub mod interchange;
pub mod lower;
pub mod mode;
mod pool;
pub mod regions;
pub mod target;
pub mod warp;

use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use zyntax_hir::{Function, FunctionKind, Module, OptLevel, ScalarType, Type, VerifyError};
use zyntax_opt::{ConstraintError, Report};

/// Errors of the CPU backend.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The HIR verifier rejected the module.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// A function's constraints cannot be met (names the function and the reason).
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    /// Something the CPU backend cannot compile.
    #[error("in @{function}: {message}")]
    Unsupported { function: String, message: String },
    /// An LLVM failure on IR we generated: a zyntax bug.
    #[error("internal compiler error in {stage}: {message}\n(this is a bug in zyntax; please report it with the .zir input)")]
    Internal {
        stage: &'static str,
        message: String,
    },
    /// Wrong arguments for a call (Python maps this to `TypeError`).
    #[error("{0}")]
    Argument(String),
    /// No such function in the compiled module.
    #[error("no function @{0} in the compiled module")]
    NotFound(String),
    /// The generated code reported a run-time error (bounds, division by zero).
    #[error(transparent)]
    Runtime(Box<RuntimeError>),
    /// An unknown or ABI-breaking CPU name or feature (see [`target`]).
    #[error("{0}")]
    Target(String),
    /// Running the system linker for a shared library failed.
    #[error("linking the shared library failed: {0}")]
    Link(String),
}

pub type HostResult<T> = Result<T, HostError>;

fn internal(stage: &'static str, m: impl Into<String>) -> HostError {
    HostError::Internal {
        stage,
        message: m.into(),
    }
}

impl From<RuntimeError> for HostError {
    fn from(e: RuntimeError) -> HostError {
        HostError::Runtime(Box::new(e))
    }
}

/// A run-time error reported by checked generated code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RuntimeError {
    /// The function that was called.
    pub entry: String,
    /// The function the failing instruction is in (after inlining).
    pub function: String,
    pub code: i64,
    /// Element index of an out-of-bounds access.
    pub index: Option<i64>,
    /// Parameter number of the accessed array, if it is a parameter.
    pub param: Option<i64>,
    pub len: Option<i64>,
    pub message: String,
}

/// The error record the generated code fills (see [`lower`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrRecord {
    pub code: i64,
    pub param: i64,
    pub index: i64,
    pub len: i64,
    pub inst: i64,
    pub func: i64,
    /// Input: the lowest stack address at which a recursive function may
    /// start; below it the call fails with [`lower::ERR_STACK`] instead of
    /// running into the guard page. 0 disables the check.
    pub stack_limit: i64,
}

impl ErrRecord {
    /// A clear record whose stack limit is this thread's (see [`stack_limit`]).
    pub fn new() -> ErrRecord {
        ErrRecord {
            stack_limit: stack_limit(),
            ..ErrRecord::default()
        }
    }
}

/// The stack limit for recursive generated code on the calling thread: its
/// stack's lowest address plus a margin, so that the frame of one more call
/// (up to the verifier's 512 KiB of allocas plus spills) and the
/// non-recursive callees below it still fit above the guard page. The
/// margin is 1 MiB, or half the stack on threads with less than 2 MiB.
/// Computed once per thread; 0 (unchecked) if the stack is unknown.
pub fn stack_limit() -> i64 {
    use std::cell::Cell;
    thread_local!(static LIMIT: Cell<Option<i64>> = const { Cell::new(None) });
    LIMIT.with(|l| {
        *l.get().get_or_insert_with(|| {
            let v = thread_stack()
                .map(|(low, size)| low.saturating_add((size / 2).min(1 << 20)))
                .and_then(|a| i64::try_from(a).ok())
                .unwrap_or(0);
            l.set(Some(v));
            v
        })
    })
}

/// Lowest address and size of the calling thread's stack.
fn thread_stack() -> Option<(usize, usize)> {
    // SAFETY: the attribute object is initialised by pthread_getattr_np and
    // destroyed once; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0 && !addr.is_null() && size > 0).then_some((addr as usize, size))
    }
}

/// The most threads a block may have (the GPU's and the interpreter's limit;
/// the block runners count threads in `i32`).
pub const MAX_BLOCK_THREADS: u64 = 1024;

/// Worker threads a CPU kernel launch uses: `ZYNTAX_CPU_THREADS` when it is
/// a positive integer (1: run the grid on the calling thread), otherwise
/// every core (`std::thread::available_parallelism`).
pub fn cpu_threads() -> usize {
    std::env::var("ZYNTAX_CPU_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The host CPU as LLVM sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTarget {
    pub triple: String,
    pub cpu: String,
    pub features: String,
}

static INIT: Once = Once::new();

/// LLVM diagnostics (optimization remarks, warnings) collected for the report
/// instead of being printed on stderr.
#[derive(Default)]
struct Diags(Mutex<Vec<String>>);

extern "C" fn on_diagnostic(
    di: llvm_sys::prelude::LLVMDiagnosticInfoRef,
    ctx: *mut std::ffi::c_void,
) {
    if ctx.is_null() || di.is_null() {
        return;
    }
    // SAFETY: ctx is the `Diags` installed by `with_diagnostics`, alive until it uninstalls the handler.
    let d = unsafe { &*(ctx as *const Diags) };
    // SAFETY: di is valid for the duration of the callback; the message is ours to dispose.
    let p = unsafe { llvm_sys::core::LLVMGetDiagInfoDescription(di) };
    if p.is_null() {
        return;
    }
    let s = unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .replace("<unknown>:0:0: ", "");
    // SAFETY: as above.
    let severity = unsafe { llvm_sys::core::LLVMGetDiagInfoSeverity(di) };
    // Keep warnings, errors and the vectorizer's verdicts; drop the flood of
    // other remarks (instruction counts, SLP costs) the handler also receives.
    let keep = !matches!(
        severity,
        llvm_sys::LLVMDiagnosticSeverity::LLVMDSRemark
            | llvm_sys::LLVMDiagnosticSeverity::LLVMDSNote
    ) || s.contains("not vectorized")
        || s.contains("vectorized loop");
    // SAFETY: the message came from LLVMGetDiagInfoDescription.
    unsafe { llvm_sys::core::LLVMDisposeMessage(p) };
    if !keep {
        return;
    }
    if let Ok(mut v) = d.0.lock() {
        if v.len() < 32 && !v.contains(&s) {
            v.push(s);
        }
    }
}

/// Run `f` with LLVM diagnostics of `ctx` captured; returns them with f's result.
fn with_diagnostics<T>(ctx: &Context, f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let d = Box::new(Diags::default());
    let raw = ctx.raw();
    // SAFETY: the handler and its context pointer are removed before `d` is dropped.
    unsafe {
        llvm_sys::core::LLVMContextSetDiagnosticHandler(
            raw,
            Some(on_diagnostic),
            (&*d as *const Diags).cast_mut().cast(),
        )
    };
    let out = f();
    unsafe { llvm_sys::core::LLVMContextSetDiagnosticHandler(raw, None, std::ptr::null_mut()) };
    let notes = d.0.lock().map(|v| v.clone()).unwrap_or_default();
    (out, notes)
}

/// Register the native target and MCJIT, and align innermost loop headers to
/// 64 bytes. LLVM has no IR attribute for loop alignment and `-align-loops`
/// belongs to llc's flags, not the library; the X86 backend's
/// `x86-experimental-pref-innermost-loop-alignment` is the knob the library
/// reads. It is process-wide and only affects x86 code generation.
pub fn initialize() -> HostResult<()> {
    let mut res = Ok(());
    INIT.call_once(|| {
        if let Err(e) = Target::initialize_native(&InitializationConfig::default()) {
            res = Err(internal("native target", e));
            return;
        }
        let args = [
            c"zyntax".as_ptr(),
            c"-x86-experimental-pref-innermost-loop-alignment=6".as_ptr(),
        ];
        // SAFETY: two valid NUL-terminated strings; called once, before any codegen of ours.
        unsafe {
            llvm_sys::support::LLVMParseCommandLineOptions(2, args.as_ptr(), std::ptr::null())
        };
    });
    res
}

impl CpuTarget {
    /// The host CPU name and features from LLVM, overridden by `ZYNTAX_CPU` /
    /// `ZYNTAX_CPU_FEATURES` when set.
    pub fn detect() -> CpuTarget {
        let cpu = std::env::var("ZYNTAX_CPU")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| {
                TargetMachine::get_host_cpu_name()
                    .to_string_lossy()
                    .into_owned()
            });
        let features = std::env::var("ZYNTAX_CPU_FEATURES")
            .ok()
            .unwrap_or_else(|| {
                TargetMachine::get_host_cpu_features()
                    .to_string_lossy()
                    .into_owned()
            });
        CpuTarget {
            triple: TargetMachine::get_default_triple()
                .as_str()
                .to_string_lossy()
                .into_owned(),
            cpu,
            features,
        }
    }
}

/// Options of the CPU backend.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostOptions {
    /// LLVM CPU name (default: the host's, e.g. `znver3`; `generic` for portable code).
    pub cpu: Option<String>,
    /// LLVM feature string (default: the host's, e.g. `+avx2,+fma,...`).
    pub features: Option<String>,
    /// Replace every function's `opt_level`.
    pub opt_level: Option<OptLevel>,
    /// Kernels to run on the interpreter even if the CPU could run them.
    pub force_interp: Vec<String>,
    /// Run the threads of a block as SIMD lanes (`regions::fast_runner`) in
    /// every kernel; `None`: `ZYNTAX_CPU_VECTOR=0|1` in the environment, else
    /// chosen per kernel (`mode::choose`: with AVX-512, where no region of the
    /// kernel holds a loop; on the AMD EPYC with AVX2 it was slower:
    /// `vmaskmov` stores, see docs/cpu.md).
    pub vector_threads: Option<bool>,
    /// Run the rows of threads of an interchanged loop as SIMD lanes
    /// (`fission::Plan::affine`) in every kernel; `None`:
    /// `ZYNTAX_CPU_AFFINE=0|1` in the environment, else chosen per kernel
    /// (`mode::choose`: with AVX-512, for an interchanged loop without
    /// atomics).
    pub affine_rows: Option<bool>,
    /// Iterations of an interchanged loop a thread runs before it stops at
    /// the loop's header (`fission::iterations`); `None`:
    /// `ZYNTAX_CPU_ITERS=K`, else 8 (`mode::ROW_ITERS` for rows).
    pub iterations: Option<u32>,
    /// Interchange row walks too (`interchange::headers_with`), as rows of
    /// SIMD lanes; `None`: `ZYNTAX_CPU_WALKS=0|1`, else `mode::ROW_WALKS`
    /// with AVX-512.
    pub row_walks: Option<bool>,
}

impl HostOptions {
    pub fn target(&self) -> CpuTarget {
        let mut t = CpuTarget::detect();
        if let Some(c) = &self.cpu {
            t.cpu = c.clone();
            if self.features.is_none() && c != &t.cpu {
                t.features = String::new();
            }
        }
        if let Some(f) = &self.features {
            t.features = f.clone();
        }
        t
    }
}

/// What a compiled function is on the CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostFnKind {
    Host,
    /// A kernel compiled to run its grid in parallel over blocks.
    CpuKernel,
    /// A kernel the CPU cannot run (it needs threads of a block together):
    /// the listed ops; callers fall back to the interpreter.
    InterpKernel(Vec<String>),
    Device,
}

/// One function of a compiled module.
#[derive(Clone, Debug)]
pub struct HostFunction {
    pub name: String,
    pub kind: HostFnKind,
    pub params: Vec<Type>,
    pub returns: Vec<Type>,
    /// Bounds checks emitted / accesses through pointers of unknown origin.
    pub checks: usize,
    pub unchecked: usize,
    addr: usize,
    slots: usize,
    block: usize,
}

impl HostFunction {
    /// `@name(f32, ptr<global, f32>) -> f32`
    pub fn signature(&self) -> String {
        let p: Vec<String> = self.params.iter().map(|t| t.to_string()).collect();
        let r: Vec<String> = self.returns.iter().map(|t| t.to_string()).collect();
        let ret = match r.len() {
            0 => String::new(),
            1 => format!(" -> {}", r[0]),
            _ => format!(" -> ({})", r.join(", ")),
        };
        format!("@{}({}){ret}", self.name, p.join(", "))
    }
    /// Address of the native entry with the lowered ABI (see [`lower`]); 0 if not compiled.
    pub fn address(&self) -> usize {
        self.addr
    }
    pub fn slots_address(&self) -> usize {
        self.slots
    }
}

/// The result of verification, optimization and lowering.
pub struct Prepared {
    pub module: Module,
    pub report: Report,
    pub ir: String,
    pub target: CpuTarget,
    pub functions: Vec<HostFunction>,
    pub shared_bytes: u64,
    pub base_pipeline: String,
    pub latency_pipeline: Option<&'static str>,
}

/// Verify, optimize and lower `m` to LLVM IR text for the CPU.
pub fn prepare(m: &Module, opts: &HostOptions) -> HostResult<Prepared> {
    zyntax_hir::verify_module(m)?;
    let mut src = m.clone();
    if let Some(l) = opts.opt_level {
        for f in &mut src.functions {
            f.constraints.opt_level = l;
        }
    }
    // Before the optimizer: its plans and DCE then see the kernels as lowered.
    let inlined = regions::inline_suspending(&mut src);
    let opt = zyntax_opt::optimize(&src)?;
    let mut report = opt.report;
    for (k, c) in &inlined {
        report.add(
            k,
            "inline",
            format!("inlined call to @{c} for the CPU"),
            "the callee reaches a barrier or warp collective: only the kernel itself is a coroutine that can suspend",
        );
    }
    let module = opt.module;
    let plans = opt.plans;
    let target = opts.target();
    target::validate(&target)?;
    // Forced runner settings (options, then the environment); the rest is
    // chosen per kernel (`mode::choose`).
    let forced = mode::Forced::new(opts, &target.features);
    let mut cpu_kernels = BTreeSet::new();
    let mut kinds = Vec::new();
    for f in &module.functions {
        let kind = match &f.kind {
            FunctionKind::Host => HostFnKind::Host,
            FunctionKind::Device => HostFnKind::Device,
            FunctionKind::Kernel(_) => {
                let mut blockers = regions::cpu_blockers(&module, f);
                if opts.force_interp.contains(&f.name) {
                    blockers.push("forced by options".into());
                }
                if blockers.is_empty() {
                    cpu_kernels.insert(f.name.clone());
                    let mode = mode::choose(f, &forced);
                    let hs = &mode.headers;
                    let split = fission::applies(f, hs);
                    if !hs.is_empty() && split {
                        let names: Vec<String> = hs.iter().map(|b| b.to_string()).collect();
                        report.add(&f.name, "interchange", format!("loop(s) at {} interchanged with the thread loop: each iteration runs for every thread of the block in turn (a virtual barrier at the loop's header), so consecutive threads touch consecutive addresses and the thread loop is the innermost loop", names.join(", ")), "the loop's address steps by one element from thread x to x + 1, and it has no atomics, calls, barriers or inner loops (see host/interchange.rs)");
                    }
                    if split || !regions::has_suspend(f) {
                        // (Coroutine kernels have one form: no mode to report.)
                        report.add(&f.name, "mode", mode.to_string(), "chosen per kernel from its loops, atomics and the target's AVX-512 unless forced (see host/mode.rs)");
                    }
                    if split {
                        report.add(&f.name, "kernel", "compiled for the CPU: blocks run in parallel on worker threads; each barrier splits the block's threads into regions (region fission: each region is a loop over the block's threads, values live across a barrier kept in per-thread arrays)", "barriers only, in the kernel itself; no warp collectives or allocas (those keep the coroutine lowering)");
                    } else if regions::has_suspend(f) {
                        report.add(&f.name, "kernel", "compiled for the CPU: blocks run in parallel on worker threads; each barrier splits the block's threads into regions run one after another, each shuffle or vote those of a warp (threads are LLVM coroutines, values live across a suspend in per-thread frames)", "barriers, shuffles and votes only in the kernel itself; no other warp collectives, MMA or async copies");
                    } else {
                        report.add(&f.name, "kernel", "compiled for the CPU: blocks run in parallel on worker threads, threads of a block in sequence", "no barriers, warp collectives, MMA or async copies");
                    }
                    HostFnKind::CpuKernel
                } else {
                    report.add(
                        &f.name,
                        "kernel",
                        "left to the interpreter",
                        format!(
                            "uses {}, which need the threads of a block to run together",
                            blockers.join(", ")
                        ),
                    );
                    HostFnKind::InterpKernel(blockers)
                }
            }
        };
        kinds.push(kind);
    }
    let mut mi = lower::ModuleInfo::new(&module, &plans, &target.cpu, &target.features);
    mi.forced = forced;
    initialize()?;
    let tm = machine(&target, RelocMode::PIC)?;
    let dl = tm
        .get_target_data()
        .get_data_layout()
        .as_str()
        .to_string_lossy()
        .into_owned();
    let (ir, lowered) = lower::lower_module(&mi, &plans, &target.triple, &dl, &cpu_kernels)
        .map_err(|e| HostError::Unsupported {
            function: e.function,
            message: e.message,
        })?;
    let shared_bytes = mi.shared_bytes;
    drop(mi);
    let (base, latency) = lower::pipeline_for(&plans);
    let mut functions = Vec::new();
    for (f, kind) in module.functions.iter().zip(kinds) {
        let lf = lowered.iter().find(|l| l.name == f.name);
        if let Some(lf) = lf {
            if lf.checks + lf.unchecked > 0 {
                report.add(&f.name, "bounds", format!("{} access(es) checked, {} unchecked", lf.checks, lf.unchecked), if lf.unchecked > 0 { "unchecked accesses go through pointers loaded from memory or returned by calls (unknown length)" } else { "every access goes through a parameter, alloca or shared array of known length" });
            }
        }
        functions.push(HostFunction {
            name: f.name.clone(),
            kind,
            params: f.param_types(),
            returns: f.returns.clone(),
            checks: lf.map_or(0, |l| l.checks),
            unchecked: lf.map_or(0, |l| l.unchecked),
            addr: 0,
            slots: 0,
            block: 0,
        });
    }
    for f in &module.functions {
        report.add(&f.name, "target", format!("cpu {} ({} features), pipeline {}{}", target.cpu, target.features.split(',').filter(|s| s.starts_with('+')).count(), base, latency.map(|_| " + latency pipeline").unwrap_or("")), "host CPU detected by LLVM at compile time (override with cpu/features options or ZYNTAX_CPU/ZYNTAX_CPU_FEATURES)");
    }
    Ok(Prepared {
        module,
        report,
        ir,
        target,
        functions,
        shared_bytes,
        base_pipeline: base,
        latency_pipeline: latency,
    })
}

fn machine(t: &CpuTarget, reloc: RelocMode) -> HostResult<TargetMachine> {
    target::validate(t)?;
    let triple = TargetTriple::create(&t.triple);
    let target = Target::from_triple(&triple)
        .map_err(|e| internal("host target lookup", e.to_string_lossy()))?;
    target
        .create_target_machine(
            &triple,
            &t.cpu,
            &t.features,
            OptimizationLevel::Aggressive,
            reloc,
            CodeModel::Default,
        )
        .ok_or_else(|| HostError::Unsupported {
            function: String::new(),
            message: format!(
                "LLVM refused CPU `{}` with features `{}`",
                t.cpu, t.features
            ),
        })
}

/// Parse, verify and optimize the prepared IR in `ctx`.
fn build_llvm<'c>(
    ctx: &'c Context,
    p: &Prepared,
    tm: &TargetMachine,
) -> HostResult<inkwell::module::Module<'c>> {
    let buf = MemoryBuffer::create_from_memory_range_copy(p.ir.as_bytes(), &p.module.name);
    let module = ctx
        .create_module_from_ir(buf)
        .map_err(|e| internal("LLVM IR parse", e.to_string_lossy()))?;
    module
        .verify()
        .map_err(|e| internal("LLVM verify", e.to_string_lossy()))?;
    module
        .run_passes(&p.base_pipeline, tm, PassBuilderOptions::create())
        .map_err(|e| internal("optimizer", e.to_string_lossy()))?;
    if let Some(lat) = p.latency_pipeline {
        module
            .run_passes(lat, tm, PassBuilderOptions::create())
            .map_err(|e| internal("latency pipeline", e.to_string_lossy()))?;
    }
    module
        .verify()
        .map_err(|e| internal("LLVM verify after optimization", e.to_string_lossy()))?;
    Ok(module)
}

/// An artifact kind for [`emit`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Emit {
    /// Optimized LLVM IR text.
    LlvmIr,
    /// Native assembly text.
    Asm,
    /// A relocatable ELF object.
    Object,
    /// A shared library (`cc -shared`; `$CC` or `cc` must be installed).
    SharedLib,
}

/// AOT compilation for the `zyntax compile --backend llvm --emit ...` CLI.
pub struct Artifact {
    pub bytes: Vec<u8>,
    pub report: Report,
    pub target: CpuTarget,
    /// Exported symbols (`name` with the lowered ABI, `name.zx_slots`, `name.zx_block`).
    pub symbols: Vec<String>,
}

/// Compile `m` ahead of time. Exported symbols use the ABI described in [`lower`].
pub fn emit(m: &Module, opts: &HostOptions, what: Emit) -> HostResult<Artifact> {
    let mut p = prepare(m, opts)?;
    let tm = machine(&p.target, RelocMode::PIC)?;
    let ctx = Context::create();
    let (module, notes) = with_diagnostics(&ctx, || build_llvm(&ctx, &p, &tm));
    let module = module?;
    p.report.notes.extend(notes);
    let symbols = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .collect();
    let bytes = match what {
        Emit::LlvmIr => module.print_to_string().to_bytes().to_vec(),
        Emit::Asm | Emit::Object | Emit::SharedLib => {
            let ft = if what == Emit::Asm {
                FileType::Assembly
            } else {
                FileType::Object
            };
            let buf = tm
                .write_to_memory_buffer(&module, ft)
                .map_err(|e| internal("code generation", e.to_string_lossy()))?;
            buf.as_slice().to_vec()
        }
    };
    let bytes = if what == Emit::SharedLib {
        link_shared(&bytes)?
    } else {
        bytes
    };
    Ok(Artifact {
        bytes,
        report: p.report,
        target: p.target,
        symbols,
    })
}

fn link_shared(obj: &[u8]) -> HostResult<Vec<u8>> {
    let dir = tempfile::tempdir().map_err(|e| HostError::Link(e.to_string()))?;
    let o = dir.path().join("module.o");
    let so = dir.path().join("module.so");
    std::fs::write(&o, obj).map_err(|e| HostError::Link(e.to_string()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = std::process::Command::new(&cc)
        .arg("-shared")
        .arg("-o")
        .arg(&so)
        .arg(&o)
        .arg("-lm")
        .output()
        .map_err(|e| {
            HostError::Link(format!(
                "cannot run `{cc}` (set $CC to a C compiler/linker): {e}"
            ))
        })?;
    if !out.status.success() {
        return Err(HostError::Link(format!(
            "`{cc} -shared` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::read(&so).map_err(|e| HostError::Link(e.to_string()))
}

/// A module compiled in process (MCJIT). Function addresses stay valid while it lives.
pub struct HostModule {
    // Field order is drop order: the engine (and the module it owns) before the context.
    engine: Option<ExecutionEngine<'static>>,
    context: *mut Context,
    /// The optimized HIR that was lowered (function ids in error records refer to it).
    pub hir: Module,
    pub report: Report,
    pub target: CpuTarget,
    pub functions: Vec<HostFunction>,
    /// Optimized LLVM IR.
    pub llvm_ir: String,
    pub shared_bytes: u64,
}

// SAFETY: after construction the engine is never used again except to drop
// it; the generated code is immutable and reentrant (each call gets its own
// error record and slots), so calls may come from any thread.
unsafe impl Send for HostModule {}
unsafe impl Sync for HostModule {}

impl Drop for HostModule {
    fn drop(&mut self) {
        drop(self.engine.take());
        // SAFETY: `context` came from Box::into_raw in `jit`, and nothing borrows it any more.
        unsafe { drop(Box::from_raw(self.context)) };
    }
}

/// Compile `m` for this CPU and load it in process.
pub fn jit(m: &Module, opts: &HostOptions) -> HostResult<HostModule> {
    let p = prepare(m, opts)?;
    let tm = machine(&p.target, RelocMode::Default)?;
    let context: *mut Context = Box::into_raw(Box::new(Context::create()));
    // SAFETY: the context outlives the engine: HostModule drops the engine first.
    let ctx: &'static Context = unsafe { &*context };
    let mut hm = HostModule {
        engine: None,
        context,
        hir: p.module.clone(),
        report: p.report.clone(),
        target: p.target.clone(),
        functions: p.functions.clone(),
        llvm_ir: String::new(),
        shared_bytes: p.shared_bytes,
    };
    let (built, notes) = with_diagnostics(ctx, || -> HostResult<_> {
        let module = build_llvm(ctx, &p, &tm)?;
        let engine = module
            .create_jit_execution_engine(OptimizationLevel::Aggressive)
            .map_err(|e| internal("JIT", e.to_string_lossy()))?;
        // Machine code is generated on the first lookup: do it while diagnostics are captured.
        let mut addrs = Vec::new();
        for f in &p.functions {
            let look = |n: &str| {
                let defined = module
                    .get_function(n)
                    .is_some_and(|v| v.count_basic_blocks() > 0);
                if defined {
                    engine.get_function_address(n).unwrap_or(0)
                } else {
                    0
                }
            };
            addrs.push((
                look(&f.name),
                look(&format!("{}.zx_slots", f.name)),
                look(&format!("{}.zx_block", f.name)),
            ));
        }
        Ok((module, engine, addrs))
    });
    let (module, engine, addrs) = built?;
    for (f, (a, s, b)) in hm.functions.iter_mut().zip(addrs) {
        f.addr = a;
        f.slots = s;
        f.block = b;
    }
    hm.report.notes.extend(notes);
    hm.llvm_ir = module.print_to_string().to_string_lossy().into_owned();
    hm.engine = Some(engine);
    Ok(hm)
}

/// A scalar argument or result.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
}

/// Element types a [`Buffer`] can be made from.
pub trait Elem: Copy {
    const TYPE: ScalarType;
}
macro_rules! elem {
    ($($t:ty => $s:ident),*) => {$(impl Elem for $t { const TYPE: ScalarType = ScalarType::$s; })*};
}
elem!(f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, bool => Bool);

/// A mutable array passed to a pointer parameter, with its length for bounds checks.
pub struct Buffer<'a> {
    ptr: *mut u8,
    bytes: usize,
    elem: ScalarType,
    _p: PhantomData<&'a mut [u8]>,
}

impl<'a> Buffer<'a> {
    pub fn new<T: Elem>(s: &'a mut [T]) -> Buffer<'a> {
        Buffer {
            ptr: s.as_mut_ptr().cast(),
            bytes: std::mem::size_of_val(s),
            elem: T::TYPE,
            _p: PhantomData,
        }
    }
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` elements of `elem` for `'a`.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize, elem: ScalarType) -> Buffer<'a> {
        Buffer {
            ptr,
            bytes: len.saturating_mul(elem.size_bytes() as usize),
            elem,
            _p: PhantomData,
        }
    }
}

/// A call argument.
pub enum Arg<'a> {
    Scalar(Scalar),
    Buffer(Buffer<'a>),
}

/// The slot bits of a scalar for a parameter of type `s`, or why it does not fit.
pub fn scalar_slot(s: ScalarType, v: Scalar) -> Result<u64, String> {
    let int_range = |x: i128| -> Result<u64, String> {
        let bits = s.bits();
        let (lo, hi) = if s.is_signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        if x < lo || x > hi {
            return Err(format!("{x} does not fit {s}"));
        }
        Ok(x as i64 as u64
            & if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            })
    };
    match (s, v) {
        (ScalarType::Bool, Scalar::Bool(b)) => Ok(u64::from(b)),
        (ScalarType::Bool, _) => Err("expected a bool".into()),
        (s, Scalar::Int(x)) if s.is_int() => int_range(i128::from(x)),
        (s, Scalar::UInt(x)) if s.is_int() => int_range(i128::from(x)),
        (s, _) if s.is_int() => Err(format!("expected an integer for {s}")),
        (ScalarType::F32, Scalar::Float(x)) => Ok(u64::from((x as f32).to_bits())),
        (ScalarType::F64, Scalar::Float(x)) => Ok(x.to_bits()),
        (ScalarType::F32, Scalar::Int(x)) => Ok(u64::from((x as f32).to_bits())),
        (ScalarType::F64, Scalar::Int(x)) => Ok((x as f64).to_bits()),
        (ScalarType::F32, Scalar::UInt(x)) => Ok(u64::from((x as f32).to_bits())),
        (ScalarType::F64, Scalar::UInt(x)) => Ok((x as f64).to_bits()),
        (s, _) => Err(format!(
            "{s} scalars are not supported by the dynamic call interface"
        )),
    }
}

/// Decode a return slot of type `t`.
pub fn slot_scalar(t: &Type, bits: u64) -> Scalar {
    match t.as_scalar() {
        Some(ScalarType::Bool) => Scalar::Bool(bits & 1 == 1),
        Some(s) if s.is_signed() => {
            let sh = 64 - s.bits();
            Scalar::Int(((bits << sh) as i64) >> sh)
        }
        Some(s) if s.is_unsigned() => {
            let sh = 64 - s.bits();
            Scalar::UInt((bits << sh) >> sh)
        }
        Some(ScalarType::F32) => Scalar::Float(f64::from(f32::from_bits(bits as u32))),
        Some(ScalarType::F16) => Scalar::Float(f16_to_f64(bits as u16)),
        Some(ScalarType::BF16) => {
            Scalar::Float(f64::from(f32::from_bits((bits as u32 & 0xffff) << 16)))
        }
        _ => Scalar::Float(f64::from_bits(bits)),
    }
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((h >> 10) & 0x1f);
    let m = f64::from(h & 0x3ff);
    match e {
        0 => sign * m * 2f64.powi(-24),
        31 if m == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

/// The pointee scalar of a pointer parameter and how many of them make one pointee.
pub fn pointee_elem(t: &Type) -> Option<(ScalarType, u64)> {
    let p = t.pointee()?;
    match p {
        Type::Scalar(s) => Some((*s, 1)),
        Type::Vector(s, n) => Some((*s, u64::from(*n))),
        Type::Array(e, n) => {
            let (s, k) = pointee_elem(&Type::ptr(zyntax_hir::AddrSpace::Generic, (**e).clone()))?;
            Some((s, k * n))
        }
        _ => None,
    }
}

impl HostModule {
    pub fn function(&self, name: &str) -> HostResult<&HostFunction> {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| HostError::NotFound(name.to_string()))
    }

    /// Marshal typed arguments into slots and lengths, checking them against the signature.
    pub fn pack(&self, f: &HostFunction, args: &[Arg<'_>]) -> HostResult<(Vec<u64>, Vec<u64>)> {
        if args.len() != f.params.len() {
            return Err(HostError::Argument(format!(
                "{} takes {} argument(s), got {}",
                f.signature(),
                f.params.len(),
                args.len()
            )));
        }
        let mut slots = Vec::with_capacity(args.len());
        let mut lens = vec![0u64; args.len()];
        for (k, (a, t)) in args.iter().zip(&f.params).enumerate() {
            match (a, t) {
                (Arg::Scalar(v), Type::Scalar(s)) => {
                    slots.push(scalar_slot(*s, *v).map_err(|e| {
                        HostError::Argument(format!("argument {k} of {}: {e}", f.signature()))
                    })?);
                }
                (Arg::Buffer(b), Type::Ptr(..)) => {
                    let Some((es, per)) = pointee_elem(t) else {
                        return Err(HostError::Argument(format!(
                            "argument {k} of {}: cannot pass an array for {t}",
                            f.signature()
                        )));
                    };
                    if es != b.elem {
                        return Err(HostError::Argument(format!(
                            "argument {k} of {}: array of {} passed for {t}",
                            f.signature(),
                            b.elem
                        )));
                    }
                    slots.push(b.ptr as u64);
                    let unit = es.size_bytes() * per;
                    lens[k] = b.bytes as u64 / unit.max(1);
                }
                (Arg::Scalar(_), _) => {
                    return Err(HostError::Argument(format!(
                        "argument {k} of {}: expected an array for {t}",
                        f.signature()
                    )))
                }
                (Arg::Buffer(_), _) => {
                    return Err(HostError::Argument(format!(
                        "argument {k} of {}: expected a scalar {t}",
                        f.signature()
                    )))
                }
            }
        }
        Ok((slots, lens))
    }

    /// Call a host function with typed arguments; returns its results.
    pub fn call(&self, name: &str, args: &mut [Arg<'_>]) -> HostResult<Vec<Scalar>> {
        let f = self.function(name)?;
        let (slots, lens) = self.pack(f, args)?;
        // SAFETY: pack checked every argument against the signature, buffers carry their lengths.
        let rets = unsafe { self.call_slots(name, &slots, &lens)? };
        Ok(f.returns
            .iter()
            .zip(rets)
            .map(|(t, b)| slot_scalar(t, b))
            .collect())
    }

    /// Call through the slot entry.
    ///
    /// # Safety
    /// `args` must hold one slot per parameter with valid pointers for pointer
    /// parameters, and `lens` the element count of each pointed-to array (for
    /// bounds-checked functions, a larger length than the real one is unsound).
    pub unsafe fn call_slots(
        &self,
        name: &str,
        args: &[u64],
        lens: &[u64],
    ) -> HostResult<Vec<u64>> {
        let f = self.function(name)?;
        if f.slots == 0 {
            return Err(HostError::Argument(format!(
                "{} cannot be called dynamically (kernel, device function, or vector parameters)",
                f.signature()
            )));
        }
        if args.len() != f.params.len() || lens.len() != f.params.len() {
            return Err(HostError::Argument(format!(
                "{} takes {} argument(s), got {}",
                f.signature(),
                f.params.len(),
                args.len()
            )));
        }
        let mut rets = vec![0u64; f.returns.len().max(1)];
        let mut err = ErrRecord::new();
        let all_lens = lens;
        type SlotFn = unsafe extern "C" fn(*const u64, *const u64, *mut u64, *mut ErrRecord);
        // SAFETY: `slots` is the address of a function with exactly this signature (lower::slots_wrapper).
        let func: SlotFn = unsafe { std::mem::transmute::<usize, SlotFn>(f.slots) };
        unsafe {
            func(
                args.as_ptr(),
                all_lens.as_ptr(),
                rets.as_mut_ptr(),
                &mut err,
            )
        };
        if err.code != 0 {
            return Err(self.runtime_error(name, &err).into());
        }
        rets.truncate(f.returns.len());
        Ok(rets)
    }

    /// [`Self::call_slots`] by function index, writing results into `rets`
    /// (one slot per result) without allocating: the Python call path.
    ///
    /// # Safety
    /// As [`Self::call_slots`].
    pub unsafe fn call_slots_into(
        &self,
        idx: usize,
        args: &[u64],
        lens: &[u64],
        rets: &mut [u64],
    ) -> HostResult<()> {
        let Some(f) = self.functions.get(idx) else {
            return Err(HostError::NotFound(format!("#{idx}")));
        };
        if f.slots == 0
            || args.len() != f.params.len()
            || lens.len() != f.params.len()
            || rets.len() < f.returns.len().max(1)
        {
            // The checked path gives the precise message.
            return unsafe { self.call_slots(&f.name, args, lens).map(|_| ()) };
        }
        let mut err = ErrRecord::new();
        type SlotFn = unsafe extern "C" fn(*const u64, *const u64, *mut u64, *mut ErrRecord);
        // SAFETY: `slots` is the address of lower::slots_wrapper's function for `f`.
        let func: SlotFn = unsafe { std::mem::transmute::<usize, SlotFn>(f.slots) };
        unsafe { func(args.as_ptr(), lens.as_ptr(), rets.as_mut_ptr(), &mut err) };
        if err.code != 0 {
            return Err(self.runtime_error(&f.name, &err).into());
        }
        Ok(())
    }

    /// Turn an error record into a message naming the function, parameter and index.
    pub fn runtime_error(&self, entry: &str, e: &ErrRecord) -> RuntimeError {
        let func = usize::try_from(e.func)
            .ok()
            .and_then(|i| self.hir.functions.get(i));
        let fname = func.map_or_else(|| entry.to_string(), |f| f.name.clone());
        let at = func
            .and_then(|f| {
                u32::try_from(e.inst)
                    .ok()
                    .map(|i| zyntax_hir::print_inst(f, zyntax_hir::InstId(i)))
            })
            .map(|t| format!(" at `{t}`"))
            .unwrap_or_default();
        let loc = func
            .and_then(|f| f.insts.get(e.inst as usize))
            .and_then(|d| d.loc.as_ref())
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        let message = match e.code {
            // The vectorized runner saw a failure the checked re-run did not
            // (regions::fast_runner): the kernel changed its own inputs.
            lower::ERR_OOB if e.inst < 0 && e.index < 0 => format!(
                "@{fname}: an access out of bounds (its index is unknown: the failure did not recur when the block ran again thread by thread)"
            ),
            lower::ERR_OOB => {
                let what = if e.param >= 0 {
                    let ty = func
                        .and_then(|f| f.param_types().get(e.param as usize).map(|t| t.to_string()))
                        .unwrap_or_default();
                    format!("parameter {} ({ty})", e.param)
                } else {
                    "a local array".to_string()
                };
                format!(
                    "@{fname}: index {} out of bounds for {what} of length {}{at}{loc}",
                    e.index, e.len
                )
            }
            lower::ERR_DIV_ZERO => format!("@{fname}: integer division by zero{at}{loc}"),
            lower::ERR_UNREACHABLE => format!("@{fname}: reached `unreachable`{at}{loc}"),
            lower::ERR_STACK => format!(
                "@{fname}: stack overflow: recursion went deeper than this thread's stack allows{loc}"
            ),
            regions::ERR_BARRIER => format!(
                "@{fname}: divergent barrier: thread {} of a block waits at another barrier (instruction {}) than the others{at}{loc}",
                e.index, e.len
            ),
            warp::ERR_COLLECTIVE => format!(
                "@{fname}: divergent warp collective: lane {} is named in the mask of thread {} but is not at it (it returned or waits elsewhere){at}{loc}",
                e.index, e.len
            ),
            c => format!("@{fname}: run-time error code {c}{at}{loc}"),
        };
        RuntimeError {
            entry: entry.to_string(),
            function: fname,
            code: e.code,
            index: (e.code == lower::ERR_OOB).then_some(e.index),
            param: (e.code == lower::ERR_OOB && e.param >= 0).then_some(e.param),
            len: (e.code == lower::ERR_OOB).then_some(e.len),
            message,
        }
    }

    /// Launch a CPU kernel over `grid` blocks of `block` threads with typed arguments.
    pub fn launch(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        args: &mut [Arg<'_>],
        dyn_shared: usize,
    ) -> HostResult<()> {
        let f = self.function(name)?;
        let (slots, lens) = self.pack(f, args)?;
        // SAFETY: pack checked the arguments.
        unsafe { self.launch_slots(name, grid, block, &slots, &lens, dyn_shared) }
    }

    /// Launch with arguments in slots.
    ///
    /// # Safety
    /// As [`Self::call_slots`]; additionally, threads of different blocks run
    /// concurrently, so the kernel must be free of data races between blocks
    /// (as on the GPU).
    pub unsafe fn launch_slots(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        args: &[u64],
        lens: &[u64],
        dyn_shared: usize,
    ) -> HostResult<()> {
        let f = self.function(name)?;
        match &f.kind {
            HostFnKind::CpuKernel => {}
            HostFnKind::InterpKernel(why) => {
                return Err(HostError::Unsupported {
                    function: name.into(),
                    message: format!(
                        "the CPU backend cannot run this kernel ({}); use the interpreter",
                        why.join(", ")
                    ),
                })
            }
            _ => {
                return Err(HostError::Argument(format!(
                    "{} is not a kernel",
                    f.signature()
                )))
            }
        }
        if f.block == 0 {
            return Err(internal("launch", "kernel block runner missing"));
        }
        if args.len() != f.params.len() || lens.len() != f.params.len() {
            return Err(HostError::Argument(format!(
                "{} takes {} argument(s), got {}",
                f.signature(),
                f.params.len(),
                args.len()
            )));
        }
        if grid.contains(&0) || block.contains(&0) {
            return Err(HostError::Argument(format!(
                "grid {grid:?} and block {block:?} must be positive"
            )));
        }
        let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
        if threads > MAX_BLOCK_THREADS {
            return Err(HostError::Argument(format!(
                "block {block:?} has {threads} threads; at most {MAX_BLOCK_THREADS} per block (as on the GPU and the interpreter)"
            )));
        }
        let total = u64::from(grid[0]) * u64::from(grid[1]) * u64::from(grid[2]);
        let all_lens = lens;
        type BlockFn = unsafe extern "C" fn(*const u64, *const u64, *mut ErrRecord, *mut u8);
        // SAFETY: `block` is the address of lower::block_runner's function.
        let func: BlockFn = unsafe { std::mem::transmute::<usize, BlockFn>(f.block) };
        let next = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let first: Mutex<Option<ErrRecord>> = Mutex::new(None);
        let workers = cpu_threads().min(total as usize).max(1);
        let shared = self.shared_bytes as usize;
        let worker = || {
            let mut ctx = [0u8; lower::CTX_BYTES];
            let mut sh = vec![0u8; shared.max(1)];
            let mut dy = vec![0u8; dyn_shared.max(1)];
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= total || stop.load(Ordering::Relaxed) {
                    break;
                }
                let (gx, gy) = (u64::from(grid[0]), u64::from(grid[1]));
                let bid = [
                    (b % gx) as u32,
                    ((b / gx) % gy) as u32,
                    (b / (gx * gy)) as u32,
                ];
                let put = |ctx: &mut [u8; lower::CTX_BYTES], off: u64, v: [u32; 3]| {
                    for (k, x) in v.iter().enumerate() {
                        let o = off as usize + 4 * k;
                        ctx[o..o + 4].copy_from_slice(&x.to_ne_bytes());
                    }
                };
                put(&mut ctx, lower::CTX_BID, bid);
                put(&mut ctx, lower::CTX_BDIM, block);
                put(&mut ctx, lower::CTX_GDIM, grid);
                sh.fill(0);
                let shp = sh.as_mut_ptr() as u64;
                let dyp = dy.as_mut_ptr() as u64;
                ctx[lower::CTX_SHARED as usize..lower::CTX_SHARED as usize + 8]
                    .copy_from_slice(&shp.to_ne_bytes());
                ctx[lower::CTX_DYN as usize..lower::CTX_DYN as usize + 8]
                    .copy_from_slice(&dyp.to_ne_bytes());
                ctx[64..72].copy_from_slice(&(dyn_shared as u64).to_ne_bytes());
                let mut err = ErrRecord::new();
                // SAFETY: argument validity is the caller's contract; ctx and buffers live across the call.
                unsafe { func(args.as_ptr(), all_lens.as_ptr(), &mut err, ctx.as_mut_ptr()) };
                if err.code != 0 {
                    stop.store(true, Ordering::Relaxed);
                    if let Ok(mut g) = first.lock() {
                        g.get_or_insert(err);
                    }
                    break;
                }
            }
        };
        // Kept between launches (`host/pool.rs`): starting 15 threads per
        // launch cost a few hundred µs on 16 cores.
        pool::run(workers, &worker);
        let e = first.lock().ok().and_then(|g| *g);
        match e {
            Some(e) => Err(self.runtime_error(name, &e).into()),
            None => Ok(()),
        }
    }

    /// Per-call latency of a host function through its slot entry: `n`
    /// samples of `batch` calls each, in ns per call, sorted (see [`bench::time_slots`]).
    pub fn time_calls(
        &self,
        name: &str,
        args: &[u64],
        lens: &[u64],
        n: usize,
        batch: usize,
    ) -> HostResult<Vec<f64>> {
        bench::time_slots(self, name, args, lens, n, batch)
    }
}

/// Latency measurement helpers shared by `benches/cpu_latency.py` and tests.
pub mod bench {
    use super::*;

    /// TSC ticks per nanosecond, calibrated against `Instant` over ~50 ms.
    pub fn tsc_per_ns() -> f64 {
        let t0 = std::time::Instant::now();
        let c0 = rdtsc();
        while t0.elapsed() < std::time::Duration::from_millis(50) {
            std::hint::spin_loop();
        }
        let c1 = rdtsc();
        (c1 - c0) as f64 / t0.elapsed().as_nanos() as f64
    }

    #[inline(always)]
    pub fn rdtsc() -> u64 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe {
            std::arch::x86_64::_rdtsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            std::time::Instant::now().elapsed().as_nanos() as u64
        }
    }

    /// Nanoseconds per call of the slot entry: `n` samples, each `batch`
    /// calls between two cycle-counter reads (the TSC of some CPUs, e.g. AMD
    /// Zen, advances in steps of ~10 ns, too coarse for one call), minus the
    /// median cost of an empty bracket; sorted ascending. The slot array is
    /// passed through `black_box` on every call so nothing is hoisted.
    pub fn time_slots(
        m: &HostModule,
        name: &str,
        args: &[u64],
        lens: &[u64],
        n: usize,
        batch: usize,
    ) -> HostResult<Vec<f64>> {
        let f = m.function(name)?;
        if f.slots == 0 {
            return Err(HostError::Argument(format!(
                "{} cannot be timed (no slot entry)",
                f.signature()
            )));
        }
        if args.len() != f.params.len() || lens.len() != f.params.len() {
            return Err(HostError::Argument(format!(
                "{} takes {} argument(s)",
                f.signature(),
                f.params.len()
            )));
        }
        let batch = batch.max(1);
        type SlotFn = unsafe extern "C" fn(*const u64, *const u64, *mut u64, *mut ErrRecord);
        // SAFETY: `slots` is the address of lower::slots_wrapper's function.
        let func: SlotFn = unsafe { std::mem::transmute::<usize, SlotFn>(f.slots) };
        let mut rets = vec![0u64; f.returns.len().max(1)];
        let mut err = ErrRecord::new();
        let per_ns = tsc_per_ns();
        let mut empty = Vec::with_capacity(1000);
        for _ in 0..1000 {
            let a = rdtsc();
            std::hint::black_box(&mut err);
            let b = rdtsc();
            empty.push(b - a);
        }
        empty.sort_unstable();
        let overhead = empty[empty.len() / 2];
        let mut call = || {
            // SAFETY: the caller passed arguments valid for this function.
            unsafe {
                func(
                    std::hint::black_box(args.as_ptr()),
                    lens.as_ptr(),
                    rets.as_mut_ptr(),
                    &mut err,
                )
            }
        };
        for _ in 0..n.min(10_000) * batch {
            // Warm-up: caches, branch predictors, clock frequency.
            call();
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let a = rdtsc();
            for _ in 0..batch {
                call();
            }
            let b = rdtsc();
            out.push((b - a).saturating_sub(overhead) as f64 / per_ns / batch as f64);
        }
        if err.code != 0 {
            return Err(m.runtime_error(name, &err).into());
        }
        out.sort_by(|a, b| a.total_cmp(b));
        Ok(out)
    }

    /// (median, p99) of sorted samples.
    pub fn median_p99(sorted: &[f64]) -> (f64, f64) {
        if sorted.is_empty() {
            return (0.0, 0.0);
        }
        let med = sorted[sorted.len() / 2];
        let p99 = sorted[((sorted.len() as f64 * 0.99) as usize).min(sorted.len() - 1)];
        (med, p99)
    }
}

/// Functions of `m` whose kind is host (what `call` accepts).
pub fn host_functions(m: &Module) -> impl Iterator<Item = &Function> {
    m.functions
        .iter()
        .filter(|f| matches!(f.kind, FunctionKind::Host))
}
