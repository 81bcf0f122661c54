//! `--accuracy-threshold`: relative to the accuracy at the shortest length (RULER's
//! model-specific baseline) or absolute (RULER's fixed one).

/// What a length must score to count as within the effective context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// This factor times the rate at the shortest length (default 0.85).
    Relative(f64),
    /// This rate, whatever the shortest length scored.
    Absolute(f64),
}

impl Default for Threshold {
    fn default() -> Self {
        Threshold::Relative(0.85)
    }
}

impl Threshold {
    /// `0.85` (a factor of the shortest length's rate) or `abs:0.8` (a rate), both in (0, 1].
    pub fn parse(s: &str) -> Result<Threshold, String> {
        let (abs, num) = match s.trim().strip_prefix("abs:") {
            Some(rest) => (true, rest),
            None => (false, s.trim()),
        };
        match num.trim().parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 1.0 => Ok(if abs {
                Threshold::Absolute(x)
            } else {
                Threshold::Relative(x)
            }),
            _ => Err(format!(
                "--accuracy-threshold: `{s}` is neither a factor in (0, 1] of the accuracy at \
                 the shortest length (e.g. 0.85) nor an absolute rate `abs:X` (e.g. abs:0.8)"
            )),
        }
    }

    /// The rate to reach, given the shortest length's rate.
    pub fn rate(self, baseline: f64) -> f64 {
        match self {
            Threshold::Relative(f) => f * baseline,
            Threshold::Absolute(x) => x,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms_and_refuses_the_rest() {
        assert_eq!(Threshold::parse("0.9"), Ok(Threshold::Relative(0.9)));
        assert_eq!(Threshold::parse("abs:0.8"), Ok(Threshold::Absolute(0.8)));
        assert!(Threshold::parse("1.5").is_err());
        assert!(Threshold::parse("abs:x").is_err());
        assert!((Threshold::default().rate(0.8) - 0.68).abs() < 1e-12);
    }
}
