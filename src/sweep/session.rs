//! Measuring one sample: cache defeat (nonce, flush, `cache_prompt:false`), the request or
//! two-point pair, and the verification flags.

use super::measure::{self, Expectation};
use crate::backend::{Backend, Completion, Flush, GenRequest, RequestError};
use crate::choices::{CacheBust, Method};
use crate::record::{ErrorRecord, Sample, SourceRecord, flag};
use crate::workload::PromptSource;
use crate::workload::{Needle, NonceSource};
use std::sync::Arc;
use std::time::Duration;

pub struct Session {
    pub backend: Arc<dyn Backend>,
    pub prompts: PromptSource,
    pub nonce: NonceSource,
    pub cache_bust: CacheBust,
    pub output_tokens: u64,
    pub cache_allowance_tokens: u64,
    /// Whether the server reports cached tokens; if not, hits are inferred from timing.
    pub reports_cached_tokens: bool,
}

/// One cold request as sent and answered.
struct Sent {
    completion: Completion,
    /// Prompt tokens sent, when known exactly.
    sent_tokens: Option<u64>,
    flush_failed: bool,
    source: Option<SourceRecord>,
}

/// What one measurement produced.
pub enum Outcome {
    Sample(Box<Sample>),
    Error(ErrorRecord),
}

impl Session {
    /// One sample at `n` tokens by `method`: `TwoPoint` is a cold 1-token request, then
    /// the cold full one; otherwise the full one.
    pub async fn measure(
        &mut self,
        n: u64,
        rep: u32,
        method: Method,
        needle: Option<&Needle>,
        deadline: Duration,
    ) -> Outcome {
        let sampled: Result<Sample, RequestError> = async {
            let first = match method {
                Method::TwoPoint => Some(self.cold_request(n, 1, needle, deadline).await?),
                _ => None,
            };
            let b = self
                .cold_request(n, self.output_tokens, needle, deadline)
                .await?;
            let expect = self.expect(n, b.sent_tokens, rep, needle);
            let (mut s, fa) = match &first {
                Some(a) => (
                    measure::two_point_sample(&a.completion, &b.completion, &expect),
                    a.flush_failed,
                ),
                None => (measure::stream_sample(&b.completion, &expect), false),
            };
            if fa || b.flush_failed {
                s.push_flag(flag::FLUSH_FAILED);
            }
            s.source = b.source;
            Ok(s)
        }
        .await;
        match sampled {
            Ok(s) => Outcome::Sample(Box::new(s)),
            Err(e) => Outcome::Error(ErrorRecord {
                context_tokens: n,
                rep,
                kind: e.kind().to_string(),
                message: e.to_string(),
                method: Some(method.sample_name().into()),
            }),
        }
    }

    fn expect(&self, n: u64, sent: Option<u64>, rep: u32, needle: Option<&Needle>) -> Expectation {
        Expectation {
            context_tokens: n,
            sent_tokens: sent,
            output_tokens: self.output_tokens,
            cache_allowance_tokens: self.cache_allowance_tokens,
            needle: needle.cloned(),
            rep,
        }
    }

    /// Flush where asked, build a fresh-nonce prompt, send it.
    async fn cold_request(
        &mut self,
        n: u64,
        max_tokens: u64,
        needle: Option<&Needle>,
        deadline: Duration,
    ) -> Result<Sent, RequestError> {
        let mut flush_failed = false;
        if self.cache_bust.uses_flush() {
            flush_failed = flush_failed_for(self.cache_bust, &self.backend.flush().await);
        }
        let nonce = self.cache_bust.uses_nonce().then_some(&mut self.nonce);
        let built = self
            .prompts
            .build(self.backend.as_ref(), n, nonce, needle)
            .await
            .map_err(|e| RequestError::Prompt(format!("{e:#}")))?;
        let req = GenRequest {
            prompt: built.prompt,
            max_tokens,
            ignore_eos: true,
            cache_prompt: self.cache_bust == CacheBust::Off,
            deadline,
        };
        Ok(Sent {
            completion: self.backend.generate(&req).await?,
            sent_tokens: built.sent_tokens,
            flush_failed,
            source: built.source,
        })
    }

    /// A warm-up request with its own nonce, excluded from results.
    pub async fn warm_up(&mut self, n: u64, deadline: Duration) -> Result<(), RequestError> {
        let built = self
            .prompts
            .build(self.backend.as_ref(), n, Some(&mut self.nonce), None)
            .await
            .map_err(|e| RequestError::Prompt(format!("{e:#}")))?;
        let req = GenRequest {
            prompt: built.prompt,
            max_tokens: self.output_tokens.min(8),
            ignore_eos: true,
            cache_prompt: false,
            deadline,
        };
        self.backend.generate(&req).await.map(|_| ())
    }
}

/// Whether a flush left the sample without its cache defence: an error always does; a
/// server that offers no flush (or answered 501) does only when no nonce stands in.
pub fn flush_failed_for(bust: CacheBust, flush: &Result<Flush, RequestError>) -> bool {
    match flush {
        Ok(Flush::Done) => false,
        Ok(Flush::NotOffered) => !bust.uses_nonce(),
        Err(_) => true,
    }
}

/// Without cached-token reports a hit shows only in timing: a TTFT under half of what a
/// smaller prompt took (TTFT never falls with length), or under half the median of this
/// length's earlier repetitions.
pub fn infer_cache_hit(
    s: &mut Sample,
    smaller_point_ttft_s: Option<f64>,
    same_point_median_s: Option<f64>,
) {
    if s.cached_tokens.is_some() {
        return;
    }
    let Some(t) = s.ttft_s else { return };
    let below = |r: Option<f64>| r.is_some_and(|r| t < 0.5 * r);
    if below(smaller_point_ttft_s) || below(same_point_median_s) {
        s.push_flag(flag::CACHE_HIT_INFERRED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_flush_fails_only_where_no_nonce_stands_in() {
        let none = Ok(Flush::NotOffered);
        assert!(flush_failed_for(CacheBust::Flush, &none));
        assert!(!flush_failed_for(CacheBust::Auto, &none));
        assert!(!flush_failed_for(CacheBust::Flush, &Ok(Flush::Done)));
        let err = Err(RequestError::Http {
            status: 500,
            message: "x".into(),
        });
        assert!(flush_failed_for(CacheBust::Auto, &err));
    }

    #[test]
    fn timing_checks_a_sample_without_a_count_whatever_the_server_claims() {
        let mut s = Sample {
            ttft_s: Some(0.001),
            valid: true,
            ..Sample::default()
        };
        infer_cache_hit(&mut s, None, Some(0.05));
        assert!(!s.valid && s.flags.contains(&flag::CACHE_HIT_INFERRED));
    }
}
