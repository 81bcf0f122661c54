//! Depth mode (`sweep --depth`): what a new turn costs deep in a long conversation. Each
//! depth's prefix is primed once, then every repetition sends that prefix plus a fresh
//! suffix, and the server's counts (or, failing those, timing) must show the prefix reused.

pub mod turn;

// The depth summary is pure record arithmetic and lives in `summary`; re-exported here.
pub use crate::summary::depth as summary;
pub use crate::summary::depth::{PRIMING, TURN};

use super::session::Session;
use super::timeout::TimeoutPolicy;
use crate::backend::{Completion, GenRequest, Prompt, RequestError};
use crate::lengths::{format_count, parse_count};
use crate::record::{DepthConfig, ErrorRecord, Record, Sample, SourceRecord, flag};
use crate::run::writer::ResultWriter;
use crate::workload::Built;
use indicatif::ProgressBar;
use std::sync::atomic::{AtomicBool, Ordering};
use turn::TurnShape;

/// The validated `--depth` / `--turn-tokens` options.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthPlan {
    /// Ascending, deduplicated; 0 allowed (a turn on nothing: the cold baseline of a turn).
    pub depths: Vec<u64>,
    pub turn_tokens: u64,
}

impl DepthPlan {
    pub fn parse(depths: &str, turn_tokens: u64) -> anyhow::Result<DepthPlan> {
        let mut out = Vec::new();
        for d in depths.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let n = if d == "0" {
                0
            } else {
                parse_count(d).map_err(|e| anyhow::anyhow!("--depth: {e}"))?
            };
            out.push(n);
        }
        if out.is_empty() {
            anyhow::bail!("--depth: no depths given: pass e.g. --depth 0,8k,32k");
        }
        // The suffix opens with its own nonce, so it needs room for one plus some filler.
        let min_turn = 2 * crate::workload::NONCE_TOKENS as u64;
        if turn_tokens < min_turn {
            anyhow::bail!(
                "--turn-tokens must be at least {min_turn} (the turn opens with a {}-token nonce), got {turn_tokens}",
                crate::workload::NONCE_TOKENS
            );
        }
        out.sort_unstable();
        out.dedup();
        Ok(DepthPlan {
            depths: out,
            turn_tokens,
        })
    }

    /// The cold points measured beside the turns: depth + turn tokens each.
    pub fn totals(&self) -> Vec<u64> {
        self.depths.iter().map(|d| d + self.turn_tokens).collect()
    }

    /// Refuse, before anything is sent, a depth whose turn would not fit the server.
    pub fn check_limit(
        &self,
        output_tokens: u64,
        limit: Option<&crate::workload::points::Limit>,
    ) -> anyhow::Result<()> {
        let Some(l) = limit else { return Ok(()) };
        for &d in &self.depths {
            let need = d + self.turn_tokens + output_tokens;
            if need > l.tokens {
                anyhow::bail!(
                    "--depth {}: {d} prefix + {} turn + {output_tokens} output tokens exceed the \
                     server's limit of {} tokens ({}); the deepest possible depth is {}",
                    format_count(d),
                    self.turn_tokens,
                    l.tokens,
                    l.source,
                    l.tokens.saturating_sub(self.turn_tokens + output_tokens)
                );
            }
        }
        Ok(())
    }

    pub fn config(&self, api: &str, reports_cached_tokens: bool) -> DepthConfig {
        DepthConfig {
            depths: self.depths.clone(),
            turn_tokens: self.turn_tokens,
            reuse_hints: reuse_hints(api),
            reuse_evidence: if reports_cached_tokens {
                "server_counts".into()
            } else {
                "timing".into()
            },
        }
    }
}

/// What each API needs to reuse a prefix, set deliberately and recorded in the run header.
pub fn reuse_hints(api: &str) -> Vec<String> {
    match api {
        // llama-server reuses a prompt only with cache_prompt, and only in the same slot.
        "llamacpp" => vec!["cache_prompt=true".into(), "id_slot=0".into()],
        // A cache_salt isolates caches; leaving it out lets the turns share the primed prefix.
        "vllm" => vec!["cache_salt unset".into()],
        _ => Vec::new(),
    }
}

