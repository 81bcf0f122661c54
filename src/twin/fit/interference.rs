//! The interference term from the mixed steps (`mixed_steps.rs`): a prompt prefilled beside k
//! decoding requests costs (1 + x·k) times its prefill alone. Each step gives
//! y = step − decode part − prefill alone = x · k · prefill alone, with the prefill alone
//! the median TTFT of the same prompt length sent alone in the mixed trace (the same host
//! within seconds), else t0 + n/p0 + q·n²/2 from the sweep, and the decode part the same
//! decoders' ordinary step (their median gap), else d0 + d1·Σcontext + d2·k from the decode
//! law; x is the least-squares slope through the origin over the median y of each
//! (k, prompt) group. Pure: no I/O.

use crate::sim::stepcost::StepCost;
use crate::stats::median;
use crate::twin::fit::mixed_steps::{AloneStep, MixedStep};
use crate::twin::model::profile::{Coefficients, Estimate};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// An interval wider than ± this (per decoding request) cannot tell the effect the issue
/// expects (5–15 % beside three decoders, 2–5 % per decoder) from none: unidentified.
pub const IDENTIFIED_HALF_WIDTH: f64 = 0.05;
/// z for a two-sided 95 % interval.
const Z95: f64 = 1.96;

/// The step cost of the fitted coefficients `c`, without interference: what a mixed step
/// would cost were there none.
fn cost(c: &Coefficients) -> StepCost {
    Coefficients {
        interference: None,
        ..*c
    }
    .step_cost()
}

/// One (k, prompt) group: X = k · prefill alone, y's median and its 95 % interval.
#[derive(Debug, Clone, serde::Serialize)]
struct Group {
    decoding: u32,
    prompt_tokens: u64,
    steps: usize,
    step_p50_s: f64,
    alone_s: f64,
    x: f64,
    y: f64,
    y_sigma: f64,
}

/// Prompts within 1/16 of a doubling of each other are one group (servers count a few
/// template tokens more or less).
fn bucket(n: u64) -> i64 {
    ((n.max(1) as f64).log2() * 16.0).round() as i64
}

/// One mixed step's (y, step, prompt tokens).
type Triple = (f64, f64, f64);

fn groups(steps: &[MixedStep], measured: &[AloneStep], base: &Coefficients) -> Vec<Group> {
    let cost = cost(base);
    let alone = |n: u64| {
        let ttfts: Vec<f64> = measured
            .iter()
            .filter(|a| bucket(a.prompt_tokens) == bucket(n))
            .map(|a| a.ttft_s)
            .collect();
        median(&ttfts).unwrap_or_else(|| cost.model.t0 + cost.chunk_s(0, n))
    };
    // (k, prompt bucket) → (y, step, prompt) per step.
    let mut by: BTreeMap<(u32, i64), Vec<Triple>> = BTreeMap::new();
    for m in steps
        .iter()
        .filter(|m| m.prompt_tokens > 0 && m.decoding > 0)
    {
        // Measured beside the stall rather than from the law: a sweep read by a starved
        // client once fitted d0 = 0 against a true 2 ms, and the recovered interference
        // came out 24 % high (tests/offline/twin_mixed.rs).
        let decode = m
            .decode_s
            .filter(|d| d.is_finite() && *d > 0.0)
            .unwrap_or_else(|| cost.decode_s(u64::from(m.decoding), m.context_sum));
        let y = m.step_s - decode - alone(m.prompt_tokens);
        by.entry((m.decoding, bucket(m.prompt_tokens)))
            .or_default()
            .push((y, m.step_s, m.prompt_tokens as f64));
    }
    by.into_iter()
        .filter_map(|((decoding, _), v)| {
            let ys: Vec<f64> = v.iter().map(|p| p.0).collect();
            let y = median(&ys)?;
            let step = median(&v.iter().map(|p| p.1).collect::<Vec<_>>())?;
            let prompt = median(&v.iter().map(|p| p.2).collect::<Vec<_>>())?.round() as u64;
            // The median's spread: 1.2533 σ/√n for a normal sample, σ from the MAD; one step
            // alone has no spread of its own, so a quarter of its y stands in.
            let dev: Vec<f64> = ys.iter().map(|v| (v - y).abs()).collect();
            let y_sigma = if ys.len() > 1 {
                1.2533 * 1.4826 * median(&dev).unwrap_or(0.0) / (ys.len() as f64).sqrt()
            } else {
                y.abs() / 4.0
            };
            let alone_s = alone(prompt);
            Some(Group {
                decoding,
                prompt_tokens: prompt,
                steps: v.len(),
                step_p50_s: step,
                alone_s,
                x: f64::from(decoding) * alone_s,
                y,
                y_sigma,
            })
        })
        .collect()
}

