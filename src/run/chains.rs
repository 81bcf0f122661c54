//! Requests that wait on an earlier one: an agent session's next turn is sent a think time
//! after its previous turn ended, not at a clock time. Chains are data beside an open loop's
//! send times: a request with no predecessor (a root) keeps its time, each other one is sent
//! `delay` after its predecessor finished.

use std::time::Duration;

/// Each request's predecessor and successor in its chain (one each at most: a session is a
/// line of turns).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chains {
    after: Vec<Option<usize>>,
    next: Vec<Option<usize>>,
    delay: Vec<Duration>,
}

impl Chains {
    /// From each request's predecessor (an earlier index) and its delay after it. Refused: a
    /// predecessor not earlier, or one with two successors.
    pub fn new(links: &[Option<(usize, Duration)>]) -> Result<Chains, String> {
        let n = links.len();
        let mut c = Chains {
            after: vec![None; n],
            next: vec![None; n],
            delay: vec![Duration::ZERO; n],
        };
        for (i, link) in links.iter().enumerate() {
            let Some((j, d)) = *link else { continue };
            if j >= i {
                return Err(format!("request {i} waits on {j}, which is not earlier"));
            }
            if let Some(k) = c.next[j] {
                return Err(format!("requests {k} and {i} both wait on request {j}"));
            }
            c.next[j] = Some(i);
            c.after[i] = Some(j);
            c.delay[i] = d;
        }
        Ok(c)
    }

    pub fn len(&self) -> usize {
        self.after.len()
    }

    pub fn is_empty(&self) -> bool {
        self.after.is_empty()
    }

    /// Whether request `i` is sent at its own time (it waits on nothing).
    pub fn is_root(&self, i: usize) -> bool {
        self.after.get(i).is_none_or(Option::is_none)
    }

    /// The request that waits on `i`, and how long after `i` ends it goes.
    pub fn next(&self, i: usize) -> Option<(usize, Duration)> {
        let k = (*self.next.get(i)?)?;
        Some((k, self.delay[k]))
    }

    /// The chains among `kept` (indices into these, ascending), renumbered 0.. in their order:
    /// a link whose predecessor is not kept is dropped, its request a root.
    pub fn among(&self, kept: &[u64]) -> Chains {
        let mut local = vec![None; self.len()];
        for (li, &g) in kept.iter().enumerate() {
            local[g as usize] = Some(li);
        }
        let links: Vec<_> = kept
            .iter()
            .map(|&g| {
                let g = g as usize;
                let j = local[self.after[g]?]?;
                Some((j, self.delay[g]))
            })
            .collect();
        Chains::new(&links).expect("a subset of valid chains is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn links_give_roots_and_successors() {
        let c = Chains::new(&[None, None, Some((0, ms(5))), Some((2, ms(7)))]).unwrap();
        assert!(c.is_root(0) && c.is_root(1) && !c.is_root(2));
        assert_eq!(c.next(0), Some((2, ms(5))));
        assert_eq!(c.next(2), Some((3, ms(7))));
        assert_eq!(c.next(1), None);
        assert_eq!(c.next(3), None);
    }

    #[test]
    fn a_later_predecessor_or_a_fork_is_refused() {
        assert!(
            Chains::new(&[Some((0, ms(1)))])
                .unwrap_err()
                .contains("not earlier")
        );
        let fork = Chains::new(&[None, Some((0, ms(1))), Some((0, ms(1)))]).unwrap_err();
        assert!(fork.contains("both wait on request 0"), "{fork}");
    }

    #[test]
    fn a_subset_keeps_its_links_and_frees_orphans() {
        let c = Chains::new(&[
            None,
            Some((0, ms(1))),
            None,
            Some((1, ms(2))),
            Some((2, ms(3))),
        ])
        .unwrap();
        // Keep 1, 3, 4: 3 still waits on 1; 4's predecessor 2 is gone, so 4 is a root.
        let s = c.among(&[1, 3, 4]);
        assert_eq!(s.len(), 3);
        assert!(s.is_root(0) && s.is_root(2));
        assert_eq!(s.next(0), Some((1, ms(2))));
    }
}
