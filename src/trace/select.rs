//! Which of a trace's requests a run replays (`--trace-window`, then `--trace-limit`), and
//! when each is sent. A shard's part is taken later, from the whole replay's requests, so
//! that what it could hit is reckoned over all of them (`load::replay`).

use super::format::TraceRequest;
use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

/// `--trace-window A..B`: requests whose time since the trace's first request is in [A, B);
/// either end may be left out (`..20m`, `10m..`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub from: Duration,
    pub to: Option<Duration>,
}

impl FromStr for Window {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s.split_once("..").ok_or_else(|| {
            format!(
                "--trace-window `{s}`: expected START..END, e.g. 10m..20m (either may be left out)"
            )
        })?;
        let dur = |x: &str| -> Result<Option<Duration>, String> {
            let x = x.trim();
            if x.is_empty() {
                return Ok(None);
            }
            humantime::parse_duration(x)
                .map(Some)
                .map_err(|e| format!("--trace-window `{s}`: `{x}` is not a duration ({e})"))
        };
        let w = Window {
            from: dur(a)?.unwrap_or_default(),
            to: dur(b)?,
        };
        if w.to.is_some_and(|t| t <= w.from) {
            return Err(format!(
                "--trace-window `{s}`: the end must come after the start"
            ));
        }
        Ok(w)
    }
}

impl Window {
    fn holds(&self, since_first: Duration) -> bool {
        since_first >= self.from && self.to.is_none_or(|t| since_first < t)
    }
}

/// The requests to replay: those in `window` (in trace order), at most `limit` of them. An
/// agent trace's session is in or out whole, by its first turn's time.
pub fn select(
    trace: Vec<TraceRequest>,
    window: Option<Window>,
    limit: Option<u64>,
) -> Vec<TraceRequest> {
    let t0 = trace.first().map_or(0.0, |r| r.timestamp_ms);
    let mut started: HashMap<String, f64> = HashMap::new();
    trace
        .into_iter()
        .filter(|r| {
            let at = match &r.session {
                Some(s) => *started.entry(s.id.clone()).or_insert(r.timestamp_ms),
                None => r.timestamp_ms,
            };
            let since = Duration::from_secs_f64((at - t0) / 1e3);
            window.is_none_or(|w| w.holds(since))
        })
        .take(limit.map_or(usize::MAX, |n| n as usize))
        .collect()
}

/// Send offsets: each request's time after the first selected one, times `scale`.
pub fn send_times(requests: &[TraceRequest], scale: f64) -> Vec<Duration> {
    let t0 = requests.first().map_or(0.0, |r| r.timestamp_ms);
    requests
        .iter()
        .map(|r| Duration::from_secs_f64((r.timestamp_ms - t0) / 1e3 * scale))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: f64) -> TraceRequest {
        TraceRequest {
            line: ms as usize,
            timestamp_ms: ms,
            input_length: 1,
            output_length: 1,
            hash_ids: vec![ms as u64],
            session: None,
            recorded_cached_tokens: None,
        }
    }

    #[test]
    fn windows_parse_and_select_from_the_first_request() {
        let w: Window = "1s..2s".parse().unwrap();
        let trace: Vec<_> = [500.0, 1500.0, 1999.0, 2500.0, 3500.0].map(at).into();
        // Offsets from the first request (500 ms): 0, 1, 1.499, 2, 3 s.
        let got = select(trace.clone(), Some(w), None);
        assert_eq!(
            got.iter().map(|r| r.timestamp_ms).collect::<Vec<_>>(),
            [1500.0, 1999.0]
        );
        let open: Window = "2s..".parse().unwrap();
        assert_eq!(select(trace.clone(), Some(open), Some(1)).len(), 1);
        assert_eq!(select(trace.clone(), None, Some(3)).len(), 3);
        let upto: Window = "..1s".parse().unwrap();
        assert_eq!(upto.from, Duration::ZERO);
        for bad in ["10m", "2s..1s", "x..1s"] {
            assert!(
                bad.parse::<Window>()
                    .unwrap_err()
                    .contains("--trace-window")
            );
        }
    }

    #[test]
    fn send_times_are_scaled_offsets_from_the_first_selected() {
        let t = send_times(&[at(1000.0), at(1500.0), at(3000.0)], 0.5);
        assert_eq!(
            t,
            [
                Duration::ZERO,
                Duration::from_millis(250),
                Duration::from_secs(1)
            ]
        );
    }
}
