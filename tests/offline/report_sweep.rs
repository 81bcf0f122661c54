//! End to end against the in-process simulator: the fit of a real sweep recovers the
//! simulator's configured cost model, and `sweep --html` rewrites the report after every
//! point, so a long sweep can be watched by reloading.

use crate::common;

use common::{flags, rel, sim};
use ctxbench::fit::fit_points;
use std::collections::BTreeSet;

/// The simulator's cost model in this test (its flags below).
const T0: f64 = 0.02;
const P0: f64 = 50_000.0;
const Q: f64 = 8.0e-10;
const D0: f64 = 0.004;
const D1: f64 = 1.0e-7;
const OUT: u64 = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_of_the_simulator_recovers_its_cost_model_and_html_follows_it() {
    let _timing = common::timing_lock().await;
    let server = sim(&[
        "--sim-t0", "0.02", "--sim-p0", "50000", "--sim-q", "8e-10", "--sim-d0", "0.004",
        "--sim-d1", "1e-7",
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("live.html");
    let html_arg = html.to_str().unwrap().to_string();
    let args = flags("1k,2k,4k,8k,16k,32k", 2, 16)
        .with(&["--html", &html_arg])
        .args(&server.url());
    let task = tokio::spawn(ctxbench::sweep::execute(args));
    // Watch the page while the sweep runs, as a person reloading it would.
    let mut seen = BTreeSet::new();
    while !task.is_finished() {
        if let Ok(page) = std::fs::read_to_string(&html) {
            assert!(
                page.ends_with("</html>\n"),
                "a reader never sees half a page"
            );
            if let Some(i) = page.find("data-points=\"") {
                let rest = &page[i + 13..];
                seen.insert(rest[..rest.find('"').unwrap()].parse::<usize>().unwrap());
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(15)).await;
    }
    let r = task.await.unwrap().expect("sweep runs");
    assert_eq!(r.exit_code(), 0);
    assert!(
        seen.iter().any(|n| *n < 6),
        "no intermediate page seen: {seen:?}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-points=\"6\""));
    assert!(page.contains("data-series=\"ttft-fit\""));

    let fit = fit_points(&r.summary.points);
    let t = fit.ttft.expect("ttft fit");
    // Client TTFT adds a loopback round trip and request handling (~1 ms) to t0, and a
    // shared 2-core machine adds scheduling jitter: tolerances are stated per term.
    assert!((t.a_s - T0).abs() < 0.005, "a = {} s vs {T0}", t.a_s);
    assert!(
        rel(t.b_s_per_token, 1.0 / P0) < 0.10,
        "b = {:e} vs {:e}",
        t.b_s_per_token,
        1.0 / P0
    );
    assert!(
        rel(t.c_s_per_token2, Q / 2.0) < 0.10,
        "c = {:e} vs {:e}",
        t.c_s_per_token2,
        Q / 2.0
    );
    let d = fit.decode_step.expect("decode fit");
    // Decode steps run at contexts n+1 … n+OUT−1: mean n + OUT/2.
    let d_true = D0 + D1 * (OUT as f64 / 2.0);
    assert!(rel(d.d_s, d_true) < 0.10, "d = {} vs {d_true}", d.d_s);
    assert!(
        rel(d.e_s_per_token, D1) < 0.20,
        "e = {:e} vs {D1:e}",
        d.e_s_per_token
    );
    eprintln!(
        "recovered: a={:.4} s b={:.3e} c={:.3e} d={:.5} e={:.3e}",
        t.a_s, t.b_s_per_token, t.c_s_per_token2, d.d_s, d.e_s_per_token
    );
}
