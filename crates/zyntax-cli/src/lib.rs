//! `zyntax`: the command-line front of the zyntax compiler.
//!
//! All of the command lives in [`run`], shared by the cargo-built `zyntax`
//! binary and the pip-installed console script (through
//! `zyntax._native.cli_main`), so both behave identically.
//!
//! Errors print as `file:line:col: error: message` (one line per problem)
//! and never show a backtrace; the exit status is one of [`EXIT_STATUS`]'s.

#[cfg(feature = "compute")]
mod quick;

use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};
use zyntax_hir::{Arch, OptLevel, PtxVersion};
use zyntax_llvm::CompileError;
#[cfg(feature = "compute")]
use zyntax_llvm::{Options, Ptxas};

/// The exit statuses of the command (`zyntax --help` prints this table;
/// docs/cli.md has the same one, checked by a test).
pub const EXIT_STATUS: &str = "Exit status:
  0  success
  1  error: the input could not be read, parsed, verified, compiled, assembled or run
  2  usage error: unknown option or bad value, options that do not go together, -o naming the input";

/// Status 1: the input could not be read, parsed, verified, compiled, assembled or run.
const EXIT_ERROR: i32 = 1;
/// Status 2: the command line itself is wrong.
const EXIT_USAGE: i32 = 2;

/// zyntax: an ahead-of-time GPU compiler backend (HIR → LLVM → PTX).
///
/// Reads `.zir` modules (the textual HIR), verifies them, lowers them through
/// LLVM 19 and prints PTX or LLVM IR. Errors print one line per problem,
/// `file:line:col: error: message`.
#[derive(Parser, Debug)]
#[command(name = "zyntax", version, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile a `.zir` module to PTX, LLVM IR or CPU code, or run one kernel.
    ///
    /// Examples:
    ///   zyntax compile --backend nvptx --arch sm_90 saxpy.zir -o saxpy.ptx
    ///   zyntax compile --backend nvptx --emit llvm saxpy.zir
    ///   zyntax compile --backend llvm --opt Olatency --report critical_host.zir
    ///   zyntax compile --backend cuda saxpy.zir --kernel saxpy --grid 4 --block 256 \
    ///       1000 2.5 rand:1000 range:1000
    ///
    /// Python kernels (`kernels.py`) compile with the pip-installed `zyntax`
    /// command (or `python -m zyntax.cli`), which routes them to the Python
    /// front-end: zyntax compile --backend nvptx kernels.py --arch sm_80 -o out/
    /// So do AOT bundles (SASS per arch + PTX in a fatbin, with a launch manifest)
    /// and the cache commands (docs/aot.md):
    ///   zyntax compile --emit fatbin --arch sm_80 --arch sm_90a saxpy.zir -o saxpy.fatbin
    ///   zyntax cache list|verify|clear|export|import
    ///
    /// Kernel arguments of `--backend cuda` (one per kernel parameter, in order):
    ///   scalars    a number (or true/false), typed by the kernel's parameter type
    ///   rand:N     a buffer of N random elements of the pointee type (--seed):
    ///              floats uniform in [0, 1), integers uniform in [0, 100)
    ///   range:N    a buffer holding 0, 1, ..., N-1
    ///   fill:N:V   a buffer of N elements equal to V
    /// After the run, each buffer's first elements, sum and checksum, and the
    /// kernel time are printed.
    #[command(verbatim_doc_comment, after_help = EXIT_STATUS)]
    Compile(Box<CompileArgs>),
    /// List the target archs with their default PTX versions.
    Archs,
    /// Inspect, check, clear, export and import the kernel cache (`zyntax cache
    /// --help`; pip-installed command only).
    #[command(disable_help_flag = true)]
    Cache {
        /// The cache command and its arguments.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
}

/// What this binary says to `zyntax cache` and `--emit cubin|fatbin`: they are
/// Python (nvFatbin, the cache tools) and come with the pip-installed command.
const PIP_ONLY: &str = "is part of the pip-installed `zyntax` command (the `zyntax-compiler` \
                        wheel, or `python -m zyntax.cli`), not this binary";

#[derive(clap::Args, Debug)]
pub(crate) struct CompileArgs {
    /// The `.zir` module to compile (`-` reads standard input).
    input: PathBuf,

    /// `--backend cuda`: the kernel's arguments, one per parameter (see above).
    #[arg(allow_negative_numbers = true, value_name = "ARG")]
    kernel_args: Vec<String>,

