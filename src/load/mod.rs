//! `ctxbench load`: cells of (context length × concurrency or arrival rate) on the shared
//! request runner, small to large; SLOs and goodput, server telemetry, the knee.

pub mod cell;
pub mod clock;
pub mod compare;
pub mod knee;
pub mod merge;
pub mod render;
pub mod request;
pub mod slo;
pub mod telemetry;

use crate::backend::shared::SharedTail;
use crate::backend::{self, Backend, Prompt, http::Http, http::strip_credentials};
use crate::cli::LoadArgs;
use crate::exit;
use crate::lengths::parse_lengths;
use crate::record::load::{
    CellKey, CellRecord, KneeRecord, LoadPlan, RequestRecord, ServerMetricsRecord, ShardTag,
};
use crate::record::{Record, RunConfig, RunRecord, Target};
use crate::run::shard::{self, Shard};
use crate::run::writer::ResultWriter;
use crate::run::{self, Arrival, Budget, Collector, Load, Pacing, runner::InFlight, schedule};
use crate::workload::{Built, PromptSource};
use crate::workload::{NONCE_TOKENS, NonceSource, prompt};
use request::{Shot, Tail};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// How long the pacing thread spins before each open-loop send (see `runner::Pacing`):
/// longer than the OS timer's usual lateness (its 50 µs slack plus a wake-up).
const SEND_SPIN: Duration = Duration::from_micros(250);
/// Default requests per closed-loop worker, and the floor for any cell.
const REQUESTS_PER_WORKER: u64 = 4;
pub(crate) const MIN_REQUESTS: u64 = 16;
/// The longest a cell's connection warm-up may take.
const WARM_TIMEOUT: Duration = Duration::from_secs(30);
/// Default open-loop arrival span, seconds.
pub(crate) const DEFAULT_OPEN_SPAN_S: f64 = 10.0;

/// What to run per length.
#[derive(Debug, Clone)]
pub(crate) enum Mode {
    Closed(Vec<u32>),
    Open(Vec<f64>),
    Knee,
}

/// Everything a finished load run produced.
pub struct LoadResult {
    pub run: RunRecord,
    pub plan: LoadPlan,
    pub cells: Vec<CellRecord>,
    pub knees: Vec<KneeRecord>,
    pub requests: Vec<RequestRecord>,
    pub server_metrics: Vec<ServerMetricsRecord>,
}

impl LoadResult {
    pub fn exit_code(&self) -> u8 {
        // A shard's share of a cell can be nothing (fewer workers or arrivals than shards).
        let ran: Vec<&CellRecord> = self
            .cells
            .iter()
            .filter(|c| !(c.sent == 0 && c.shard.is_some()))
            .collect();
        if self.cells.is_empty() {
            exit::NOTHING_VALID
        } else if ran.is_empty() {
            exit::OK
        } else if ran.iter().all(|c| c.ok == 0) {
            exit::NOTHING_VALID
        } else if ran.iter().any(|c| c.ok == 0) {
            exit::PARTIAL
        } else {
            exit::OK
        }
    }
}

/// `ctxbench load`: run, print, return the exit code.
pub async fn run(args: LoadArgs) -> anyhow::Result<u8> {
    let (format, html) = (args.format, args.html.clone());
    let r = execute(args).await?;
    print!("{}", render::render_result(&r, format));
    if let Some(path) = html {
        render::write_html(&path, &r)?;
    }
    Ok(r.exit_code())
}

fn list<T: std::str::FromStr>(
    flag: &str,
    s: &str,
    ok: impl Fn(&T) -> bool,
) -> anyhow::Result<Vec<T>> {
    let v = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.parse::<T>()
                .ok()
                .filter(|v| ok(v))
                .ok_or_else(|| anyhow::anyhow!("{flag}: `{x}` is not a positive number"))
        })
        .collect::<anyhow::Result<Vec<T>>>()?;
    if v.is_empty() {
        anyhow::bail!("{flag}: give at least one value");
    }
    Ok(v)
}

