//! Planning the points: resolving `--lengths` against the server's limit, small to large.

use crate::lengths::{LengthSpec, format_count};

/// The server's context limit and where it was read.
#[derive(Debug, Clone)]
pub struct Limit {
    pub tokens: u64,
    pub source: String,
}

/// Resolve lengths: `max` becomes limit − output tokens; anything beyond the limit is refused
/// before a request is sent. Sorted ascending (first results in seconds), deduplicated.
pub fn resolve(
    specs: &[LengthSpec],
    output_tokens: u64,
    limit: Option<&Limit>,
) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for spec in specs {
        let n = match (spec, limit) {
            (LengthSpec::Tokens(n), _) => *n,
            (LengthSpec::Max, Some(l)) => l.tokens.checked_sub(output_tokens).filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!(
                    "--lengths max: the server's limit of {} tokens ({}) leaves no room for {} output tokens",
                    l.tokens, l.source, output_tokens
                )
            })?,
            (LengthSpec::Max, None) => anyhow::bail!(
                "--lengths max: the server does not report its context limit; give explicit lengths"
            ),
        };
        if let Some(l) = limit
            && n + output_tokens > l.tokens
        {
            anyhow::bail!(
                "--lengths {}: {} prompt + {} output tokens exceed the server's limit of {} tokens ({}); \
                     the longest possible prompt is {} (use `max`)",
                format_count(n),
                n,
                output_tokens,
                l.tokens,
                l.source,
                l.tokens.saturating_sub(output_tokens)
            );
        }
        out.push(n);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Hold resolved lengths to a limit on the prompt alone (TGI's `/info` `max_input_tokens`),
/// before anything is sent: `max` (`max_resolved`) comes down to it, any other length beyond
/// it is refused naming it.
pub fn cap_prompt(
    lengths: Vec<u64>,
    max_resolved: Option<u64>,
    max_input: Option<&Limit>,
) -> anyhow::Result<Vec<u64>> {
    let Some(cap) = max_input else {
        return Ok(lengths);
    };
    let mut out = Vec::with_capacity(lengths.len());
    for n in lengths {
        if n <= cap.tokens {
            out.push(n);
        } else if Some(n) == max_resolved {
            out.push(cap.tokens);
        } else {
            anyhow::bail!(
                "--lengths {}: a {n}-token prompt exceeds the server's limit of {} prompt tokens ({}); \
                 the longest possible prompt is {} (use `max`)",
                format_count(n),
                cap.tokens,
                cap.source,
                cap.tokens
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit() -> Limit {
        Limit {
            tokens: 32768,
            source: "/v1/models max_model_len".into(),
        }
    }

    #[test]
    fn max_resolves_to_limit_minus_output_and_order_is_ascending() {
        let specs = [
            LengthSpec::Max,
            LengthSpec::Tokens(1024),
            LengthSpec::Tokens(1024),
        ];
        assert_eq!(
            resolve(&specs, 64, Some(&limit())).unwrap(),
            vec![1024, 32704]
        );
    }

    #[test]
    fn beyond_the_limit_is_refused_naming_it() {
        let err = resolve(&[LengthSpec::Tokens(32768)], 64, Some(&limit())).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("32768 tokens") && msg.contains("max_model_len"),
            "{msg}"
        );
    }

    #[test]
    fn a_prompt_limit_caps_max_and_refuses_the_rest() {
        let cap = Limit {
            tokens: 4000,
            source: "/info max_input_tokens".into(),
        };
        assert_eq!(
            cap_prompt(vec![1024, 4032], Some(4032), Some(&cap)).unwrap(),
            vec![1024, 4000]
        );
        let err = cap_prompt(vec![4032], None, Some(&cap))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("4000 prompt tokens") && err.contains("max_input_tokens"),
            "{err}"
        );
        assert_eq!(cap_prompt(vec![9], None, None).unwrap(), vec![9]);
    }

    #[test]
    fn max_needs_a_known_limit() {
        assert!(resolve(&[LengthSpec::Max], 64, None).is_err());
        assert_eq!(
            resolve(&[LengthSpec::Tokens(5)], 64, None).unwrap(),
            vec![5]
        );
    }
}
