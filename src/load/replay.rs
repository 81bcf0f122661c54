//! `ctxbench load --trace`: the trace's requests sent at their recorded times (scaled), an
//! arrival plan of one open-loop cell run by `exec` like any other, each prompt built from its block ids, each record carrying what
//! the trace made possible beside what the server reported.

use super::exec::{self, Ctx};
use super::result::LoadResult;
use super::setup::{self, Heads, Output};
use super::{request, slo, telemetry};
use crate::backend::{Backend, GenRequest, Prompt};
use crate::load::args::LoadArgs;
use crate::record::Record;
use crate::record::load::{CellKey, LoadPlan, ShardTag, TracePlan, TraceRequestInfo};
use crate::run;
use crate::run::Chains;
use crate::run::arrivals::{ArrivalPlan, Shape};
use crate::run::shard::Shard;
use crate::trace::agent;
use crate::trace::blocks::Blocks;
use crate::trace::expect::{self, Expected};
use crate::trace::format::{self, TraceRequest};
use crate::trace::groups;
use crate::trace::select::{self, Window};
use crate::workload::NonceSource;
use rand::RngExt;
use std::sync::Arc;
use std::time::Duration;

/// Everything checked before connecting: the trace read and selected, the flags sane.
pub fn prepare(args: &LoadArgs) -> anyhow::Result<(Vec<TraceRequest>, Option<Window>)> {
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
    let chosen = select::select(trace, window, args.trace_limit);
    if chosen.is_empty() {
        anyhow::bail!(
            "--trace {}: no request is left after --trace-window",
            path.display()
        );
    }
    Ok((chosen, window))
}

/// A replay's arrival plan from its flags and the selected trace alone (no server): one
/// open-loop cell at the trace's send times, scaled, each request in its prefix group; its
/// cell's length is the longest input. An agent trace's turns wait on their session's
/// previous turn, then its delay (scaled), and a session is one group. Also each request's
/// group.
pub fn arrival_plan(args: &LoadArgs, requests: &[TraceRequest]) -> (ArrivalPlan, Arc<[usize]>) {
    let mut groups = groups::prefix_groups(requests.iter().map(|r| &r.hash_ids[..]));
    let links = agent::links(requests);
    for (i, link) in links.iter().enumerate() {
        if let Some((j, _)) = link {
            groups[i] = groups[*j];
        }
    }
    let groups: Arc<[usize]> = groups::renumbered(&groups).into();
    let chains = links.iter().any(Option::is_some).then(|| {
        let scaled: Vec<_> = (links.iter())
            .map(|l| l.map(|(j, ms)| (j, Duration::from_secs_f64(ms / 1e3 * args.time_scale))))
            .collect();
        Arc::new(Chains::new(&scaled).expect("a session's turns wait on the one before"))
    });
    let plan = ArrivalPlan {
        shape: Shape::Trace {
            at: select::send_times(requests, args.time_scale),
            groups: groups.clone(),
            chains,
        },
        requests: None,
        duration: None,
        max_concurrency: args.max_concurrency,
        seed: args.seed,
    };
    (plan, groups)
}

/// The salt of this run's block contents: fresh per run, so no earlier run's cache serves
/// them; on a shard the same on every shard of the run (derived from the plan and its
/// `--start-at`), so blocks the shards' groups share are equal tokens, as unsharded.
fn salt(args: &LoadArgs, shard: Option<Shard>, requests: &[TraceRequest]) -> u64 {
    if shard.is_none_or(|s| s.count() == 1) {
        return rand::rng().random();
    }
    if args.start_at.is_none() {
        eprintln!(
            "note: a sharded replay without --start-at salts its blocks by the trace alone: a \
             server that replayed this trace before may serve them from its cache"
        );
    }
    let mut bytes = format!("{:?}", args.start_at).into_bytes();
    bytes.extend(args.block_tokens.to_le_bytes());
    for r in requests {
        bytes.extend(r.input_length.to_le_bytes());
        r.hash_ids
            .iter()
            .for_each(|id| bytes.extend(id.to_le_bytes()));
    }
    crate::run::shard::fnv1a64(&bytes)
}