/// What the depth phase needs from the sweep around it.
pub struct Turns<'a> {
    pub session: &'a mut Session,
    pub writer: &'a mut ResultWriter,
    pub samples: &'a mut Vec<Sample>,
    pub errors: &'a mut Vec<ErrorRecord>,
    pub timeout: &'a TimeoutPolicy,
    pub stop: &'a AtomicBool,
    pub bar: &'a ProgressBar,
    pub reps: u32,
}

/// Prime each depth and measure its turns (the cold points at the same totals ran before,
/// so their cache flushes cannot evict a primed prefix). Returns whether it was interrupted.
pub async fn run(plan: &DepthPlan, t: Turns<'_>) -> anyhow::Result<bool> {
    let s = plan.turn_tokens;
    for &d in &plan.depths {
        let total = d + s;
        let todo: Vec<u32> = (0..t.reps)
            .filter(|r| {
                !t.samples.iter().any(|x| {
                    x.method == TURN
                        && x.depth_tokens == Some(d)
                        && x.turn_tokens == Some(s)
                        && x.rep == *r
                })
            })
            .collect();
        if todo.is_empty() {
            continue;
        }
        t.bar.inc_length(todo.len() as u64);
        let out = t.session.output_tokens;
        let prefix = if d > 0 {
            let built = build(t.session, d).await?;
            t.bar
                .set_message(format!("priming depth {}", format_count(d)));
            let req = reuse_request(built.prompt.clone(), 1, t.timeout, d);
            let outcome = t.session.backend.generate(&req).await;
            record(
                &mut *t.writer,
                t.samples,
                t.errors,
                outcome.map(|c| {
                    let mut x = priming_sample(&c, d, s, built.sent_tokens);
                    x.source = built.source.clone();
                    x
                }),
                d,
                0,
                PRIMING,
            )?;
            Some(built)
        } else {
            None
        };
        let prime_ttft = (d > 0)
            .then(|| t.samples.last())
            .flatten()
            .filter(|x| x.method == PRIMING && x.depth_tokens == Some(d))
            .and_then(|x| x.ttft_s);
        for rep in todo {
            if t.stop.load(Ordering::SeqCst) {
                return Ok(true);
            }
            t.bar
                .set_message(format!("depth {} + {s}, rep {}", format_count(d), rep + 1));
            let suffix = build(t.session, s).await?;
            let (prompt, sent, source) = match &prefix {
                Some(p) => (
                    join(&p.prompt, &suffix.prompt)?,
                    p.sent_tokens.zip(suffix.sent_tokens).map(|(a, b)| a + b),
                    SourceRecord::joined(p.source.as_ref(), suffix.source.as_ref()),
                ),
                None => (suffix.prompt, suffix.sent_tokens, suffix.source),
            };
            let req = reuse_request(prompt, out, t.timeout, total);
            let shape = TurnShape {
                depth_tokens: d,
                turn_tokens: s,
                sent_tokens: sent,
                output_tokens: out,
                page_tokens: t.session.cache_allowance_tokens,
                rep,
            };
            let outcome = t.session.backend.generate(&req).await.map(|c| {
                let mut x = turn::turn_sample(&c, &shape);
                x.source = source.clone();
                if !t.session.reports_cached_tokens {
                    let cold = summary::cold_ttft_median(t.samples, total);
                    turn::infer_prefix_miss(&mut x, cold, prime_ttft);
                }
                x
            });
            record(
                &mut *t.writer,
                t.samples,
                t.errors,
                outcome,
                total,
                rep,
                TURN,
            )?;
            t.bar.inc(1);
        }
        t.writer.sync()?;
        let line = summary::depth_line(t.samples, d, s);
        t.bar.suspend(|| eprintln!("{line}"));
    }
    Ok(false)
}

/// A prompt of `tokens` with a fresh leading nonce, its exact length when known, its source.
async fn build(session: &mut Session, tokens: u64) -> anyhow::Result<Built> {
    session
        .prompts
        .build(
            session.backend.as_ref(),
            tokens,
            Some(&mut session.nonce),
            None,
        )
        .await
        .map_err(|e| anyhow::anyhow!("building a depth prompt of {tokens} tokens: {e:#}"))
}

