//! What a prediction leans on that the calibration did not identify: a term the profile
//! marks unidentified (its interval spans zero, its cell was bimodal), or a context or
//! batch beyond what was calibrated (the envelope), where the fitted laws are extrapolated.
//! Each is a `warning:` naming the term and what would identify it, and step models at the
//! ends of the term's plausible range, over which the band is stretched (`band.rs`).

use crate::load::LoadResult;
use crate::twin::model::profile::{Coefficients, Estimate};
use crate::twin::model::twin::Twin;

/// One thing the prediction does not know.
#[derive(Debug, Clone)]
pub struct Unknown {
    /// The term, e.g. `d2`.
    pub term: &'static str,
    /// The warning's text: why, and what would identify it.
    pub warning: String,
    /// Step models at the ends of the term's plausible range.
    pub alternatives: Vec<Coefficients>,
}

/// The twin's step model as coefficients (a what-if's engine, not only the profile's).
fn base(twin: &Twin) -> Coefficients {
    Coefficients::from(&twin.engine.cost)
}

/// Per decoding request, the interference published engines measure at most (Vidur,
/// SplitwiseSim and AIConfigurator put a prefill beside a few decodes near 10 % dearer:
/// 2–5 % per decoder): the far end of an interference nothing measured.
const INTERFERENCE_PRIOR_HIGH: f64 = 0.05;

/// The interference's plausible range: its interval's ends (never below zero) and none at
/// all; with no interval (nothing measured), none to [`INTERFERENCE_PRIOR_HIGH`].
fn interference_alternatives(twin: &Twin) -> Vec<Coefficients> {
    let b = base(twin);
    let mut xs = ends(&twin.profile.step.interference);
    if xs.is_empty() {
        xs.push(INTERFERENCE_PRIOR_HIGH);
    }
    xs.push(0.0);
    xs.into_iter()
        .map(|x| Coefficients {
            interference: Some(x),
            ..b
        })
        .collect()
}

/// `e`'s interval ends (never below zero), or none.
fn ends(e: &Estimate) -> Vec<f64> {
    e.ci95
        .map(|[lo, hi]| vec![lo.max(0.0), hi.max(0.0)])
        .unwrap_or_default()
}

/// The batch law's plausible range: d2 at its interval's ends, and no batching at all
/// (every decoding request pays the whole batch-1 step: d0 moved into d2).
fn batch_alternatives(twin: &Twin) -> Vec<Coefficients> {
    let b = base(twin);
    let mut out: Vec<Coefficients> = ends(&twin.profile.step.d2_s_per_request)
        .into_iter()
        .map(|d2| Coefficients {
            d2_s_per_request: d2,
            ..b
        })
        .collect();
    out.push(Coefficients {
        d0_s: 0.0,
        d2_s_per_request: b.d2_s_per_request + b.d0_s,
        ..b
    });
    out
}

/// Everything `r` (a prediction by `twin`) leans on that is not identified.
pub fn unknowns(twin: &Twin, r: &LoadResult) -> Vec<Unknown> {
    let p = &twin.profile;
    let env = &p.envelope;
    let mut out = Vec::new();
    let batch = r
        .cells
        .iter()
        .filter_map(|c| c.server.as_ref()?.running_max)
        .fold(0.0, f64::max) as u64;
    let longest = r
        .requests
        .iter()
        .map(|q| q.prompt_tokens.unwrap_or(q.cell.context_tokens) + q.output_tokens.unwrap_or(0))
        .max()
        .unwrap_or(0);
    for (term, why) in p.unidentified() {
        // Both only act where requests run together: d2 in a batch of decodes, the
        // interference on a prefill beside decodes.
        if (term == "d2" || term == "interference") && batch < 2 {
            continue;
        }
        out.push(Unknown {
            term,
            warning: format!("{term} is not identified: {why}"),
            alternatives: match term {
                "d2" => batch_alternatives(twin),
                "interference" => interference_alternatives(twin),
                _ => Vec::new(),
            },
        });
    }
    if batch > env.max_concurrency {
        out.push(Unknown {
            term: "d2",
            warning: format!(
                "up to {batch} requests running at once, more than any calibrated ({}): the \
                 per-request decode cost (d2) is extrapolated; `twin calibrate \
                 --concurrency-up-to {batch}` would measure it",
                env.max_concurrency
            ),
            alternatives: batch_alternatives(twin),
        });
    }
    if longest > env.max_context_tokens {
        let b = base(twin);
        let mut alternatives: Vec<Coefficients> = ends(&p.step.d1_s_per_token)
            .into_iter()
            .map(|d1| Coefficients {
                d1_s_per_token: d1,
                ..b
            })
            .collect();
        alternatives.extend(
            ends(&p.step.q_s_per_token2)
                .into_iter()
                .map(|q| Coefficients {
                    q_s_per_token2: q,
                    ..b
                }),
        );
        out.push(Unknown {
            term: "d1, q",
            warning: format!(
                "contexts up to {longest} tokens, longer than any calibrated ({} tokens): the \
                 prefill and decode laws are extrapolated; `twin calibrate --max-length {}` \
                 would measure them",
                env.max_context_tokens,
                crate::lengths::format_count(longest)
            ),
            alternatives,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn twin(interference: Estimate) -> Twin {
        let mut cfg = crate::twin::model::exact::test_engine();
        cfg.cost.interference = interference.value;
        let mut p = crate::twin::model::exact::profile_of(&cfg, 8192);
        p.step.interference = interference;
        Twin::new(p, "mem".into())
    }

    fn xs(t: &Twin) -> Vec<Option<f64>> {
        interference_alternatives(t)
            .iter()
            .map(|c| c.interference)
            .collect()
    }

    #[test]
    fn an_unidentified_interference_stretches_the_band_over_its_range() {
        // Measured but too scattered: its interval's ends (none below zero) and none.
        let wide = Estimate::new(0.23, Some([-0.54, 1.0]), "mixed").unidentified("wide");
        assert_eq!(xs(&twin(wide)), [Some(0.0), Some(1.0), Some(0.0)]);
        // Nothing measured: none to the published engines' high end.
        let none = Estimate::new(0.0, None, "not measured").unidentified("none");
        assert_eq!(xs(&twin(none)), [Some(INTERFERENCE_PRIOR_HIGH), Some(0.0)]);
        // The other coefficients stay the twin's own.
        let t = twin(Estimate::new(0.0, None, "x").unidentified("none"));
        let alt = interference_alternatives(&t)[0];
        assert_eq!(alt.d2_s_per_request, 0.001);
        assert_eq!(alt.p0_tps, 10_000.0);
    }
}
