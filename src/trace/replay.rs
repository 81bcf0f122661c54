//! `ctxbench load --trace`: the trace's requests sent at their recorded times (scaled), open
//! loop on the shared runner, each prompt built from its block ids, each record carrying what
//! the trace made possible beside what the server reported.

use super::blocks::Blocks;
use super::expect::{self, Expected};
use super::format::{self, TraceRequest};
use super::select::{self, Window};
use crate::backend::{Backend, GenRequest, Prompt};
use crate::cli::LoadArgs;
use crate::load::{self, Ctx, Heads, LoadResult, request};
use crate::record::Record;
use crate::record::load::{CellKey, LoadPlan, TracePlan, TraceRequestInfo};
use crate::run::{self, Budget, Collector, Load, Pacing};
use crate::workload::{NonceSource, PromptSource};
use rand::RngExt;
use std::sync::Arc;
use std::time::Duration;

/// As `load --rate`: the pacing thread spins this long before each send.
const SEND_SPIN: Duration = Duration::from_micros(250);

/// Everything checked before connecting: the trace read and selected, the flags sane.
fn prepare(args: &LoadArgs) -> anyhow::Result<(Vec<TraceRequest>, Option<Window>)> {
    let path = args
        .trace
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("--trace FILE is required here"))?;
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        anyhow::bail!("--time-scale must be a positive number (0.5 replays twice as fast)");
    }
    if args.max_concurrency == Some(0) {
        anyhow::bail!("--max-concurrency must be at least 1");
    }
    if args.trace_limit == Some(0) {
        anyhow::bail!("--trace-limit must be at least 1");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--timeout must be a positive number of seconds");
    }
    let window = args
        .trace_window
        .as_deref()
        .map(str::parse::<Window>)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let trace = format::read(path, args.trace_format, args.block_tokens)?;
    let chosen = select::select(trace, &select::window_filter(window), args.trace_limit);
    if chosen.is_empty() {
        anyhow::bail!(
            "--trace {}: no request is left after --trace-window",
            path.display()
        );
    }
    Ok((chosen, window))
}

/// Refuse a request the server cannot take whole, naming its line.
fn check_context(requests: &[TraceRequest], limit: Option<u64>) -> anyhow::Result<()> {
    let Some(limit) = limit else { return Ok(()) };
    if let Some(r) = requests
        .iter()
        .find(|r| r.input_length + r.output_length > limit)
    {
        anyhow::bail!(
            "--trace line {}: input_length {} + output_length {} exceeds the server's context \
             of {limit} tokens; replay a part with --trace-window or --trace-limit",
            r.line,
            r.input_length,
            r.output_length
        );
    }
    Ok(())
}

/// Why a text-only API cannot replay a trace.
fn text_only(api: &str) -> String {
    format!(
        "--trace: prompts must be token-exact so that equal block ids are equal tokens, which \
         needs a server taking token ids (SGLang, llama.cpp, vLLM's completions with its \
         tokenizer); {api} takes text here (block texts tokenized apart are not the tokens of \
         their concatenation)"
    )
}

/// What one send needs.
struct Shot {
    backend: Arc<dyn Backend>,
    blocks: Arc<Blocks>,
    requests: Arc<[TraceRequest]>,
    expected: Arc<[Expected]>,
    deadline: Duration,
    cell: CellKey,
    t0_ms: f64,
}

impl Shot {
    async fn fire(&self, slot: run::Slot) -> Record {
        let i = slot.index as usize;
        let t = &self.requests[i];
        let e = self.expected[i];
        let req = GenRequest {
            prompt: Prompt::Ids(self.blocks.prompt(t)),
            max_tokens: t.output_length,
            ignore_eos: true,
            cache_prompt: true,
            deadline: self.deadline,
        };
        let result = self.backend.generate(&req).await;
        let ended = slot.start.elapsed().as_secs_f64();
        let mut r = request::record(self.cell, slot, ended, result);
        r.trace = Some(TraceRequestInfo {
            line: t.line,
            trace_s: (t.timestamp_ms - self.t0_ms) / 1e3,
            group: t.group_key(),
            input_length: t.input_length,
            output_length: t.output_length,
            shared_blocks: e.shared_blocks,
            shared_tokens: e.shared_tokens,
            possible_cached_tokens: e.possible_cached_tokens,
            early_stop: r.ok && r.output_tokens.is_some_and(|n| n < t.output_length),
        });
        Record::Request(Box::new(r))
    }
}

