//! The validated `ctxbench sessions` options: every bad value is refused here, naming its
//! flag, before any request is sent.

use super::args::SessionsArgs;
use super::record::SessionsPlanRecord;
use crate::lengths::{format_count, parse_count};
use crate::trace::synth_cmd::{count_range, duration_range};
use std::ops::RangeInclusive;

/// A latency a bound applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloMetric {
    Ttft,
    Tpot,
    E2e,
}

/// One `--slo` bound: the `quantile` of `metric` over warm turns at most `bound_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SloBound {
    pub metric: SloMetric,
    /// As given (95 for p95).
    pub percentile: f64,
    pub quantile: f64,
    pub bound_s: f64,
}

/// `--slo ttft_p95=2s,tpot_p99=50ms`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionsSlo {
    pub bounds: Vec<SloBound>,
}

impl SessionsSlo {
    pub fn parse(text: &str) -> anyhow::Result<SessionsSlo> {
        let mut bounds = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = |why: String| anyhow::anyhow!("--slo `{part}`: {why}");
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| bad("expected METRIC_pNN=DURATION, e.g. ttft_p95=2s".into()))?;
            let (metric, q) = key
                .trim()
                .split_once("_p")
                .ok_or_else(|| bad("the key is METRIC_pNN, e.g. ttft_p95".into()))?;
            let metric = match metric {
                "ttft" => SloMetric::Ttft,
                "tpot" => SloMetric::Tpot,
                "e2e" => SloMetric::E2e,
                m => {
                    return Err(bad(format!(
                        "unknown metric `{m}` (known: ttft, tpot, e2e)"
                    )));
                }
            };
            let percentile = q
                .parse::<f64>()
                .ok()
                .filter(|p| *p > 0.0 && *p < 100.0)
                .ok_or_else(|| bad(format!("`p{q}` is not a percentile between 0 and 100")))?;
            let d = humantime::parse_duration(value.trim())
                .map_err(|e| bad(format!("`{value}` is not a duration ({e}); e.g. 2s, 50ms")))?;
            let bound_s = d.as_secs_f64();
            if bound_s <= 0.0 {
                return Err(bad("a bound must be above zero".into()));
            }
            bounds.push(SloBound {
                metric,
                percentile,
                quantile: percentile / 100.0,
                bound_s,
            });
        }
        Ok(SessionsSlo { bounds })
    }
}

impl std::fmt::Display for SessionsSlo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .bounds
            .iter()
            .map(|b| {
                let m = match b.metric {
                    SloMetric::Ttft => "ttft",
                    SloMetric::Tpot => "tpot",
                    SloMetric::E2e => "e2e",
                };
                format!("{m}_p{}={}ms", b.percentile, b.bound_s * 1e3)
            })
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

/// What a sessions run does, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionsPlan {
    /// Ascending, deduplicated, each ≥ 1.
    pub cells: Vec<u32>,
    pub turns: u32,
    pub system_tokens: u64,
    pub shared_system: u32,
    pub first_tokens: u64,
    pub turn_tokens: RangeInclusive<u64>,
    pub output_tokens: RangeInclusive<u64>,
    pub think_s: RangeInclusive<f64>,
    pub max_context: Option<u64>,
    pub duration_s: Option<f64>,
    pub slo: SessionsSlo,
    pub hit_floor: f64,
    pub needle: bool,
    pub seed: u64,
    /// `--session-header`: each turn carries its session's id in this header.
    pub session_header: Option<String>,
}

