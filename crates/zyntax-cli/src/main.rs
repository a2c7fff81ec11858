//! The `zyntax` binary: a thin shell around [`zyntax_cli::run`].

fn main() {
    let code = zyntax_cli::run(
        std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    );
    std::process::exit(code);
}
