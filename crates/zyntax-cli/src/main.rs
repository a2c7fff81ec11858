//! `zyntax`: the command-line front of the zyntax compiler.
//!
//! Errors print as `file:line:col: error: message` (one line per problem),
//! exit with status 1, and never show a backtrace.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zyntax_hir::{Arch, OptLevel, PtxVersion};
use zyntax_llvm::{CompileError, Options, Ptxas};

/// zyntax: an ahead-of-time GPU compiler backend (HIR → LLVM → PTX).
///
/// Reads `.zir` modules (the textual HIR), verifies them, lowers them through
/// LLVM 19 and prints PTX or LLVM IR. Errors print as `file:line:col: error:
/// message` and exit with status 1.
#[derive(Parser, Debug)]
#[command(name = "zyntax", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile a `.zir` module to PTX or LLVM IR.
    ///
    /// Examples:
    ///   zyntax compile --backend nvptx --arch sm_90 saxpy.zir -o saxpy.ptx
    ///   zyntax compile --backend nvptx --emit llvm saxpy.zir
    ///   zyntax compile --backend llvm --arch sm_80 --opt O0 saxpy.zir
    #[command(verbatim_doc_comment)]
    Compile(CompileArgs),
    /// List the target archs with their default PTX versions.
    Archs,
}

#[derive(clap::Args, Debug)]
struct CompileArgs {
    /// The `.zir` module to compile (`-` reads standard input).
    input: PathBuf,

    /// Backend: `nvptx` compiles GPU functions to PTX (`--emit ptx`, default)
    /// or to the LLVM IR fed to the NVPTX code generator (`--emit llvm`);
    /// `llvm` compiles host functions (and barrier-free kernels) for the CPU
    /// through LLVM: `--emit llvm` (optimized IR, default), `asm`, `obj` or
    /// `so` (a shared library; needs `cc`).
    #[arg(long, value_enum, default_value_t = Backend::Nvptx)]
    backend: Backend,

    /// Target arch (sm_70, sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a).
    /// Default: the module's first declared target, else sm_80.
    #[arg(long, value_parser = parse_arch)]
    arch: Option<Arch>,

    /// What to write: `ptx` or `llvm` with `--backend nvptx`; `llvm`, `asm`,
    /// `obj` or `so` with `--backend llvm` (`obj` and `so` need `-o`).
    #[arg(long, value_enum)]
    emit: Option<Emit>,

    /// CPU for `--backend llvm` (LLVM name, e.g. `znver3`, or `generic` for
    /// portable code). Default: this machine's, or $ZYNTAX_CPU.
    #[arg(long)]
    cpu: Option<String>,

    /// LLVM CPU feature string for `--backend llvm` (e.g. `+avx2,+fma`).
    /// Default: this machine's, or $ZYNTAX_CPU_FEATURES.
    #[arg(long)]
    features: Option<String>,

    /// PTX ISA version, e.g. 7.8. Default: the module's `ptx(...)`, else the
    /// arch's default (see `zyntax archs`).
    #[arg(long, value_parser = parse_ptx)]
    ptx: Option<PtxVersion>,

    /// Optimization level for the whole module (O0, O1, O2, O3, Os, Olatency).
    /// Default: the functions' own level when they agree, else O3.
    #[arg(long, value_parser = parse_opt)]
    opt: Option<OptLevel>,

    /// Also assemble the PTX with `ptxas -Werror` (found through $ZYNTAX_PTXAS
    /// or the `nvidia-cuda-nvcc-cu12` Python package) and fail if it rejects it.
    #[arg(long)]
    validate: bool,

    /// Assemble with ptxas (as --validate) and print each kernel's registers,
    /// stack, spills, shared memory and barriers to standard error.
    #[arg(long)]
    resources: bool,

    /// Print per-stage compile times to standard error.
    #[arg(long)]
    timings: bool,

    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    Nvptx,
    Llvm,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    /// PTX assembly (nvptx).
    Ptx,
    /// LLVM IR text.
    Llvm,
    /// Native assembly (llvm).
    Asm,
    /// A relocatable object file (llvm).
    Obj,
    /// A shared library (llvm).
    So,
}

fn parse_arch(s: &str) -> Result<Arch, String> {
    Arch::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        format!("unknown arch `{s}` (expected one of {})", names.join(", "))
    })
}

fn parse_ptx(s: &str) -> Result<PtxVersion, String> {
    let (a, b) = s
        .split_once('.')
        .ok_or_else(|| format!("PTX version `{s}` is not MAJOR.MINOR"))?;
    let major = a
        .parse()
        .map_err(|_| format!("bad PTX major version `{a}`"))?;
    let minor = b
        .parse()
        .map_err(|_| format!("bad PTX minor version `{b}`"))?;
    Ok(PtxVersion::new(major, minor))
}

