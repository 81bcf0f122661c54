//! `ctxbench twin predict`: the plans `load` takes (closed, open, `--find-knee`) run
//! against the profile's engine in virtual time, each cell on a fresh engine, its requests
//! made as `load` makes them (same lengths, output tokens, budgets and seeded arrivals).
//! Traces are in `predict_trace.rs`; the records are load's own (`output.rs`).

use super::cell::{self, Predicted};
use super::clients::{Fresh, Pace};
use super::output;
use super::profile::Profile;
use crate::cli::LoadArgs;
use crate::lengths::parse_lengths;
use crate::load::{self, LoadResult, Mode, knee};
use crate::record::load::{CellKey, CellRecord, LoadPlan};
use crate::run::{Arrival, schedule};
use crate::sim::scheduler::EngineConfig;
use crate::workload::points::{self, Limit};
use std::time::Duration;

/// A profile and the engine it configures (whatif changes the engine, not the profile).
#[derive(Debug, Clone)]
pub struct Twin {
    pub profile: Profile,
    /// As given on the command line, for the records.
    pub path: String,
    pub engine: EngineConfig,
}

impl Twin {
    pub fn read(path: &std::path::Path) -> anyhow::Result<Twin> {
        let profile = Profile::read(path).map_err(|e| anyhow::anyhow!("--profile: {e}"))?;
        Ok(Twin::new(profile, path.display().to_string()))
    }

    pub fn new(profile: Profile, path: String) -> Twin {
        let engine = profile.engine_config();
        Twin {
            profile,
            path,
            engine,
        }
    }

    /// The server's context limit as the profile has it.
    pub fn context_limit(&self) -> Limit {
        Limit {
            tokens: self.profile.limits.context_tokens.value.round() as u64,
            source: format!("twin profile {}", self.path),
        }
    }
}

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
    ];
    for (given, flag, why) in refused {
        if given {
            anyhow::bail!("{flag} does not apply to a prediction: {why}");
        }
    }
    Ok(())
}

/// Predict the plan `args` describes (library entry point).
pub fn execute(twin: &Twin, args: &LoadArgs) -> anyhow::Result<LoadResult> {
    refuse_live_flags(args)?;
    if args.trace.is_some() {
        return super::predict_trace::execute(twin, args);
    }
    let (mode, mut plan, arrival, _) = load::plan(args)?;
    let specs = parse_lengths(&args.lengths).map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
    let lengths = points::resolve(&specs, args.output_tokens, Some(&twin.context_limit()))?;
    plan.lengths = lengths.clone();
    let mut out = output::result(twin, args, &plan, lengths.clone());
    for &n in &lengths {
        match &mode {
            Mode::Closed(cs) => {
                for &c in cs {
                    closed_cell(twin, args, &plan, &mut out, n, c)?;
                }
            }
            Mode::Open(rates) => {
                for &r in rates {
                    let key = CellKey {
                        context_tokens: n,
                        concurrency: None,
                        rate: Some(r),
                    };
                    let p = predict_cell(twin, &plan, arrival, key, args.timeout)?;
                    push(twin, &plan, &mut out, key, p);
                }
            }
            Mode::Knee => knee_of(twin, args, &plan, &mut out, n)?,
        }
    }
    Ok(out)
}

/// One cell of `plan` (closed or open loop), as `load` runs it: a closed loop's budget, an
/// open loop's seeded schedule (its seed mixed with the length's and the rate's indices in
/// the plan). `timeout_s`: load's `--timeout`.
pub fn predict_cell(
    twin: &Twin,
    plan: &LoadPlan,
    arrival: Option<Arrival>,
    key: CellKey,
    timeout_s: f64,
) -> anyhow::Result<Predicted> {
    let pace = match (key.concurrency, key.rate) {
        (Some(c), _) => Pace::Closed {
            workers: c as usize,
            budget: load::closed_budget(plan, c),
        },
        (None, Some(r)) => {
            let index = |found: Option<usize>, what: &str| {
                found.ok_or_else(|| anyhow::anyhow!("{what} of cell {key:?} is not in the plan"))
            };
            let li = index(
                plan.lengths.iter().position(|&n| n == key.context_tokens),
                "the length",
            )?;
            let ri = index(
                plan.rates.iter().position(|x| x.to_bits() == r.to_bits()),
                "the rate",
            )?;
            Pace::Open {
                at_s: open_schedule(plan, arrival, li, ri, r),
                cap: plan.max_concurrency.map(|m| m as usize),
            }
        }
        (None, None) => anyhow::bail!("cell {key:?} has neither a concurrency nor a rate"),
    };
    let prompts = Fresh {
        prompt_tokens: key.context_tokens,
        output_tokens: plan.output_tokens,
        salt: 1,
    };
    Ok(cell::run(
        &twin.engine,
        key,
        pace,
        prompts,
        plan.seed,
        timeout_s,
    ))
}

/// The send offsets `load` draws for rate `r` (the `ri`-th rate) at the `li`-th length:
/// the same seed, count and span, so the same schedule.
pub fn open_schedule(
    plan: &LoadPlan,
    arrival: Option<Arrival>,
    li: usize,
    ri: usize,
    r: f64,
) -> Vec<f64> {
    let requests = plan.requests.or_else(|| {
        plan.duration_s
            .is_none()
            .then(|| ((r * load::DEFAULT_OPEN_SPAN_S).ceil() as u64).max(load::MIN_REQUESTS))
    });
    schedule::schedule(
        arrival.unwrap_or(Arrival::Poisson),
        r,
        plan.seed ^ ((li as u64) << 32) ^ ri as u64,
        requests,
        plan.duration_s.map(Duration::from_secs_f64),
    )
    .into_iter()
    .map(|d| d.as_secs_f64())
    .collect()
}

fn closed_cell(
    twin: &Twin,
    args: &LoadArgs,
    plan: &LoadPlan,
    out: &mut LoadResult,
    n: u64,
    c: u32,
) -> anyhow::Result<CellRecord> {
    let key = CellKey {
        context_tokens: n,
        concurrency: Some(c),
        rate: None,
    };
    let p = predict_cell(twin, plan, None, key, args.timeout)?;
    Ok(push(twin, plan, out, key, p))
}

/// Summarise a predicted cell as `load` does and add it to the result.
pub fn push(
    twin: &Twin,
    plan: &LoadPlan,
    out: &mut LoadResult,
    key: CellKey,
    p: Predicted,
) -> CellRecord {
    let cell = output::summarise(twin, plan, key, &p);
    out.cells.push(cell.clone());
    out.requests.extend(p.requests);
    out.server_metrics.extend(p.scrapes);
    cell
}

/// `--find-knee` at length `n`: load's own search over predicted closed-loop cells.
fn knee_of(
    twin: &Twin,
    args: &LoadArgs,
    plan: &LoadPlan,
    out: &mut LoadResult,
    n: u64,
) -> anyhow::Result<()> {
    let found = futures::executor::block_on(knee::search(args.knee_max, async |c| {
        Ok(closed_cell(twin, args, plan, out, n, c)?.meets_target)
    }))?;
    let e = &twin.engine;
    let planned = knee::planned_concurrency(
        Some(e.pool_tokens),
        e.page_tokens,
        Some(e.max_running as u64),
        n,
        args.output_tokens,
    );
    let k = load::knee_record(&out.cells, n, &found, planned);
    out.knees.push(k);
    Ok(())
}
