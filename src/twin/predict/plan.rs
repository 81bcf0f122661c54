//! `ctxbench twin predict`: the arrival plans `load` takes (closed, open, `--find-knee`)
//! run against the profile's engine in virtual time, each cell on a fresh engine, its
//! requests made as `load` makes them (same lengths, output tokens, budgets and seeded
//! arrivals: load's own `run::arrivals` plan, iterated here instead of over HTTP).
//! Traces are in `trace.rs`; the records are load's own (`records.rs`).

use crate::lengths::parse_lengths;
use crate::load::args::LoadArgs;
use crate::load::{self, LoadResult, knee};
use crate::record::load::{CellKey, LoadPlan};
use crate::run::Arrival;
use crate::run::arrivals::{ArrivalPlan, PlannedCell, Shape};
use crate::twin::model::twin::Twin;
use crate::twin::predict::cell::{self, Predicted};
use crate::twin::predict::clients::{Fresh, pace};
use crate::twin::predict::records::{self, push};
use crate::workload::points;
use std::time::Duration;

/// Refuse the load flags that have no meaning in virtual time, naming each.
pub fn refuse_live_flags(args: &LoadArgs) -> anyhow::Result<()> {
    let refused = [
        (
            args.target.url.is_some(),
            "--url",
            "the profile is the server",
        ),
        (args.resume, "--resume", "a prediction is recomputed whole"),
        (
            args.shard.is_some() || args.shards.is_some(),
            "--shard/--shards",
            "one process predicts the whole plan",
        ),
        (
            args.start_at.is_some(),
            "--start-at",
            "virtual time starts at 0",
        ),
        (
            !args.telemetry_url.is_empty(),
            "--telemetry-url",
            "a prediction draws no power",
        ),
        (
            args.print_out || args.log.is_some(),
            "--print-out/--log",
            "they shape a live run's stdout and stderr",
        ),
    ];
    for (given, flag, why) in refused {
        if given {
            anyhow::bail!("{flag} does not apply to a prediction: {why}");
        }
    }
    Ok(())
}

/// Predict the plan `args` describes (library entry point): load's own arrival plan
/// (`load::plan`), each of its cells run on a fresh engine.
pub fn execute(twin: &Twin, args: &LoadArgs) -> anyhow::Result<LoadResult> {
    refuse_live_flags(args)?;
    if args.trace.is_some() {
        return crate::twin::predict::trace::execute(twin, args);
    }
    let (arrivals, mut plan, _) = load::plan::plan(args)?;
    let specs = parse_lengths(&args.lengths).map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
    let lengths = points::resolve(&specs, args.output_tokens, Some(&twin.context_limit()))?;
    plan.lengths = lengths.clone();
    let mut out = records::result(twin, args, &plan, lengths.clone());
    for (li, &n) in lengths.iter().enumerate() {
        if let Shape::Knee { max } = arrivals.shape {
            knee_of(twin, &arrivals, &plan, &mut out, n, max, args.timeout)?;
            continue;
        }
        for cell in arrivals.cells(li, n) {
            let p = run_cell(twin, &plan, &cell, args.timeout);
            push(twin, &plan, &mut out, cell.key, p);
        }
    }
    Ok(out)
}

/// The arrival plan a load file's plan was run from (`twin check`).
pub fn arrival_plan(plan: &LoadPlan) -> anyhow::Result<ArrivalPlan> {
    let shape = match plan.mode.as_str() {
        "closed" => Shape::Closed(plan.concurrency.clone()),
        "open" => Shape::Open {
            rates: plan.rates.clone(),
            arrival: plan
                .arrival
                .as_deref()
                .unwrap_or("poisson")
                .parse::<Arrival>()
                .map_err(anyhow::Error::msg)?,
        },
        "knee" => Shape::Knee { max: u32::MAX },
        other => anyhow::bail!("a load plan of mode `{other}` has no closed or open cells"),
    };
    Ok(ArrivalPlan {
        shape,
        requests: plan.requests,
        duration: plan.duration_s.map(Duration::from_secs_f64),
        max_concurrency: plan.max_concurrency,
        seed: plan.seed,
    })
}

/// The cell `key` of a load file's plan, predicted as `load` ran it: a closed loop's
/// budget, an open loop's seeded schedule. `timeout_s`: load's `--timeout`.
pub fn predict_cell(
    twin: &Twin,
    plan: &LoadPlan,
    key: CellKey,
    timeout_s: f64,
) -> anyhow::Result<Predicted> {
    let arrivals = arrival_plan(plan)?;
    let cell = match key.concurrency {
        Some(c) => arrivals.closed(key.context_tokens, c),
        None => {
            let li = plan
                .lengths
                .iter()
                .position(|&n| n == key.context_tokens)
                .ok_or_else(|| anyhow::anyhow!("cell {key:?}: its length is not in the plan"))?;
            arrivals
                .cells(li, key.context_tokens)
                .into_iter()
                .find(|c| c.key.same(&key))
                .ok_or_else(|| anyhow::anyhow!("cell {key:?}: its rate is not in the plan"))?
        }
    };
    Ok(run_cell(twin, plan, &cell, timeout_s))
}

/// The measured run's request timeout, for the predicted requests (600 s where the run's
/// was not a number of seconds).
pub fn timeout_s(m: &LoadResult) -> f64 {
    m.run.config.timeout.parse::<f64>().unwrap_or(600.0)
}

/// Every measured cell of a load plan, predicted.
pub fn predict_cells(twin: &Twin, m: &LoadResult, timeout_s: f64) -> anyhow::Result<LoadResult> {
    let mut out = LoadResult {
        cells: Vec::new(),
        knees: Vec::new(),
        requests: Vec::new(),
        server_metrics: Vec::new(),
        gpu_metrics: Vec::new(),
        run: m.run.clone(),
        plan: m.plan.clone(),
    };
    for c in &m.cells {
        let p = predict_cell(twin, &m.plan, c.cell, timeout_s)?;
        push(twin, &m.plan, &mut out, c.cell, p);
    }
    Ok(out)
}

/// One planned cell of fresh prompts (each its own nonce), on a fresh engine.
fn run_cell(twin: &Twin, plan: &LoadPlan, cell: &PlannedCell, timeout_s: f64) -> Predicted {
    let prompts = Fresh {
        prompt_tokens: cell.key.context_tokens,
        output_tokens: plan.output_tokens,
        salt: 1,
    };
    cell::run(
        &twin.engine,
        cell.key,
        pace(&cell.arrivals),
        prompts,
        plan.seed,
        timeout_s,
        twin.schedule,
    )
}

/// `--find-knee` at length `n`: load's own search over predicted closed-loop cells.
fn knee_of(
    twin: &Twin,
    arrivals: &ArrivalPlan,
    plan: &LoadPlan,
    out: &mut LoadResult,
    n: u64,
    max: u32,
    timeout_s: f64,
) -> anyhow::Result<()> {
    let found = futures::executor::block_on(knee::search(max, async |c| {
        let cell = arrivals.closed(n, c);
        let p = run_cell(twin, plan, &cell, timeout_s);
        Ok(push(twin, plan, out, cell.key, p).meets_target)
    }))?;
    let e = &twin.engine;
    let planned = knee::planned_concurrency(
        Some(e.pool_tokens),
        e.page_tokens,
        Some(e.max_running as u64),
        n,
        plan.output_tokens,
    );
    let k = knee::knee_record(&out.cells, n, &found, planned);
    out.knees.push(k);
    Ok(())
}