impl SessionsPlan {
    pub fn from_args(a: &SessionsArgs) -> anyhow::Result<SessionsPlan> {
        let mut cells = Vec::new();
        for s in a
            .sessions
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let n: u32 = s.parse().map_err(|_| {
                anyhow::anyhow!("--sessions: `{s}` is not a whole number of sessions")
            })?;
            if n == 0 {
                anyhow::bail!("--sessions: 0 sessions measure nothing; use 1 or more");
            }
            cells.push(n);
        }
        if cells.is_empty() {
            anyhow::bail!("--sessions: no cells given; pass e.g. --sessions 1,4,16");
        }
        cells.sort_unstable();
        cells.dedup();
        if a.turns == 0 {
            anyhow::bail!("--turns 0: a session needs at least one turn");
        }
        if a.shared_system == 0 {
            anyhow::bail!("--shared-system 0: use 1 (one system prompt for all) or more");
        }
        let min_message = 2 * crate::workload::NONCE_TOKENS as u64;
        if a.first_tokens < min_message {
            anyhow::bail!(
                "--first-tokens must be at least {min_message} (the message opens with a nonce)"
            );
        }
        let turn_tokens =
            count_range(&a.turn_tokens).map_err(|e| anyhow::anyhow!("--turn-tokens {e}"))?;
        let output_tokens =
            count_range(&a.output_tokens).map_err(|e| anyhow::anyhow!("--output-tokens {e}"))?;
        let think_s = think_range(&a.think_time)?;
        let max_context = a
            .max_context
            .as_deref()
            .map(|m| parse_count(m).map_err(|e| anyhow::anyhow!("--max-context: {e}")))
            .transpose()?;
        let duration_s = a
            .duration
            .as_deref()
            .map(|d| {
                humantime::parse_duration(d)
                    .map(|d| d.as_secs_f64())
                    .map_err(|e| {
                        anyhow::anyhow!("--duration `{d}` is not a duration ({e}); e.g. 5m")
                    })
            })
            .transpose()?;
        if duration_s == Some(0.0) {
            anyhow::bail!("--duration 0: a cell needs some time; e.g. --duration 5m");
        }
        if !(0.0..=1.0).contains(&a.hit_floor) {
            anyhow::bail!("--hit-floor {} must be between 0 and 1", a.hit_floor);
        }
        let needle = match a.tasks.as_deref().map(str::trim) {
            None | Some("") => false,
            Some("niah") if a.turns < 2 => anyhow::bail!(
                "--tasks niah asks on the last turn for a fact in the first: use --turns 2 or more"
            ),
            Some("niah") => true,
            Some(t) => anyhow::bail!(
                "--tasks {t}: sessions grade the needle task only (--tasks niah); the other \
                 tasks run under `sweep --tasks`"
            ),
        };
        if let Some(h) = &a.session_header
            && reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_err()
        {
            anyhow::bail!("--session-header `{h}` is not an HTTP header name (e.g. x-session-id)");
        }
        let plan = SessionsPlan {
            cells,
            turns: a.turns,
            system_tokens: a.system_tokens,
            shared_system: a.shared_system,
            first_tokens: a.first_tokens,
            turn_tokens,
            output_tokens,
            think_s,
            max_context,
            duration_s,
            slo: SessionsSlo::parse(&a.slo)?,
            hit_floor: a.hit_floor,
            needle,
            seed: a.seed,
            session_header: a.session_header.clone(),
        };
        plan.check_first_fits(plan.max_context, "--max-context")?;
        Ok(plan)
    }

    /// The first request's prompt (system prompt and first message) and its longest reply.
    pub fn first_request_tokens(&self) -> u64 {
        self.system_tokens + self.first_tokens + self.output_tokens.end()
    }

    /// Refuse a limit (`--max-context` or the server's) below the first request.
    pub fn check_first_fits(&self, limit: Option<u64>, source: &str) -> anyhow::Result<()> {
        let Some(l) = limit else { return Ok(()) };
        let need = self.first_request_tokens();
        if need > l {
            anyhow::bail!(
                "{source} {}: the first turn alone needs {} tokens ({} system + {} first \
                 message + {} output); raise the limit or lower --first-tokens",
                format_count(l),
                need,
                self.system_tokens,
                self.first_tokens,
                self.output_tokens.end()
            );
        }
        Ok(())
    }

    pub fn record(&self, page_tokens: u64, pool_tokens: Option<u64>) -> SessionsPlanRecord {
        SessionsPlanRecord {
            sessions: self.cells.clone(),
            turns: self.turns,
            system_tokens: self.system_tokens,
            shared_system: self.shared_system,
            first_tokens: self.first_tokens,
            turn_tokens: [*self.turn_tokens.start(), *self.turn_tokens.end()],
            output_tokens: [*self.output_tokens.start(), *self.output_tokens.end()],
            think_s: [*self.think_s.start(), *self.think_s.end()],
            max_context: self.max_context,
            duration_s: self.duration_s,
            slo: self.slo.to_string(),
            hit_floor: self.hit_floor,
            seed: self.seed,
            page_tokens,
            pool_tokens,
            session_header: self.session_header.clone(),
        }
    }
}

