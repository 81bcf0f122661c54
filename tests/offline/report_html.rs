//! Structural tests of the HTML report: the SVG charts have the axes, series, spread and
//! fitted curves the data says; text is escaped; nothing external is referenced; the file is
//! replaced atomically.

use crate::common;

use common::report::*;
use ctxbench::record::Summary;
use ctxbench::report::html;
use ctxbench::summary::summarize_with_fit;

fn page() -> (Fixture, Summary, String) {
    let fx = troubled_run();
    let summary = summarize_with_fit(&fx.samples, &fx.errors);
    let doc = html::render(&fx.run, &fx.samples, &fx.errors, &summary);
    (fx, summary, doc)
}

#[test]
fn the_four_scaling_charts_are_present() {
    let (_, _, doc) = page();
    let charts = elements(&doc, "svg", "chart");
    let ids: Vec<&str> = charts.iter().map(|c| c["data-chart"].as_str()).collect();
    for id in ["ttft", "prefill_tps", "decode_tps", "itl"] {
        assert!(ids.contains(&id), "chart {id} missing from {ids:?}");
    }
}

#[test]
fn context_axis_is_log2_with_powers_of_two_labelled_in_k() {
    let (_, _, doc) = page();
    for id in [
        "chart-ttft",
        "chart-prefill_tps",
        "chart-decode_tps",
        "chart-itl",
    ] {
        let svg = svg_by_id(&doc, id);
        let axis = &elements(svg, "g", "x-axis")[0];
        assert_eq!(axis["data-scale"], "log2", "{id}");
        assert_eq!(
            (f(axis, "data-min"), f(axis, "data-max")),
            (1024.0, 65536.0)
        );
        let labels = texts(svg, "tick-label");
        for l in ["1k", "2k", "4k", "8k", "16k", "32k", "64k"] {
            assert!(
                labels.iter().any(|t| t == l),
                "{id}: no tick {l} in {labels:?}"
            );
        }
        assert_eq!(texts(svg, "x-label"), vec!["context (tokens)".to_string()]);
        assert_eq!(texts(svg, "y-label").len(), 1);
    }
}

#[test]
fn ttft_points_are_the_medians_with_p10_p90_bars() {
    let (_, summary, doc) = page();
    let svg = svg_by_id(&doc, "chart-ttft");
    assert_eq!(elements(svg, "g", "y-axis")[0]["data-scale"], "log10");
    let points = elements(svg, "circle", "point");
    assert_eq!(points.len(), summary.points.len());
    for (p, s) in points.iter().zip(&summary.points) {
        assert_eq!(p["data-series"], "ttft");
        assert_eq!(f(p, "data-x"), s.context_tokens as f64);
        assert_eq!(f(p, "data-y"), s.ttft_s.unwrap().median);
    }
    // Longer context: further right and (TTFT grows) higher up, i.e. smaller cy.
    let cx: Vec<f64> = points.iter().map(|p| f(p, "cx")).collect();
    let cy: Vec<f64> = points.iter().map(|p| f(p, "cy")).collect();
    assert!(cx.windows(2).all(|w| w[0] < w[1]), "{cx:?}");
    assert!(cy.windows(2).all(|w| w[0] > w[1]), "{cy:?}");
    let bars = elements(svg, "g", "errorbar");
    assert_eq!(bars.len(), summary.points.len());
    for (b, s) in bars.iter().zip(&summary.points) {
        let st = s.ttft_s.unwrap();
        assert_eq!((f(b, "data-lo"), f(b, "data-hi")), (st.p10, st.p90));
    }
    // One polyline joins the points; tooltips name the length.
    assert_eq!(elements(svg, "polyline", "series-line").len(), 1);
    assert!(svg.contains("<title>TTFT median at 64k: "));
}

#[test]
fn fitted_curves_are_dashed_and_follow_the_fit() {
    let (_, summary, doc) = page();
    let fit = ctxbench::fit::fit_points(&summary.points);
    let t = fit.ttft.as_ref().expect("ttft fit");
    for (id, key) in [
        ("chart-ttft", "ttft-fit"),
        ("chart-prefill_tps", "prefill_tps-fit"),
        ("chart-decode_tps", "decode_tps-fit"),
    ] {
        let svg = svg_by_id(&doc, id);
        let curves = elements(svg, "g", "curve");
        assert_eq!(curves.len(), 1, "{id}");
        assert_eq!(curves[0]["data-series"], key);
        let lines = elements(svg, "polyline", "curve-line");
        assert!(!lines.is_empty());
        assert!(lines.iter().all(|l| l["stroke-dasharray"] == "6 4"));
    }
    // The page states the coefficients it drew.
    let stats = &elements(&doc, "p", "fit-stats")[0];
    assert_eq!(stats["data-fit"], "ttft");
    assert_eq!(f(stats, "data-a-s"), t.a_s);
    assert_eq!(f(stats, "data-c-s-per-token2"), t.c_s_per_token2);
    // Residuals: a table row and a chart point per length.
    let svg = svg_by_id(&doc, "chart-ttft-residuals");
    assert_eq!(elements(svg, "circle", "point").len(), t.n);
    assert!(doc.contains("<table class=\"fit-residuals ttft\">"));
}