/// Validate every option before anything is sent or written.
pub(crate) fn plan(
    args: &LoadArgs,
) -> anyhow::Result<(Mode, LoadPlan, Option<Arrival>, Option<Shard>)> {
    parse_lengths(&args.lengths).map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
    let mode = match (&args.concurrency, &args.rate, args.find_knee) {
        (Some(c), None, false) => {
            let mut v = list::<u32>("--concurrency", c, |x| *x > 0)?;
            v.sort_unstable();
            v.dedup();
            Mode::Closed(v)
        }
        (None, Some(r), false) => {
            let mut v = list::<f64>("--rate", r, |x| x.is_finite() && *x > 0.0)?;
            v.sort_by(f64::total_cmp);
            v.dedup();
            Mode::Open(v)
        }
        (None, None, true) => Mode::Knee,
        _ => anyhow::bail!("give one of --concurrency LIST, --rate LIST or --find-knee"),
    };
    let arrival = match mode {
        Mode::Open(_) => Some(
            args.arrival
                .parse::<Arrival>()
                .map_err(anyhow::Error::msg)?,
        ),
        _ => None,
    };
    if args.output_tokens < 1 {
        anyhow::bail!("--output-tokens must be at least 1");
    }
    if !(args.goodput_target > 0.0 && args.goodput_target <= 1.0) {
        anyhow::bail!("--goodput-target must be in (0, 1], e.g. 0.95");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--timeout must be a positive number of seconds");
    }
    if args.requests == Some(0) {
        anyhow::bail!("--requests must be at least 1");
    }
    if args.max_concurrency == Some(0) {
        anyhow::bail!("--max-concurrency must be at least 1");
    }
    if args.max_concurrency.is_some() && args.rate.is_none() {
        anyhow::bail!("--max-concurrency needs --rate or --trace (an open loop)");
    }
    if args.knee_max == 0 {
        anyhow::bail!("--knee-max must be at least 1");
    }
    if args.resume && args.out.is_none() {
        anyhow::bail!("--resume needs --out FILE (the file to continue)");
    }
    let duration = match &args.duration {
        Some(d) => Some(
            humantime::parse_duration(d)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    anyhow::anyhow!("--duration `{d}`: expected a duration such as 60s")
                })?,
        ),
        None => None,
    };
    let slo = slo::parse(&args.slo).map_err(anyhow::Error::msg)?;
    let shard = Shard::resolve(args.shard, args.shards, |k| std::env::var(k).ok())
        .map_err(anyhow::Error::msg)?;
    if matches!(mode, Mode::Knee) && shard.is_some_and(|s| s.count() > 1) {
        anyhow::bail!(
            "--find-knee cannot be sharded: each probe depends on the one before; run it on one client"
        );
    }
    let p = LoadPlan {
        mode: match mode {
            Mode::Closed(_) => "closed",
            Mode::Open(_) => "open",
            Mode::Knee => "knee",
        }
        .into(),
        lengths: Vec::new(),
        concurrency: match &mode {
            Mode::Closed(c) => c.clone(),
            _ => Vec::new(),
        },
        rates: match &mode {
            Mode::Open(r) => r.clone(),
            _ => Vec::new(),
        },
        arrival: arrival.map(|a| a.to_string()),
        max_concurrency: args.max_concurrency,
        requests: args.requests,
        duration_s: duration.map(|d| d.as_secs_f64()),
        output_tokens: args.output_tokens,
        slo,
        goodput_target: args.goodput_target,
        seed: args.seed,
        shard: None,
        start: None,
        trace: None,
    };
    Ok((mode, p, arrival, shard))
}

/// Tag the plan with this process's shard (its hash taken over the plan as run unsharded)
/// and, with `--start-at`, measure this clock against the server's: the local time the first
/// cell starts at.
pub(crate) async fn shard_and_start(
    args: &LoadArgs,
    shard: Option<Shard>,
    plan: &mut LoadPlan,
    http: &Http,
) -> anyhow::Result<Option<std::time::SystemTime>> {
    plan.shard = shard.map(|s| ShardTag {
        shard: s.index(),
        shards: s.count(),
        plan_hash: shard::plan_hash(plan),
    });
    if let Some(t) = &plan.shard {
        eprintln!("shard {}/{} of plan {}", t.shard, t.shards, t.plan_hash);
    }
    Ok(match args.start_at {
        Some(at) => {
            let (sync, local) = clock::sync(http, at).await?;
            plan.start = Some(sync);
            Some(local)
        }
        None => None,
    })
}

