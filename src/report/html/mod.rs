//! The HTML report of one run: a pure function of its records, one self-contained page
//! (inline SVG and CSS, nothing fetched) that `sweep --html` rewrites after every point.

mod accuracy;
mod fit;
pub mod page;
mod samples;

use crate::fit::ScalingFit;
use crate::lengths::format_count;
use crate::record::{ErrorRecord, RunRecord, Sample, Summary};
use crate::report::escape::escape;
use crate::report::plot::figures;
use crate::report::table;
use page::{document, key_values, notes};

/// The whole report page. The fit is recomputed from the summary's medians when the summary
/// carries none (a sweep still running), so the page always shows the current fit.
pub fn render(
    run: &RunRecord,
    samples: &[Sample],
    errors: &[ErrorRecord],
    summary: &Summary,
) -> String {
    let fit = ScalingFit::from_json(&summary.fit)
        .filter(|f| f.ttft.is_some() || f.decode_step.is_some())
        .unwrap_or_else(|| crate::fit::fit_points(&summary.points));
    let model = run.target.model.as_deref().unwrap_or("unknown model");
    let title = format!("ctxbench: {model} @ {}", run.target.url);
    let mut body = String::new();
    body.push_str(&header(run, samples, errors, summary));
    body.push_str(&notes(&summary.notes));
    body.push_str(&summary_table(summary));
    body.push_str(&charts(summary, &fit));
    body.push_str(&crate::report::spec::html(summary));
    body.push_str(&crate::report::depth::html(summary));
    body.push_str(&fit::section(summary, &fit));
    body.push_str(&accuracy::section(run, summary));
    body.push_str(&samples::needle_grid(summary));
    body.push_str(&samples::flagged(samples, errors));
    body.push_str(&run_section(run));
    body.push_str(&definitions());
    document(&title, &body)
}

fn header(
    run: &RunRecord,
    samples: &[Sample],
    errors: &[ErrorRecord],
    summary: &Summary,
) -> String {
    let valid = samples.iter().filter(|s| s.valid).count();
    let flagged = samples
        .iter()
        .filter(|s| !s.valid || !s.flags.is_empty())
        .count();
    format!(
        "<header>\n<h1>ctxbench report: {model}</h1>\n<p class=\"sub target\">{url} · {api} · started {started} · ctxbench {version}</p>\n<p class=\"sub counts\" data-points=\"{points}\" data-samples=\"{n}\" data-valid=\"{valid}\" data-errors=\"{errs}\">{points} lengths · {n} samples ({valid} valid, {flagged} flagged) · {errs} errors</p>\n</header>\n",
        model = escape(run.target.model.as_deref().unwrap_or("unknown model")),
        url = escape(&run.target.url),
        api = escape(&run.target.api),
        started = escape(&run.started_at),
        version = escape(&run.tool_version),
        points = summary.points.len(),
        n = samples.len(),
        errs = errors.len(),
    )
}

fn summary_table(summary: &Summary) -> String {
    let valid = summary.points.iter().map(|p| p.n_valid > 0);
    let rows = page::number_rows(table::rows(summary).into_iter().zip(valid));
    format!(
        "<section id=\"summary\">\n<h2>Summary</h2>\n{}</section>\n",
        page::table("summary", &table::header(summary), &rows, 1)
    )
}

fn charts(summary: &Summary, fit: &ScalingFit) -> String {
    let p = &summary.points;
    format!(
        "<section id=\"charts\">\n<h2>Scaling with context</h2>\n<p class=\"sub\">Medians over valid repetitions; bars span p10–p90; dashed lines are the fitted laws.</p>\n<div class=\"charts\">\n{}\n{}\n{}\n{}\n</div>\n</section>\n",
        figures::ttft_chart(p, fit).to_svg(),
        figures::prefill_chart(p, fit).to_svg(),
        figures::decode_chart(p, fit).to_svg(),
        figures::itl_chart(p).to_svg(),
    )
}

fn run_section(run: &RunRecord) -> String {
    let c = &run.config;
    let lengths: Vec<String> = c.lengths.iter().map(|n| format_count(*n)).collect();
    let depths: Vec<String> = c.needle_depths.iter().map(f64::to_string).collect();
    let pairs = [
        ("url", run.target.url.clone()),
        ("api", run.target.api.clone()),
        (
            "model",
            run.target.model.clone().unwrap_or_else(|| "-".into()),
        ),
        ("tool version", run.tool_version.clone()),
        ("started at", run.started_at.clone()),
        ("schema", run.schema.to_string()),
        ("lengths", lengths.join(", ")),
        ("output tokens", c.output_tokens.to_string()),
        ("repetitions", c.reps.to_string()),
        ("method", c.method.clone()),
        ("cache bust", c.cache_bust.clone()),
        (
            "needle",
            if c.needle {
                format!("on, depths {}", depths.join(", "))
            } else {
                "off".into()
            },
        ),
        ("timeout", c.timeout.clone()),
        ("seed", c.seed.to_string()),
        ("prompt mode", c.prompt_mode.clone()),
        (
            "network RTT",
            c.rtt_s
                .map(crate::report::plot::format::seconds)
                .unwrap_or_else(|| "not measured".into()),
        ),
    ];
    let info = serde_json::to_string_pretty(&run.target.server_info).unwrap_or_default();
    format!(
        "<section id=\"run\">\n<h2>Target and configuration</h2>\n{}<details><summary>server info (as probed)</summary><pre>{}</pre></details>\n</section>\n",
        key_values(&pairs),
        escape(&info)
    )
}

fn definitions() -> String {
    "<footer id=\"definitions\">\n<h2>Definitions</h2>\n<ul>\n<li>TTFT: request sent → first stream event with content (a role-only chunk is not a token).</li>\n<li>prefill tok/s: uncached prompt tokens / TTFT.</li>\n<li>decode tok/s: (output tokens − tokens in the first event) / (t<sub>last</sub> − t<sub>first</sub>); tokens from the server's counts, not events.</li>\n<li>ITL: gap between events divided over the tokens they carry; p50 and p99 per request, then median and p10–p90 over repetitions.</li>\n<li>accept (speculative decoding): decode tokens per verification step, (output − 1) / verify steps with the prefill's first token left out, per request, from the server's counts or its <code>/metrics</code> counters around a request that ran alone; ~ marks a proxy (tokens per stream event). Verify steps/s = decode tok/s / accept length.</li>\n<li>Samples with a flag that corrupts a metric are invalid and never enter the medians.</li>\n</ul>\n</footer>\n".into()
}
