//! Speculative acceptance in a replayed trace, beside its prefix hits: a request served
//! from the cache decodes the same way, but a multi-turn trace's later turns repeat their
//! earlier text, which a prompt-lookup drafter copies, so acceptance may differ by hit.

use crate::record::load::RequestRecord;

fn median_of<'a>(rs: impl Iterator<Item = &'a RequestRecord>) -> (Option<f64>, usize) {
    let v: Vec<f64> = rs
        .filter_map(|r| r.spec.as_ref().and_then(|s| s.accept_length))
        .collect();
    (crate::stats::median(&v), v.len())
}

/// One line: the median per-request accept length over all successful requests, over
/// those the server served partly from its cache and over the rest; `None` without any.
pub fn line(requests: &[RequestRecord]) -> Option<String> {
    let ok = || requests.iter().filter(|q| q.ok);
    let (all, n) = median_of(ok());
    let all = all?;
    let hit = |q: &&RequestRecord| q.cached_tokens.unwrap_or(0) > 0;
    let (h, nh) = median_of(ok().filter(hit));
    let (m, nm) = median_of(ok().filter(|q| !hit(q)));
    let f = |x: Option<f64>| x.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
    Some(format!(
        "acceptance (decode tokens per verify step, median per request): all {all:.2} (n {n}), \
         cache hits {} (n {nh}), misses {} (n {nm})\n",
        f(h),
        f(m)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{SpecSource, SpecStats};

    fn req(cached: u64, accept: Option<f64>) -> RequestRecord {
        RequestRecord {
            ok: true,
            cached_tokens: Some(cached),
            spec: accept.map(|a| SpecStats {
                accept_length: Some(a),
                ..SpecStats::empty(SpecSource::Server)
            }),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn acceptance_is_split_by_the_servers_cached_count() {
        let r = vec![req(512, Some(3.0)), req(0, Some(1.5)), req(256, Some(2.0))];
        let l = line(&r).unwrap();
        assert!(l.contains("all 2.00 (n 3)"), "{l}");
        assert!(
            l.contains("cache hits 2.50 (n 2)") && l.contains("misses 1.50 (n 1)"),
            "{l}"
        );
        assert_eq!(line(&[req(0, None)]), None);
    }
}
