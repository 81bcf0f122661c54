//! The built-in simulated server: behaves like SGLang / an OpenAI-compatible server with a
//! known cost model, so ctxbench can be demonstrated anywhere and tested against ground truth.

mod admission;
mod chat_template;
pub mod cost;
mod debug;
pub mod driver;
mod engine;
mod error;
pub mod fault;
mod frames;
mod info;
mod metrics;
pub mod needle;
mod ollama;
mod openai;
pub mod pool;
mod request;
mod sched_io;
pub mod scheduler;
mod server;
mod sglang;
pub mod spec;
mod sse;
mod state;
pub mod stats;
pub mod stepcost;
pub mod tasks;
mod tgi;
pub mod tokenizer;
pub mod truth;
pub mod virtual_time;
mod vllm;
mod vocab;
mod whole;

pub use cost::CostModel;
pub use scheduler::TokenBudget;
pub use server::SimServer;
pub use spec::SpecModel;
pub use truth::{DecodeStep, RequestTruth};

use clap::{Args, ValueEnum};

/// Which real server the simulator pretends to be (what `probe` should find).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Persona {
    /// SGLang: native `/generate`, `/flush_cache`, `/server_info`, OpenAI routes, `/tokenize`.
    #[default]
    Sglang,
    /// A generic OpenAI-compatible server: `/v1/*` and `/health` only (no tokenize, no flush).
    Openai,
    /// vLLM: OpenAI routes, `/tokenize`, `/metrics`; `/reset_prefix_cache` only with `--dev-mode`.
    Vllm,
    /// Ollama: `/api/generate` (NDJSON), `/api/show`, `/api/tags`, `/api/ps`; a default
    /// window that silently truncates longer prompts, a reload on every new `num_ctx`.
    Ollama,
    /// TGI: `/generate_stream` (SSE without `[DONE]`), `/info`, `/tokenize`; no `ignore_eos`.
    Tgi,
}

