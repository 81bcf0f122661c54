//! Transport delay that is not the server: a server that leaves Nagle's algorithm on holds
//! each small write on a keep-alive connection until the client's delayed ACK (~40 ms on
//! Linux). Found by comparing the first event of tiny requests over reused and fresh
//! connections (a fresh connection ACKs at once), and the HTTP round trip with TCP connect.

use super::allowance::PROBE_TOKENS;
use super::session::Session;
use crate::backend::{Backend, GenRequest};
use crate::record::TransportCheck;
use std::time::{Duration, Instant};

/// Pairs of probe requests (fresh, reused) in a set; a hold found is probed with a second.
const ROUNDS: usize = 3;
/// Excess that means a transport delay: half the 40 ms minimum delayed ACK of Linux (other
/// systems wait longer), far above the scheduling noise of a median of three on loopback.
pub const DELAY_MIN_S: f64 = 0.020;
/// An HTTP round trip this many times the TCP connect time, and `DELAY_MIN_S` above it.
const RTT_OVER_CONNECT: f64 = 10.0;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the cure is, for the header and the report.
pub const CURE: &str = "the server holds small writes until the client's delayed ACK \
(Nagle's algorithm is on: it does not set TCP_NODELAY), adding ~40 ms to TTFT and batching \
events on reused connections; cure: the server's operator sets TCP_NODELAY on its sockets; \
to measure the server without it now, rerun with --fresh-connection (a new connection per \
request). Samples on reused connections are flagged transport_delay";

pub async fn check(
    s: &mut Session,
    fresh: &dyn Backend,
    keep_alive: &dyn Backend,
    url: &str,
    http_rtt_s: Option<f64>,
    deadline: Duration,
) -> TransportCheck {
    let (mut fresh_ttft, mut reused_ttft) = probe_rounds(s, fresh, keep_alive, deadline).await;
    // A delayed ACK holds every reused probe, every time; a host too loaded to schedule the
    // probes evenly (decode at 10 tok/s where the same request had run at 392 a second
    // earlier) once held two of three by 23 ms. So a hold found is probed again, and named
    // only if the second set holds too.
    let mut by_first_event = held_by_first_event(&fresh_ttft, &reused_ttft);
    if by_first_event {
        let (f, r) = probe_rounds(s, fresh, keep_alive, deadline).await;
        by_first_event = held_by_first_event(&f, &r);
        fresh_ttft.extend(f);
        reused_ttft.extend(r);
    }
    let tcp_connect_s = tcp_connect_s(url).await;
    let fresh_ttft_s = crate::stats::median(&fresh_ttft);
    let reused_ttft_s = crate::stats::median(&reused_ttft);
    let by_round_trip = match (http_rtt_s, tcp_connect_s) {
        (Some(rtt), Some(c)) => rtt - c >= DELAY_MIN_S && rtt >= RTT_OVER_CONNECT * c,
        _ => false,
    };
    TransportCheck {
        tcp_connect_s,
        http_rtt_s,
        fresh_ttft_s,
        reused_ttft_s,
        delayed: by_first_event || by_round_trip,
        cure: (by_first_event || by_round_trip).then(|| CURE.to_string()),
    }
}

/// `ROUNDS` pairs of probes, fresh then reused: their TTFTs.
async fn probe_rounds(
    s: &mut Session,
    fresh: &dyn Backend,
    keep_alive: &dyn Backend,
    deadline: Duration,
) -> (Vec<f64>, Vec<f64>) {
    let mut fresh_ttft = Vec::new();
    let mut reused_ttft = Vec::new();
    // A failed probe ends the check: against a failing server, probing on would only add
    // a deadline per probe before the sweep.
    'rounds: for _ in 0..ROUNDS {
        for (backend, out, want_new) in [
            (fresh, &mut fresh_ttft, true),
            (keep_alive, &mut reused_ttft, false),
        ] {
            match probe_ttft(s, backend, deadline, want_new).await {
                Probe::Ttft(t) => out.push(t),
                Probe::OtherConnection => {}
                Probe::Failed => break 'rounds,
            }
        }
    }
    (fresh_ttft, reused_ttft)
}