/// Refuse a request the server cannot take whole, naming its line.
pub(crate) fn check_context(requests: &[TraceRequest], limit: Option<u64>) -> anyhow::Result<()> {
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
    /// Each request's prefix group (`trace::groups`).
    groups: Arc<[usize]>,
    shard: Option<ShardTag>,
    deadline: Duration,
    cell: CellKey,
    t0_ms: f64,
    /// Whether any request shares a block with an earlier one. Without sharing, asking for
    /// prefix reuse only costs: llama.cpp pins such requests to one slot
    /// (`backend::llamacpp::REUSE_SLOT`), which would run the whole replay one at a time.
    reuse: bool,
}

impl Shot {
    /// Send request `slot.index` of the whole (unsharded) replay.
    async fn fire(&self, slot: run::Slot) -> Record {
        let i = slot.index as usize;
        let t = &self.requests[i];
        let e = self.expected[i];
        let req = GenRequest {
            prompt: Prompt::Ids(self.blocks.prompt(t)),
            max_tokens: t.output_length,
            ignore_eos: true,
            cache_prompt: self.reuse,
            deadline: self.deadline,
        };
        let result = self.backend.generate(&req).await;
        let ended = slot.start.elapsed().as_secs_f64();
        let mut r = request::record(self.cell, slot, ended, result);
        let early_stop = r.ok && r.output_tokens.is_some_and(|n| n < t.output_length);
        r.trace = Some(TraceRequestInfo {
            early_stop,
            ..info(t, e, self.t0_ms, self.groups[i])
        });
        r.shard = self.shard;
        Record::Request(Box::new(r))
    }
}

/// What a request record says of its trace request: `e` what the trace made possible, `t0_ms`
/// the first replayed request's time.
pub(crate) fn info(t: &TraceRequest, e: Expected, t0_ms: f64, group: usize) -> TraceRequestInfo {
    TraceRequestInfo {
        line: t.line,
        trace_s: (t.timestamp_ms - t0_ms) / 1e3,
        group: group as u64,
        input_length: t.input_length,
        output_length: t.output_length,
        shared_blocks: e.shared_blocks,
        shared_tokens: e.shared_tokens,
        possible_cached_tokens: e.possible_cached_tokens,
        early_stop: false,
        session_id: t.session.as_ref().map(|s| s.id.clone()),
        turn: t.session.as_ref().map(|s| s.turn),
        recorded_cached_tokens: t.recorded_cached_tokens,
    }
}

/// The record's plan of a replay: the trace's own part (what was read and how it is sent)
/// and the load plan around it. `cache`: page size, working set and KV pool, in tokens.
/// Also the plan of a twin's trace prediction (`twin::predict (trace.rs)`).
pub(crate) fn load_plan(
    args: &LoadArgs,
    requests: &[TraceRequest],
    window: Option<Window>,
    cache: (u64, u64, Option<u64>),
    content_label: String,
) -> anyhow::Result<LoadPlan> {
    let slo = slo::parse(&args.slo).map_err(anyhow::Error::msg)?;
    let (page, working_set, kv_pool_tokens) = cache;
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
        kv_pool_tokens,
        content: content_label,
    };
    Ok(LoadPlan {
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
        shard: None,
        start: None,
        price_per_hour: super::cost::price(args)?,
    })
}

/// Warm-up, excluded: a connection and the server's first-request costs, on a prompt of
/// its own nonce that shares nothing with the trace.
async fn warm_up(backend: &dyn Backend, heads: &Heads, timeout_s: f64) {
    let warm = GenRequest {
        prompt: heads.next(),
        max_tokens: 1,
        ignore_eos: true,
        cache_prompt: false,
        deadline: Duration::from_secs_f64(timeout_s),
    };
    if let Err(e) = backend.generate(&warm).await {
        eprintln!("warning: the warm-up request failed: {e}");
    }
}