/// Cost model and quirks; shared by `ctxbench sim` and `ctxbench sweep` without `--url`.
// The step cost model is stated in `--sim-step-overhead`'s help and in `stepcost.rs`.
#[derive(Args, Debug, Clone)]
pub struct SimCostArgs {
    /// Fixed prefill overhead per request, seconds.
    #[arg(long = "sim-t0", default_value_t = 0.010)]
    pub t0: f64,
    /// Linear prefill rate, tokens per second.
    #[arg(long = "sim-p0", default_value_t = 100_000.0)]
    pub p0: f64,
    /// Quadratic (attention) prefill coefficient: seconds per token^2 (cost q*(n^2-c^2)/2).
    #[arg(long = "sim-q", default_value_t = 4.0e-10)]
    pub q: f64,
    /// Fixed decode step time, seconds.
    #[arg(long = "sim-d0", default_value_t = 0.004)]
    pub d0: f64,
    /// Decode step time per context token, seconds.
    #[arg(long = "sim-d1", default_value_t = 5.0e-8)]
    pub d1: f64,
    /// KV pool and prefix-cache page size, tokens.
    #[arg(long = "sim-page-size", default_value_t = 16)]
    pub page_size: u64,
    /// Turn the prefix cache off.
    #[arg(long = "no-cache")]
    pub no_cache: bool,
    /// Leave `usage.prompt_tokens_details.cached_tokens` out of OpenAI responses (like SGLang
    /// without `--enable-cache-report`); `meta_info.cached_tokens` stays.
    #[arg(long = "no-cache-report")]
    pub no_cache_report: bool,
    /// `/tokenize` answers HTTP 500 (`unordered_map::at`) for text holding any word outside
    /// the vocabulary, like a llama-server whose vocabulary has no piece for some characters.
    #[arg(long = "tokenize-strict")]
    pub tokenize_strict: bool,
    /// Leave Nagle's algorithm on for accepted connections (do not set TCP_NODELAY), like a
    /// server whose operator never set it: small writes wait for the client's delayed ACK.
    #[arg(long)]
    pub nagle: bool,
    /// Ignore `stream_options.continuous_usage_stats`: no per-event usage (like servers that
    /// only send the final usage chunk).
    #[arg(long = "no-continuous-usage")]
    pub no_continuous_usage: bool,
    /// Speculative decoding: each decode step emits 1..=K tokens in one event.
    #[arg(long, default_value_t = 1)]
    pub spec: u32,
    /// How many of a step's K−1 draft tokens are accepted (with --spec K > 1): `uniform`
    /// draws 1..=K tokens per step whatever the prompt; `ngram` is a prompt-lookup drafter
    /// whose per-draft acceptance α = 0.1 + 0.85·r grows with the share r of the prompt's
    /// bigrams that repeat earlier ones (filler text: α ≈ 0.95), each draft accepted in
    /// turn until the first rejection.
    #[arg(long = "spec-model", value_enum, default_value = "uniform")]
    pub spec_model: SpecModel,
    /// With --spec K > 1, OpenAI routes: the last chunk carries the request's own
    /// `metrics.speculative_decoding` (verify steps, drafted, accepted), like vLLM's
    /// `--per-request-spec-decode-metrics summary`; `/metrics` counts the same steps.
    #[arg(long = "per-request-spec-metrics")]
    pub per_request_spec_metrics: bool,
    /// Context limit, tokens.
    #[arg(long = "context-length", default_value_t = 131_072)]
    pub context_length: u64,
    /// Silently keep the last N tokens of longer prompts instead of answering 400.
    #[arg(long)]
    pub truncate: bool,
    /// The simulated model's effective context for `--tasks` prompts: every task answered
    /// right within N tokens; beyond, each fact is seen with probability (N/L)^3.
    /// Example: ctxbench sim --effective-context 4096 --lost-in-middle
    #[arg(long = "effective-context", value_name = "N", value_parser = crate::lengths::parse_count_arg)]
    pub effective_context: Option<u64>,
    /// With --effective-context: facts in the middle of a long prompt fade first (the
    /// exponent grows from 1 at either end to 7 in the middle).
    #[arg(long = "lost-in-middle", requires = "effective_context")]
    pub lost_in_middle: bool,
    /// Chat route only: a chat template that adds N fixed words (a system preamble) to
    /// every conversation, counted in `usage.prompt_tokens` like a real template's tokens.
    #[arg(long = "chat-template-words", default_value_t = 0)]
    pub chat_template_words: usize,
    /// Requests running at once; beyond it requests queue (see --reject-when-full).
    #[arg(long = "max-running", default_value_t = 8)]
    pub max_running: usize,
    /// Which server the simulator pretends to be.
    #[arg(long, value_enum, default_value = "sglang")]
    pub persona: Persona,
    /// Probability that a request meets a fault.
    #[arg(long = "fault-rate", default_value_t = 0.0)]
    pub fault_rate: f64,
    /// Fault kinds to draw from, comma-separated (default: all).
    #[arg(long = "fault-kinds")]
    pub fault_kinds: Option<String>,
    /// Fixed cost of every engine step, seconds.
    ///
    /// The engine runs in steps like SGLang's and vLLM's schedulers (continuous batching,
    /// chunked prefill). One step costs, in seconds:
    ///
    ///   step = overhead
    ///     plus, for each prefill chunk [c, e) in the step:
    ///       (t0 on a request's first chunk) + (e−c)/p0 + q·(e²−c²)/2
    ///     plus, if any request decodes:
    ///       d0 + d1·Σ(context of each decoding request) + d2·(decoding requests)
    ///
    ///   the prefill chunks' sum times (1 + interference·decoding requests) when the step
    ///   also decodes (--sim-interference).
    ///
    /// With one request in flight this is exactly the one-request model (plus the
    /// overhead): TTFT = t0 + (n−c)/p0 + q·(n²−c²)/2, each decode step d0 + d1·context.
    ///
    /// Example: `--sim-step-overhead 0.002 --sim-d2 0.0001 --max-batch-tokens 2048`.
    #[arg(
        long = "sim-step-overhead",
        default_value_t = 0.0,
        verbatim_doc_comment
    )]
    pub step_overhead: f64,
    /// Decode step time per decoding request, seconds (added to d0 + d1·Σcontext).
    #[arg(long = "sim-d2", default_value_t = 0.0)]
    pub d2: f64,
    /// Extra share of a step's prefill work per request decoding in the same step: a prompt
    /// prefilled beside k decoding requests costs (1 + X·k) times its prefill alone (a real
    /// server's interference between prefill and decode). Example: `--sim-interference 0.04`
    #[arg(long = "sim-interference", value_name = "X", default_value_t = 0.0)]
    pub interference: f64,
    /// With --spec K > 1: decode step time per draft token verified, per decoding request,
    /// seconds (a batch of B requests with K−1 drafts each adds B·(K−1)·this). With
    /// --sim-spec-drafter-step-s, what makes speculation stop paying as batches grow.
    #[arg(long = "sim-spec-draft-token-s", default_value_t = 0.0)]
    pub spec_draft_token_s: f64,
    /// With --spec K > 1: the drafter's own step, seconds, once per decode step in which
    /// any request drafted.
    #[arg(long = "sim-spec-drafter-step-s", default_value_t = 0.0)]
    pub spec_drafter_step_s: f64,
    /// Prefill tokens per engine step (chunked prefill): longer prompts take several steps,
    /// sharing them with the running requests' decode, e.g. `--max-batch-tokens 2048`.
    #[arg(long = "max-batch-tokens", default_value_t = 8192)]
    pub max_batch_tokens: u64,
    /// What --max-batch-tokens counts: `prefill` tokens only (SGLang), or `all` the step's
    /// tokens, the running decodes' first (llama.cpp's -b, vLLM's max-num-batched-tokens).
    #[arg(long = "sim-budget", value_enum, default_value_t = TokenBudget::Prefill)]
    pub budget: TokenBudget,
    /// KV pool size in tokens, shared by running requests and the prefix cache
    /// (default: 4 × --context-length), e.g. `--kv-pool-tokens 218000`.
    #[arg(long = "kv-pool-tokens")]
    pub kv_pool_tokens: Option<u64>,
    /// Share of each request's max output reserved in the pool at admission (SGLang's
    /// new-token ratio): 1 never preempts; lower admits more and preempts when decode
    /// growth finds no page.
    #[arg(long = "sim-new-token-ratio", default_value_t = 1.0)]
    pub new_token_ratio: f64,
    /// Quirk for fault tests: answer 503 at once beyond --max-running instead of queueing.
    #[arg(long = "reject-when-full")]
    pub reject_when_full: bool,
    /// vLLM persona: serve `POST /reset_prefix_cache` (vLLM needs VLLM_SERVER_DEV_MODE=1).
    #[arg(long = "dev-mode")]
    pub dev_mode: bool,
    /// Keep a finished request's generated tokens in the prefix cache beside its prompt
    /// (whole pages, least recently used out), as SGLang's radix cache and vLLM's block
    /// cache do: a conversation's next turn then reuses the reply it re-sends.
    /// `ctxbench sessions` turns it on for the simulator it starts.
    #[arg(long = "cache-replies")]
    pub cache_replies: bool,
    /// Ollama persona: the window served when a request omits `options.num_ctx` (longer
    /// prompts are cut to it from the front, silently), like `OLLAMA_CONTEXT_LENGTH`.
    #[arg(long = "ollama-num-ctx", default_value_t = 4096)]
    pub ollama_num_ctx: u64,
    /// Ollama persona: seconds a model (re)load takes, reported as `load_duration`.
    #[arg(long = "ollama-load-s", default_value_t = 0.5)]
    pub ollama_load_s: f64,
    /// TGI persona: `max_input_tokens` in `/info` (default: `--context-length` − 1).
    #[arg(long = "tgi-max-input-tokens")]
    pub tgi_max_input_tokens: Option<u64>,
}

