//! `--find-knee`: the largest concurrency whose cell meets the SLOs at the goodput target,
//! found by doubling until a miss, then bisecting between the last pass and that miss.
//! Assumes goodput falls with load (monotone), as queueing makes it.

use crate::record::load::{CellRecord, KneeRecord};

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Knee {
    /// Largest passing load; `None` when even the first probe missed.
    pub knee: Option<u32>,
    /// Smallest missing load seen; `None` when the search hit `max` still passing.
    pub first_miss: Option<u32>,
    /// (load, passed) in probe order.
    pub probes: Vec<(u32, bool)>,
}

/// Probe loads `1, 2, 4, …` (up to `max`) with `passes`, then bisect.
pub async fn search(
    max: u32,
    mut passes: impl AsyncFnMut(u32) -> anyhow::Result<bool>,
) -> anyhow::Result<Knee> {
    let mut probes = Vec::new();
    let mut good: Option<u32> = None;
    let mut bad: Option<u32> = None;
    let mut c = 1u32;
    loop {
        let ok = passes(c).await?;
        probes.push((c, ok));
        if ok {
            good = Some(c);
            if c >= max {
                break;
            }
            c = (c.saturating_mul(2)).min(max);
        } else {
            bad = Some(c);
            break;
        }
    }
    if let (Some(mut lo), Some(mut hi)) = (good, bad) {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let ok = passes(mid).await?;
            probes.push((mid, ok));
            if ok {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        good = Some(lo);
        bad = Some(hi);
    }
    Ok(Knee {
        knee: good,
        first_miss: bad,
        probes,
    })
}

/// The knee of length `n` beside the planner's count and the onset of server queueing.
pub(crate) fn knee_record(
    all: &[CellRecord],
    n: u64,
    found: &Knee,
    planned: Option<(f64, String)>,
) -> KneeRecord {
    let cells: Vec<&CellRecord> = all.iter().filter(|c| c.cell.context_tokens == n).collect();
    let queued = |c: &&&CellRecord| {
        c.server
            .as_ref()
            .is_some_and(|s| s.waiting_max.is_some_and(|w| w > 0.0))
    };
    KneeRecord {
        context_tokens: n,
        axis: "concurrency".into(),
        knee: found.knee.map(f64::from),
        first_miss: found.first_miss.map(f64::from),
        planned: planned.as_ref().map(|p| p.0),
        planned_from: planned.map(|p| p.1),
        queue_onset: cells
            .iter()
            .filter(queued)
            .filter_map(|c| c.cell.concurrency.map(f64::from))
            .reduce(f64::min),
        probes: found
            .probes
            .iter()
            .map(|(c, _)| {
                let g = cells
                    .iter()
                    .find(|x| x.cell.concurrency == Some(*c))
                    .and_then(|x| x.goodput_fraction)
                    .unwrap_or(0.0);
                (f64::from(*c), g)
            })
            .collect(),
        shard: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(max: u32, true_knee: u32) -> Knee {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(search(max, async |c| Ok(c <= true_knee)))
            .unwrap()
    }

    #[test]
    fn doubling_then_bisecting_finds_the_knee() {
        for k in [1u32, 2, 3, 5, 12, 13, 64, 100] {
            let r = run(256, k);
            assert_eq!(r.knee, Some(k), "{r:?}");
            assert_eq!(r.first_miss, Some(k + 1));
            // log2 doublings plus log2 bisections.
            assert!(
                r.probes.len() <= 2 * (32 - k.leading_zeros()) as usize + 1,
                "{r:?}"
            );
        }
    }

    #[test]
    fn edges_no_pass_and_no_miss() {
        let none = run(64, 0);
        assert_eq!((none.knee, none.first_miss), (None, Some(1)));
        let all = run(48, 1000);
        assert_eq!((all.knee, all.first_miss), (Some(48), None));
        assert_eq!(all.probes.last(), Some(&(48, true)));
    }
}

/// The capacity planner's answer for one length: concurrent requests of `length` prompt
/// plus `output` tokens that the server's KV pool holds (each rounded up to whole pages),
/// capped by its running-request limit.
pub fn planned_concurrency(
    pool_tokens: Option<u64>,
    page: u64,
    max_running: Option<u64>,
    length: u64,
    output: u64,
) -> Option<(f64, String)> {
    let page = page.max(1);
    let per_request = (length + output).div_ceil(page) * page;
    let by_pool = pool_tokens.map(|p| p / per_request.max(1));
    match (by_pool, max_running) {
        (Some(p), Some(m)) if m < p => Some((m as f64, format!("max_running_requests {m}"))),
        (Some(p), _) => Some((
            p as f64,
            format!(
                "KV pool {} tokens / {per_request} per request",
                pool_tokens.unwrap_or(0)
            ),
        )),
        (None, Some(m)) => Some((m as f64, format!("max_running_requests {m} (no pool size)"))),
        (None, None) => None,
    }
}

#[cfg(test)]
mod plan_tests {
    #[test]
    fn pool_and_running_cap_bound_the_plan() {
        // The story's server: 218k-token pool, 8 running, 32k prompts + 64 out → 6 fit.
        let (c, from) = super::planned_concurrency(Some(218_000), 1, Some(8), 32_768, 64).unwrap();
        assert_eq!(c, 6.0, "{from}");
        let (c, from) = super::planned_concurrency(Some(218_000), 1, Some(8), 8192, 64).unwrap();
        assert_eq!(c, 8.0);
        assert!(from.contains("max_running"));
        assert_eq!(super::planned_concurrency(None, 16, None, 1, 1), None);
    }
}
