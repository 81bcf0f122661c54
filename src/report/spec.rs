//! Speculative decoding in reports: the acceptance behind each length's decode rate, so a
//! decode tok/s is read with the tokens per verification step that produced it, and the
//! step rate (decode tok/s / accept length) that is the server's own speed.

use super::escape::escape;
use super::html::page::{Cell, table};
use crate::lengths::format_count;
use crate::record::{PointSummary, SpecSource, Summary};

/// Whether any point has acceptance data (else no column or section is shown).
pub fn any(summary: &Summary) -> bool {
    summary.points.iter().any(|p| p.accept_length.is_some())
}

/// The header line naming what the prompts were made of, with a warning where decode was
/// measured on filler under speculative decoding (acceptance depends on the text).
pub fn content_line(run: &crate::record::RunRecord, summary: &Summary) -> String {
    let Some(content) = &run.config.content else {
        return String::new();
    };
    let filler = content.starts_with("filler");
    let warn = if filler && any(summary) {
        " — speculative decoding accepts more of a repeated paragraph than of real text: \
         try --corpus for the decode users get"
    } else if filler {
        " (fine for prefill; decode under speculative decoding needs --corpus)"
    } else {
        ""
    };
    format!("content: {content}{warn}\n")
}

/// The table cell: median accept length, `~` before a proxy figure.
pub fn cell(p: &PointSummary) -> String {
    match (p.accept_length, p.spec_source) {
        (Some(a), Some(SpecSource::EventsProxy)) => format!("~{:.2}", a.median),
        (Some(a), _) => format!("{:.2}", a.median),
        _ => "-".into(),
    }
}

/// Verification steps per second: median decode tok/s over median accept length.
pub fn step_rate(p: &PointSummary) -> Option<f64> {
    let d = p.decode_tps?.median;
    let a = p.accept_length?.median;
    (a > 0.0).then(|| d / a)
}

fn source_words(s: Option<SpecSource>) -> &'static str {
    match s {
        Some(SpecSource::Server) => "server counts",
        Some(SpecSource::MetricsDelta) => "/metrics deltas",
        Some(SpecSource::EventsProxy) => "PROXY: tokens per stream event",
        None => "-",
    }
}

/// One line per length with acceptance: accept length, decode tok/s and steps/s.
fn lines(summary: &Summary) -> Vec<String> {
    summary
        .points
        .iter()
        .filter_map(|p| {
            let a = p.accept_length?;
            let unit = if p.spec_source == Some(SpecSource::EventsProxy) {
                "tokens/event"
            } else {
                "tokens/step"
            };
            let rate = p
                .accept_rate
                .map(|r| format!(", {:.0}% of drafts accepted", r.median * 100.0))
                .unwrap_or_default();
            let decode = p
                .decode_tps
                .map(|d| format!("{:.0} tok/s", d.median))
                .unwrap_or_else(|| "-".into());
            let steps = step_rate(p)
                .map(|s| format!("{s:.1} steps/s"))
                .unwrap_or_else(|| "-".into());
            let own = p
                .server_accept_length
                .map(|v| format!(" · server's own figure {v:.2}"))
                .unwrap_or_default();
            Some(format!(
                "{:>7}: accept {}{:.2} {unit} (p10–p90 {:.2}–{:.2}, n={}{rate}; {}) · decode {decode} · {steps}{own}",
                format_count(p.context_tokens),
                if p.spec_source == Some(SpecSource::EventsProxy) {
                    "~"
                } else {
                    ""
                },
                a.median,
                a.p10,
                a.p90,
                a.n,
                source_words(p.spec_source),
            ))
        })
        .collect()
}

const TITLE: &str = "speculative decoding (median per-request accept length = decode tokens per verify step, the first token left out; steps/s = decode tok/s / accept length; a server's own figure, where it states one, by its own definition: SGLang's counts the first token, = ours + 1/steps)";

/// The terminal section.
pub fn text(summary: &Summary) -> String {
    let l = lines(summary);
    if l.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{TITLE}\n");
    for line in l {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

pub fn markdown(summary: &Summary) -> String {
    let l = lines(summary);
    if l.is_empty() {
        return String::new();
    }
    let mut out = format!("\n**{TITLE}**\n\n");
    for line in l {
        out.push_str(&format!("- {}\n", line.trim_start()));
    }
    out
}

/// The page's section: one row per length.
pub fn html(summary: &Summary) -> String {
    if !any(summary) {
        return String::new();
    }
    let header = [
        "context",
        "source",
        "accept length",
        "p10–p90",
        "accept rate",
        "decode tok/s",
        "verify steps/s",
    ];
    let rows: Vec<(String, Vec<Cell>)> = summary
        .points
        .iter()
        .filter(|p| p.accept_length.is_some())
        .map(|p| {
            let a = p.accept_length.expect("filtered on accept_length");
            let cells = vec![
                Cell::text(format_count(p.context_tokens)),
                Cell::text(source_words(p.spec_source)),
                Cell::num(cell(p)),
                Cell::num(format!("{:.2}–{:.2}", a.p10, a.p90)),
                Cell::num(
                    p.accept_rate
                        .map(|r| format!("{:.0}%", r.median * 100.0))
                        .unwrap_or_else(|| "-".into()),
                ),
                Cell::num(super::cells::rate(p.decode_tps)),
                Cell::num(
                    step_rate(p)
                        .map(|s| format!("{s:.1}"))
                        .unwrap_or_else(|| "-".into()),
                ),
            ];
            (String::new(), cells)
        })
        .collect();
    format!(
        "<section id=\"spec\">\n<h2>Speculative decoding</h2>\n<p class=\"sub\">{}</p>\n{}</section>\n",
        escape(
            "Accept length: decode tokens per verification step ((output − 1) / verify \
             steps, the prefill's first token left out), median over requests. \
             Decode tok/s follows it: verify steps/s (decode / accept length) is the \
             server's step rate. ~ marks a proxy (tokens per stream event)."
        ),
        table("spec", &header, &rows, 2)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Stat;

    fn stat(m: f64) -> Option<Stat> {
        Stat::of(&[m])
    }

    #[test]
    fn proxy_is_marked_and_steps_are_decode_over_accept() {
        let mut s = Summary::default();
        assert!(!any(&s) && text(&s).is_empty() && html(&s).is_empty());
        s.points.push(PointSummary {
            context_tokens: 32768,
            decode_tps: stat(102.0),
            accept_length: stat(3.4),
            accept_rate: stat(0.6),
            spec_source: Some(SpecSource::Server),
            ..PointSummary::default()
        });
        s.points.push(PointSummary {
            context_tokens: 1024,
            decode_tps: stat(150.0),
            accept_length: stat(1.5),
            spec_source: Some(SpecSource::EventsProxy),
            ..PointSummary::default()
        });
        assert_eq!(cell(&s.points[0]), "3.40");
        assert_eq!(cell(&s.points[1]), "~1.50");
        assert!((step_rate(&s.points[0]).unwrap() - 30.0).abs() < 1e-9);
        let t = text(&s);
        assert!(t.contains("32k: accept 3.40 tokens/step"), "{t}");
        assert!(t.contains("30.0 steps/s"), "{t}");
        assert!(
            t.contains("~1.50 tokens/event") && t.contains("PROXY"),
            "{t}"
        );
        let h = html(&s);
        assert!(h.contains("id=\"spec\"") && h.contains("~1.50"), "{h}");
    }
}