/// The prompts of a load run: `--corpus`/`--dataset` loaded, the length mode chosen with
/// the server (no needle: load measures speed).
pub(crate) async fn prompt_source(
    args: &LoadArgs,
    backend: &dyn Backend,
    ceiling: Option<u64>,
    nonce: &mut NonceSource,
) -> anyhow::Result<PromptSource> {
    let content = crate::workload::load_content(
        args.content.corpus.as_deref(),
        args.content.dataset.as_deref(),
        args.content.dataset_format,
    )?;
    PromptSource::prepare_with(backend, false, ceiling, nonce, content.as_ref()).await
}

/// The run record of a load run (sweep fields that do not apply are empty).
pub(crate) fn run_record(
    args: &LoadArgs,
    url: &str,
    conn: &backend::Connected,
    lengths: Vec<u64>,
    prompt_mode: &str,
    content: String,
) -> anyhow::Result<RunRecord> {
    let info = &conn.info;
    Ok(RunRecord {
        schema: crate::record::SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        target: Target {
            url: strip_credentials(url),
            api: conn.backend.api().to_string(),
            model: Some(conn.model.clone()),
            server_info: serde_json::to_value(info)?,
            checks: Default::default(),
        },
        config: RunConfig {
            lengths,
            output_tokens: args.output_tokens,
            reps: 0,
            method: "load".into(),
            cache_bust: "nonce".into(),
            needle: false,
            needle_depths: Vec::new(),
            timeout: args.timeout.to_string(),
            seed: args.seed,
            prompt_mode: prompt_mode.to_string(),
            rtt_s: info.rtt_s,
            simulator: args.target.url.is_none().then(|| format!("{:?}", args.sim)),
            depth: None,
            content: Some(content),
        },
    })
}

/// Fresh nonce heads, one per request.
pub(crate) struct Heads {
    vocab: Option<prompt::IdVocabulary>,
    nonce: Mutex<NonceSource>,
}

impl Heads {
    pub(crate) fn new(vocab: Option<prompt::IdVocabulary>, nonce: NonceSource) -> Self {
        Heads {
            vocab,
            nonce: Mutex::new(nonce),
        }
    }

    pub(crate) fn next(&self) -> Prompt {
        let mut n = self.nonce.lock().unwrap_or_else(|p| p.into_inner());
        match &self.vocab {
            Some(v) => prompt::build_ids(v, NONCE_TOKENS as u64, Some(&mut n), None),
            None => prompt::build_text(0, Some(&mut n), None),
        }
    }
}

/// The state cells share.
pub(crate) struct Ctx {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) http: Http,
    pub(crate) collector: Collector,
    pub(crate) heads: Arc<Heads>,
    pub(crate) plan: LoadPlan,
    pub(crate) metrics: bool,
    pub(crate) deadline: Duration,
    pub(crate) done: Vec<CellRecord>,
    pub(crate) out: LoadResult,
    pub(crate) shard: Option<Shard>,
    /// `--start-at` on this machine's clock, until the first cell takes it.
    pub(crate) gate: Option<std::time::SystemTime>,
}

/// This process's part of a cell, when the plan is sharded.
#[derive(Default)]
struct Part {
    /// Closed loop: the workers it runs of the cell's concurrency.
    workers: Option<u32>,
    /// Open loop: its arrivals' indices in the unsharded schedule.
    indices: Option<Arc<[u64]>>,
}

