//! Open-loop send times, drawn up front from the seed as offsets from the cell's start, so a
//! slow request can never delay the ones scheduled after it (no coordinated omission).

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How inter-arrival gaps are distributed (`--arrival`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Exponential gaps: a Poisson process (coefficient of variation 1).
    Poisson,
    /// Equal gaps of 1/rate.
    Constant,
    /// Gamma-distributed gaps with this coefficient of variation (> 0): below 1 smoother
    /// than Poisson, above 1 burstier.
    Gamma { cv: f64 },
}

impl FromStr for Arrival {
    type Err = String;
    fn from_str(s: &str) -> Result<Arrival, String> {
        let s = s.trim();
        match s.to_ascii_lowercase().as_str() {
            "poisson" => return Ok(Arrival::Poisson),
            "constant" => return Ok(Arrival::Constant),
            _ => {}
        }
        let cv = s
            .strip_prefix("gamma:")
            .ok_or_else(|| {
                format!("--arrival `{s}`: expected poisson, constant or gamma:CV (e.g. gamma:2)")
            })?
            .parse::<f64>()
            .map_err(|e| format!("--arrival `{s}`: CV is not a number ({e})"))?;
        if !(cv.is_finite() && cv > 0.0) {
            return Err(format!(
                "--arrival `{s}`: the coefficient of variation must be above 0"
            ));
        }
        Ok(Arrival::Gamma { cv })
    }
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Poisson => write!(f, "poisson"),
            Arrival::Constant => write!(f, "constant"),
            Arrival::Gamma { cv } => write!(f, "gamma:{cv}"),
        }
    }
}

/// Send offsets for `rate` requests/s: `requests` of them, or as many as start before
/// `duration`, whichever ends first (at least one of the two must be given).
pub fn schedule(
    arrival: Arrival,
    rate: f64,
    seed: u64,
    requests: Option<u64>,
    duration: Option<Duration>,
) -> Vec<Duration> {
    assert!(rate > 0.0 && rate.is_finite(), "rate checked at parse");
    assert!(requests.is_some() || duration.is_some());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mean = 1.0 / rate;
    let mut out = Vec::new();
    // The first request goes at once; gaps follow it.
    let mut t = 0.0f64;
    loop {
        if requests.is_some_and(|n| out.len() as u64 >= n) {
            break;
        }
        if duration.is_some_and(|d| t >= d.as_secs_f64()) {
            break;
        }
        out.push(Duration::from_secs_f64(t));
        t += match arrival {
            Arrival::Constant => mean,
            Arrival::Poisson => exponential(&mut rng) * mean,
            Arrival::Gamma { cv } => {
                let shape = 1.0 / (cv * cv);
                gamma(&mut rng, shape) * mean / shape
            }
        };
    }
    out
}

/// A uniform draw in (0, 1].
fn unit(rng: &mut impl Rng) -> f64 {
    1.0 - rng.random::<f64>()
}

fn exponential(rng: &mut impl Rng) -> f64 {
    -unit(rng).ln()
}

fn normal(rng: &mut impl Rng) -> f64 {
    (-2.0 * unit(rng).ln()).sqrt() * (std::f64::consts::TAU * rng.random::<f64>()).cos()
}

/// Gamma(shape, 1) by Marsaglia and Tsang; shapes below 1 by the boost `G(a+1)·U^(1/a)`.
fn gamma(rng: &mut impl Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        return gamma(rng, shape + 1.0) * unit(rng).powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = unit(rng);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(s: &[Duration]) -> Vec<f64> {
        s.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect()
    }

    fn mean_cv(xs: &[f64]) -> (f64, f64) {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
        (m, var.sqrt() / m)
    }

    // With 20,000 gaps the sample mean and CV have a relative standard error under 2 %
    // (CV/sqrt(n) for the mean; a little more for the CV of a skewed law): 6 % is 3+ SE.
    const STAT_TOL: f64 = 0.06;

    #[test]
    fn arrivals_have_the_asked_mean_and_spread() {
        for (arrival, cv) in [
            (Arrival::Poisson, 1.0),
            (Arrival::Gamma { cv: 2.0 }, 2.0),
            (Arrival::Gamma { cv: 0.5 }, 0.5),
        ] {
            let s = schedule(arrival, 50.0, 7, Some(20_001), None);
            let (m, c) = mean_cv(&gaps(&s));
            assert!((m * 50.0 - 1.0).abs() < STAT_TOL, "{arrival}: mean {m}");
            assert!((c / cv - 1.0).abs() < STAT_TOL * 2.0, "{arrival}: cv {c}");
        }
        let s = schedule(Arrival::Constant, 4.0, 0, Some(5), None);
        assert_eq!(s[4], Duration::from_secs(1));
    }

    #[test]
    fn schedules_are_seeded_and_bounded_by_count_or_time() {
        let a = schedule(
            Arrival::Poisson,
            10.0,
            3,
            None,
            Some(Duration::from_secs(5)),
        );
        let b = schedule(
            Arrival::Poisson,
            10.0,
            3,
            None,
            Some(Duration::from_secs(5)),
        );
        assert_eq!(a, b);
        assert!(a.iter().all(|t| *t < Duration::from_secs(5)));
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        let n = schedule(
            Arrival::Poisson,
            10.0,
            3,
            Some(7),
            Some(Duration::from_secs(60)),
        );
        assert_eq!(n.len(), 7);
    }

    #[test]
    fn arrival_names_parse_and_bad_ones_name_the_flag() {
        assert_eq!("poisson".parse::<Arrival>(), Ok(Arrival::Poisson));
        assert_eq!(
            "gamma:1.5".parse::<Arrival>(),
            Ok(Arrival::Gamma { cv: 1.5 })
        );
        for bad in ["gamma:0", "gamma:x", "uniform"] {
            assert!(bad.parse::<Arrival>().unwrap_err().contains("--arrival"));
        }
    }
}