/// Most reused probes slower than the fresh ones' median by the margin: a delayed ACK holds
/// reused requests (all but one that Linux's quick-ACK mode may let through after an idle
/// spell), while a scheduling hiccup on a loaded machine holds one probe, which moves neither
/// the fresh median nor a majority of the reused. A slow server's own TTFT varies too (a real
/// model on a loaded machine: 130 to 220 ms between three fresh probes): an excess within the
/// fresh probes' own spread is not the transport's, so the margin is the larger of the two.
fn held_by_first_event(fresh: &[f64], reused: &[f64]) -> bool {
    let Some(median) = crate::stats::median(fresh) else {
        return false;
    };
    if reused.len() < 2 {
        return false;
    }
    let margin = DELAY_MIN_S.max(spread(fresh));
    let held = reused.iter().filter(|&&t| t - median >= margin).count();
    2 * held > reused.len()
}

/// Largest minus smallest.
fn spread(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    if v.is_empty() { 0.0 } else { max - min }
}

enum Probe {
    Ttft(f64),
    /// It went out on the other kind of connection than wanted.
    OtherConnection,
    Failed,
}

/// TTFT of one tiny request, when it went out on the kind of connection wanted.
async fn probe_ttft(
    s: &mut Session,
    backend: &dyn Backend,
    deadline: Duration,
    want_new: bool,
) -> Probe {
    let Ok(built) = s
        .prompts
        .build(backend, PROBE_TOKENS, Some(&mut s.nonce), None)
        .await
    else {
        return Probe::Failed;
    };
    let Ok(c) = backend
        .generate(&GenRequest {
            prompt: built.prompt,
            max_tokens: 1,
            ignore_eos: true,
            cache_prompt: false,
            deadline,
        })
        .await
    else {
        return Probe::Failed;
    };
    match c.events.first() {
        Some(e) if c.new_connection == Some(want_new) => Probe::Ttft(e.at.as_secs_f64()),
        Some(_) => Probe::OtherConnection,
        None => Probe::Failed,
    }
}

/// Median TCP connect time to the server's address.
async fn tcp_connect_s(url: &str) -> Option<f64> {
    let u = reqwest::Url::parse(url).ok()?;
    let host = u.host_str()?.trim_matches(['[', ']']).to_string();
    let port = u.port_or_known_default()?;
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        if let Ok(Ok(_)) = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    crate::stats::median(&times)
}

/// The header line: the figures, and what they mean.
pub fn describe(t: &TransportCheck) -> String {
    let ms = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{:.1} ms", v * 1e3));
    let figures = format!(
        "first event over a reused connection {} vs a fresh one {}; HTTP round trip {} vs TCP connect {}",
        ms(t.reused_ttft_s),
        ms(t.fresh_ttft_s),
        ms(t.http_rtt_s),
        ms(t.tcp_connect_s)
    );
    if t.delayed {
        format!("warning: transport delay ({figures}): {CURE}")
    } else {
        format!("transport: no delay found ({figures})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delayed_ack_on_most_reused_probes_is_found() {
        assert!(held_by_first_event(
            &[0.002, 0.0021, 0.0019],
            &[0.042, 0.0425, 0.002]
        ));
        assert!(!held_by_first_event(
            &[0.002, 0.0021, 0.0019],
            &[0.042, 0.002, 0.002]
        ));
    }

    #[test]
    fn a_slow_servers_own_spread_is_not_a_delay() {
        // Fresh probes from 130 to 220 ms: reused ones 80 ms above the median are within it.
        assert!(!held_by_first_event(
            &[0.130, 0.139, 0.220],
            &[0.222, 0.219, 0.225]
        ));
        // A steady slow server still shows a 40 ms hold.
        assert!(held_by_first_event(
            &[0.139, 0.140, 0.141],
            &[0.181, 0.180, 0.182]
        ));
    }
}
