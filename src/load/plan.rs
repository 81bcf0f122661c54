//! `load`'s flags checked before anything is sent or written, and turned into the record's
//! plan and the arrival plan (`run::arrivals`) the cells are run from.

use super::slo;
use crate::lengths::parse_lengths;
use crate::load::args::LoadArgs;
use crate::record::load::LoadPlan;
use crate::run::Arrival;
use crate::run::arrivals::{ArrivalPlan, Shape};
use crate::run::shard::Shard;

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

/// The cells' shape from `--concurrency`, `--rate` (with `--arrival`) or `--find-knee`.
fn shape(args: &LoadArgs) -> anyhow::Result<Shape> {
    Ok(match (&args.concurrency, &args.rate, args.find_knee) {
        (Some(c), None, false) => {
            let mut v = list::<u32>("--concurrency", c, |x| *x > 0)?;
            v.sort_unstable();
            v.dedup();
            Shape::Closed(v)
        }
        (None, Some(r), false) => {
            let mut v = list::<f64>("--rate", r, |x| x.is_finite() && *x > 0.0)?;
            v.sort_by(f64::total_cmp);
            v.dedup();
            let arrival = args
                .arrival
                .parse::<Arrival>()
                .map_err(anyhow::Error::msg)?;
            Shape::Open { rates: v, arrival }
        }
        (None, None, true) => Shape::Knee { max: args.knee_max },
        _ => anyhow::bail!("give one of --concurrency LIST, --rate LIST or --find-knee"),
    })
}

/// The flags every load plan checks alike.
fn check(args: &LoadArgs) -> anyhow::Result<()> {
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
    Ok(())
}

/// Validate every option before anything is sent or written: the arrival plan, the
/// record's plan (lengths filled in once the server's limit is known) and the shard.
pub fn plan(args: &LoadArgs) -> anyhow::Result<(ArrivalPlan, LoadPlan, Option<Shard>)> {
    parse_lengths(&args.lengths).map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
    let shape = shape(args)?;
    check(args)?;
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
    if matches!(shape, Shape::Knee { .. }) && shard.is_some_and(|s| s.count() > 1) {
        anyhow::bail!(
            "--find-knee cannot be sharded: each probe depends on the one before; run it on one client"
        );
    }
    let p = LoadPlan {
        mode: match shape {
            Shape::Closed(_) => "closed",
            Shape::Open { .. } => "open",
            Shape::Knee { .. } => "knee",
            Shape::Trace { .. } => "trace",
        }
        .into(),
        lengths: Vec::new(),
        concurrency: match &shape {
            Shape::Closed(c) => c.clone(),
            _ => Vec::new(),
        },
        rates: match &shape {
            Shape::Open { rates, .. } => rates.clone(),
            _ => Vec::new(),
        },
        arrival: match &shape {
            Shape::Open { arrival, .. } => Some(arrival.to_string()),
            _ => None,
        },
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
        price_per_hour: super::cost::price(args)?,
    };
    let arrivals = ArrivalPlan {
        shape,
        requests: args.requests,
        duration,
        max_concurrency: args.max_concurrency,
        seed: args.seed,
    };
    Ok((arrivals, p, shard))
}
