//! Bands for a long trace from a sample of it. Each of a band's reruns (a bootstrap
//! replicate, an unidentified term's alternative, a jittered schedule) is a whole
//! prediction; over an hour of trace forty of them take minutes. What a band needs of a
//! rerun is how far it moves each figure from the point, and that a sample of the trace
//! shows: the sample is predicted on the twin itself and on each rerun's twin, and each
//! rerun's figure is the hour's point × (sample on the rerun / sample on the twin).
//!
//! The sample: the replay cut into [`SLICES`] equal strata of requests; in each, a slice of
//! [`SLICE_REQUESTS`] consecutive requests centred on the request the point predicted the
//! longest TTFT for there (the moments that make the tail; the medians' requests are in
//! every slice), led in by the [`LEAD_IN_MS`] of trace before it, which run (filling the
//! engine's queue and prefix cache as the hour had them there) but count in no figure. The
//! slices follow each other at the trace's mean gap between requests, in one replay.

use super::predict_trace::Replay;
use crate::load::LoadResult;
use crate::trace::format::TraceRequest;

/// A replay of more requests than this is banded from a sample.
pub const SAMPLE_ABOVE: usize = 2_000;
/// Slices in a sample.
pub const SLICES: usize = 4;
/// Requests a slice's figures count.
pub const SLICE_REQUESTS: usize = 200;
/// Trace time run before each slice and left out of its figures, ms.
pub const LEAD_IN_MS: f64 = 30_000.0;

/// The sample of `replay` its bands are rerun on (`None`: short enough to rerun whole),
/// its slices placed by `point`, the replay predicted on the twin itself.
pub fn sample(replay: &Replay, point: &LoadResult) -> Option<Replay> {
    let all = replay.requests();
    let n = all.len();
    if n <= SAMPLE_ABOVE {
        return None;
    }
    let mut ttft = vec![0.0; n];
    for r in &point.requests {
        if let (Some(t), Some(slot)) = (r.ttft_s, ttft.get_mut(r.index as usize)) {
            *slot = t;
        }
    }
    let gap_ms = (all[n - 1].timestamp_ms - all[0].timestamp_ms) / (n - 1) as f64;
    let mut requests: Vec<TraceRequest> = Vec::new();
    let mut measured: Vec<bool> = Vec::new();
    let mut taken = 0;
    for (from, to) in slices(&ttft) {
        let start_ms = all[from].timestamp_ms - LEAD_IN_MS;
        let lead = (taken..from)
            .find(|&i| all[i].timestamp_ms >= start_ms)
            .unwrap_or(from);
        let shift = requests
            .last()
            .map_or(0.0, |r| r.timestamp_ms + gap_ms - all[lead].timestamp_ms);
        for (i, r) in all.iter().enumerate().take(to).skip(lead) {
            requests.push(TraceRequest {
                timestamp_ms: r.timestamp_ms + shift,
                ..r.clone()
            });
            measured.push(i >= from);
        }
        taken = to;
    }
    Some(replay.sampled(requests, measured))
}

/// What the sample is, for a reader of the prediction.
pub fn describe(whole: &Replay, sample: &Replay) -> String {
    format!(
        "bands from a sample of the trace: {SLICES} slices of {SLICE_REQUESTS} requests, each \
         at its quarter's longest predicted TTFT and led in by {:.0} s of trace ({} of {} \
         requests run per band prediction), each figure's reruns taken relative to the sample \
         and applied to the whole trace's point (docs/twin.md, \"Bands of a long trace\")",
        LEAD_IN_MS / 1e3,
        sample.requests().len(),
        whole.requests().len()
    )
}

/// Each slice's measured requests `[from, to)`: per stratum, [`SLICE_REQUESTS`] around its
/// longest TTFT (the first of equals), kept inside the stratum.
fn slices(ttft: &[f64]) -> Vec<(usize, usize)> {
    let n = ttft.len();
    (0..SLICES)
        .map(|j| {
            let (lo, hi) = (j * n / SLICES, (j + 1) * n / SLICES);
            let worst = (lo..hi).fold(lo, |w, i| if ttft[i] > ttft[w] { i } else { w });
            let from = worst
                .saturating_sub(SLICE_REQUESTS / 2)
                .clamp(lo, hi.saturating_sub(SLICE_REQUESTS).max(lo));
            (from, (from + SLICE_REQUESTS).min(hi))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_centres_on_its_strata_worst_request_and_stays_inside_it() {
        let mut ttft = vec![0.1; 4_000];
        ttft[1_500] = 2.0; // stratum 1: 1000..2000
        ttft[2_010] = 3.0; // stratum 2's first requests: clamped to start at 2000
        let s = slices(&ttft);
        assert_eq!(s.len(), SLICES);
        assert_eq!(s[0], (0, SLICE_REQUESTS), "no worse request: the first");
        assert_eq!(s[1], (1_400, 1_600));
        assert_eq!(s[2], (2_000, 2_200));
        let small = slices(&[0.1; 40]);
        assert!(small.iter().all(|(a, b)| b - a == 10), "{small:?}");
    }
}
