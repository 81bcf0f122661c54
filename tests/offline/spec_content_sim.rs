//! Why filler gives the wrong decode number under speculative decoding, tested against the
//! simulator's truth: with a prompt-lookup drafter (`--spec-model ngram`, acceptance a
//! documented function of the prompt's repeated bigrams) the same sweep on filler and on
//! real prose reports accept lengths and decode rates that each match the truth, and that
//! differ as the truth does.

use crate::common;

use common::{flags, measured_truth_after, sim, timing_lock};
use ctxbench::record::Sample;
use ctxbench::sim::RequestTruth;

const SPEC: &[&str] = &[
    "--spec",
    "4",
    "--spec-model",
    "ngram",
    "--context-length",
    "16384",
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// (client accept length, truth accept length, client decode tok/s, truth decode tok/s),
/// medians over the run's samples.
async fn run(content: &[&str]) -> (f64, f64, f64, f64) {
    let server = sim(SPEC).await;
    let r = flags("2k,4k", 3, 128)
        .with(content)
        .run(&server.url())
        .await;
    let samples: Vec<&Sample> = r.samples.iter().filter(|s| s.method == "stream").collect();
    assert_eq!(samples.len(), 6);
    assert!(samples.iter().all(|s| s.valid), "{samples:?}");
    let truth: Vec<RequestTruth> = measured_truth_after(&server, samples.len()).await;
    assert_eq!(truth.len(), samples.len());
    let client_accept = median(
        samples
            .iter()
            .map(|s| s.spec.as_ref().unwrap().accept_length.unwrap())
            .collect(),
    );
    let truth_accept = median(
        truth
            .iter()
            .map(|t| t.tokens_per_verify_step().unwrap())
            .collect(),
    );
    let client_decode = median(samples.iter().map(|s| s.decode_tps.unwrap()).collect());
    let truth_decode = median(truth.iter().map(RequestTruth::decode_tps).collect());
    (client_accept, truth_accept, client_decode, truth_decode)
}

#[tokio::test]
async fn filler_overstates_decode_under_prompt_lookup_drafting() {
    let _guard = timing_lock().await;
    let filler = run(&[]).await;
    let prose = run(&["--corpus", "builtin:prose"]).await;
    eprintln!(
        "filler: accept {:.2} (truth {:.2}), decode {:.0} tok/s (truth {:.0}); \
         prose: accept {:.2} (truth {:.2}), decode {:.0} tok/s (truth {:.0})",
        filler.0, filler.1, filler.2, filler.3, prose.0, prose.1, prose.2, prose.3
    );
    for (name, (ca, ta, cd, td)) in [("filler", filler), ("prose", prose)] {
        // The accept length is the server's own count (meta_info.spec_verify_ct): exact.
        assert!((ca - ta).abs() < 1e-9, "{name}: accept {ca} vs truth {ta}");
        // Decode: the client's window between first and last event against the summed
        // step costs; the gap is event delivery on a shared machine (~0.1–1 ms over a
        // window of ~0.2–0.5 s), well inside the 5 %.
        assert!(
            (cd / td - 1.0).abs() < 0.05,
            "{name}: decode {cd} vs truth {td}"
        );
    }
    // The truth's difference, reported: repeated filler lets the drafter copy far more.
    assert!(
        filler.1 > prose.1 * 1.2,
        "filler accepts more than prose in truth ({} vs {})",
        filler.1,
        prose.1
    );
    assert!(filler.0 / prose.0 > 1.2 && filler.2 / prose.2 > 1.2);
}
