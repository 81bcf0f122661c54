//! The server's `/metrics` read around each request of a sweep (which sends one at a
//! time): the counter deltas are that request's own. Two readings come of it: speculative
//! acceptance (`spec_decode` counters, vLLM and llama.cpp) and vLLM's per-request phase
//! times (its histograms' `_sum`/`_count`, `server_timings`).

use super::spec::{self, SpecCounters};
use super::vllm_timings::{self, PhaseDelta, PhaseTotals};
use super::{Backend, Completion, Connected, Flush, GenRequest, RequestError};
use async_trait::async_trait;
use std::time::Duration;

/// A `/metrics` read slower than this is given up (the request goes without a delta).
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// Re-reads after a request whose counters have not moved yet (a server may record the
/// last step's counts just after sending the final event), and the pause between them.
const SETTLE_READS: u32 = 5;
const SETTLE_PAUSE: Duration = Duration::from_millis(20);

/// What one `/metrics` read holds of use here.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Scrape {
    pub spec: Option<SpecCounters>,
    pub phases: Option<PhaseTotals>,
}

impl Scrape {
    fn any(&self) -> bool {
        self.spec.is_some() || self.phases.is_some()
    }
}

pub async fn scrape(http: &super::http::Http) -> Option<Scrape> {
    let text = super::prometheus::fetch(http, SCRAPE_TIMEOUT).await?;
    let m = super::prometheus::read(&text);
    let s = Scrape {
        spec: spec::counters_in(&m),
        phases: vllm_timings::read(&m),
    };
    s.any().then_some(s)
}

/// A backend that reads the server's counters around each request and records the deltas
/// on completions that carry no counts of their own. Only correct where requests run one
/// at a time (the sweep); where a delta shows other requests, nothing is recorded.
pub struct MetricsDelta {
    pub inner: Box<dyn Backend>,
    pub http: super::http::Http,
}

impl MetricsDelta {
    /// Whether `after` shows the request counted (its drafts, its finish).
    fn settled(before: &Scrape, after: &Scrape, c: &Completion) -> bool {
        let spec_moved = match (before.spec, after.spec) {
            (Some(b), Some(a)) => a.drafts > b.drafts || c.completion_tokens.unwrap_or(0) <= 1,
            _ => true,
        };
        let phases_moved = match (before.phases, after.phases) {
            (Some(b), Some(a)) => !matches!(vllm_timings::delta(&b, &a), PhaseDelta::NotYet),
            _ => true,
        };
        spec_moved && phases_moved
    }
}

#[async_trait]
impl Backend for MetricsDelta {
    fn api(&self) -> &'static str {
        self.inner.api()
    }

    fn takes_token_ids(&self) -> bool {
        self.inner.takes_token_ids()
    }

    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let before = scrape(&self.http).await;
        let mut c = self.inner.generate(req).await?;
        let Some(before) = before else {
            return Ok(c);
        };
        let wants_spec = c.spec.is_none() && before.spec.is_some();
        let wants_phases = c.server_timings.is_none() && before.phases.is_some();
        if !wants_spec && !wants_phases {
            return Ok(c);
        }
        let mut after = scrape(&self.http).await;
        for _ in 0..SETTLE_READS {
            if after.is_some_and(|a| Self::settled(&before, &a, &c)) {
                break;
            }
            tokio::time::sleep(SETTLE_PAUSE).await;
            after = scrape(&self.http).await;
        }
        let Some(after) = after else {
            return Ok(c);
        };
        if wants_spec && let (Some(b), Some(a)) = (before.spec, after.spec) {
            c.spec = spec::delta(&b, &a, c.completion_tokens);
        }
        if wants_phases && let (Some(b), Some(a)) = (before.phases, after.phases) {
            match vllm_timings::delta(&b, &a) {
                PhaseDelta::One(t) => c.server_timings = Some(t),
                PhaseDelta::Several(n) => eprintln!(
                    "warning: server timings not recorded: vLLM's /metrics counted {n} \
                     requests around one (another client is using the server)"
                ),
                PhaseDelta::NotYet => eprintln!(
                    "warning: server timings not recorded: vLLM's /metrics had not counted \
                     the request {} ms after it ended",
                    SETTLE_PAUSE.as_millis() * u128::from(SETTLE_READS)
                ),
            }
        }
        Ok(c)
    }

    async fn flush(&self) -> Result<Flush, RequestError> {
        self.inner.flush().await
    }

    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        self.inner.tokenize(text).await
    }

    fn exact_text_lengths(&self) -> bool {
        self.inner.exact_text_lengths()
    }

    async fn vocabulary(&self) -> super::vocab::VocabInfo {
        self.inner.vocabulary().await
    }

    async fn detokenize(&self, ids: &[u32]) -> Result<Option<String>, RequestError> {
        self.inner.detokenize(ids).await
    }

    async fn instance_marker(&self) -> Option<super::instance::InstanceMarker> {
        self.inner.instance_marker().await
    }
}