    /// Backend: `nvptx` compiles GPU functions to PTX (`--emit ptx`, default)
    /// or to the LLVM IR fed to the NVPTX code generator (`--emit llvm`);
    /// `llvm` compiles host functions (and barrier-free kernels) for the CPU
    /// through LLVM: `--emit llvm` (optimized IR, default), `asm`, `obj` or
    /// `so` (a shared library; needs `cc`); `cuda` compiles for the GPU of
    /// this machine (or `--arch`) and runs `--kernel` once.
    #[arg(long, value_enum, default_value_t = Backend::Nvptx)]
    backend: Backend,

    /// `--backend cuda`: the kernel to run (default: the module's only kernel).
    #[arg(long)]
    kernel: Option<String>,

    /// `--backend cuda`: grid size in blocks, `X[,Y[,Z]]`.
    #[arg(long, value_parser = parse_dim3, default_value = "1")]
    grid: [u32; 3],

    /// `--backend cuda`: block size in threads, `X[,Y[,Z]]`.
    #[arg(long, value_parser = parse_dim3, default_value = "1")]
    block: [u32; 3],

    /// `--backend cuda`: dynamic shared memory per block, in bytes
    /// (default: the kernel's declared amount).
    #[arg(long, value_name = "BYTES")]
    shared: Option<u32>,

    /// `--backend cuda`: seed of the `rand:N` buffers.
    #[arg(long, default_value_t = 0)]
    seed: u64,

    /// `--backend cuda`: CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: u32,

    /// `--backend llvm`: print the optimizer's report (what each pass did to
    /// each function and why) as `text` (default) or `json`: to standard
    /// error, or to standard output when `-o` writes the code to a file.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
          default_missing_value = "text", value_name = "FORMAT")]
    report: Option<ReportFormat>,

    /// `--backend nvptx` and `cuda`: target arch (sm_70, sm_75, sm_80, sm_86,
    /// sm_89, sm_90, sm_90a). Default: the module's first declared target,
    /// else sm_80; with `--backend cuda`, the device's. With `--emit
    /// cubin|fatbin`, repeatable or comma-separated.
    #[arg(long, value_parser = parse_arch)]
    arch: Option<Arch>,

    /// What to write: `ptx` or `llvm` with `--backend nvptx`; `llvm`, `asm`,
    /// `obj` or `so` with `--backend llvm` (`obj` and `so` need `-o`);
    /// `cubin` or `fatbin` with `--backend nvptx`: an AOT bundle plus its JSON
    /// launch manifest (OUTPUT with .json), built by the pip-installed command,
    /// whose `zyntax compile --emit fatbin --help` lists `--no-ptx` and `--force`.
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

    /// `--backend nvptx` and `cuda`: PTX ISA version, e.g. 7.8. Default: the
    /// module's `ptx(...)`, else the arch's default (see `zyntax archs`).
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

    /// `--backend nvptx`: `.file`/`.loc` lines naming the `.zir` line of each
    /// instruction (nvcc's `-lineinfo`; profilers map the code back with it).
    #[arg(long)]
    line_info: bool,

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
    Cuda,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    Text,
    Json,
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
    /// One arch's SASS, with a launch manifest (nvptx; pip-installed command).
    Cubin,
    /// SASS per `--arch` plus PTX, with a launch manifest (nvptx; pip-installed command).
    Fatbin,
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

fn parse_dim3(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("`{s}` is not X[,Y[,Z]]"));
    }
    let mut d = [1u32; 3];
    for (slot, p) in d.iter_mut().zip(&parts) {
        *slot = p
            .trim()
            .parse()
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("`{p}` is not a positive integer (in `{s}`)"))?;
    }
    Ok(d)
}

