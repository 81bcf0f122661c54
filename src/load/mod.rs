//! `ctxbench load`: cells of (context length × concurrency or arrival rate) on the shared
//! request runner, small to large; SLOs and goodput, server telemetry, the knee.

pub mod args;
pub mod cell;
pub mod clock;
pub mod cost;
pub mod energy;
pub mod exec;
pub mod gpu;
pub mod job_io;
pub mod knee;
pub mod knob;
pub mod plan;
pub mod progress;
pub mod replay;
pub mod request;
pub mod result;
pub mod setup;
pub mod slo;
pub mod spec_rate;
pub mod telemetry;

use crate::backend::{self, Backend};
use crate::lengths::parse_lengths;
use crate::load::args::LoadArgs;
use crate::run::target::{Connection, connect};
use crate::workload::NonceSource;
use exec::Ctx;
pub use exec::spare_connections;
pub use result::LoadResult;
use setup::Heads;
use std::sync::Arc;
use std::time::Duration;

/// Depths of `load --tasks` items, taken in turn by each task's samples.
const LOAD_DEPTHS: [f64; 3] = [0.1, 0.5, 0.9];

/// Run the load plan (library entry point used by tests).
pub async fn execute(args: LoadArgs) -> anyhow::Result<LoadResult> {
    if args.trace.is_some() {
        return replay::execute(args).await;
    }
    let (arrivals, mut lplan, shard) = plan::plan(&args)?;
    let exporters = gpu::exporters(&args.telemetry_url)?;
    let specs = parse_lengths(&args.lengths).map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
    let accuracy = args.accuracy.plan(args.content.dataset.as_deref())?;
    if let Some(a) = &accuracy {
        check_accuracy_lengths(a, &specs)?;
    }
    let mut target = args.target.clone();
    if accuracy.is_some() && args.accuracy.wants_chat() {
        target.endpoint = crate::choices::Endpoint::Chat;
    }
    // `_sim`: the built-in simulator, kept alive for the whole run.
    let Connection {
        sim: _sim,
        url,
        conn,
    } = connect(&target, &args.sim, args.seed, |sim| {
        format!(
            "ctxbench: no --url given: loading the built-in simulator at {} ({})",
            sim.url(),
            sim.describe()
        )
    })
    .await?;
    let (conn, chat) = match &accuracy {
        Some(_) => crate::run::target::graded_route(&target, &url, conn).await?,
        None => (conn, false),
    };
    let style = match chat {
        true => crate::accuracy::generate::Style::Chat,
        false => crate::accuracy::generate::Style::Raw,
    };
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
    let gate = setup::shard_and_start(&args, shard, &mut lplan, &conn.http).await?;
    let ceiling = limit
        .as_ref()
        .map(|l| l.tokens.saturating_sub(args.output_tokens));
    let mut nonce = NonceSource::from_entropy();
    let mut prompts =
        setup::prompt_source(&args, conn.backend.as_ref(), ceiling, &mut nonce).await?;
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
    let run = setup::run_record(
        &args,
        &url,
        &conn,
        lengths.clone(),
        prompts.mode().name(),
        prompts.content_label(),
    )?;
    let output = setup::open_output(&args, run, &lplan)?;
    let heads = Arc::new(Heads::new(prompts.id_vocabulary().cloned(), nonce));
    let backend: Arc<dyn Backend> = Arc::from(conn.backend);
    let deadline = Duration::from_secs_f64(args.timeout);
    gpu::announce(&exporters).await;
    let mut ctx = Ctx {
        metrics,
        telemetry: exporters,
        shard,
        gate,
        ..Ctx::new(output, &lplan, backend, conn.http.clone(), heads, deadline)
    };
    warm_up(&ctx, &mut prompts, lengths[0], args.output_tokens).await?;
    let planned_knee = |n: u64| {
        knee::planned_concurrency(
            info.kv_pool_tokens,
            info.page_size.unwrap_or(1),
            info.max_running_requests,
            n,
            args.output_tokens,
        )
    };
    let backend = ctx.backend.clone();
    let graded = accuracy.as_ref().map(|plan| setup::Graded {
        plan,
        seed: args.seed,
        depths: &LOAD_DEPTHS,
        style,
    });
    let tails =
        async |n: u64| setup::tails(&mut prompts, backend.as_ref(), n, graded.as_ref()).await;
    exec::run_plan(&mut ctx, &arrivals, &lengths, tails, planned_knee).await?;
    Ok(ctx.out)
}

/// The `--tasks` items must fit the explicit `--lengths` (those resolved from the server
/// are checked once it answers).
fn check_accuracy_lengths(
    a: &crate::accuracy::args::AccuracyPlan,
    specs: &[crate::lengths::LengthSpec],
) -> anyhow::Result<()> {
    let explicit: Vec<u64> = specs
        .iter()
        .filter_map(|l| match l {
            crate::lengths::LengthSpec::Tokens(n) => Some(*n),
            _ => None,
        })
        .collect();
    a.check_lengths(
        &explicit,
        &LOAD_DEPTHS,
        crate::accuracy::generate::Style::Raw,
    )
}

/// Warm-up, excluded: connections and the server's first-request costs.
async fn warm_up(
    ctx: &Ctx,
    prompts: &mut crate::workload::PromptSource,
    shortest: u64,
    output_tokens: u64,
) -> anyhow::Result<()> {
    let n = 256.min(shortest);
    let built = setup::fresh_prompt(prompts, ctx.backend.as_ref(), n).await?;
    let req = backend::GenRequest {
        prompt: built.prompt,
        max_tokens: output_tokens.min(4),
        ignore_eos: true,
        cache_prompt: false,
        deadline: ctx.deadline,
    };
    if let Err(e) = ctx.backend.generate(&req).await {
        eprintln!("warning: the warm-up request failed: {e}");
    }
    Ok(())
}
