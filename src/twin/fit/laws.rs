//! `twin fit`'s arithmetic: from the gathered records to a profile. The prefill law
//! (TTFT = t0 + n/p0 + q·n²/2) and the batch-1 decode law (step = I + d1·context) come from
//! the sweep through `crate::fit`; the per-decoding-request cost d2 from the closed-loop
//! cells' steps labelled by batch (`batch_steps.rs`), whose median gap at batch b is
//! I + d2·(b−1) + d1·Σcontext (`decode.rs`); the interference of a prefill beside
//! decoding requests from the mixed cells' steps (`interference.rs`). A term the data cannot
//! pin down is marked unidentified; a number that is not finite is an error naming it.
//! Pure: no I/O.

use crate::fit::{DecodeStepFit, TtftFit, fit_decode_step, fit_ttft};
use crate::twin::fit::bootstrap;
use crate::twin::fit::decode::decode;
use crate::twin::fit::inputs::Inputs;
use crate::twin::fit::interference as fit_mixed;
use crate::twin::fit::interval::interval;
use crate::twin::fit::limits;
use crate::twin::model::profile::{
    Caveat, Coefficients, Envelope, Estimate, PROFILE_VERSION, Profile, Speculation, StepModel,
};
use serde_json::{Value, json};

/// The prefill terms: from the law where its linear term is positive; else (the
/// non-negative fit put it at 0, so p0 would be infinite: TTFT over the lengths did not
/// separate the linear and quadratic terms, as on a host whose contention swamps the short
/// prompts) from a straight line through the same points, q = 0, all three marked
/// unidentified. `None` when even the line is flat.
fn prefill_terms(
    law: &TtftFit,
    pts: &[(u64, f64)],
    what: &str,
) -> Option<(Estimate, Estimate, Estimate)> {
    if law.b_s_per_token > 0.0 {
        return Some(prefill(law, what));
    }
    let line = fit_decode_step(pts)?;
    // A slope that adds under 0.1 % to the longest prompt's TTFT is rounding, not a rate.
    let longest = pts.iter().map(|p| p.0).max()? as f64;
    if line.e_s_per_token * longest <= 1e-3 * line.d_s.max(0.0) || line.e_s_per_token <= 0.0 {
        return None;
    }
    let why = format!(
        "the TTFT fit over {} lengths put the linear prefill term at 0 (it could not tell the \
         linear and quadratic terms apart): fitted as a straight line, q = 0; calibrate on a \
         quieter host, with more repetitions (--reps 5) or longer prompts (--max-length)",
        law.n
    );
    let ci = line.ci95;
    let t0 = Estimate::new(
        line.d_s,
        ci.and_then(|c| interval(c.d_s.0, c.d_s.1)),
        format!("{what}, straight line: intercept"),
    )
    .unidentified(why.clone());
    let p0_ci = ci.and_then(|c| {
        let (lo, hi) = c.e_s_per_token;
        (lo > 0.0).then(|| interval(1.0 / hi, 1.0 / lo)).flatten()
    });
    let p0 = Estimate::new(
        1.0 / line.e_s_per_token,
        p0_ci,
        format!("{what}, straight line: 1 / slope"),
    )
    .unidentified(why.clone());
    let q =
        Estimate::new(0.0, None, format!("{what}, straight line: no n² term")).unidentified(why);
    Some((t0, p0, q))
}

/// The prefill law as the engine's t0, p0, q (the law's n² coefficient is q/2).
fn prefill(law: &TtftFit, what: &str) -> (Estimate, Estimate, Estimate) {
    let ci = law.ci95;
    let t0 = Estimate::new(
        law.a_s,
        ci.and_then(|c| interval(c.a_s.0, c.a_s.1)),
        format!("{what}: intercept (includes the client's transport)"),
    );
    let p0_ci = ci.and_then(|c| {
        let (lo, hi) = c.b_s_per_token;
        (lo > 0.0).then(|| interval(1.0 / hi, 1.0 / lo)).flatten()
    });
    let p0 = Estimate::new(1.0 / law.b_s_per_token, p0_ci, format!("{what}: 1 / slope"));
    let q = Estimate::new(
        2.0 * law.c_s_per_token2,
        ci.and_then(|c| interval(2.0 * c.c_s_per_token2.0, 2.0 * c.c_s_per_token2.1)),
        format!("{what}: 2 × the n² coefficient"),
    );
    (t0, p0, q)
}