/// Replay the trace `args.trace` names (library entry point; `load::execute` comes here).
pub async fn execute(args: LoadArgs) -> anyhow::Result<LoadResult> {
    let (requests, window) = prepare(&args)?;
    let (arrivals, groups) = arrival_plan(&args, &requests);
    slo::parse(&args.slo).map_err(anyhow::Error::msg)?;
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
    let mut prompts = setup::prompt_source(&args, conn.backend.as_ref(), None, &mut nonce).await?;
    let vocab = prompts
        .id_vocabulary()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{}", text_only(conn.backend.api())))?;
    let shard = Shard::resolve(args.shard, args.shards, |k| std::env::var(k).ok())
        .map_err(anyhow::Error::msg)?;
    let salt = salt(&args, shard, &requests);
    let blocks = Blocks::filler(args.block_tokens, vocab.nonce_pool.clone(), salt)?;
    let blocks = match prompts.has_content() {
        true => {
            let backend = conn.backend.as_ref();
            blocks
                .from_content(&mut prompts, backend, &requests)
                .await?
        }
        false => blocks,
    };
    let page = info.page_size.unwrap_or(1).max(1);
    // Over the whole replay, also on a shard: the server's cache holds every shard's blocks.
    let (expected, working_set) = expect::expected(&requests, args.block_tokens, page);
    let content_label = prompts.content_label();
    eprintln!("content: {content_label}");
    let longest = requests.iter().map(|r| r.input_length).max().unwrap_or(0);
    let mut plan = load_plan(
        &args,
        &requests,
        window,
        (page, working_set, info.kv_pool_tokens),
        content_label.clone(),
    )?;
    let gate = setup::shard_and_start(&args, shard, &mut plan, &conn.http).await?;
    let run = setup::run_record(
        &args,
        &url,
        &conn,
        vec![longest],
        prompts.mode().name(),
        content_label,
    )?;
    // A replay is one cell, run whole: a resumed file's records are not carried over.
    let output = Output {
        done: Vec::new(),
        requests: Vec::new(),
        server_metrics: Vec::new(),
        gpu_metrics: Vec::new(),
        ..setup::open_output(&args, run, &plan)?
    };
    let metrics = telemetry::available(&conn.http).await;
    let backend: Arc<dyn Backend> = Arc::from(conn.backend);
    let heads = Arc::new(Heads::new(Some(vocab), nonce));
    warm_up(backend.as_ref(), &heads, args.timeout).await;
    let deadline = Duration::from_secs_f64(args.timeout);
    let http = conn.http.clone();
    let exporters = super::gpu::exporters(&args.telemetry_url)?;
    super::gpu::announce(&exporters).await;
    let mut ctx = Ctx {
        metrics,
        telemetry: exporters,
        shard,
        gate,
        ..Ctx::new(output, &plan, backend.clone(), http, heads, deadline)
    };
    let key = CellKey {
        context_tokens: longest,
        concurrency: None,
        rate: None,
    };
    let reuse = expected.iter().any(|e| e.shared_blocks > 0);
    let shot = Arc::new(Shot {
        reuse,
        backend,
        blocks: Arc::new(blocks),
        t0_ms: requests[0].timestamp_ms,
        requests: requests.into(),
        expected: expected.into(),
        groups,
        shard: ctx.plan.shard,
        deadline: ctx.deadline,
        cell: key,
    });
    let send = move |slot: run::Slot| {
        let shot = shot.clone();
        async move { shot.fire(slot).await }
    };
    for cell in arrivals.cells(0, longest) {
        exec::run_planned(&mut ctx, cell, send.clone()).await?;
    }
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
            session: None,
            recorded_cached_tokens: None,
        };
        let e = check_context(&[r(1, 100), r(7, 1000)], Some(500)).unwrap_err();
        assert!(e.to_string().contains("line 7"), "{e}");
        assert!(check_context(&[r(1, 100)], Some(500)).is_ok());
        assert!(check_context(&[r(1, 100_000)], None).is_ok());
    }
}
