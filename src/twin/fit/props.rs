//! Property: whatever records `twin fit` is given — noisy, flat, decreasing, bimodal, too
//! few — it either writes a profile that reads back unchanged, every number finite, or
//! says what it could not fit. Never a `null` where a reader needs a number.

use crate::twin::fit::batch_steps::CellSteps;
use crate::twin::fit::inputs::{Inputs, SweepPoint, fastest};
use crate::twin::fit::laws::fit;
use crate::twin::model::profile::Profile;
use proptest::prelude::*;
use serde_json::json;

fn sweep_point(n: u64, reps: Vec<(f64, f64)>) -> SweepPoint {
    let (ttft_s, step_s) = fastest(&reps);
    SweepPoint {
        context_tokens: n,
        prompt_tokens: n,
        output_tokens: 32,
        ttft_s,
        step_s,
        samples: reps.len(),
        reps,
    }
}

fn cell(concurrency: u32, batch: u32, per_request: Vec<Vec<f64>>) -> Option<CellSteps> {
    CellSteps::empty(concurrency, batch, 1024, 32).with_requests(per_request)
}

/// A positive time from 10 µs to 10 s, log-uniform, or an exact repeat of `1 ms` (flat
/// laws make degenerate fits).
fn time() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => (-5.0f64..1.0).prop_map(|e| 10f64.powf(e)),
        1 => Just(1e-3),
    ]
}

fn reps() -> impl Strategy<Value = Vec<(f64, f64)>> {
    prop::collection::vec((time(), time()), 1..4)
}

fn inputs() -> impl Strategy<Value = Inputs> {
    let sweep = prop::collection::vec(reps(), 1..6);
    let cells = prop::collection::vec(
        (
            1u32..5,
            1u32..5,
            prop::collection::vec(prop::collection::vec(time(), 1..12), 1..5),
        ),
        0..4,
    );
    (sweep, cells, prop::bool::ANY).prop_map(|(sweep, cells, llama)| {
        let kind = if llama { "llamacpp" } else { "sglang" };
        Inputs {
            files: vec!["random".into()],
            target: Some(json!({"server_info": {"kind": kind, "slots": 4,
                "max_running_requests": 4, "context_length": 16384}})),
            sweep: sweep
                .into_iter()
                .enumerate()
                .map(|(i, r)| sweep_point(512 << i, r))
                .collect(),
            cells: cells
                .into_iter()
                .filter_map(|(c, b, per)| cell(c, b.min(c), per))
                .collect(),
            max_context_tokens: 16384,
            ..Inputs::default()
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_fit_reads_back_or_names_what_it_could_not_fit(i in inputs()) {
        match fit(&i) {
            Ok(p) => {
                prop_assert!(p.problems().is_empty(), "{:?}", p.problems());
                let text = p.to_json_checked().map_err(TestCaseError::fail)?;
                let back = Profile::parse(&text, "random.json")
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(back, p);
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(
                    ["prefill law", "decode law", "p0", "cannot hold"]
                        .iter()
                        .any(|w| e.contains(w)),
                    "{}",
                    e
                );
            }
        }
    }
}
