//! `--slo ttft=5s,tpot=50ms,e2e=60s`: the bounds a request must meet to count as good.

use crate::record::load::RequestRecord;
pub use crate::record::load::Slo;

/// Parse `key=duration` pairs (`ttft`, `tpot`, `e2e`); an empty string sets no bound.
pub fn parse(s: &str) -> Result<Slo, String> {
    let mut slo = Slo {
        ttft_s: None,
        tpot_s: None,
        e2e_s: None,
    };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("--slo `{part}`: expected key=duration, e.g. ttft=5s"))?;
        let d = humantime::parse_duration(value.trim()).map_err(|e| {
            format!("--slo `{part}`: `{value}` is not a duration ({e}); e.g. 50ms, 5s")
        })?;
        let secs = Some(d.as_secs_f64())
            .filter(|s| *s > 0.0)
            .ok_or_else(|| format!("--slo `{part}`: a bound must be above zero"))?;
        match key.trim() {
            "ttft" => slo.ttft_s = Some(secs),
            "tpot" => slo.tpot_s = Some(secs),
            "e2e" => slo.e2e_s = Some(secs),
            other => {
                return Err(format!(
                    "--slo: unknown bound `{other}` (known: ttft, tpot, e2e)"
                ));
            }
        }
    }
    Ok(slo)
}

/// Whether a request met every bound. A failed request never does; TTFT and E2E are
/// taken from the scheduled send (what the user waited), which equals the actual send in
/// a closed loop.
pub fn met(slo: &Slo, r: &RequestRecord) -> bool {
    if !r.ok {
        return false;
    }
    let within = |bound: Option<f64>, v: Option<f64>| match (bound, v) {
        (None, _) => true,
        (Some(b), Some(v)) => v <= b,
        (Some(_), None) => false,
    };
    within(slo.ttft_s, r.ttft_from_schedule_s.or(r.ttft_s))
        && within(slo.e2e_s, r.e2e_from_schedule_s.or(r.e2e_s))
        // A 1-token answer has no TPOT: nothing to miss.
        && (r.tpot_s.is_none() || within(slo.tpot_s, r.tpot_s))
}

impl std::fmt::Display for DisplaySlo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (k, v) in [
            ("ttft", self.0.ttft_s),
            ("tpot", self.0.tpot_s),
            ("e2e", self.0.e2e_s),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}<={}ms", (v * 1e3).round()));
            }
        }
        write!(f, "{}", parts.join(","))
    }
}

/// `ttft<=5000ms,…` for messages.
pub struct DisplaySlo<'a>(pub &'a Slo);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_parses_and_errors_name_the_flag() {
        let s = parse("ttft=5s,tpot=50ms,e2e=1m").unwrap();
        assert_eq!(
            (s.ttft_s, s.tpot_s, s.e2e_s),
            (Some(5.0), Some(0.05), Some(60.0))
        );
        for bad in ["ttft", "ttft=fast", "itl=5ms", "ttft=0s"] {
            assert!(parse(bad).unwrap_err().starts_with("--slo"), "{bad}");
        }
    }

    #[test]
    fn failures_are_misses_and_schedule_time_counts() {
        let slo = parse("ttft=1s").unwrap();
        let mut r = RequestRecord {
            ok: true,
            ttft_s: Some(0.5),
            ttft_from_schedule_s: Some(0.5),
            ..Default::default()
        };
        assert!(met(&slo, &r));
        r.ttft_from_schedule_s = Some(1.5);
        assert!(!met(&slo, &r), "a request late to send missed its TTFT");
        r.ttft_from_schedule_s = Some(0.5);
        r.ok = false;
        assert!(!met(&slo, &r));
    }
}
