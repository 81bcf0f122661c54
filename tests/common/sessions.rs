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

/// Small sessions of `turns` turns: 64-token shared system prompt, a 512-token document, then
/// 64-token turns and 16-token replies: about 800 tokens each at a fourth turn.
pub fn small(turns: &'static str) -> Vec<&'static str> {
    vec![
        "--system-tokens",
        "64",
        "--first-tokens",
        "512",
        "--turn-tokens",
        "64",
        "--output-tokens",
        "16",
        "--turns",
        turns,
    ]
}