fn parse_opt(s: &str) -> Result<OptLevel, String> {
    OptLevel::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = OptLevel::ALL.iter().map(|o| o.name()).collect();
        format!(
            "unknown optimization level `{s}` (expected one of {})",
            names.join(", ")
        )
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile(args) => compile(&args),
        Command::Archs => {
            for a in Arch::ALL {
                println!("{:<7} PTX {}", a.name(), a.default_ptx());
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(lines) => {
            for l in lines {
                eprintln!("{l}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Errors are returned as the lines to print.
type CliResult = Result<(), Vec<String>>;

fn one(msg: impl std::fmt::Display) -> Vec<String> {
    vec![format!("error: {msg}")]
}

fn compile(args: &CompileArgs) -> CliResult {
    let display = args.input.display().to_string();
    let text = if args.input == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| one(format!("reading standard input: {e}")))?;
        s
    } else {
        std::fs::read_to_string(&args.input).map_err(|e| one(format!("{display}: {e}")))?
    };
    let module = zyntax_hir::parse_module_named(&text, Some(&display))
        .map_err(|e| vec![format!("{}: error: {}", e.loc, e.message)])?;

    if args.backend == Backend::Llvm {
        return compile_host(args, &module, &display);
    }
    let arch = args
        .arch
        .or_else(|| module.targets.first().copied())
        .unwrap_or(Arch::Sm80);
    let mut opts = Options::new(arch);
    opts.ptx_version = args.ptx;
    opts.opt_level = args.opt;
    if args.cpu.is_some() || args.features.is_some() {
        return Err(one("--cpu and --features apply to --backend llvm only"));
    }
    let emit = match args.emit {
        None | Some(Emit::Ptx) => Emit::Ptx,
        Some(Emit::Llvm) => Emit::Llvm,
        Some(_) => return Err(one(
            "--backend nvptx emits ptx or llvm; asm, obj and so are for --backend llvm (the CPU)",
        )),
    };

    let (text, timings) = match emit {
        Emit::Llvm => {
            let ir =
                zyntax_llvm::emit_llvm(&module, &opts).map_err(|e| error_lines(&display, e))?;
            (ir, None)
        }
        _ => {
            let out =
                zyntax_llvm::compile_ptx(&module, &opts).map_err(|e| error_lines(&display, e))?;
            if args.validate || args.resources {
                let ptxas = Ptxas::locate().map_err(one)?;
                let asm = ptxas
                    .assemble(&out.ptx, out.arch)
                    .map_err(|e| error_lines(&display, e.into()))?;
                if args.resources {
                    for k in asm.kernels() {
                        eprintln!(
                            "{}: {} registers, {} B stack, {} B spill stores, {} B spill loads, \
                             {} B shared, {} barriers",
                            k.name,
                            k.registers,
                            k.stack_bytes,
                            k.spill_store_bytes,
                            k.spill_load_bytes,
                            k.shared_bytes,
                            k.barriers
                        );
                    }
                }
            }
            (out.ptx, Some(out.timings))
        }
    };
    if args.timings {
        if let Some(t) = timings {
            for (stage, d) in t.stages() {
                eprintln!("{stage:>12}: {:>9.3} ms", d.as_secs_f64() * 1e3);
            }
            eprintln!("{:>12}: {:>9.3} ms", "total", t.total().as_secs_f64() * 1e3);
        }
    }
    match &args.output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| one(format!("{}: {e}", path.display())))?
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// `--backend llvm`: the CPU backend (`zyntax_llvm::host`).
fn compile_host(args: &CompileArgs, module: &zyntax_hir::Module, display: &str) -> CliResult {
    use zyntax_llvm::host::{self, HostError, HostOptions};
    let what = match args.emit {
        None | Some(Emit::Llvm) => host::Emit::LlvmIr,
        Some(Emit::Asm) => host::Emit::Asm,
        Some(Emit::Obj) => host::Emit::Object,
        Some(Emit::So) => host::Emit::SharedLib,
        Some(Emit::Ptx) => {
            return Err(one(
                "--backend llvm compiles for the CPU; use --backend nvptx for PTX",
            ))
        }
    };
    if args.validate || args.arch.is_some() || args.ptx.is_some() {
        return Err(one(
            "--arch, --ptx and --validate apply to --backend nvptx only",
        ));
    }
    let binary = matches!(what, host::Emit::Object | host::Emit::SharedLib);
    if binary && args.output.is_none() {
        return Err(one(
            "--emit obj and --emit so write binary files: give -o FILE",
        ));
    }
    let opts = HostOptions {
        cpu: args.cpu.clone(),
        features: args.features.clone(),
        opt_level: args.opt,
        ..HostOptions::default()
    };
    let art = host::emit(module, &opts, what).map_err(|e| match e {
        HostError::Verify(v) => error_lines(display, CompileError::Verify(v)),
        other => {
            let text = other.to_string();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            if let Some(first) = lines.first_mut() {
                *first = format!("{display}: error: {first}");
            }
            lines
        }
    })?;
    match &args.output {
        Some(path) => {
            std::fs::write(path, &art.bytes).map_err(|e| one(format!("{}: {e}", path.display())))?
        }
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(&art.bytes)
                .map_err(|e| one(format!("writing standard output: {e}")))?;
        }
    }
    Ok(())
}

/// One line per problem; verifier diagnostics carry their own file:line:col.
fn error_lines(file: &str, e: CompileError) -> Vec<String> {
    match e {
        CompileError::Verify(v) => v
            .diagnostics
            .iter()
            .map(|d| {
                let mut d = d.clone();
                match d.loc.take() {
                    Some(loc) => format!("{loc}: error: {d}"),
                    None => format!("{file}: error: {d}"),
                }
            })
            .collect(),
        other => {
            let text = other.to_string();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            if let Some(first) = lines.first_mut() {
                *first = format!("{file}: error: {first}");
            }
            lines
        }
    }
}