fn speculation(info: &Value, inputs: &Inputs) -> Option<Speculation> {
    let spec = info.get("speculative").filter(|s| !s.is_null());
    let accepted = inputs.accept.iter().any(|(_, a, _)| *a > 1.05);
    if spec.is_none() && !accepted {
        return None;
    }
    let longest = inputs.accept.iter().map(|(_, a, _)| *a).fold(1.0, f64::max);
    let draft_tokens = spec
        .and_then(|s| s.get("speculative_num_draft_tokens"))
        .and_then(Value::as_u64)
        .map_or(longest.ceil() as u32, |d| d as u32);
    let accept_length = inputs
        .accept
        .iter()
        .map(|(content, a, n)| {
            let src = format!("sweep: median tokens per verification step, {n} samples");
            (content.clone(), Estimate::new(*a, None, src))
        })
        .collect();
    Some(Speculation {
        draft_tokens,
        accept_length,
    })
}

fn law_caveats(ttft: &TtftFit, step: &DecodeStepFit) -> Vec<Caveat> {
    let mut out = vec![Caveat {
        what: "the per-step overhead is folded into t0 and d0".into(),
        effect: "a step that holds both a prefill and decodes is charged that overhead twice"
            .into(),
    }];
    for (law, note) in [("prefill", &ttft.note), ("decode", &step.note)] {
        if let Some(n) = note {
            out.push(Caveat {
                what: format!("{law} law: {n}"),
                effect: "that term is 0 in the model".into(),
            });
        }
    }
    out
}

/// The prefill law, the decode law, and the (prompt tokens, TTFT) points of the first.
type Laws = (TtftFit, DecodeStepFit, Vec<(u64, f64)>);

/// The sweep's two laws, or what is missing.
fn laws(inputs: &Inputs) -> anyhow::Result<Laws> {
    let ttft_pts: Vec<(u64, f64)> = inputs
        .sweep
        .iter()
        .map(|p| (p.prompt_tokens, p.ttft_s))
        .collect();
    let step_pts: Vec<(u64, f64)> = inputs
        .sweep
        .iter()
        .map(|p| (p.decode_context(), p.step_s))
        .collect();
    let ttft = fit_ttft(&ttft_pts).ok_or_else(|| {
        anyhow::anyhow!(
            "the prefill law needs valid streamed sweep samples at {} or more distinct lengths; \
             found {} ({}): run `ctxbench sweep --lengths 1k,2k,4k,8k --out FILE` first",
            crate::fit::MIN_TTFT_POINTS,
            ttft_pts.len(),
            inputs.files.join(", ")
        )
    })?;
    let step = fit_decode_step(&step_pts).ok_or_else(|| {
        anyhow::anyhow!("the decode law needs sweep samples at 2 or more lengths")
    })?;
    Ok((ttft, step, ttft_pts))
}

/// The step model's coefficients alone (one bootstrap replicate); `None` where the laws
/// cannot be fitted or a coefficient is not usable by the engine.
pub fn coefficients(inputs: &Inputs) -> Option<Coefficients> {
    let (ttft, step, pts) = laws(inputs).ok()?;
    let (t0, p0, q) = prefill_terms(&ttft, &pts, "")?;
    let (d0, d1, d2, _, _) = decode(&step, &inputs.cells);
    let mut c = values([&t0, &p0, &q, &d0, &d1, &d2]);
    c.interference = fit_mixed::refit(&inputs.mixed, &inputs.alone, &c);
    c.usable().then_some(c)
}