/// Runs the `zyntax` command with `args` (`args[0]` is the program name) and
/// returns the process exit status (see [`EXIT_STATUS`]). Output goes to this
/// process's standard output and error, flushed before returning.
pub fn run(args: Vec<String>) -> i32 {
    let code = match Cli::try_parse_from(args) {
        Err(e) if e.use_stderr() => {
            // One line, as every other error: clap's message without its usage block.
            let text = e.render().to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("{} (see `zyntax --help`)", first.join(" "));
            EXIT_USAGE
        }
        Err(e) => {
            // --help and --version print to stdout with status 0.
            let _ = e.print();
            0
        }
        Ok(cli) => {
            let usage = match &cli.command {
                Command::Compile(args) => usage_error(args),
                Command::Archs => None,
                Command::Cache { .. } => Some(format!("`zyntax cache` {PIP_ONLY}")),
            };
            if let Some(msg) = usage {
                eprintln!("error: {msg}");
                let _ = std::io::stderr().flush();
                return EXIT_USAGE;
            }
            // A bug must still end as one clear line and status 1, not an abort
            // (and, inside Python, not an exception out of cli_main).
            let result = std::panic::catch_unwind(|| match cli.command {
                Command::Compile(args) => compile(&args),
                Command::Cache { .. } => unreachable!("a usage error above"),
                Command::Archs => {
                    let mut text = String::new();
                    for a in Arch::ALL {
                        text.push_str(&format!("{:<7} PTX {}\n", a.name(), a.default_ptx()));
                    }
                    write_stdout(text.as_bytes())
                }
            })
            .unwrap_or_else(|payload| {
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic payload".to_owned());
                Err(one(format!(
                    "internal error (Rust panic): {msg}; please report this as a zyntax bug"
                )))
            });
            match result {
                Ok(()) => 0,
                Err(lines) => {
                    let mut err = std::io::stderr().lock();
                    for l in lines {
                        let _ = writeln!(err, "{l}");
                    }
                    EXIT_ERROR
                }
            }
        }
    };
    // Inside the Python extension nothing flushes Rust's stdout at exit.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    code
}

fn write_stdout(bytes: &[u8]) -> CliResult {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| one(format!("writing standard output: {e}")))
}

/// Errors are returned as the lines to print.
pub(crate) type CliResult = Result<(), Vec<String>>;

pub(crate) fn one(msg: impl std::fmt::Display) -> Vec<String> {
    vec![format!("error: {msg}")]
}

/// A command line that parses but cannot be right: options that do not go
/// together, or `-o` naming the input. Checked before the input is read.
fn usage_error(args: &CompileArgs) -> Option<String> {
    let display = args.input.display();
    if args.input.extension().is_some_and(|e| e == "py") {
        return Some(format!(
            "{display} is a Python file: Python kernels compile with the pip-installed \
             `zyntax` command (or `python -m zyntax.cli`), not this binary"
        ));
    }
    if matches!(args.emit, Some(Emit::Cubin | Emit::Fatbin)) {
        return Some(format!(
            "--emit cubin and --emit fatbin (AOT bundles) {PIP_ONLY}"
        ));
    }
    if let Some(out) = &args.output {
        if args.input != Path::new("-") && same_file(&args.input, out) {
            return Some(format!(
                "-o {} names the input file; refusing to overwrite it",
                out.display()
            ));
        }
    }
    if args.backend != Backend::Cuda {
        let cuda_only = [
            (!args.kernel_args.is_empty(), "kernel arguments"),
            (args.kernel.is_some(), "--kernel"),
            (args.shared.is_some(), "--shared"),
        ];
        if let Some((_, what)) = cuda_only.iter().find(|(set, _)| *set) {
            return Some(format!(
                "{what} apply to --backend cuda only (which runs a kernel)"
            ));
        }
    }
    if args.report.is_some() && args.backend != Backend::Llvm {
        return Some(
            "--report prints the CPU optimizer's report: it applies to --backend llvm only".into(),
        );
    }
    let cpu_options = args.cpu.is_some() || args.features.is_some();
    let msg = match args.backend {
        Backend::Nvptx if cpu_options => "--cpu and --features apply to --backend llvm only",
        Backend::Nvptx if matches!(args.emit, Some(Emit::Asm | Emit::Obj | Emit::So)) => {
            "--backend nvptx emits ptx or llvm; asm, obj and so are for --backend llvm (the CPU)"
        }
        Backend::Llvm if args.emit == Some(Emit::Ptx) => {
            "--backend llvm compiles for the CPU; use --backend nvptx for PTX"
        }
        Backend::Llvm if args.arch.is_some() || args.ptx.is_some() => {
            "--arch and --ptx apply to --backend nvptx and cuda (the GPU), not llvm (the CPU)"
        }
        Backend::Llvm if args.validate || args.resources || args.timings => {
            "--validate, --resources and --timings apply to --backend nvptx only"
        }
        Backend::Llvm
            if matches!(args.emit, Some(Emit::Obj | Emit::So)) && args.output.is_none() =>
        {
            "--emit obj and --emit so write binary files: give -o FILE"
        }
        Backend::Cuda if args.emit.is_some() || args.output.is_some() => {
            "--backend cuda runs a kernel and writes no code; use --backend nvptx for --emit/-o"
        }
        Backend::Cuda if cpu_options || args.validate || args.resources || args.timings => {
            "--cpu, --features, --validate, --resources and --timings do not apply to --backend cuda"
        }
        _ => return None,
    };
    Some(msg.into())
}

