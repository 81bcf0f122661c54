//! `ctxbench twin whatif`: the profile's engine with knobs changed (max-running, pool,
//! chunk), each configuration predicted over the same load plan (or trace), set side by side
//! with its SLO verdict, goodput and knee; the best configuration named; every place a
//! configuration leaves what was calibrated said.

use crate::twin::model::twin::Twin;
mod outcome;

use crate::load::LoadResult;
use crate::load::args::LoadArgs;
pub use crate::load::knob::Knob;
pub use outcome::{Config, Outcome};

/// One `--vary KNOB=A,B,…`.
#[derive(Debug, Clone, PartialEq)]
pub struct Vary {
    pub knob: Knob,
    /// As given (counts take `k`).
    pub values: Vec<String>,
}

/// Parse one `--vary`, naming the flag in every error.
pub fn parse_vary(s: &str) -> anyhow::Result<Vary> {
    let (name, list) = s.split_once('=').ok_or_else(|| {
        anyhow::anyhow!("--vary `{s}`: expected KNOB=A,B,… e.g. max-running=8,16,64")
    })?;
    let knob = Knob::from_name(name).ok_or_else(|| {
        anyhow::anyhow!(
            "--vary `{s}`: unknown knob `{name}`; one of {}",
            Knob::names()
        )
    })?;
    let values: Vec<String> = list
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        anyhow::bail!("--vary `{s}`: give at least one value");
    }
    if let Some(v) = values.iter().find(|v| knob.value(v).is_none()) {
        anyhow::bail!("--vary {}: `{v}` is not a positive number", knob.name());
    }
    Ok(Vary { knob, values })
}

impl Config {
    /// The twin and load flags of this configuration.
    pub fn apply(&self, twin: &Twin, args: &LoadArgs) -> anyhow::Result<(Twin, LoadArgs)> {
        let (mut t, mut a) = (twin.clone(), args.clone());
        self.apply_engine(&mut t)?;
        for (knob, v) in &self.settings {
            if *knob == Knob::TimeScale {
                a.time_scale = v.parse()?;
            }
        }
        Ok((t, a))
    }

    /// The engine knobs of this configuration, set on `t`.
    fn apply_engine(&self, t: &mut Twin) -> anyhow::Result<()> {
        let count = |v: &str| crate::lengths::parse_count(v).map_err(anyhow::Error::msg);
        for (knob, v) in &self.settings {
            match knob {
                Knob::MaxRunning => t.engine.max_running = count(v)? as usize,
                Knob::Pool => t.engine.pool_tokens = count(v)?,
                Knob::Chunk => t.engine.max_batch_tokens = count(v)?,
                Knob::TimeScale | Knob::Concurrency | Knob::Rate => {}
            }
        }
        Ok(())
    }
}

/// Every combination of the engine knobs' values (load knobs set the load flags instead).
pub fn configs(varies: &[Vary]) -> Vec<Config> {
    let mut out = vec![Config {
        settings: Vec::new(),
    }];
    for v in varies {
        if !v.knob.is_tagged() {
            continue;
        }
        out = out
            .into_iter()
            .flat_map(|c| {
                v.values.iter().map(move |x| {
                    let mut c = c.clone();
                    c.settings.push((v.knob, x.clone()));
                    c
                })
            })
            .collect();
    }
    out
}