#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 30000)]
    pub port: u16,
    /// Seed for the simulator's randomness (early stops, speculative acceptance, faults).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Model name the simulator reports.
    #[arg(long = "model-name", default_value = "ctxbench-sim")]
    pub model_name: String,
    /// Serve as a calibrated server: the step model, limits and model name of this twin
    /// profile (`ctxbench twin calibrate`); flags given explicitly still override it.
    /// Example: ctxbench sim --profile llama.json --port 8081
    #[arg(long, value_name = "PROFILE.json")]
    pub profile: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub cost: SimCostArgs,
}

/// Everything a simulator needs besides where to listen.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub cost: SimCostArgs,
    pub seed: u64,
    pub model_name: String,
}

impl From<SimArgs> for SimConfig {
    fn from(args: SimArgs) -> SimConfig {
        SimConfig {
            cost: args.cost,
            seed: args.seed,
            model_name: args.model_name,
        }
    }
}

/// `ctxbench sim`: serve until interrupted.
pub async fn serve_forever(args: SimArgs) -> anyhow::Result<()> {
    if let Some(p) = &args.profile {
        eprintln!(
            "ctxbench sim: serving as the twin profile {} (flags given explicitly override it)",
            p.display()
        );
    }
    let (host, port) = (args.host.clone(), args.port);
    let server = SimServer::start(&host, port, args.into()).await?;
    eprintln!(
        "ctxbench sim listening on http://{} ({})",
        server.addr,
        server.describe()
    );
    tokio::signal::ctrl_c().await?;
    eprintln!("ctxbench sim: interrupted, shutting down");
    server.shutdown().await;
    Ok(())
}