/// The fitted estimates' values as coefficients (t0, p0, q, d0, d1, d2), no interference.
fn values([t0, p0, q, d0, d1, d2]: [&Estimate; 6]) -> Coefficients {
    Coefficients {
        t0_s: t0.value,
        p0_tps: p0.value,
        q_s_per_token2: q.value,
        d0_s: d0.value,
        d1_s_per_token: d1.value,
        d2_s_per_request: d2.value,
        interference: None,
    }
}

/// Fit a profile from gathered records; errors say what is missing or could not be fitted.
pub fn fit(inputs: &Inputs) -> anyhow::Result<Profile> {
    let (ttft, step, pts) = laws(inputs)?;
    let info = inputs.server_info();
    let (limits, chunk) = limits::limits(&info, inputs.max_context_tokens);
    let what = format!("sweep TTFT fit, {} lengths", ttft.n);
    let (t0, p0, q) = prefill_terms(&ttft, &pts, &what).ok_or_else(|| {
        anyhow::anyhow!(
            "p0 cannot be fitted: TTFT does not grow with the prompt over {} lengths; \
             calibrate with more repetitions (--reps 5) or longer prompts (--max-length)",
            ttft.n
        )
    })?;
    let (d0, d1, d2, overhead, decode_quality) = decode(&step, &inputs.cells);
    let base = values([&t0, &p0, &q, &d0, &d1, &d2]);
    let (interference, mixed_quality) =
        fit_mixed::interference(&inputs.mixed, &inputs.alone, &base);
    let mut caveats = limits::caveats(&info, &limits);
    caveats.extend(law_caveats(&ttft, &step));
    let max_concurrency = inputs
        .cells
        .iter()
        .map(|c| u64::from(c.batch))
        .max()
        .unwrap_or(1);
    let profile = Profile {
        profile_version: PROFILE_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        server: inputs.target.clone().unwrap_or(Value::Null),
        step: StepModel {
            t0_s: t0,
            p0_tps: p0,
            q_s_per_token2: q,
            chunk_tokens: chunk,
            budget: limits::budget(&info),
            d0_s: d0,
            d1_s_per_token: d1,
            d2_s_per_request: d2,
            step_overhead_s: overhead,
            interference,
        },
        speculation: speculation(&info, inputs),
        limits,
        envelope: Envelope {
            max_context_tokens: inputs.max_context_tokens,
            max_concurrency,
        },
        caveats,
        fit_quality: json!({
            "files": inputs.files,
            "ttft": ttft,
            "decode_step": step,
            "decode": decode_quality,
            "mixed": mixed_quality,
            "held_out_cells": inputs.held_out_cells,
        }),
        uncertainty: Some(bootstrap::uncertainty(inputs, coefficients)),
    };
    let problems = profile.problems();
    if !problems.is_empty() {
        anyhow::bail!(
            "the fit produced numbers a profile cannot hold: {}; the records may be too few or \
             too noisy (calibrate with --reps 5 and more --requests)",
            problems.join("; ")
        );
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::fit::inputs::{CellSteps, SweepPoint};

    const T0: f64 = 0.025;
    const P0: f64 = 40_000.0;
    const Q: f64 = 4e-10;
    const D0: f64 = 0.008;
    const D1: f64 = 5e-8;
    const D2: f64 = 0.001;

    fn point(n: u64) -> SweepPoint {
        let x = n as f64;
        let ctx = (n + 16) as f64;
        SweepPoint {
            context_tokens: n,
            prompt_tokens: n,
            output_tokens: 32,
            ttft_s: T0 + x / P0 + Q * x * x / 2.0,
            step_s: D0 + D2 + D1 * ctx,
            samples: 3,
            reps: Vec::new(),
        }
    }

    fn cell(c: u32, n: u64) -> CellSteps {
        let ctx = (n + 16) as f64;
        let gap = D0 + D2 * f64::from(c) + D1 * ctx * f64::from(c);
        CellSteps {
            concurrency: c,
            batch: c,
            context_tokens: n,
            prompt_tokens: n,
            output_tokens: 32,
            itl_p50_s: gap,
            itl_p50_ci95_s: [gap - 1e-5, gap + 1e-5],
            itl_mean_s: gap,
            gaps: 500,
            requests: 16,
            per_request: Vec::new(),
        }
    }

    fn inputs() -> Inputs {
        Inputs {
            files: vec!["synthetic".into()],
            target: Some(json!({"url": "http://x", "server_info": {
                "kind": "sglang", "max_running_requests": 6, "kv_pool_tokens": 200000,
                "context_length": 32768, "chunked_prefill_tokens": 2048, "page_size": 16,
                "prefix_cache": true}})),
            sweep: [512, 1024, 2048, 4096, 8192].map(point).to_vec(),
            cells: vec![cell(1, 1024), cell(2, 1024)],
            max_context_tokens: 8192 + 32,
            ..Inputs::default()
        }
    }

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-6 * want.abs()
    }

    #[test]
    fn exact_laws_give_back_every_coefficient() {
        let p = fit(&inputs()).unwrap();
        let s = &p.step;
        assert!(close(s.t0_s.value, T0), "{:?}", s.t0_s);
        assert!(close(s.p0_tps.value, P0), "{:?}", s.p0_tps);
        assert!(close(s.q_s_per_token2.value, Q), "{:?}", s.q_s_per_token2);
        assert!(close(s.d1_s_per_token.value, D1), "{:?}", s.d1_s_per_token);
        assert!(
            close(s.d2_s_per_request.value, D2),
            "{:?}",
            s.d2_s_per_request
        );
        assert!(close(s.d0_s.value, D0), "{:?}", s.d0_s);
        let [lo, hi] = s.d2_s_per_request.ci95.unwrap();
        assert!(lo < D2 && D2 < hi);
        assert_eq!(p.limits.max_running.value, 6.0);
        assert_eq!(s.chunk_tokens.value, 2048.0);
        assert_eq!(p.envelope.max_concurrency, 2);
        // Written and read back unchanged.
        let back = Profile::parse(&p.to_json_pretty(), "p.json").unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn a_batch_of_one_cheaper_than_the_slope_refits_d2_through_the_origin() {
        // llama.cpp on a CPU: one decoding request costs 0.3 ms beyond attention, two cost
        // 1.0 ms (the batch of one takes a matrix-vector path). The slope, 0.7 ms, with d0
        // at 0 would charge a lone request 0.7 ms; the through-origin fit over (1, 0.3),
        // (1, 0.3), (2, 1.0) gives (0.3 + 0.3 + 2.0) / 6.
        let net = |b: f64| if b == 1.0 { 3e-4 } else { 1e-3 };
        let mut i = inputs();
        for p in &mut i.sweep {
            p.step_s = net(1.0) + D1 * p.decode_context() as f64;
        }
        for c in &mut i.cells {
            let b = f64::from(c.concurrency);
            c.itl_p50_s = net(b) + D1 * b * c.decode_context() as f64;
            c.itl_mean_s = c.itl_p50_s;
            c.itl_p50_ci95_s = [c.itl_p50_s - 1e-6, c.itl_p50_s + 1e-6];
        }
        let p = fit(&i).unwrap();
        let s = &p.step;
        assert_eq!(s.d0_s.value, 0.0);
        assert!(s.d0_s.source.contains("negative"), "{}", s.d0_s.source);
        assert!(
            close(s.d2_s_per_request.value, 2.6e-3 / 6.0),
            "{:?}",
            s.d2_s_per_request
        );
        assert!(s.d2_s_per_request.source.contains("through the origin"));
        let [lo, hi] = s.d2_s_per_request.ci95.unwrap();
        assert!(lo < s.d2_s_per_request.value && s.d2_s_per_request.value < hi);
    }

    #[test]
    fn steps_that_never_ran_two_requests_leave_d2_unidentified() {
        // With one slot a c=2 cell's steps all ran one request: no batching signal.
        let mut i = inputs();
        let mut queued = cell(1, 2048);
        queued.concurrency = 2;
        i.cells = vec![cell(1, 1024), queued];
        let p = fit(&i).unwrap();
        assert_eq!(p.step.d2_s_per_request.value, 0.0);
        assert!(p.step.d2_s_per_request.source.contains("not measured"));
        let why = p.step.d2_s_per_request.unidentified.as_deref().unwrap();
        assert!(why.contains("calibrate --concurrency-up-to"), "{why}");
        assert!(close(p.step.d0_s.value, D0 + D2));
    }

    #[test]
    fn bimodal_cells_leave_d2_unidentified_with_an_interval_over_the_mean_reading() {
        // The c=2 cell's median gap is the batch-1 step (an unfair lock lets one request
        // run several tokens in a row), its mean twice that.
        let mut i = inputs();
        let gap1 = i.cells[0].itl_p50_s;
        let c2 = &mut i.cells[1];
        c2.itl_p50_s = gap1;
        c2.itl_mean_s = 2.0 * c2.itl_p50_s;
        let p = fit(&i).unwrap();
        let d2 = &p.step.d2_s_per_request;
        let why = d2.unidentified.as_deref().expect("unidentified");
        assert!(why.contains("bimodal") && why.contains("c=2"), "{why}");
        let [_, hi] = d2.ci95.unwrap();
        // The mean reading's slope: 2·gap1 − d1·2·ctx − (gap1 − d1·ctx) ≈ gap1 = D0+D2+…
        assert!(hi > D0, "{d2:?}");
    }

    #[test]
    fn a_vanished_linear_prefill_term_is_marked_not_written_as_infinity() {
        // TTFT whose linear part is negative (short prompts swamped by the host, as on
        // llama-server at load 9: 385 ms at 512 tokens): the non-negative fit puts the
        // linear term at 0, and version 2 wrote p0 = 1/0 as null.
        let mut i = inputs();
        for p in &mut i.sweep {
            let x = p.prompt_tokens as f64;
            p.ttft_s = T0 + 1e-9 * x * x - 1e-6 * x;
        }
        let p = fit(&i).expect("a straight line stands in");
        let s = &p.step;
        assert!(
            s.p0_tps.value.is_finite() && s.p0_tps.value > 0.0,
            "{:?}",
            s.p0_tps
        );
        assert_eq!(s.q_s_per_token2.value, 0.0);
        for e in [&s.t0_s, &s.p0_tps, &s.q_s_per_token2] {
            let why = e.unidentified.as_deref().expect("marked");
            assert!(
                why.contains("straight line") && why.contains("--reps"),
                "{why}"
            );
        }
        assert!(p.problems().is_empty(), "{:?}", p.problems());
        let back = Profile::parse(&p.to_json_checked().unwrap(), "p.json").unwrap();
        assert_eq!(back, p);
        // Flat TTFT has no prefill rate at all: an error naming p0.
        for p in &mut i.sweep {
            p.ttft_s = T0;
        }
        let e = fit(&i).unwrap_err().to_string();
        assert!(e.contains("p0"), "{e}");
    }

    #[test]
    fn too_few_lengths_say_what_to_run() {
        let mut i = inputs();
        i.sweep.truncate(2);
        let e = fit(&i).unwrap_err().to_string();
        assert!(
            e.contains("3 or more distinct lengths") && e.contains("ctxbench sweep"),
            "{e}"
        );
    }

    #[test]
    fn llama_cpp_limits_follow_its_slots() {
        let info = json!({"kind": "llamacpp", "slots": 4, "max_running_requests": 4,
                          "context_length": 8192, "prefix_cache": true});
        let (l, chunk) = limits::limits(&info, 5000);
        assert_eq!(l.max_running.value, 4.0);
        assert_eq!(l.pool_tokens.value, 32768.0);
        assert!(chunk.source.starts_with("default"));
        let c = limits::caveats(&info, &l);
        assert!(c.iter().any(|c| c.what.contains("slot")));
        assert!(
            c.iter()
                .any(|c| c.what.contains("beside several decoding slots"))
        );
        assert_eq!(limits::budget(&info), crate::sim::TokenBudget::All);
        let sglang = json!({"kind": "sglang"});
        assert_eq!(limits::budget(&sglang), crate::sim::TokenBudget::Prefill);
    }
}
