//! Thin entry point: parse, call the library, map the outcome to an exit code.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = ctxbench::cli::Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(ctxbench::exit::FAILURE);
        }
    };
    match runtime.block_on(ctxbench::run(cli)) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(ctxbench::exit::FAILURE)
        }
    }
}