/// Whether `a` and `b` name the same existing file (through links and `..`).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn compile(args: &CompileArgs) -> CliResult {
    // A build limitation, not a usage error: status 1.
    if !zyntax_llvm::HAS_NVPTX && args.backend != Backend::Llvm {
        let name = format!("{:?}", args.backend).to_lowercase();
        return Err(one(format!(
            "--backend {name} needs the GPU backends, and this zyntax was built without the \
             `compute` feature (rebuild with `cargo build -p zyntax-cli --features compute`); \
             --backend llvm compiles for the CPU"
        )));
    }
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

    match args.backend {
        Backend::Llvm => compile_host(args, &module, &display),
        #[cfg(feature = "compute")]
        Backend::Cuda => quick::run_kernel(args, &module, &display),
        #[cfg(feature = "compute")]
        Backend::Nvptx => compile_nvptx(args, &module, &display),
        #[cfg(not(feature = "compute"))]
        Backend::Nvptx | Backend::Cuda => unreachable!("rejected above"),
    }
}

/// `--backend nvptx`: PTX or the NVPTX LLVM IR.
#[cfg(feature = "compute")]
fn compile_nvptx(args: &CompileArgs, module: &zyntax_hir::Module, display: &str) -> CliResult {
    if module.kernels().next().is_none() {
        // Host and device functions alone make an empty PTX file: say so instead.
        return Err(vec![format!(
            "{display}: error: module `{}` has no kernel, so --backend nvptx has nothing to \
             compile (host functions compile for the CPU with --backend llvm)",
            module.name
        )]);
    }
    let arch = args
        .arch
        .or_else(|| module.targets.first().copied())
        .unwrap_or(Arch::DEFAULT);
    let mut opts = Options::new(arch);
    opts.ptx_version = args.ptx;
    opts.opt_level = args.opt;
    opts.line_info = args.line_info;
    // usage_error rejected asm, obj, so, cubin and fatbin.
    let emit = match args.emit {
        Some(Emit::Llvm) => Emit::Llvm,
        _ => Emit::Ptx,
    };

    let (text, timings) = match emit {
        Emit::Llvm => {
            let ir = zyntax_llvm::emit_llvm(module, &opts).map_err(|e| error_lines(display, e))?;
            (ir, None)
        }
        _ => {
            let out =
                zyntax_llvm::compile_ptx(module, &opts).map_err(|e| error_lines(display, e))?;
            if args.validate || args.resources {
                let ptxas = Ptxas::locate().map_err(one)?;
                let asm = ptxas
                    .assemble(&out.ptx, out.arch)
                    .map_err(|e| error_lines(display, e.into()))?;
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
        None => write_stdout(text.as_bytes())?,
    }
    Ok(())
}

/// `--backend llvm`: the CPU backend (`zyntax_llvm::host`).
fn compile_host(args: &CompileArgs, module: &zyntax_hir::Module, display: &str) -> CliResult {
    use zyntax_llvm::host::{self, HostError, HostOptions};
    // usage_error rejected ptx, and obj/so without -o.
    let what = match args.emit {
        Some(Emit::Asm) => host::Emit::Asm,
        Some(Emit::Obj) => host::Emit::Object,
        Some(Emit::So) => host::Emit::SharedLib,
        _ => host::Emit::LlvmIr,
    };
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
        None => write_stdout(&art.bytes)?,
    }
    if let Some(fmt) = args.report {
        let mut text = match fmt {
            ReportFormat::Text => art.report.to_string(),
            ReportFormat::Json => art.report.to_json(),
        };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        // The code owns stdout unless it went to a file.
        if args.output.is_some() {
            write_stdout(text.as_bytes())?;
        } else {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
    Ok(())
}

/// One line per problem; verifier diagnostics carry their own file:line:col.
pub(crate) fn error_lines(file: &str, e: CompileError) -> Vec<String> {
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
