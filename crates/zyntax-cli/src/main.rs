//! The `zyntax` binary: a thin shell around [`zyntax_cli::run`].
//!
//! The command reads files from anywhere, so it compiles in a worker: the
//! binary runs itself once more as a child (marked by [`WORKER_ENV`]) and
//! waits. If LLVM or ptxas abort the child on hostile input, the parent still
//! prints one `error:` line and exits with status 1 instead of dying by the
//! signal (docs/cli.md, "Untrusted input").

use std::process::Command;

/// Set in the worker's environment; the worker does the actual work.
const WORKER_ENV: &str = "ZYNTAX_CLI_WORKER";
/// Test hook, honoured by the worker only: abort as LLVM does on a fatal error.
const TEST_ABORT_ENV: &str = "ZYNTAX_WORKER_TEST_ABORT";

fn main() {
    // `run` reports a panic as one `error:` line; the default hook would add
    // its own message and backtrace hint first.
    std::panic::set_hook(Box::new(|_| {}));
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if std::env::var_os(WORKER_ENV).is_some() {
        if std::env::var_os(TEST_ABORT_ENV).is_some_and(|v| v == "1") {
            std::process::abort();
        }
        std::process::exit(zyntax_cli::run(args));
    }
    std::process::exit(supervise(&args));
}

/// Runs the command in a child process (same arguments, inherited standard
/// streams) and turns a death by signal into an error line and status 1.
fn supervise(args: &[String]) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        // Cannot re-run ourselves: run in this process.
        Err(_) => return zyntax_cli::run(args.to_vec()),
    };
    let status = Command::new(exe)
        .args(args.iter().skip(1))
        .env(WORKER_ENV, "1")
        .status();
    match status {
        Ok(s) => match s.code() {
            Some(code) => code,
            None => {
                use std::os::unix::process::ExitStatusExt;
                let sig = s.signal().unwrap_or(0);
                eprintln!(
                    "error: the compiler worker process was killed by signal {sig} ({}): \
                     the input makes LLVM or ptxas abort; please report it as a zyntax bug",
                    signal_name(sig)
                );
                1
            }
        },
        Err(e) => {
            eprintln!("error: cannot start the compiler worker process: {e}");
            1
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        _ => "signal",
    }
}