/// Wrap the connection's backends in [`MetricsDelta`] when the server's `/metrics` shows
/// speculative-decoding counters or vLLM's phase histograms; decided once, so servers
/// without them pay nothing more.
pub async fn with_metrics_deltas(mut conn: Connected) -> Connected {
    if scrape(&conn.http).await.is_none() {
        return conn;
    }
    let wrap = |inner: Box<dyn Backend>| -> Box<dyn Backend> {
        Box::new(MetricsDelta {
            inner,
            http: conn.http.clone(),
        })
    };
    conn.backend = wrap(conn.backend);
    conn.fresh = wrap(conn.fresh);
    conn
}

#[cfg(test)]
mod tests {
    //! A `/metrics` server on loopback whose counters a request bumps: 3 drafts of 4
    //! tokens, 9 accepted, for a 13-token answer (1 + 3 × (1 + 3)); and, when asked, vLLM's
    //! phase histograms, one observation per request (two when `crowd` is set).
    use super::*;
    use crate::record::SpecSource;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[derive(Clone, Copy)]
    struct Shape {
        spec: bool,
        phases: bool,
        /// Each request is counted twice in the histograms (another client's beside it).
        crowd: bool,
    }

    async fn metrics_server(requests: Arc<AtomicU64>, shape: Shape) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = l.accept().await {
                let _ = tcp.set_nodelay(true);
                let n = requests.load(Ordering::SeqCst) as f64;
                let mut body = "vllm:num_requests_running 0\n".to_string();
                if shape.spec {
                    body += &format!(
                        "# TYPE vllm:spec_decode_num_drafts_total counter\n\
                         vllm:spec_decode_num_drafts_total {}\n\
                         vllm:spec_decode_num_draft_tokens_total {}\n\
                         vllm:spec_decode_num_accepted_tokens_total {}\n",
                        100.0 + 3.0 * n,
                        400.0 + 12.0 * n,
                        250.0 + 9.0 * n
                    );
                }
                if shape.phases {
                    let per = if shape.crowd { 2.0 } else { 1.0 };
                    for (i, (family, _)) in vllm_timings::PHASES.iter().enumerate() {
                        body += &format!(
                            "{family}_count{{engine=\"0\"}} {}\n{family}_sum{{engine=\"0\"}} {}\n",
                            per * n,
                            per * n * 0.125 * (i as f64 + 1.0)
                        );
                    }
                }
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => got.extend_from_slice(&buf[..k]),
                    }
                }
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(reply.as_bytes()).await;
            }
        });
        url
    }

    struct Counting(Arc<AtomicU64>);

    #[async_trait]
    impl Backend for Counting {
        fn api(&self) -> &'static str {
            "vllm"
        }
        fn takes_token_ids(&self) -> bool {
            true
        }
        async fn generate(&self, _: &GenRequest) -> Result<Completion, RequestError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(Completion {
                completion_tokens: Some(13),
                ..Completion::default()
            })
        }
        async fn flush(&self) -> Result<Flush, RequestError> {
            Ok(Flush::NotOffered)
        }
        async fn tokenize(&self, _: &str) -> Result<Option<Vec<u32>>, RequestError> {
            Ok(None)
        }
    }

    fn request() -> GenRequest {
        GenRequest {
            prompt: super::super::Prompt::Ids(vec![1, 2, 3]),
            max_tokens: 13,
            ignore_eos: true,
            cache_prompt: false,
            deadline: Duration::from_secs(5),
        }
    }

    async fn wrapped(shape: Shape) -> MetricsDelta {
        let n = Arc::new(AtomicU64::new(0));
        let url = metrics_server(n.clone(), shape).await;
        let http = super::super::http::Http::new(&url, None).unwrap();
        MetricsDelta {
            inner: Box::new(Counting(n)),
            http,
        }
    }

    #[tokio::test]
    async fn each_request_gets_the_counters_it_moved() {
        let b = wrapped(Shape {
            spec: true,
            phases: true,
            crowd: false,
        })
        .await;
        assert!(scrape(&b.http).await.is_some());
        for _ in 0..2 {
            let c = b.generate(&request()).await.unwrap();
            let k = c.spec.unwrap();
            assert_eq!(k.source, SpecSource::MetricsDelta);
            assert_eq!(
                (k.draft_tokens, k.accepted_tokens, k.verify_steps),
                (Some(12), Some(9), Some(3))
            );
            let t = c.server_timings.expect("phase times");
            assert_eq!(t["source"], vllm_timings::SOURCE);
            assert_eq!(t["ttft_s"], 0.125);
            assert_eq!(t["e2e_s"], 0.625);
        }
    }

    #[tokio::test]
    async fn a_delta_over_several_requests_records_no_times() {
        let b = wrapped(Shape {
            spec: false,
            phases: true,
            crowd: true,
        })
        .await;
        let c = b.generate(&request()).await.unwrap();
        assert_eq!(c.server_timings, None);
    }

    #[tokio::test]
    async fn a_server_without_counters_is_not_read() {
        let b = wrapped(Shape {
            spec: false,
            phases: false,
            crowd: false,
        })
        .await;
        assert_eq!(scrape(&b.http).await, None);
    }
}