/// The interference, with its interval and what the fit saw; unidentified where no mixed
/// step was measured or the interval is wider than [`IDENTIFIED_HALF_WIDTH`].
pub fn interference(
    steps: &[MixedStep],
    alone: &[AloneStep],
    base: &Coefficients,
) -> (Estimate, Value) {
    let gs = groups(steps, alone, base);
    let sxx: f64 = gs.iter().map(|g| g.x * g.x).sum();
    if gs.is_empty() || sxx <= 0.0 {
        let e = Estimate::new(
            0.0,
            None,
            "not measured: no prompt was prefilled whole beside decoding requests",
        )
        .unidentified(
            "no mixed step was measured (a prefill beside k decodes is charged its price \
             alone): `twin calibrate` measures mixed cells on servers that take token-id \
             prompts",
        );
        return (e, Value::Null);
    }
    let slope = slope(&gs, sxx);
    // Two sources of uncertainty: each group median's own spread, and (with more groups
    // than one) the scatter of the groups about the line, Student-t on n − 1.
    let var_medians: f64 = gs.iter().map(|g| (g.x * g.y_sigma).powi(2)).sum::<f64>() / sxx.powi(2);
    let dof = gs.len() - 1;
    let scatter = crate::stats::student_t_975(dof).map_or(0.0, |t| {
        let rss: f64 = gs.iter().map(|g| (g.y - slope * g.x).powi(2)).sum();
        t * (rss / dof as f64 / sxx).sqrt()
    });
    let half = ((Z95 * Z95) * var_medians + scatter * scatter).sqrt();
    let value = slope.max(0.0);
    let batches: Vec<u32> = gs.iter().map(|g| g.decoding).collect();
    let prompts: Vec<u64> = gs.iter().map(|g| g.prompt_tokens).collect();
    let n: usize = gs.iter().map(|g| g.steps).sum();
    let mut source = format!(
        "mixed cells, {n} steps (decoding {batches:?}, prompts {prompts:?}): least squares \
         through the origin of (step − the decoders' ordinary step − prefill alone) over \
         k × prefill alone ({})",
        if alone.is_empty() {
            "the sweep's TTFT law"
        } else {
            "the median TTFT of the prompts sent alone"
        }
    );
    if slope < 0.0 {
        source.push_str(&format!(
            "; the fit gave {slope:.4} (a prefill beside decodes cheaper than alone): fixed at 0"
        ));
    }
    let mut e = Estimate::new(value, Some([slope - half, slope + half]), source);
    if !half.is_finite() || half > IDENTIFIED_HALF_WIDTH {
        e.ci95 = half.is_finite().then_some([slope - half, slope + half]);
        e = e.unidentified(format!(
            "its 95 % interval ±{:.1} % per decoding request is wider than ±{:.0} %: the mixed \
             steps scatter too much to tell interference from none; calibrate on a quieter \
             host or with more repetitions (--reps 5)",
            half * 100.0,
            IDENTIFIED_HALF_WIDTH * 100.0
        ));
    }
    (e, json!({"groups": gs, "slope": slope}))
}

fn slope(gs: &[Group], sxx: f64) -> f64 {
    gs.iter().map(|g| g.x * g.y).sum::<f64>() / sxx
}

