//! Evidence of silent truncation that a sizing error cannot produce: text prompts are sized
//! by the server's counts of other texts, so one short count may be the sizing; but a longer
//! request that the server counts no more tokens for than a shorter one has been cut.

use crate::record::LENGTH_TOLERANCE;

/// Counts that stopped growing with the text: `longer` (requested, counted) was counted no
/// more than `shorter`, and the server cut prompts from `onset` tokens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plateau {
    pub onset: u64,
    pub shorter: (u64, u64),
    pub longer: (u64, u64),
}

/// From each point's (requested, counted) tokens, in any order: the first plateau, with the
/// smallest requested length beyond the cap as its onset. Requests within the length
/// tolerance of each other, and points the server counted in full, say nothing.
pub fn plateau(points: &[(u64, u64)]) -> Option<Plateau> {
    let mut p = points.to_vec();
    p.sort_unstable();
    let tol = 1.0 + LENGTH_TOLERANCE;
    let short = |(req, got): (u64, u64)| (got as f64) < req as f64 * (1.0 - LENGTH_TOLERANCE);
    for (i, &a) in p.iter().enumerate() {
        for &b in &p[i + 1..] {
            let grew_request = b.0 as f64 > a.0 as f64 * tol;
            let count_flat = b.1 as f64 <= a.1 as f64 * tol;
            if grew_request && count_flat && short(b) {
                let cap = a.1.max(b.1);
                let onset = p
                    .iter()
                    .map(|q| q.0)
                    .find(|&n| n as f64 > cap as f64 * tol)?;
                return Some(Plateau {
                    onset,
                    shorter: a,
                    longer: b,
                });
            }
        }
    }
    None
}

impl Plateau {
    /// The summary's note.
    pub fn note(&self) -> String {
        format!(
            "the server truncated prompts silently from {} tokens on: it counted {} tokens for \
             a {}-token request and {} for a {}-token one (a longer text counted no more is \
             cut, not missized); results at and beyond it are invalid",
            self.onset, self.longer.1, self.longer.0, self.shorter.1, self.shorter.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_that_stop_growing_are_truncation() {
        // A 2048-token window: 1k counted in full, 4k and 8k cut to the window.
        let p = plateau(&[(8192, 2048), (1024, 1024), (4096, 2048)]).unwrap();
        assert_eq!(p.onset, 4096);
        assert_eq!((p.shorter, p.longer), ((4096, 2048), (8192, 2048)));
        assert!(p.note().contains("from 4096 tokens"));
    }

    #[test]
    fn counts_that_grow_are_not_truncation_even_when_off() {
        // Missized text (4 % and 9 % over, 1 % under): off, but growing with the request.
        assert_eq!(plateau(&[(1024, 1013), (4096, 4482), (16384, 17854)]), None);
        // One point, or every point counted in full: nothing to say.
        assert_eq!(plateau(&[(1024, 1000)]), None);
        assert_eq!(plateau(&[(1024, 1024), (2048, 2048)]), None);
    }
}
