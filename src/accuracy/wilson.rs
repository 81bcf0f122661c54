//! The Wilson score interval of a proportion: honest at small samples and at rates near 0
//! or 1, where the normal approximation gives intervals outside [0, 1].

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The 95 % Wilson interval of `successes` (may be fractional: partial scores summed) out
/// of `total`; `[0, 1]` when there is nothing to go on.
pub fn wilson95(successes: f64, total: u64) -> [f64; 2] {
    if total == 0 {
        return [0.0, 1.0];
    }
    let n = total as f64;
    let p = (successes / n).clamp(0.0, 1.0);
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_published_values() {
        // 8 of 10: Wilson 95 % = [0.4902, 0.9433] (Newcombe 1998, table I method 3).
        let [lo, hi] = wilson95(8.0, 10);
        assert!(
            (lo - 0.4902).abs() < 1e-4 && (hi - 0.9433).abs() < 1e-4,
            "{lo} {hi}"
        );
        // 0 of 10 and 10 of 10 stay inside [0, 1] with a non-zero width.
        let [lo, hi] = wilson95(0.0, 10);
        assert!(lo.abs() < 1e-12 && (hi - 0.2775).abs() < 1e-4, "{lo} {hi}");
        let [lo, hi] = wilson95(10.0, 10);
        assert!(
            (lo - 0.7225).abs() < 1e-4 && (hi - 1.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert_eq!(wilson95(0.0, 0), [0.0, 1.0]);
    }
}