/// Predict every configuration.
pub fn run(twin: &Twin, args: &LoadArgs, vary: &[String]) -> anyhow::Result<Vec<Outcome>> {
    let varies = vary
        .iter()
        .map(|s| parse_vary(s))
        .collect::<anyhow::Result<Vec<Vary>>>()?;
    let mut args = args.clone();
    for v in &varies {
        match v.knob {
            Knob::Concurrency => args.concurrency = Some(v.values.join(",")),
            Knob::Rate => args.rate = Some(v.values.join(",")),
            _ => {}
        }
    }
    let runs = configs(&varies)
        .into_iter()
        .map(|config| {
            let (t, a) = config.apply(twin, &args)?;
            Ok((config, t, a))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // As many configurations' points at once as there are cores (each holds its replay);
    // then each one's bands, whose reruns use every core.
    let hidden = indicatif::ProgressBar::hidden();
    let mut out = Vec::new();
    for some in runs.chunks(crate::twin::uncertainty::threads::threads(runs.len())) {
        let points = crate::twin::uncertainty::threads::run(
            some,
            |(_, t, a)| crate::twin::uncertainty::banded::point(t, a),
            &hidden,
        );
        for ((config, t, a), point) in some.iter().zip(points) {
            out.push(outcome(twin, config, t, a, point?)?);
        }
    }
    Ok(out)
}

/// One configuration's outcome from its point: its bands, its cells tagged, its warnings.
fn outcome(
    twin: &Twin,
    config: &Config,
    t: &Twin,
    a: &LoadArgs,
    mut b: crate::twin::uncertainty::banded::Banded,
) -> anyhow::Result<Outcome> {
    crate::twin::uncertainty::banded::band(t, a, &mut b)?;
    let crate::twin::uncertainty::banded::Banded {
        mut result,
        unknown,
        moves,
        ..
    } = b;
    let tag = config.tag();
    for c in &mut result.cells {
        c.config = (!tag.is_empty()).then(|| tag.clone());
    }
    let mut warnings: Vec<String> = unknown.into_iter().map(|u| u.warning).collect();
    warnings.extend(
        moves
            .iter()
            .flat_map(crate::twin::uncertainty::schedule::schedule_warnings),
    );
    let measured_pool = twin.profile.limits.pool_tokens.value;
    if t.engine.pool_tokens as f64 > measured_pool {
        warnings.push(format!(
            "pool {} tokens is larger than the measured server's ({measured_pool:.0}): \
             it must fit in the accelerator's memory",
            t.engine.pool_tokens
        ));
    }
    Ok(Outcome {
        config: config.clone(),
        result,
        warnings,
    })
}

/// `twin` as relaunched with each `KNOB=VALUE` of `settings` (engine knobs only).
pub fn configured(twin: Twin, settings: &[String]) -> anyhow::Result<Twin> {
    let mut config = Config {
        settings: Vec::new(),
    };
    for s in settings {
        let v = parse_vary(&s.replace('_', "-"))
            .map_err(|e| anyhow::anyhow!("{}", e.to_string().replace("--vary", "--config")))?;
        if !v.knob.is_engine() || v.values.len() != 1 {
            anyhow::bail!(
                "--config `{s}`: give one engine knob and one value (max-running, pool or chunk)"
            );
        }
        config.settings.push((v.knob, v.values[0].clone()));
    }
    let mut t = twin.clone();
    config.apply_engine(&mut t)?;
    if !config.settings.is_empty() {
        t.path = format!("{} ({})", twin.path, config.label());
    }
    Ok(t)
}

/// Every configuration's predicted cells in one file, each tagged with its configuration:
/// the run header, the plan, then the cells and knees (no per-request records: their cell
/// keys repeat across configurations).
pub fn write(twin: &Twin, outcomes: &[Outcome], path: &std::path::Path) -> anyhow::Result<()> {
    let Some(first) = outcomes.first() else {
        anyhow::bail!("--out: no configuration to write");
    };
    let mut all = LoadResult {
        cells: Vec::new(),
        requests: Vec::new(),
        server_metrics: Vec::new(),
        gpu_metrics: Vec::new(),
        knees: Vec::new(),
        run: first.result.run.clone(),
        plan: first.result.plan.clone(),
    };
    for o in outcomes {
        all.cells.extend(o.result.cells.iter().cloned());
    }
    crate::twin::predict::records::write(twin, &all, path)
}

/// Per length: the largest load whose cell meets the SLOs at the goodput target, from the
/// knee search when there was one, else from the cells (`None`: none met).
pub fn knees(r: &LoadResult) -> Vec<(u64, Option<f64>)> {
    if !r.knees.is_empty() {
        return r.knees.iter().map(|k| (k.context_tokens, k.knee)).collect();
    }
    r.plan
        .lengths
        .iter()
        .map(|&n| {
            let best = r
                .cells
                .iter()
                .filter(|c| c.cell.context_tokens == n && c.meets_target)
                .filter_map(|c| c.cell.concurrency.map(f64::from).or(c.cell.rate))
                .reduce(f64::max);
            (n, best)
        })
        .collect()
}

/// The best configuration: the one meeting the SLOs at the most load (summed knees), then
/// with the most goodput among its passing cells, the first given on a tie; `None` when
/// none meets them anywhere.
pub fn best(outcomes: &[Outcome]) -> Option<usize> {
    let score = |o: &Outcome| {
        let load: f64 = knees(&o.result).iter().filter_map(|k| k.1).sum();
        let goodput: f64 = o
            .result
            .cells
            .iter()
            .filter(|c| c.meets_target)
            .filter_map(|c| c.goodput_rps)
            .sum();
        let passes = o.result.cells.iter().any(|c| c.meets_target);
        (passes, load, goodput)
    };
    // Ties go to the first configuration given (the cheaper one, when listed so).
    let (i, (passes, _, _)) = outcomes
        .iter()
        .map(score)
        .enumerate()
        .reduce(|best, x| if x.1 > best.1 { x } else { best })?;
    passes.then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varies_parse_and_bad_ones_name_the_flag() {
        let v = parse_vary("max-running=8,16, 64").unwrap();
        assert_eq!(v.knob, Knob::MaxRunning);
        assert_eq!(v.values, ["8", "16", "64"]);
        assert_eq!(parse_vary("pool=128k,256k").unwrap().knob, Knob::Pool);
        for bad in ["max-running", "speed=1", "chunk=", "chunk=0", "rate=x"] {
            let e = parse_vary(bad).unwrap_err().to_string();
            assert!(e.contains("--vary"), "{bad}: {e}");
        }
    }

    #[test]
    fn configurations_are_every_combination_of_the_engine_knobs() {
        let v = [
            parse_vary("max-running=8,64").unwrap(),
            parse_vary("concurrency=1,2").unwrap(),
            parse_vary("pool=100k,200k,300k").unwrap(),
        ];
        let c = configs(&v);
        assert_eq!(
            c.len(),
            6,
            "the load dimension is cells, not configurations"
        );
        assert_eq!(c[0].label(), "max-running=8 pool=100k");
        assert_eq!(c[5].label(), "max-running=64 pool=300k");
    }
}
