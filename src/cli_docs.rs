//! `ctxbench completions SHELL` and `ctxbench man`: shell completion scripts and man pages,
//! generated from the same clap definitions that parse the command line.

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::stdout::print_stdout;
use anyhow::Context;
use clap::CommandFactory;

/// The completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ctxbench", &mut out);
    out
}

/// The clap command as the man pages show it: the plain package version, so that a page
/// does not change with the commit it was built from.
fn man_command() -> clap::Command {
    Cli::command().version(env!("CARGO_PKG_VERSION"))
}

/// `ctxbench.1`, roff.
pub fn man_page() -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(man_command())
        .render(&mut out)
        .context("cannot render the man page")?;
    Ok(out)
}

/// `ctxbench completions SHELL`.
pub fn run_completions(args: CompletionsArgs) -> anyhow::Result<u8> {
    print_stdout(&completions(args.shell))?;
    Ok(crate::exit::OK)
}

/// `ctxbench man [--dir DIR]`.
pub fn run_man(args: ManArgs) -> anyhow::Result<u8> {
    match args.dir {
        None => print_stdout(&man_page()?)?,
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(man_command(), &dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
        }
    }
    Ok(crate::exit::OK)
}
