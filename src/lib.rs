//! ctxbench: measure how an LLM inference server performs as the context grows.
//!
//! `run` is the whole program behind a thin `main`, so tests drive the same entry point.

pub mod accuracy;
pub mod backend;
pub mod cache_capacity;
pub mod capacity;
pub mod choices;
pub mod cli;
pub mod cli_docs;
pub mod exit;
pub mod fit;
pub mod lengths;
pub mod load;
pub mod load_cmd;
pub mod load_report;
pub mod probe;
pub mod record;
pub mod report;
pub mod report_cmd;
pub mod resultfile;
pub mod run;
pub mod schema;
pub mod sessions;
pub mod sim;
pub mod stats;
pub mod stdout;
pub mod summary;
pub mod sweep;
pub mod trace;
pub mod truncation;
pub mod twin;
pub mod workload;

use cli::{Cli, Command};

/// Run one command; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Sweep(args) => sweep::run(*args).await,
        Command::Sim(mut args) => {
            twin::serve::load_into(&mut args, &twin::serve::given_on_command_line())?;
            sim::serve_forever(args).await.map(|_| exit::OK)
        }
        Command::Probe(args) => probe::run(args).await,
        Command::Plan(args) => capacity::run(args).await,
        Command::Report(args) => report_cmd::run_report(args),
        Command::Compare(args) => report_cmd::run_compare(args),
        Command::Load(args) => load_cmd::run(*args).await,
        Command::Sessions(args) => sessions::run(*args).await,
        Command::Trace(args) => match args.command {
            cli::TraceCommand::Synth(a) => trace::synth_cmd::run(&a),
        },
        Command::Twin(args) => twin::run(args.command).await,
        Command::Schema(args) => schema::run(args),
        Command::Completions(args) => cli_docs::run_completions(args),
        Command::Man(args) => cli_docs::run_man(args),
    }
}
