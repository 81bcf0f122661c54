//! `ctxbench sessions` driven through the same flags as the command line.

use clap::Parser;
use ctxbench::cli::{Cli, Command};
use ctxbench::sessions::{SessionsArgs, SessionsOutcome, execute};

/// `ctxbench sessions --url URL FLAGS…`, parsed.
pub fn args(url: &str, flags: &[&str]) -> SessionsArgs {
    let mut argv = vec!["ctxbench", "sessions", "--url", url];
    argv.extend_from_slice(flags);
    let Command::Sessions(a) = Cli::try_parse_from(argv).expect("flags parse").command else {
        unreachable!()
    };
    *a
}

/// A sessions run against `url`; its failure fails the test.
pub async fn run(url: &str, flags: &[&str]) -> SessionsOutcome {
    execute(args(url, flags)).await.expect("sessions run")
}