/// Run the load plan (library entry point used by tests).
pub async fn execute(args: LoadArgs) -> anyhow::Result<LoadResult> {
    if args.trace.is_some() {
        return crate::trace::replay::execute(args).await;
    }
    let (mode, mut lplan, arrival, shard) = plan(&args)?;
    let specs = parse_lengths(&args.lengths).map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
    let run::target::Connection {
        sim: _sim,
        url,
        conn,
    } = run::target::connect(&args.target, &args.sim, args.seed, |sim| {
        format!(
            "ctxbench: no --url given: loading the built-in simulator at {} ({})",
            sim.url(),
            sim.describe()
        )
    })
    .await?;
    let info = conn.info.clone();
    let limit = info.context_length.map(|t| crate::workload::points::Limit {
        tokens: t,
        source: info
            .context_source
            .clone()
            .unwrap_or_else(|| "server".into()),
    });
    let lengths = crate::workload::points::resolve(&specs, args.output_tokens, limit.as_ref())?;
    lplan.lengths = lengths.clone();
    let gate = shard_and_start(&args, shard, &mut lplan, &conn.http).await?;
    let ceiling = limit
        .as_ref()
        .map(|l| l.tokens.saturating_sub(args.output_tokens));
    let mut nonce = NonceSource::from_entropy();
    let mut prompts = prompt_source(&args, conn.backend.as_ref(), ceiling, &mut nonce).await?;
    eprintln!("content: {}", prompts.content_label());
    if let Some(&longest) = lengths.last() {
        prompts.check_room(conn.backend.as_ref(), longest).await?;
    }
    let metrics = telemetry::available(&conn.http).await;
    if !metrics {
        eprintln!(
            "note: no server metrics (no usable /metrics): server-side running/waiting/KV are not shown"
        );
    }
    let run = run_record(
        &args,
        &url,
        &conn,
        lengths.clone(),
        prompts.mode().name(),
        prompts.content_label(),
    )?;
    let (writer, run, done, old) = open_output(&args, run, &lplan)?;
    let heads = Arc::new(Heads::new(prompts.id_vocabulary().cloned(), nonce));
    let backend: Arc<dyn Backend> = Arc::from(conn.backend);
    let mut ctx = Ctx {
        backend,
        http: conn.http.clone(),
        collector: Collector::new(writer),
        heads,
        plan: lplan.clone(),
        metrics,
        deadline: Duration::from_secs_f64(args.timeout),
        done,
        out: LoadResult {
            run: run.clone(),
            plan: lplan.clone(),
            cells: Vec::new(),
            knees: Vec::new(),
            requests: old.0,
            server_metrics: old.1,
        },
        shard,
        gate,
    };
    // Warm-up, excluded: connections and the server's first-request costs.
    {
        let n = 256.min(lengths[0]);
        let built = fresh_prompt(&mut prompts, ctx.backend.as_ref(), n).await?;
        let req = backend::GenRequest {
            prompt: built.prompt,
            max_tokens: args.output_tokens.min(4),
            ignore_eos: true,
            cache_prompt: false,
            deadline: ctx.deadline,
        };
        if let Err(e) = ctx.backend.generate(&req).await {
            eprintln!("warning: the warm-up request failed: {e}");
        }
    }
    for (li, &n) in lengths.iter().enumerate() {
        let tail = tails(&mut prompts, ctx.backend.as_ref(), n).await?;
        match &mode {
            Mode::Closed(cs) => {
                for &c in cs {
                    closed_cell(&mut ctx, n, c, &tail).await?;
                }
            }
            Mode::Open(rates) => {
                for (ri, &r) in rates.iter().enumerate() {
                    let key = CellKey {
                        context_tokens: n,
                        concurrency: None,
                        rate: Some(r),
                    };
                    let requests = lplan.requests.or_else(|| {
                        lplan
                            .duration_s
                            .is_none()
                            .then(|| ((r * DEFAULT_OPEN_SPAN_S).ceil() as u64).max(MIN_REQUESTS))
                    });
                    let at = schedule::schedule(
                        arrival.unwrap_or(Arrival::Poisson),
                        r,
                        args.seed ^ ((li as u64) << 32) ^ ri as u64,
                        requests,
                        lplan.duration_s.map(Duration::from_secs_f64),
                    );
                    let (at, part) = match ctx.shard {
                        Some(s) => {
                            let mine = s.arrivals(&at);
                            let part = Part {
                                workers: None,
                                indices: Some(mine.iter().map(|a| a.0).collect()),
                            };
                            (mine.into_iter().map(|a| a.1).collect(), part)
                        }
                        None => (at, Part::default()),
                    };
                    if let (true, Some(s)) = (at.is_empty(), ctx.shard) {
                        let note = format!("no arrival of this cell's schedule falls to shard {s}");
                        empty_cell(&mut ctx, key, None, note).await?;
                        continue;
                    }
                    let load = Load::Open {
                        at,
                        max_concurrency: lplan.max_concurrency.map(|m| m as usize),
                        pacing: Pacing::Thread { spin: SEND_SPIN },
                    };
                    run_cell(&mut ctx, key, load, Budget::Requests(0), &tail, part).await?;
                }
            }
            Mode::Knee => {
                let found = knee::search(args.knee_max, async |c| {
                    Ok(closed_cell(&mut ctx, n, c, &tail).await?.meets_target)
                })
                .await?;
                let planned = knee::planned_concurrency(
                    info.kv_pool_tokens,
                    info.page_size.unwrap_or(1),
                    info.max_running_requests,
                    n,
                    args.output_tokens,
                );
                let mut k = knee_record(&ctx.out.cells, n, &found, planned);
                k.shard = ctx.plan.shard;
                ctx.collector.append(&Record::Knee(k.clone()))?;
                ctx.collector.sync()?;
                ctx.out.knees.push(k);
            }
        }
    }
    Ok(ctx.out)
}

