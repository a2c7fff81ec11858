//! The `zyntax` binary: a thin shell around [`zyntax_cli::run`].

fn main() {
    // `run` reports a panic as one `error:` line; the default hook would add
    // its own message and backtrace hint first.
    std::panic::set_hook(Box::new(|_| {}));
    let code = zyntax_cli::run(
        std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    );
    std::process::exit(code);
}