/// Replay the trace `args.trace` names (library entry point; `load::execute` comes here).
pub async fn execute(args: LoadArgs) -> anyhow::Result<LoadResult> {
    let (requests, window) = prepare(&args)?;
    let slo = load::slo::parse(&args.slo).map_err(anyhow::Error::msg)?;
    let run::target::Connection {
        sim: _sim,
        url,
        conn,
    } = run::target::connect(&args.target, &args.sim, args.seed, |sim| {
        format!(
            "ctxbench: no --url given: replaying the trace against the built-in simulator at {} ({})",
            sim.url(),
            sim.describe()
        )
    })
    .await?;
    let info = conn.info.clone();
    check_context(&requests, info.context_length)?;
    if !conn.backend.takes_token_ids() {
        anyhow::bail!("{}", text_only(conn.backend.api()));
    }
    let mut nonce = NonceSource::from_entropy();
    let content = crate::workload::load_content(
        args.content.corpus.as_deref(),
        args.content.dataset.as_deref(),
        args.content.dataset_format,
    )?;
    let mut prompts = PromptSource::prepare_with(
        conn.backend.as_ref(),
        false,
        None,
        &mut nonce,
        content.as_ref(),
    )
    .await?;
    let vocab = prompts
        .id_vocabulary()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{}", text_only(conn.backend.api())))?;
    let salt: u64 = rand::rng().random();
    let mut blocks = Blocks::filler(args.block_tokens, vocab.nonce_pool.clone(), salt)?;
    if prompts.has_content() {
        blocks = blocks
            .from_content(&mut prompts, conn.backend.as_ref(), &requests)
            .await?;
    }
    let page = info.page_size.unwrap_or(1).max(1);
    let (expected, working_set) = expect::expected(&requests, args.block_tokens, page);
    let content_label = prompts.content_label();
    eprintln!("content: {content_label}");
    let longest = requests.iter().map(|r| r.input_length).max().unwrap_or(0);
    let trace_plan = TracePlan {
        file: args
            .trace
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        format: args.trace_format.name().into(),
        block_tokens: args.block_tokens,
        time_scale: args.time_scale,
        limit: args.trace_limit,
        window: window.and(args.trace_window.clone()),
        requests: requests.len() as u64,
        page_tokens: page,
        working_set_tokens: working_set,
        kv_pool_tokens: info.kv_pool_tokens,
        content: content_label.clone(),
    };
    let plan = LoadPlan {
        mode: "trace".into(),
        lengths: vec![longest],
        concurrency: Vec::new(),
        rates: Vec::new(),
        arrival: Some("trace".into()),
        max_concurrency: args.max_concurrency,
        requests: Some(requests.len() as u64),
        duration_s: None,
        output_tokens: requests.iter().map(|r| r.output_length).max().unwrap_or(0),
        slo,
        goodput_target: args.goodput_target,
        seed: args.seed,
        trace: Some(trace_plan),
    };
    let run = load::run_record(
        &args,
        &url,
        &conn,
        vec![longest],
        prompts.mode().name(),
        content_label,
    )?;
    let (writer, run, _, _) = load::open_output(&args, run, &plan)?;
    let metrics = load::telemetry::available(&conn.http).await;
    let backend: Arc<dyn Backend> = Arc::from(conn.backend);
    let heads = Arc::new(Heads::new(Some(vocab), nonce));
    // Warm-up, excluded: a connection and the server's first-request costs, on a prompt of
    // its own nonce that shares nothing with the trace.
    let warm = GenRequest {
        prompt: heads.next(),
        max_tokens: 1,
        ignore_eos: true,
        cache_prompt: false,
        deadline: Duration::from_secs_f64(args.timeout),
    };
    if let Err(e) = backend.generate(&warm).await {
        eprintln!("warning: the warm-up request failed: {e}");
    }
    let mut ctx = Ctx {
        backend: backend.clone(),
        http: conn.http.clone(),
        collector: Collector::new(writer),
        heads,
        plan: plan.clone(),
        metrics,
        deadline: Duration::from_secs_f64(args.timeout),
        done: Vec::new(),
        out: LoadResult {
            run,
            plan,
            cells: Vec::new(),
            knees: Vec::new(),
            requests: Vec::new(),
            server_metrics: Vec::new(),
        },
    };
    let key = CellKey {
        context_tokens: longest,
        concurrency: None,
        rate: None,
    };
    let at = select::send_times(&requests, args.time_scale);
    let shot = Arc::new(Shot {
        backend,
        blocks: Arc::new(blocks),
        t0_ms: requests[0].timestamp_ms,
        requests: requests.into(),
        expected: expected.into(),
        deadline: ctx.deadline,
        cell: key,
    });
    let send = move |slot: run::Slot| {
        let shot = shot.clone();
        async move { shot.fire(slot).await }
    };
    let load = Load::Open {
        at,
        max_concurrency: args.max_concurrency.map(|m| m as usize),
        pacing: Pacing::Thread { spin: SEND_SPIN },
    };
    load::run_cell_with(&mut ctx, key, load, Budget::Requests(0), send).await?;
    Ok(ctx.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_beyond_the_context_is_refused_by_line() {
        let r = |line, input| TraceRequest {
            line,
            timestamp_ms: 0.0,
            input_length: input,
            output_length: 10,
            hash_ids: vec![1],
        };
        let e = check_context(&[r(1, 100), r(7, 1000)], Some(500)).unwrap_err();
        assert!(e.to_string().contains("line 7"), "{e}");
        assert!(check_context(&[r(1, 100)], Some(500)).is_ok());
        assert!(check_context(&[r(1, 100_000)], None).is_ok());
    }
}