/// A prompt of `n` tokens with a nonce of its own, so no earlier request's cache covers it.
async fn fresh_prompt(
    prompts: &mut PromptSource,
    backend: &dyn Backend,
    n: u64,
) -> anyhow::Result<Built> {
    prompts
        .build(backend, n, Some(&mut NonceSource::from_entropy()), None)
        .await
}

/// Distinct spans of real content each length's requests take in turn: more would cost
/// client memory (each is serialised once and kept for the run), fewer would repeat a span
/// sooner. Filler has one.
const CONTENT_TAILS: usize = 8;

/// The shared tails of length `n`'s prompts.
async fn tails(
    prompts: &mut PromptSource,
    backend: &dyn Backend,
    n: u64,
) -> anyhow::Result<Arc<[Tail]>> {
    let count = if prompts.has_content() {
        CONTENT_TAILS
    } else {
        1
    };
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let built = fresh_prompt(prompts, backend, n).await?;
        out.push(Tail {
            tail: SharedTail::from_prompt(&built.prompt, NONCE_TOKENS),
            source: built.source,
        });
    }
    Ok(out.into())
}

/// One closed-loop cell of `c` workers at length `n`.
async fn closed_cell(
    ctx: &mut Ctx,
    n: u64,
    c: u32,
    tail: &Arc<[Tail]>,
) -> anyhow::Result<CellRecord> {
    let key = CellKey {
        context_tokens: n,
        concurrency: Some(c),
        rate: None,
    };
    let mut budget = closed_budget(&ctx.plan, c);
    let Some(s) = ctx.shard else {
        let load = Load::Closed {
            concurrency: c as usize,
        };
        return run_cell(ctx, key, load, budget, tail, Part::default()).await;
    };
    let workers = s.workers(c);
    if workers == 0 {
        let note = format!("shard {s} runs none of this cell's {c} workers");
        return empty_cell(ctx, key, Some(0), note).await;
    }
    if let Budget::Requests(n) = budget {
        budget = Budget::Requests(s.requests(n, c));
    }
    let load = Load::Closed {
        concurrency: workers as usize,
    };
    let part = Part {
        workers: Some(workers),
        indices: None,
    };
    run_cell(ctx, key, load, budget, tail, part).await
}

