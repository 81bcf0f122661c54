//! Parsing token counts and `--lengths`: `k` (x1024) and `m` (x1024²) suffixes, and `max`.

use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum LengthError {
    #[error(
        "`{0}` is not a token count: use a number with an optional k (x1024) or m (x1024²) suffix, e.g. 8192, 32k, 200k"
    )]
    NotACount(String),
    #[error("a length must be at least 1 token, got `{0}`")]
    Zero(String),
    #[error("no lengths given: pass e.g. --lengths 1k,8k,32k")]
    Empty,
}

/// One entry of `--lengths`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthSpec {
    Tokens(u64),
    /// The server's context limit minus the output tokens.
    Max,
}

/// Parse a count like `1k`, `32K`, `1.5k` or `8192`.
pub fn parse_count(text: &str) -> Result<u64, LengthError> {
    let t = text.trim();
    let bad = || LengthError::NotACount(t.to_string());
    let (digits, scale) = if let Some(d) = t.strip_suffix(['k', 'K']) {
        (d, 1024.0)
    } else if let Some(d) = t.strip_suffix(['m', 'M']) {
        (d, 1024.0 * 1024.0)
    } else {
        (t, 1.0)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let value: f64 = digits.parse().map_err(|_| bad())?;
    let tokens = value * scale;
    if tokens.fract() != 0.0 || tokens > 1e12 {
        return Err(bad());
    }
    if tokens < 1.0 {
        return Err(LengthError::Zero(t.to_string()));
    }
    Ok(tokens as u64)
}

/// `parse_count` as a clap value parser.
pub fn parse_count_arg(text: &str) -> Result<u64, String> {
    parse_count(text).map_err(|e| e.to_string())
}

/// Parse `--lengths`, keeping the user's order (the sweep sorts small to large).
pub fn parse_lengths(text: &str) -> Result<Vec<LengthSpec>, LengthError> {
    let specs = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            if s.trim().eq_ignore_ascii_case("max") {
                Ok(LengthSpec::Max)
            } else {
                parse_count(s).map(LengthSpec::Tokens)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if specs.is_empty() {
        return Err(LengthError::Empty);
    }
    Ok(specs)
}

/// Render a token count compactly: 1024 -> "1k", 1536 -> "1536".
pub fn format_count(tokens: u64) -> String {
    if tokens >= 1024 && tokens.is_multiple_of(1024) {
        format!("{}k", tokens / 1024)
    } else {
        tokens.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_and_plain_numbers() {
        assert_eq!(parse_count("1k"), Ok(1024));
        assert_eq!(parse_count("32K"), Ok(32768));
        assert_eq!(parse_count("1.5k"), Ok(1536));
        assert_eq!(parse_count(" 8192 "), Ok(8192));
        assert_eq!(parse_count("1m"), Ok(1_048_576));
    }

    #[test]
    fn bad_counts_are_refused() {
        assert!(matches!(parse_count("abc"), Err(LengthError::NotACount(_))));
        assert!(matches!(parse_count("-1k"), Err(LengthError::NotACount(_))));
        assert!(matches!(parse_count("1.3"), Err(LengthError::NotACount(_))));
        assert!(matches!(parse_count("0"), Err(LengthError::Zero(_))));
        assert!(matches!(parse_count("k"), Err(LengthError::NotACount(_))));
    }

    #[test]
    fn lists_with_max() {
        assert_eq!(
            parse_lengths("1k,max,8k"),
            Ok(vec![
                LengthSpec::Tokens(1024),
                LengthSpec::Max,
                LengthSpec::Tokens(8192)
            ])
        );
        assert_eq!(parse_lengths(" , "), Err(LengthError::Empty));
    }

    #[test]
    fn compact_rendering() {
        assert_eq!(format_count(32768), "32k");
        assert_eq!(format_count(1000), "1000");
    }
}