/// `--think-time`: `0`, a duration, or `A..B`; never negative.
fn think_range(text: &str) -> anyhow::Result<RangeInclusive<f64>> {
    let t = text.trim();
    if t.starts_with('-') || t.contains("..-") {
        anyhow::bail!("--think-time {t}: a think time cannot be negative; use 0 or e.g. 2s");
    }
    if t == "0" {
        return Ok(0.0..=0.0);
    }
    duration_range(t).map_err(|e| anyhow::anyhow!("--think-time {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: SessionsArgs,
    }

    fn plan(extra: &[&str]) -> anyhow::Result<SessionsPlan> {
        let mut argv = vec!["x"];
        argv.extend_from_slice(extra);
        SessionsPlan::from_args(&Wrap::try_parse_from(argv).unwrap().args)
    }

    #[test]
    fn defaults_are_the_contract() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.cells, vec![1, 2, 4, 8, 16]);
        assert_eq!((p.turns, p.system_tokens, p.first_tokens), (8, 1024, 4096));
        assert_eq!((p.turn_tokens, p.output_tokens), (512..=512, 256..=256));
        assert_eq!(p.think_s, 0.0..=0.0);
        assert_eq!(p.hit_floor, 0.5);
        assert_eq!(p.slo.to_string(), "ttft_p95=2000ms");
        assert_eq!(SessionsSlo::parse(&p.slo.to_string()).unwrap(), p.slo);
    }

    #[test]
    fn ranges_parse_as_the_rest_of_the_cli() {
        let p = plan(&[
            "--sessions",
            "16,1,4,4",
            "--turn-tokens",
            "256..1k",
            "--think-time",
            "1s..3s",
            "--max-context",
            "32k",
        ])
        .unwrap();
        assert_eq!(p.cells, vec![1, 4, 16]);
        assert_eq!(p.turn_tokens, 256..=1024);
        assert_eq!(p.think_s, 1.0..=3.0);
        assert_eq!(p.max_context, Some(32768));
    }

    #[test]
    fn bad_input_is_refused_naming_its_flag() {
        for (args, flag) in [
            (&["--sessions", "0"][..], "--sessions"),
            (&["--sessions", "1,x"][..], "--sessions"),
            (&["--turns", "0"][..], "--turns"),
            (&["--think-time", "-1s"][..], "negative"),
            (&["--think-time", "2s..1s"][..], "--think-time"),
            (&["--max-context", "4k"][..], "--max-context 4k"),
            (&["--output-tokens", "9..3"][..], "--output-tokens"),
            (&["--slo", "ttft=2s"][..], "--slo"),
            (&["--hit-floor", "2"][..], "--hit-floor"),
            (&["--tasks", "cwe"][..], "--tasks"),
        ] {
            let e = plan(args).unwrap_err().to_string();
            assert!(e.contains(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_first_turn_must_fit_the_max_context() {
        // 1k system + 4k first + 256 output = 5376 tokens.
        assert!(plan(&["--max-context", "5376"]).is_ok());
        let e = plan(&["--max-context", "5375"]).unwrap_err().to_string();
        assert!(e.contains("5376 tokens"), "{e}");
    }
}