/// A cell in which this shard has nothing to send: recorded so that its file is complete.
pub(crate) async fn empty_cell(
    ctx: &mut Ctx,
    key: CellKey,
    workers: Option<u32>,
    note: String,
) -> anyhow::Result<CellRecord> {
    if let Some(c) = ctx.done.iter().find(|c| c.cell.same(&key)) {
        let c = c.clone();
        ctx.out.cells.push(c.clone());
        return Ok(c);
    }
    if let Some(at) = ctx.gate.take() {
        clock::wait_until(at).await?;
    }
    let cell = CellRecord {
        cell: key,
        shard: ctx.plan.shard,
        workers,
        notes: vec![note],
        ..Default::default()
    };
    ctx.collector
        .append(&Record::Cell(Box::new(cell.clone())))?;
    ctx.collector.sync()?;
    eprintln!("{}", render::progress_line(&cell));
    ctx.out.cells.push(cell.clone());
    Ok(cell)
}

/// The knee of length `n` beside the planner's count and the onset of server queueing.
pub(crate) fn knee_record(
    all: &[CellRecord],
    n: u64,
    found: &knee::Knee,
    planned: Option<(f64, String)>,
) -> KneeRecord {
    let cells: Vec<&CellRecord> = all.iter().filter(|c| c.cell.context_tokens == n).collect();
    let queued = |c: &&&CellRecord| {
        c.server
            .as_ref()
            .is_some_and(|s| s.waiting_max.is_some_and(|w| w > 0.0))
    };
    KneeRecord {
        context_tokens: n,
        axis: "concurrency".into(),
        knee: found.knee.map(f64::from),
        first_miss: found.first_miss.map(f64::from),
        planned: planned.as_ref().map(|p| p.0),
        planned_from: planned.map(|p| p.1),
        queue_onset: cells
            .iter()
            .filter(queued)
            .filter_map(|c| c.cell.concurrency.map(f64::from))
            .reduce(f64::min),
        probes: found
            .probes
            .iter()
            .map(|(c, _)| {
                let g = cells
                    .iter()
                    .find(|x| x.cell.concurrency == Some(*c))
                    .and_then(|x| x.goodput_fraction)
                    .unwrap_or(0.0);
                (f64::from(*c), g)
            })
            .collect(),
        shard: None,
    }
}

pub(crate) fn closed_budget(p: &LoadPlan, c: u32) -> Budget {
    match (p.requests, p.duration_s) {
        (Some(n), _) => Budget::Requests(n),
        (None, Some(d)) => Budget::Duration(Duration::from_secs_f64(d)),
        (None, None) => Budget::Requests((u64::from(c) * REQUESTS_PER_WORKER).max(MIN_REQUESTS)),
    }
}

/// Create the file, or continue it keeping only complete cells.
#[allow(clippy::type_complexity)]
pub(crate) fn open_output(
    args: &LoadArgs,
    run: RunRecord,
    plan: &LoadPlan,
) -> anyhow::Result<(
    ResultWriter,
    RunRecord,
    Vec<CellRecord>,
    (Vec<RequestRecord>, Vec<ServerMetricsRecord>),
)> {
    let header = |w: &mut ResultWriter, run: &RunRecord| -> anyhow::Result<()> {
        w.append(&Record::Run(run.clone()))?;
        w.append(&Record::LoadPlan(plan.clone()))?;
        w.sync()
    };
    match &args.out {
        Some(path) if args.resume && path.exists() => {
            let f = crate::resultfile::read(path).map_err(|e| anyhow::anyhow!("--resume: {e}"))?;
            let old_run = f
                .run
                .ok_or_else(|| anyhow::anyhow!("--resume {}: no run record", path.display()))?;
            let unstarted = |p: &LoadPlan| LoadPlan {
                start: None,
                ..p.clone()
            };
            if f.load.plan.as_ref().map(unstarted) != Some(unstarted(plan)) {
                anyhow::bail!(
                    "--resume {}: the file holds a different load plan (or no load at all); \
                     use the same options or another --out",
                    path.display()
                );
            }
            let cells = f.load.cells;
            let keep = |k: &CellKey| cells.iter().any(|c| c.cell.same(k));
            let requests: Vec<RequestRecord> = f
                .load
                .requests
                .into_iter()
                .filter(|r| keep(&r.cell))
                .collect();
            let metrics: Vec<ServerMetricsRecord> = f
                .load
                .server_metrics
                .into_iter()
                .filter(|m| keep(&m.cell))
                .collect();
            // Rewrite with complete cells only: a half-run cell runs again from scratch.
            let mut text = String::new();
            text.push_str(&Record::Run(old_run.clone()).to_line());
            text.push_str(&Record::LoadPlan(plan.clone()).to_line());
            for c in &cells {
                for r in requests.iter().filter(|r| r.cell.same(&c.cell)) {
                    text.push_str(&Record::Request(Box::new(r.clone())).to_line());
                }
                for m in metrics.iter().filter(|m| m.cell.same(&c.cell)) {
                    text.push_str(&Record::ServerMetrics(m.clone()).to_line());
                }
                text.push_str(&Record::Cell(Box::new(c.clone())).to_line());
            }
            crate::report::write_atomic(path, &text)?;
            eprintln!(
                "resuming {}: {} complete cells kept",
                path.display(),
                cells.len()
            );
            let (w, _) = ResultWriter::resume(path, &old_run)?;
            Ok((w, old_run, cells, (requests, metrics)))
        }
        Some(path) => {
            let mut w = ResultWriter::create(path)?;
            header(&mut w, &run)?;
            Ok((w, run, Vec::new(), (Vec::new(), Vec::new())))
        }
        None => Ok((
            ResultWriter::none(),
            run,
            Vec::new(),
            (Vec::new(), Vec::new()),
        )),
    }
}

