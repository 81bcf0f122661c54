//! `--start-at`: shards on different machines start together by the server's clock. Its
//! `Date` header has 1 s resolution, so it is polled until the second changes: the change
//! happened between the last old answer's send and the first new answer's receipt.

use crate::backend::http::Http;
use crate::record::load::StartSync;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Gap between polls: the offset is known to about half of it plus a round trip.
const POLL: Duration = Duration::from_millis(1);
/// A server's second must change within this.
const WATCH_LIMIT: Duration = Duration::from_millis(2500);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The server's clock minus ours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offset {
    pub offset_s: f64,
    /// Half the interval the true offset lies in.
    pub uncertainty_s: f64,
}

impl Offset {
    /// The server's second became `new_second` (Unix seconds) after our clock read
    /// `old_sent` (the last answer still showing the old second was asked for then) and
    /// before it read `new_received`.
    pub fn from_flip(old_sent: f64, new_received: f64, new_second: f64) -> Offset {
        let mid = (old_sent + new_received) / 2.0;
        Offset {
            offset_s: new_second - mid,
            uncertainty_s: (new_received - old_sent) / 2.0,
        }
    }
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Measure the offset against the server's `Date` header; `None` when it sends none.
pub async fn measure(http: &Http) -> anyhow::Result<Option<Offset>> {
    let date = async || {
        http.date("/", REQUEST_TIMEOUT)
            .await
            .map_err(|e| anyhow::anyhow!("--start-at: reading the server's clock: {e}"))
    };
    let began = std::time::Instant::now();
    let mut old_sent = unix(SystemTime::now());
    let Some(first) = date().await? else {
        return Ok(None);
    };
    loop {
        tokio::time::sleep(POLL).await;
        let sent = unix(SystemTime::now());
        let Some(d) = date().await? else {
            return Ok(None);
        };
        let received = unix(SystemTime::now());
        if d > first {
            return Ok(Some(Offset::from_flip(old_sent, received, unix(d))));
        }
        old_sent = sent;
        if began.elapsed() > WATCH_LIMIT {
            anyhow::bail!(
                "--start-at: the server's Date header did not change in {:.1} s: its clock \
                 cannot be read",
                WATCH_LIMIT.as_secs_f64()
            );
        }
    }
}

/// Measure the offset and say when, on this machine's clock, `start_at` (server time) is.
pub async fn sync(http: &Http, start_at: SystemTime) -> anyhow::Result<(StartSync, SystemTime)> {
    let offset = measure(http).await?;
    let local = match offset {
        Some(o) => {
            eprintln!(
                "clock: the server's clock is {:+.1} ms from ours (±{:.1} ms, from its Date header)",
                o.offset_s * 1e3,
                o.uncertainty_s * 1e3
            );
            shift(start_at, -o.offset_s)
        }
        None => {
            eprintln!(
                "warning: the server sent no Date header: --start-at is read on this \
                 machine's clock (the offset is recorded as null)"
            );
            start_at
        }
    };
    let sync = StartSync {
        start_at: humantime::format_rfc3339_millis(start_at).to_string(),
        clock_offset_s: offset.map(|o| o.offset_s),
        clock_offset_uncertainty_s: offset.map(|o| o.uncertainty_s),
    };
    Ok((sync, local))
}

fn shift(t: SystemTime, by_s: f64) -> SystemTime {
    let d = Duration::from_secs_f64(by_s.abs());
    if by_s >= 0.0 { t + d } else { t - d }
}

/// Wait until `local` on this machine's clock; an instant already past is refused (the
/// shards would not start together).
pub async fn wait_until(local: SystemTime) -> anyhow::Result<()> {
    let now = SystemTime::now();
    let wait = local.duration_since(now).map_err(|e| {
        anyhow::anyhow!(
            "--start-at passed {:.1} s before the first cell could start: give a later time \
             (every shard must be ready by then)",
            e.duration().as_secs_f64()
        )
    })?;
    eprintln!("waiting {:.1} s for --start-at", wait.as_secs_f64());
    tokio::time::sleep(wait).await;
    Ok(())
}

/// `--start-at`'s value: RFC 3339 in UTC.
pub fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    humantime::parse_rfc3339(s.trim()).map_err(|e| {
        format!("`{s}`: expected an RFC 3339 UTC time such as 2025-06-01T12:00:00Z ({e})")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flip_brackets_the_offset() {
        // Our clock 0.3 s behind: the server turned 100 s when we read 99.7; we asked at
        // 99.698 (still 99) and heard 100 at 99.703.
        let o = Offset::from_flip(99.698, 99.703, 100.0);
        assert!((o.offset_s - 0.2995).abs() < 1e-9, "{o:?}");
        assert!((o.uncertainty_s - 0.0025).abs() < 1e-9, "{o:?}");
        assert!((o.offset_s - 0.3).abs() <= o.uncertainty_s);
    }

    #[test]
    fn start_times_parse_and_bad_ones_say_why() {
        let t = parse_start_at("2025-06-01T12:00:00Z").unwrap();
        assert_eq!(unix(t), 1_748_779_200.0);
        assert!(parse_start_at("tomorrow").unwrap_err().contains("RFC 3339"));
        assert_eq!(shift(t, -1.5), t - Duration::from_millis(1500));
    }
}
