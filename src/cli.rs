//! The command-line contract: clap derive, a ValueEnum for every closed choice.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "ctxbench",
    version = VERSION_LINE,
    about = "Measure how an LLM inference server performs as the context grows",
    long_about = "ctxbench measures a running LLM server (SGLang, vLLM, llama.cpp, TGI, Ollama, \
any OpenAI-compatible endpoint) across context lengths: TTFT, prefill tok/s, decode tok/s and \
inter-token latency, defeating prefix caches and checking the server's own token counts.",
    after_help = "Examples:\n  ctxbench sweep                         # benchmark the built-in simulator\n  ctxbench sim --port 30000 --spec 3     # run the simulator for other clients\n  ctxbench sweep --url http://127.0.0.1:30000 --lengths 1k,8k,32k --out run.jsonl\n  ctxbench probe --url http://127.0.0.1:8080\n  ctxbench report run.jsonl --html report.html"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Sweep context lengths and measure TTFT, prefill and decode rates.
    Sweep(Box<SweepArgs>),
    /// Run the built-in simulated server (known cost model, for demos and tests).
    Sim(crate::sim::SimArgs),
    /// Identify a server: kind, model, limits, caches, capabilities.
    Probe(ProbeArgs),
    /// KV-cache capacity planning: how much context and concurrency fit.
    Plan(crate::capacity::PlanArgs),
    /// Print the summary of a result file (also a partial one), optionally as HTML.
    Report(ReportArgs),
    /// Compare two result files point by point.
    Compare(CompareArgs),
    /// Load cells (length x concurrency or rate): TTFT/TPOT/ITL percentiles, throughput,
    /// goodput under SLOs, server telemetry, the knee.
    Load(Box<LoadArgs>),
    /// Agent sessions: many long conversations at once, each turn carrying the model's real
    /// previous reply; TTFT by turn, prefix-cache hits, and how many sessions the cache holds.
    Sessions(Box<crate::sessions::SessionsArgs>),
    /// Production traces (Mooncake format): generate one to replay with `load --trace`.
    Trace(TraceArgs),
    /// A calibrated twin of a server: measure it once (calibrate, fit), predict load plans in
    /// virtual time, and check the predictions against measured files.
    Twin(TwinArgs),
    /// JSON Schema of the result file's records: all kinds (chosen by `type`), or one.
    Schema(crate::schema::SchemaArgs),
    /// Shell completion script (bash, zsh, fish) on stdout.
    Completions(CompletionsArgs),
    /// The man page (roff) on stdout, or all pages into a folder.
    #[command(hide = true)]
    Man(ManArgs),
}

/// `ctxbench trace ...`.
#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Generate a synthetic multi-turn long-context trace with shared prefixes.
    Synth(crate::trace::synth_cmd::SynthArgs),
}

// The shared choices live in a leaf module; re-exported so `crate::cli::X` still works.
pub use crate::choices::{ApiChoice, CacheBust, Endpoint, Format, Method};

// Each command's flags live in its own room; re-exported so `crate::cli::X` still works.
pub use crate::load::args::LoadArgs;
pub use crate::probe::ProbeArgs;
pub use crate::report::args::{CompareArgs, ReportArgs};
pub use crate::run::target::TargetArgs;
pub use crate::sweep::args::SweepArgs;
pub use crate::twin::{TwinArgs, TwinCommand};
pub use crate::workload::args::ContentArgs;

/// The version line of `ctxbench --version`: version, git commit, build target.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CTXBENCH_GIT_COMMIT"),
    ", ",
    env!("CTXBENCH_TARGET"),
    ")"
);

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh or fish (elvish and powershell also work).
    /// Example: ctxbench completions bash > /etc/bash_completion.d/ctxbench
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write ctxbench.1 and one page per subcommand (ctxbench-sweep.1, …) into DIR,
    /// instead of printing ctxbench.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