/// Run one cell (or return it from the resumed file).
async fn run_cell(
    ctx: &mut Ctx,
    key: CellKey,
    load: Load,
    budget: Budget,
    tails: &Arc<[Tail]>,
    part: Part,
) -> anyhow::Result<CellRecord> {
    let shot = Arc::new(Shot {
        backend: ctx.backend.clone(),
        tails: tails.clone(),
        output_tokens: ctx.plan.output_tokens,
        deadline: ctx.deadline,
        cell: key,
    });
    let heads = ctx.heads.clone();
    let tag = ctx.plan.shard;
    let indices = part.indices.clone();
    let send = move |mut slot: run::Slot| {
        // A shard's open-loop request keeps its index in the unsharded schedule.
        if let Some(ix) = &indices {
            slot.index = ix[slot.index as usize];
        }
        let shot = shot.clone();
        let head = heads.next();
        async move {
            let mut r = shot.fire(slot, head).await;
            r.shard = tag;
            Record::Request(Box::new(r))
        }
    };
    run_cell_with(ctx, key, load, budget, part.workers, send).await
}

/// Run one cell whose requests `send` makes (or return it from the resumed file): the
/// runner, the telemetry scraper, the collector writing each record as it comes, the
/// cell's summary. `workers`: a shard's part of a closed-loop cell's concurrency.
pub(crate) async fn run_cell_with<F, Fut>(
    ctx: &mut Ctx,
    key: CellKey,
    load: Load,
    budget: Budget,
    workers: Option<u32>,
    send: F,
) -> anyhow::Result<CellRecord>
where
    F: Fn(run::Slot) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Record> + Send + 'static,
{
    if let Some(c) = ctx.done.iter().find(|c| c.cell.same(&key)) {
        let c = c.clone();
        ctx.out.cells.push(c.clone());
        return Ok(c);
    }
    let warmed = match &load {
        Load::Closed { concurrency } => warm(&ctx.http, *concurrency, ctx.deadline).await,
        Load::Open { .. } => None,
    };
    if let Some(at) = ctx.gate.take() {
        clock::wait_until(at).await?;
    }
    let tag = ctx.plan.shard;
    let start = Instant::now();
    let in_flight = InFlight::default();
    let (tx, rx) = mpsc::unbounded_channel::<Record>();
    let (stop_tx, stop_rx) = watch::channel(false);
    let scraper = ctx.metrics.then(|| {
        tokio::spawn(telemetry::scrape_cell(
            ctx.http.clone(),
            key,
            tag,
            start,
            in_flight.clone(),
            tx.clone(),
            stop_rx,
        ))
    });
    let runner = tokio::spawn(run::run(load, budget, start, in_flight, send, tx));
    let drive = async move {
        let r = runner.await;
        let _ = stop_tx.send(true);
        if let Some(s) = scraper {
            let _ = s.await;
        }
        r
    };
    let (gathered, ran) = tokio::join!(ctx.collector.gather(rx), drive);
    ran.map_err(|e| anyhow::anyhow!("the request runner failed: {e}"))?;
    let gathered = gathered?;
    let mut requests = Vec::new();
    let mut scrapes = Vec::new();
    for r in gathered.records {
        match r {
            Record::Request(q) => requests.push(*q),
            Record::ServerMetrics(m) => scrapes.push(m),
            _ => {}
        }
    }
    requests.sort_by_key(|r| r.index);
    // A shard's steady state is its own workers in flight.
    let target = CellKey {
        concurrency: workers.or(key.concurrency),
        ..key
    };
    let mut cell = cell::summarise(
        target,
        &requests.iter().collect::<Vec<_>>(),
        &scrapes.iter().collect::<Vec<_>>(),
        &ctx.plan.slo,
        ctx.plan.goodput_target,
    );
    cell.cell = key;
    cell.shard = tag;
    cell.workers = workers;
    cell.warm_connections = warmed;
    ctx.collector
        .append(&Record::Cell(Box::new(cell.clone())))?;
    ctx.collector.sync()?;
    eprintln!("{}", render::progress_line(&cell));
    for note in &cell.notes {
        eprintln!("  note: {note}");
    }
    ctx.out.cells.push(cell.clone());
    ctx.out.requests.extend(requests);
    ctx.out.server_metrics.extend(scrapes);
    Ok(cell)
}

