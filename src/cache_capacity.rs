//! `probe --cache-capacity`: how many distinct prefixes the server's prefix cache keeps —
//! prime k fresh prefixes, ask again for the first, and find the largest k it still serves
//! from cache (doubling, then bisecting), beside the KV pool the server reports.

use crate::backend::{Backend, Flush, GenRequest};
use crate::workload::NonceSource;
use crate::workload::PromptSource;
use serde::Serialize;
use std::time::Duration;

/// Deadline of one priming or checking request (prefixes are short; a stall fails loudly).
const REQUEST_DEADLINE: Duration = Duration::from_secs(600);
/// Without cached-token counts: a re-sent prefix counts as kept when its TTFT is under this
/// fraction of its priming TTFT (a hit skips the prefill, a miss repeats it).
const TIMING_HIT_FRACTION: f64 = 0.5;

/// One trial: `primed` fresh prefixes, then the first one asked for again.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Trial {
    pub primed: u32,
    /// Cached tokens the server reported for the re-sent first prefix.
    pub cached_tokens: Option<u64>,
    pub kept: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CacheCapacity {
    pub prefix_tokens: u64,
    /// Most distinct prefixes primed with the first still served from cache.
    pub kept_prefixes: u32,
    pub kept_tokens: u64,
    /// Whether the search stopped at `--max-prefixes` with nothing evicted.
    pub at_least: bool,
    /// `server_counts` or `timing`.
    pub evidence: String,
    /// Whether each trial began from an emptied cache (the server offers a flush).
    pub flushed_between_trials: bool,
    pub kv_pool_tokens: Option<u64>,
    pub trials: Vec<Trial>,
}

/// Run the search. `page_tokens`: a re-sent prefix counts as cached within one page.
pub async fn measure(
    backend: &dyn Backend,
    prompts: &mut PromptSource,
    prefix_tokens: u64,
    max_prefixes: u32,
    page_tokens: u64,
    kv_pool_tokens: Option<u64>,
) -> anyhow::Result<CacheCapacity> {
    if max_prefixes == 0 {
        anyhow::bail!("--max-prefixes must be at least 1");
    }
    let mut search = Search {
        backend,
        prompts,
        nonce: NonceSource::from_entropy(),
        prefix_tokens,
        page_tokens: page_tokens.max(1),
        trials: Vec::new(),
        flushed: true,
        timing_only: false,
    };
    // Double until the first prefix is lost (or the cap), then bisect the last step.
    let (mut lo, mut hi) = (0u32, None);
    let mut k = 1u32;
    loop {
        if search.trial(k).await? {
            lo = k;
            if k >= max_prefixes {
                break;
            }
            k = (k * 2).min(max_prefixes);
        } else {
            hi = Some(k);
            break;
        }
    }
    if let Some(mut hi) = hi {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if search.trial(mid).await? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    Ok(CacheCapacity {
        prefix_tokens,
        kept_prefixes: lo,
        kept_tokens: u64::from(lo) * prefix_tokens,
        at_least: hi.is_none(),
        evidence: if search.timing_only {
            "timing"
        } else {
            "server_counts"
        }
        .into(),
        flushed_between_trials: search.flushed,
        kv_pool_tokens,
        trials: search.trials,
    })
}

struct Search<'a> {
    backend: &'a dyn Backend,
    prompts: &'a mut PromptSource,
    nonce: NonceSource,
    prefix_tokens: u64,
    page_tokens: u64,
    trials: Vec<Trial>,
    flushed: bool,
    timing_only: bool,
}

impl Search<'_> {
    /// Prime `k` fresh prefixes from an emptied cache; is the first still cached?
    async fn trial(&mut self, k: u32) -> anyhow::Result<bool> {
        match self.backend.flush().await {
            Ok(Flush::Done) => {}
            Ok(Flush::NotOffered) | Err(_) => self.flushed = false,
        }
        let mut first = None;
        let mut first_ttft = None;
        for i in 0..k {
            let built = self
                .prompts
                .build(
                    self.backend,
                    self.prefix_tokens,
                    Some(&mut self.nonce),
                    None,
                )
                .await?;
            let c = self.send(built.prompt.clone()).await?;
            if i == 0 {
                first = Some(built.prompt);
                first_ttft = c.events.first().map(|e| e.at.as_secs_f64());
            }
        }
        let Some(first) = first else { return Ok(true) };
        let again = self.send(first).await?;
        let kept = match again.cached_tokens {
            Some(c) => c + self.page_tokens >= self.prefix_tokens,
            None => {
                self.timing_only = true;
                let t = again.events.first().map(|e| e.at.as_secs_f64());
                matches!((t, first_ttft), (Some(t), Some(p)) if t < TIMING_HIT_FRACTION * p)
            }
        };
        self.trials.push(Trial {
            primed: k,
            cached_tokens: again.cached_tokens,
            kept,
        });
        Ok(kept)
    }

    async fn send(
        &self,
        prompt: crate::backend::Prompt,
    ) -> anyhow::Result<crate::backend::Completion> {
        let req = GenRequest {
            prompt,
            max_tokens: 1,
            ignore_eos: true,
            cache_prompt: true,
            deadline: REQUEST_DEADLINE,
        };
        self.backend
            .generate(&req)
            .await
            .map_err(|e| anyhow::anyhow!("--cache-capacity: a priming request failed: {e}"))
    }
}

/// Human-readable result, a few `key: value` lines.
pub fn render(c: &CacheCapacity) -> String {
    let kept = format!(
        "{}{} prefixes of {} tokens = {} tokens",
        if c.at_least { ">= " } else { "" },
        c.kept_prefixes,
        c.prefix_tokens,
        c.kept_tokens
    );
    let pool = match c.kv_pool_tokens {
        Some(p) => format!(
            "{p} tokens (kept/pool = {:.2})",
            c.kept_tokens as f64 / p as f64
        ),
        None => "not reported".into(),
    };
    let mut out = format!(
        "prefix cache keeps  {kept}\nKV pool (reported)  {pool}\nevidence            {}\n",
        if c.evidence == "timing" {
            "timing only (the server reports no cached tokens): a re-sent prefix under half its priming TTFT counts as kept"
        } else {
            "the server's cached-token counts"
        }
    );
    if !c.flushed_between_trials {
        out.push_str(
            "note                the server offers no flush: earlier trials' prefixes stayed in the cache and may lower the count\n",
        );
    }
    out
}