/// The interference alone (a bootstrap replicate's, on its resampled steps and its own
/// coefficients), never below zero; `None` where no mixed step was measured.
pub fn refit(steps: &[MixedStep], alone: &[AloneStep], base: &Coefficients) -> Option<f64> {
    let gs = groups(steps, alone, base);
    let sxx: f64 = gs.iter().map(|g| g.x * g.x).sum();
    let x = slope(&gs, sxx);
    (sxx > 0.0 && x.is_finite()).then(|| x.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Coefficients = Coefficients {
        t0_s: 0.02,
        p0_tps: 10_000.0,
        q_s_per_token2: 0.0,
        d0_s: 0.001,
        d1_s_per_token: 1e-7,
        d2_s_per_request: 0.0005,
        interference: None,
    };

    fn step(k: u32, prompt: u64, x: f64, noise: f64) -> MixedStep {
        let ctx = u64::from(k) * 200;
        let cost = cost(&BASE);
        let alone = BASE.t0_s + cost.chunk_s(0, prompt);
        let decode = cost.decode_s(u64::from(k), ctx);
        MixedStep {
            decoding: k,
            prompt_tokens: prompt,
            context_sum: ctx,
            step_s: alone * (1.0 + x * f64::from(k)) + decode + noise,
            decode_s: Some(decode),
        }
    }

    #[test]
    fn exact_mixed_steps_give_back_the_interference() {
        let steps: Vec<MixedStep> = [(1, 512), (3, 512), (1, 1024), (3, 1024)]
            .into_iter()
            .flat_map(|(k, p)| [-1e-4, 0.0, 1e-4].map(|n| step(k, p, 0.04, n)))
            .collect();
        let (e, q) = interference(&steps, &[], &BASE);
        assert!((e.value - 0.04).abs() < 1e-9, "{e:?}");
        let [lo, hi] = e.ci95.unwrap();
        assert!(lo < 0.04 && 0.04 < hi && hi - lo < 0.01, "{e:?}");
        assert!(e.unidentified.is_none(), "{e:?}");
        assert_eq!(q["groups"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn the_decoders_own_step_stands_in_for_a_wrong_decode_law() {
        let steps: Vec<MixedStep> = [(1, 512), (1, 1024)]
            .into_iter()
            .map(|(k, p)| step(k, p, 0.05, 0.0))
            .collect();
        // The law a starved client's sweep fitted: no d0, a third of the true step at k = 1.
        let wrong = Coefficients { d0_s: 0.0, ..BASE };
        let (e, _) = interference(&steps, &[], &wrong);
        assert!((e.value - 0.05).abs() < 1e-9, "{e:?}");
        // Without the measured step, the law's missing 1 ms lands in the interference.
        let unmeasured: Vec<MixedStep> = steps
            .iter()
            .map(|m| MixedStep {
                decode_s: None,
                ..m.clone()
            })
            .collect();
        let (e, _) = interference(&unmeasured, &[], &wrong);
        assert!(e.value > 0.055, "{e:?}");
    }

    #[test]
    fn no_mixed_steps_or_scattered_ones_leave_it_unidentified() {
        let (e, _) = interference(&[], &[], &BASE);
        assert_eq!(e.value, 0.0);
        assert!(e.unidentified.as_deref().unwrap().contains("no mixed step"));
        // Steps whose stall scatters by ±30 ms around a 71 ms prefill.
        let steps: Vec<MixedStep> = [0.03, -0.03, 0.0, 0.025, -0.02]
            .iter()
            .map(|&n| step(1, 1024, 0.0, n))
            .collect();
        let (e, _) = interference(&steps, &[], &BASE);
        let why = e.unidentified.as_deref().expect("unidentified");
        assert!(why.contains("wider than"), "{why}");
        assert!(e.value.is_finite() && e.ci95.is_some());
    }

    #[test]
    fn a_replicate_refits_the_interference_on_its_own_coefficients() {
        let steps: Vec<MixedStep> = [(1, 512), (3, 1024)]
            .into_iter()
            .map(|(k, p)| step(k, p, 0.04, 0.0))
            .collect();
        let x = refit(&steps, &[], &BASE).expect("measured");
        assert!((x - 0.04).abs() < 1e-9, "{x}");
        assert_eq!(refit(&[], &[], &BASE), None);
        // A replicate whose prefill law is dearer sees less left for the interference, and
        // a slope below zero is none.
        let dearer = Coefficients {
            p0_tps: 5_000.0,
            ..BASE
        };
        assert_eq!(refit(&steps, &[], &dearer), Some(0.0));
    }
}