/// Open a closed-loop cell's `workers` connections, and [`spare_connections`] more, before
/// its clock starts, so its first requests measure the server, not connects. A failure is a
/// warning: the cell runs cold.
async fn warm(http: &Http, workers: usize, timeout: Duration) -> Option<u64> {
    let want = workers + spare_connections(workers);
    match http.warm(want, timeout.min(WARM_TIMEOUT)).await {
        Ok(n) => {
            if n < workers {
                eprintln!(
                    "note: {n} of {workers} connections warmed before the cell; the others \
                     connect inside their first request's TTFT"
                );
            }
            Some(n as u64)
        }
        Err(e) => {
            eprintln!("warning: warming the cell's connections failed ({e}); it runs cold");
            None
        }
    }
}

/// Idle connections kept beside a closed loop's own: a worker's next request can go out
/// before its last connection is back in the pool, and would then open one inside its TTFT
/// (seen at 256 workers: up to 5 of 1,024 requests per round without spares, none with 8).
pub fn spare_connections(workers: usize) -> usize {
    workers.div_ceil(32)
}

/// `ctxbench report` on load files: merge, summarise, print.
pub fn report_files(
    args: &crate::cli::ReportArgs,
    first: crate::resultfile::ResultFile,
) -> anyhow::Result<u8> {
    let mut files = vec![(args.file.display().to_string(), first)];
    for p in &args.more {
        let f = crate::resultfile::read(p).map_err(|e| anyhow::anyhow!("{e}"))?;
        files.push((p.display().to_string(), f));
    }
    for (name, f) in &files {
        if f.torn_tail {
            eprintln!("note: the last line of {name} was torn (a crash mid-write) and was ignored");
        }
    }
    let r = merge::merge(&files)?;
    print!("{}", render::render_result(&r, args.format));
    if let Some(h) = &args.html {
        render::write_html(h, &r)?;
    }
    Ok(r.exit_code())
}

/// `ctxbench compare` on two load files: common cells side by side.
pub fn compare_files(
    args: &crate::cli::CompareArgs,
    a: (String, crate::resultfile::ResultFile),
    b: (String, crate::resultfile::ResultFile),
) -> anyhow::Result<u8> {
    let (la, lb) = (a.0.clone(), b.0.clone());
    let ra = merge::merge(&[a])?;
    let rb = merge::merge(&[b])?;
    print!("{}", compare::render(&ra, &rb, (&la, &lb), args.format)?);
    if let Some(h) = &args.html {
        crate::report::write_atomic(h, &compare::html(&ra, &rb, (&la, &lb))?)?;
    }
    Ok(exit::OK)
}
