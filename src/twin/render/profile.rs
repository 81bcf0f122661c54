//! A profile for a reader: each coefficient with its interval and source, the limits, the
//! fit quality (R², largest residual) and the caveats. Pure: returns text.

use crate::sim::scheduler::TokenBudget;
use crate::twin::model::profile::{Estimate, Profile};
use serde_json::Value;
use std::fmt::Write;

/// `value` shown in `unit` after multiplying by `scale` (e.g. 1e3 for ms).
fn line(out: &mut String, name: &str, e: &Estimate, scale: f64, unit: &str) {
    let ci = e.ci95.map_or("            ".to_string(), |[lo, hi]| {
        format!("[{:.4}, {:.4}]", lo * scale, hi * scale)
    });
    let _ = writeln!(
        out,
        "  {name:<10} {:>12.4} {unit:<10} 95% {ci:<28} {}",
        e.value * scale,
        e.source
    );
    if let Some(why) = &e.unidentified {
        let _ = writeln!(out, "  {:<10} UNIDENTIFIED: {why}", "");
    }
}

fn quality(out: &mut String, name: &str, law: &Value) {
    let r2 = law.get("r2").and_then(Value::as_f64).unwrap_or(f64::NAN);
    let lengths = law.get("context_tokens").cloned().unwrap_or(Value::Null);
    let residuals: Vec<f64> = law
        .get("residuals_s")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let worst = residuals.iter().fold(0.0f64, |m, r| m.max(r.abs()));
    let _ = writeln!(
        out,
        "  {name:<12} R² {r2:.4}  at {lengths}  largest residual {:.3} ms",
        worst * 1e3
    );
}

/// The profile as a few tables of text.
pub fn render(p: &Profile) -> String {
    let mut out = String::new();
    let s = &p.step;
    let _ = writeln!(out, "step model (profile version {}):", p.profile_version);
    line(&mut out, "t0", &s.t0_s, 1e3, "ms");
    line(&mut out, "p0", &s.p0_tps, 1.0, "tok/s");
    line(&mut out, "q", &s.q_s_per_token2, 1e12, "ps/tok²");
    line(&mut out, "chunk", &s.chunk_tokens, 1.0, "tokens");
    let counts = match s.budget {
        TokenBudget::Prefill => "prefill tokens only",
        TokenBudget::All => "every token of the step, decodes first",
    };
    let _ = writeln!(out, "  {:<12} {counts}", "budget");
    line(&mut out, "d0", &s.d0_s, 1e3, "ms");
    line(&mut out, "d1", &s.d1_s_per_token, 1e9, "ns/tok");
    line(&mut out, "d2", &s.d2_s_per_request, 1e3, "ms/req");
    line(&mut out, "overhead", &s.step_overhead_s, 1e3, "ms");
    line(
        &mut out,
        "interference",
        &s.interference,
        100.0,
        "%/decoder",
    );
    let l = &p.limits;
    let _ = writeln!(out, "limits:");
    line(&mut out, "running", &l.max_running, 1.0, "requests");
    line(&mut out, "pool", &l.pool_tokens, 1.0, "tokens");
    line(&mut out, "page", &l.page_tokens, 1.0, "tokens");
    line(&mut out, "context", &l.context_tokens, 1.0, "tokens");
    let _ = writeln!(out, "  prefix cache: {}", l.prefix_cache);
    if let Some(sp) = &p.speculation {
        let _ = writeln!(
            out,
            "speculation: up to {} tokens per step",
            sp.draft_tokens
        );
        for (content, e) in &sp.accept_length {
            line(&mut out, content, e, 1.0, "tok/step");
        }
    }
    let _ = writeln!(
        out,
        "envelope: contexts up to {} tokens, concurrency up to {}",
        p.envelope.max_context_tokens, p.envelope.max_concurrency
    );
    let _ = writeln!(out, "fit quality:");
    quality(&mut out, "prefill", &p.fit_quality["ttft"]);
    quality(&mut out, "decode", &p.fit_quality["decode_step"]);
    batch_quality(&mut out, &p.fit_quality["decode"]);
    if let Some(u) = &p.uncertainty {
        let _ = writeln!(
            out,
            "uncertainty: {} bootstrap refits; server spread (relative sd) TTFT p50 {:.1} %, \
             p99 {:.1} %, TPOT p50 {:.1} %, tok/s {:.1} % ({})",
            u.replicates.len(),
            u.spread.ttft_p50 * 100.0,
            u.spread.ttft_p99 * 100.0,
            u.spread.tpot_p50 * 100.0,
            u.spread.output_tps * 100.0,
            u.spread.source
        );
    }
    for c in &p.caveats {
        let _ = writeln!(out, "caveat: {} — {}", c.what, c.effect);
    }
    out
}

fn batch_quality(out: &mut String, decode: &Value) {
    if let Some(cells) = decode.pointer("/batch/cells").and_then(Value::as_array) {
        for c in cells {
            let _ = writeln!(
                out,
                "  cell c={} batch {} at {} tokens: median gap {:.3} ms [{:.3}, {:.3}], mean \
                 {:.3} ms, over {} gaps",
                c["concurrency"],
                c["batch"],
                c["context_tokens"],
                c["itl_p50_s"].as_f64().unwrap_or(f64::NAN) * 1e3,
                c["itl_p50_ci95_s"][0].as_f64().unwrap_or(f64::NAN) * 1e3,
                c["itl_p50_ci95_s"][1].as_f64().unwrap_or(f64::NAN) * 1e3,
                c["itl_mean_s"].as_f64().unwrap_or(f64::NAN) * 1e3,
                c["gaps"],
            );
        }
    }
    if let Some(v) = decode
        .get("batch1_cells_vs_sweep_law")
        .and_then(Value::as_array)
    {
        for c in v {
            let _ = writeln!(
                out,
                "  batch-1 cell at {} tokens vs the sweep's decode law: {:+.1} %",
                c["context_tokens"],
                c["gap_pct"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
}