#[test]
fn itl_chart_has_p50_and_p99_series() {
    let (_, summary, doc) = page();
    let svg = svg_by_id(&doc, "chart-itl");
    let series: Vec<String> = elements(svg, "g", "series")
        .iter()
        .map(|s| s["data-series"].clone())
        .collect();
    assert_eq!(series, vec!["itl_p50", "itl_p99"]);
    let p99: Vec<_> = elements(svg, "circle", "point")
        .into_iter()
        .filter(|p| p["data-series"] == "itl_p99")
        .collect();
    assert_eq!(
        f(&p99[0], "data-y"),
        summary.points[0].itl_p99_s.unwrap().median
    );
}

#[test]
fn needle_grid_and_every_flagged_sample_are_listed() {
    let (fx, _, doc) = page();
    let cells = elements(&doc, "td", "needle-cell");
    assert_eq!(cells.len(), LENGTHS.len());
    let last = cells.last().unwrap();
    assert_eq!(last["data-context"], "65536");
    assert_eq!(
        (last["data-passed"].as_str(), last["data-total"].as_str()),
        ("2", "3")
    );
    assert!(last["class"].contains("partial"));
    assert!(cells[0]["class"].contains("pass"));
    let flagged = fx
        .samples
        .iter()
        .filter(|s| !s.valid || !s.flags.is_empty())
        .count();
    assert_eq!(flagged, 2);
    assert_eq!(elements(&doc, "tr", "flagged").len(), flagged);
    assert_eq!(elements(&doc, "tr", "invalid").len(), 1);
    assert!(doc.contains("cache_hit"));
    assert!(doc.contains("needle_failed"));
    assert_eq!(elements(&doc, "tr", "error").len(), 1);
    assert!(doc.contains("http_5xx"));
}

#[test]
fn server_provided_text_is_escaped() {
    let (_, _, doc) = page();
    assert!(!doc.contains("<b>evil</b>"));
    assert!(!doc.contains("<script>"));
    assert!(!doc.contains("<html>boom"));
    assert!(doc.contains("&lt;b&gt;evil&lt;/b&gt; &amp; &quot;model&quot;"));
    assert!(doc.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(doc.contains("500 Internal Server Error: &lt;html&gt;boom&lt;/html&gt;"));
}

#[test]
fn the_page_is_self_contained() {
    let (_, _, doc) = page();
    assert!(doc.starts_with("<!doctype html>"));
    for banned in [
        "<script", "<link", "<img", "<iframe", "@import", "url(", "src=", "href=",
    ] {
        assert!(!doc.contains(banned), "page contains {banned}");
    }
    // The only URLs are the SVG namespace and the target, written as text.
    let urls = doc.matches("http://").count();
    let ns = doc.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    let target = doc.matches("http://127.0.0.1:30000").count();
    assert_eq!(urls, ns + target);
}

#[test]
fn run_target_and_config_are_shown() {
    let (_, _, doc) = page();
    let sec = &doc[doc.find("<section id=\"run\">").unwrap()..];
    for needle in [
        "<dt>url</dt><dd>http://127.0.0.1:30000</dd>",
        "<dt>api</dt><dd>sglang</dd>",
        "<dt>output tokens</dt><dd>64</dd>",
        "<dt>repetitions</dt><dd>3</dd>",
        "<dt>cache bust</dt><dd>auto</dd>",
        "<dt>lengths</dt><dd>1k, 2k, 4k, 8k, 16k, 32k, 64k</dd>",
        "<dt>network RTT</dt><dd>200 µs</dd>",
        "&quot;context_length&quot;: 131072",
    ] {
        assert!(sec.contains(needle), "missing {needle}");
    }
}

#[test]
fn a_run_with_nothing_valid_yet_still_renders() {
    let run = run_record("m", &[1024], 1);
    let summary = ctxbench::summary::summarize(&[], &[]);
    let doc = html::render(&run, &[], &[], &summary);
    for id in ["ttft", "prefill_tps", "decode_tps", "itl"] {
        let svg = svg_by_id(&doc, &format!("chart-{id}"));
        assert!(svg.contains("no valid samples yet"));
        assert!(elements(svg, "circle", "point").is_empty());
    }
    assert!(doc.contains("id=\"fit-ttft-missing\""));
    assert!(doc.contains("No sample was flagged."));
}

#[test]
fn write_html_replaces_the_file_atomically() {
    let fx = troubled_run();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, "old").unwrap();
    let partial = ctxbench::summary::summarize(&fx.samples[..3], &[]);
    ctxbench::report::write_html(&path, &fx.run, &fx.samples[..3], &[], &partial).unwrap();
    let first = std::fs::read_to_string(&path).unwrap();
    assert!(first.contains("data-points=\"1\""));
    let full = summarize_with_fit(&fx.samples, &fx.errors);
    ctxbench::report::write_html(&path, &fx.run, &fx.samples, &fx.errors, &full).unwrap();
    let second = std::fs::read_to_string(&path).unwrap();
    assert!(second.contains("data-points=\"7\""));
    // Nothing but the report is left in the directory.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["report.html".to_string()]);
    // A missing directory is an error that says what to do.
    let bad = dir.path().join("no/such/dir/r.html");
    let e = ctxbench::report::write_html(&bad, &fx.run, &[], &[], &partial).unwrap_err();
    assert!(
        format!("{e:#}").contains("check that the directory exists"),
        "{e:#}"
    );
}
