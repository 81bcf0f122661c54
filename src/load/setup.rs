//! What a load run sets up before its first cell: the shard tag and `--start-at`, the
//! prompts and their shared tails, the run record, fresh nonce heads, the result file (new
//! or resumed).

use super::clock;
use super::request::Tail;
use crate::backend::shared::SharedTail;
use crate::backend::{self, Backend, Prompt, http::Http, http::strip_credentials};
use crate::load::args::LoadArgs;
use crate::record::load::{
    CellKey, CellRecord, GpuMetricsRecord, LoadPlan, RequestRecord, ServerMetricsRecord, ShardTag,
};
use crate::record::{Record, RunConfig, RunRecord, Target};
use crate::run::shard::{self, Shard};
use crate::run::writer::ResultWriter;
use crate::workload::{Built, NONCE_TOKENS, NonceSource, PromptSource, prompt};
use std::sync::{Arc, Mutex};

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
    let graded = args.accuracy.tasks.is_some();
    let qa = args
        .accuracy
        .tasks
        .as_deref()
        .is_some_and(|t| t.split(',').any(|x| x.trim().eq_ignore_ascii_case("qa")));
    // Task qa reads --dataset as its items: the haystack stays filler.
    let content = crate::workload::load_content(
        args.content.corpus.as_deref(),
        args.content.dataset.as_deref().filter(|_| !qa),
        args.content.dataset_format,
    )?;
    PromptSource::prepare_with(backend, graded, ceiling, nonce, content.as_ref()).await
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
    let target = Target {
        url: strip_credentials(url),
        api: conn.backend.api().to_string(),
        model: Some(conn.model.clone()),
        server_info: serde_json::to_value(info)?,
        checks: Default::default(),
    };
    let simulator = args.target.url.is_none().then(|| format!("{:?}", args.sim));
    Ok(load_record(
        args,
        target,
        lengths,
        prompt_mode.to_string(),
        info.rtt_s,
        simulator,
        content,
    ))
}

/// A load run's record for `target`: the sweep fields that do not apply are empty.
/// Shared by a measured run and a twin's prediction.
pub(crate) fn load_record(
    args: &LoadArgs,
    target: Target,
    lengths: Vec<u64>,
    prompt_mode: String,
    rtt_s: Option<f64>,
    simulator: Option<String>,
    content: String,
) -> RunRecord {
    RunRecord {
        schema: crate::record::SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        target,
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
            prompt_mode,
            rtt_s,
            simulator,
            depth: None,
            content: Some(content),
            tasks: Vec::new(),
            samples: None,
            accuracy_threshold: args
                .accuracy
                .tasks
                .as_ref()
                .map(|_| args.accuracy.accuracy_threshold.clone()),
            prompt_style: None,
        },
    }
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

/// A prompt of `n` tokens with a nonce of its own, so no earlier request's cache covers it.
pub(crate) async fn fresh_prompt(
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

/// The shared tails of length `n`'s prompts: with `--tasks`, one per graded item (every
/// task's samples, at the depths in turn), each hiding its own facts.
pub(crate) async fn tails(
    prompts: &mut PromptSource,
    backend: &dyn Backend,
    n: u64,
    graded: Option<&Graded<'_>>,
) -> anyhow::Result<Arc<[Tail]>> {
    if let Some(g) = graded {
        let mut out = Vec::new();
        for rep in 0..g.plan.tasks.per_length() {
            let item = g
                .plan
                .item(g.seed, n, rep, g.depths, g.style)
                .map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
            let built = prompts
                .build(
                    backend,
                    n,
                    Some(&mut NonceSource::from_entropy()),
                    Some(&item.needle),
                )
                .await?;
            out.push(Tail {
                tail: SharedTail::from_prompt(&built.prompt, NONCE_TOKENS),
                source: built.source,
                graded: Some(item.needle),
            });
        }
        return Ok(out.into());
    }
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
            graded: None,
        });
    }
    Ok(out.into())
}

/// What graded load tails are made from: the tasks, the seed, the depths, the style.
pub(crate) struct Graded<'a> {
    pub(crate) plan: &'a crate::accuracy::args::AccuracyPlan,
    pub(crate) seed: u64,
    pub(crate) depths: &'a [f64],
    pub(crate) style: crate::accuracy::generate::Style,
}

/// A load run's result file, opened: new, or resumed with the complete cells it holds.
pub(crate) struct Output {
    pub(crate) writer: ResultWriter,
    /// The run record: this run's, or the resumed file's.
    pub(crate) run: RunRecord,
    /// Cells the resumed file completed (not run again), with their records.
    pub(crate) done: Vec<CellRecord>,
    pub(crate) requests: Vec<RequestRecord>,
    pub(crate) server_metrics: Vec<ServerMetricsRecord>,
    pub(crate) gpu_metrics: Vec<GpuMetricsRecord>,
}

impl Output {
    fn new(writer: ResultWriter, run: RunRecord) -> Output {
        Output {
            writer,
            run,
            done: Vec::new(),
            requests: Vec::new(),
            server_metrics: Vec::new(),
            gpu_metrics: Vec::new(),
        }
    }
}

/// Create the file, or continue it keeping only complete cells.
pub(crate) fn open_output(
    args: &LoadArgs,
    run: RunRecord,
    plan: &LoadPlan,
) -> anyhow::Result<Output> {
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
            let gpu: Vec<GpuMetricsRecord> = f
                .load
                .gpu_metrics
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
                for m in gpu.iter().filter(|m| m.cell.same(&c.cell)) {
                    text.push_str(&Record::GpuMetrics(m.clone()).to_line());
                }
                text.push_str(&Record::Cell(Box::new(c.clone())).to_line());
            }
            crate::report::write_atomic(path, &text)?;
            eprintln!(
                "resuming {}: {} complete cells kept",
                path.display(),
                cells.len()
            );
            let (writer, _) = ResultWriter::resume(path, &old_run)?;
            Ok(Output {
                writer,
                run: old_run,
                done: cells,
                requests,
                server_metrics: metrics,
                gpu_metrics: gpu,
            })
        }
        Some(path) => {
            let mut w = ResultWriter::create(path)?;
            header(&mut w, &run)?;
            Ok(Output::new(w, run))
        }
        None => Ok(Output::new(ResultWriter::none(), run)),
    }
}