/// A request the server may answer from its prefix cache (the hints are in `reuse_hints`).
fn reuse_request(prompt: Prompt, max_tokens: u64, timeout: &TimeoutPolicy, n: u64) -> GenRequest {
    GenRequest {
        prompt,
        max_tokens,
        ignore_eos: true,
        cache_prompt: true,
        deadline: timeout.deadline(n, max_tokens),
    }
}

/// The prefix followed by the turn (one prompt source builds both, so their kinds agree).
pub fn join(prefix: &Prompt, suffix: &Prompt) -> anyhow::Result<Prompt> {
    match (prefix, suffix) {
        (Prompt::Ids(a), Prompt::Ids(b)) => Ok(Prompt::Ids(a.iter().chain(b).copied().collect())),
        (Prompt::Text(a), Prompt::Text(b)) => Ok(Prompt::Text(format!("{a} {b}"))),
        _ => anyhow::bail!("a depth prefix and its turn were built as different prompt kinds"),
    }
}

/// The priming request as a record: its timing is a cold prefill of the prefix, kept for
/// the timing evidence, never averaged.
fn priming_sample(c: &Completion, depth: u64, turn: u64, sent: Option<u64>) -> Sample {
    let e = super::measure::Expectation {
        context_tokens: depth,
        sent_tokens: sent,
        output_tokens: 1,
        cache_allowance_tokens: u64::MAX,
        needle: None,
        rep: 0,
    };
    let mut s = super::measure::stream_sample(c, &e);
    s.method = PRIMING.into();
    s.depth_tokens = Some(depth);
    s.turn_tokens = Some(turn);
    s.push_flag(flag::PRIMING);
    s
}

fn record(
    writer: &mut ResultWriter,
    samples: &mut Vec<Sample>,
    errors: &mut Vec<ErrorRecord>,
    outcome: Result<Sample, RequestError>,
    context_tokens: u64,
    rep: u32,
    method: &str,
) -> anyhow::Result<()> {
    match outcome {
        Ok(s) => {
            writer.append(&Record::Sample(Box::new(s.clone())))?;
            samples.push(s);
        }
        Err(e) => {
            let rec = ErrorRecord {
                context_tokens,
                rep,
                kind: e.kind().to_string(),
                message: e.to_string(),
                method: Some(method.into()),
            };
            eprintln!(
                "  depth {method} at {}: {} ({})",
                format_count(context_tokens),
                rec.message,
                rec.kind
            );
            writer.append(&Record::Error(rec.clone()))?;
            errors.push(rec);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_parse_sort_and_allow_zero() {
        let p = DepthPlan::parse("32k, 0,8k,8k", 512).unwrap();
        assert_eq!(p.depths, vec![0, 8192, 32768]);
        assert_eq!(p.totals(), vec![512, 8704, 33280]);
    }

    #[test]
    fn bad_depth_options_name_their_flag() {
        assert!(
            DepthPlan::parse("8q", 512)
                .unwrap_err()
                .to_string()
                .contains("--depth")
        );
        assert!(
            DepthPlan::parse(" , ", 512)
                .unwrap_err()
                .to_string()
                .contains("--depth")
        );
        assert!(
            DepthPlan::parse("8k", 4)
                .unwrap_err()
                .to_string()
                .contains("--turn-tokens")
        );
    }

    #[test]
    fn a_depth_beyond_the_limit_is_refused_naming_it() {
        let p = DepthPlan::parse("0,32k", 1024).unwrap();
        let l = crate::workload::points::Limit {
            tokens: 32768,
            source: "/server_info".into(),
        };
        let e = p.check_limit(64, Some(&l)).unwrap_err().to_string();
        assert!(e.contains("--depth 32k") && e.contains("31680"), "{e}");
        assert!(p.check_limit(64, None).is_ok());
    }

    #[test]
    fn prompts_join_prefix_first() {
        let j = join(&Prompt::Ids(vec![1, 2]), &Prompt::Ids(vec![3])).unwrap();
        assert_eq!(j, Prompt::Ids(vec![1, 2, 3]));
        let j = join(&Prompt::Text("a b".into()), &Prompt::Text("c".into())).unwrap();
        assert_eq!(j, Prompt::Text("a b c".into()));
        assert!(join(&Prompt::Ids(vec![1]), &Prompt::Text("c".into())).is_err());
    }
}
