//! Bands for a long trace from a sample of it: each rerun predicts [`SLICES`] slices of
//! [`SLICE_REQUESTS`] requests (each led in by [`LEAD_IN_MS`] of trace that counts in no
//! figure) instead of the whole hour, and its figure is the hour's point × (sample on the
//! rerun / sample on the twin). The method and its timings: docs/twin.md, "Bands of a long
//! trace".

use crate::trace::format::TraceRequest;
use crate::twin::predict::trace::Replay;

/// A replay of more requests than this is banded from a sample.
pub const SAMPLE_ABOVE: usize = 2_000;
/// Slices in a sample.
pub const SLICES: usize = 8;
/// Requests a slice's figures count.
pub const SLICE_REQUESTS: usize = 100;
/// Trace time run before each slice and left out of its figures, ms: a burst's queue and
/// a conversation's earlier turns (5–30 s apart in the bench's hour) are there by then.
pub const LEAD_IN_MS: f64 = 60_000.0;

/// The sample of `replay` its bands are rerun on (`None`: short enough to rerun whole).
pub fn sample(replay: &Replay) -> Option<Replay> {
    let all = replay.requests();
    let n = all.len();
    if n <= SAMPLE_ABOVE {
        return None;
    }
    let gap_ms = (all[n - 1].timestamp_ms - all[0].timestamp_ms) / (n - 1) as f64;
    let mut requests: Vec<TraceRequest> = Vec::new();
    let mut measured: Vec<bool> = Vec::new();
    let mut taken = 0;
    for (from, to) in slices(n) {
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
        "bands from a sample of the trace: {SLICES} slices of {SLICE_REQUESTS} requests, one \
         amid each of {SLICES} equal parts, each led in by {:.0} s of trace ({} of {} \
         requests run per band prediction), each figure's reruns taken relative to the sample \
         and applied to the whole trace's point (docs/twin.md, \"Bands of a long trace\")",
        LEAD_IN_MS / 1e3,
        sample.requests().len(),
        whole.requests().len()
    )
}

/// Each slice's measured requests `[from, to)` of `n`: [`SLICE_REQUESTS`] in the middle of
/// each of [`SLICES`] equal strata.
fn slices(n: usize) -> Vec<(usize, usize)> {
    (0..SLICES)
        .map(|j| {
            let (lo, hi) = (j * n / SLICES, (j + 1) * n / SLICES);
            let from = ((lo + hi) / 2).saturating_sub(SLICE_REQUESTS / 2).max(lo);
            (from, (from + SLICE_REQUESTS).min(hi))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_sits_in_the_middle_of_its_stratum() {
        let s = slices(8_000);
        assert_eq!(s.len(), SLICES);
        assert_eq!(s[0], (450, 550));
        assert_eq!(s[7], (7_450, 7_550));
        let small = slices(400);
        assert!(small.iter().all(|(a, b)| b - a == 50), "{small:?}");
    }
}
