//! Token counts as people write them: `131072`, `128k`, `200K`, `1m` (k = ×1024, m = ×1024²).

/// Parse a token count; the error text is what clap shows after `--context`.
pub fn parse_token_count(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let usage = || {
        format!(
            "expected a token count such as 32768, 32k or 200k (k = ×1024, m = ×1048576), got '{text}'"
        )
    };
    let (digits, multiplier) = match trimmed.char_indices().last() {
        Some((at, 'k' | 'K')) => (&trimmed[..at], 1024u64),
        Some((at, 'm' | 'M')) => (&trimmed[..at], 1024 * 1024),
        Some(_) => (trimmed, 1),
        None => return Err(usage()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(usage());
    }
    let count: u64 = digits.parse().map_err(|_| usage())?;
    let tokens = count
        .checked_mul(multiplier)
        .ok_or_else(|| format!("'{text}' is too large a token count"))?;
    if tokens == 0 {
        return Err(format!("'{text}': a context must be at least 1 token"));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::parse_token_count;

    #[test]
    fn suffixes_multiply_by_powers_of_1024() {
        assert_eq!(parse_token_count("131072"), Ok(131_072));
        assert_eq!(parse_token_count("32k"), Ok(32_768));
        assert_eq!(parse_token_count("200K"), Ok(204_800));
        assert_eq!(parse_token_count("1m"), Ok(1_048_576));
        assert_eq!(parse_token_count(" 8k "), Ok(8_192));
    }

    #[test]
    fn rejects_what_is_not_a_count() {
        for bad in [
            "",
            "k",
            "1.5k",
            "-4",
            "12x",
            "0",
            "0k",
            "99999999999999999999k",
        ] {
            assert!(parse_token_count(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(parse_token_count("12x").unwrap_err().contains("32k"));
    }
}
