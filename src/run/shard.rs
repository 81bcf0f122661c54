//! One load plan split over N client processes (`--shard I/N`, e.g. the pods of a Kubernetes
//! Indexed Job), so that the union of the shards' work is exactly the unsharded plan: the
//! split arithmetic, the shard's identity and the plan's hash every record carries.

use crate::record::load::{LoadPlan, PlanHash};
use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count` (0-based, as `JOB_COMPLETION_INDEX`); `index < count` always.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 {
            return Err("the shard count must be at least 1".into());
        }
        if index >= count {
            return Err(format!(
                "shard index {index} is not below the shard count {count} (indices are 0-based)"
            ));
        }
        Ok(Shard { index, count })
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// This shard's closed-loop workers out of `total`: an equal share, the remainder one
    /// each to the first shards.
    pub fn workers(&self, total: u32) -> u32 {
        total / self.count + u32::from(self.index < total % self.count)
    }

    /// The first of this shard's workers, when the `total` are dealt out in shard order.
    fn first_worker(&self, total: u32) -> u32 {
        let (q, r) = (total / self.count, total % self.count);
        self.index * q + self.index.min(r)
    }

    /// This shard's part of a closed-loop request budget of `total` requests over
    /// `workers` workers: each worker's equal share (remainder one each to the first
    /// workers), summed over the workers this shard runs. The parts add up to `total`, and
    /// a shard without workers gets none.
    pub fn requests(&self, total: u64, workers: u32) -> u64 {
        if workers == 0 {
            return 0;
        }
        let (q, r) = (total / u64::from(workers), total % u64::from(workers));
        let first = u64::from(self.first_worker(workers));
        let mine = u64::from(self.workers(workers));
        mine * q + r.saturating_sub(first).min(mine)
    }

    /// Whether arrival `i` of the unsharded open-loop schedule is this shard's: every Nth.
    pub fn owns_arrival(&self, i: u64) -> bool {
        i % u64::from(self.count) == u64::from(self.index)
    }

    /// This shard's arrivals of the unsharded `schedule`, each with its index there.
    pub fn arrivals<T: Copy>(&self, schedule: &[T]) -> Vec<(u64, T)> {
        (0..schedule.len() as u64)
            .filter(|&i| self.owns_arrival(i))
            .map(|i| (i, schedule[i as usize]))
            .collect()
    }

    /// Trace replay: whether prefix group `group` (numbered 0, 1, … in order of each
    /// group's first request, `trace::groups`) is this shard's. Whole groups go to one
    /// shard, so what a group shares stays within it; dealt round-robin in order of
    /// appearance, so each shard gets groups from all of the trace's time.
    pub fn owns_group(&self, group: usize) -> bool {
        self.owns_arrival(group as u64)
    }

    /// Resolve `--shard I/N`, `--shards N` and the Indexed Job's environment
    /// (`JOB_COMPLETION_INDEX`, `JOB_COMPLETIONS`) into this process's shard, if any.
    pub fn resolve(
        flag: Option<Shard>,
        shards: Option<u32>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Shard>, String> {
        if let Some(s) = flag {
            if let Some(n) = shards.filter(|&n| n != s.count) {
                return Err(format!(
                    "--shard {s} and --shards {n} disagree on the count"
                ));
            }
            return Ok(Some(s));
        }
        let Some(index) = env("JOB_COMPLETION_INDEX").filter(|v| !v.trim().is_empty()) else {
            return match shards {
                Some(n) => Err(format!(
                    "--shards {n} needs this process's index: --shard I/{n} or JOB_COMPLETION_INDEX"
                )),
                None => Ok(None),
            };
        };
        let index = index
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("JOB_COMPLETION_INDEX `{index}` is not a non-negative integer"))?;
        let count = match shards {
            Some(n) => n,
            None => {
                let v = env("JOB_COMPLETIONS").ok_or_else(|| {
                    format!(
                        "JOB_COMPLETION_INDEX is {index} but the shard count is unknown: \
                         give --shards N or set JOB_COMPLETIONS"
                    )
                })?;
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("JOB_COMPLETIONS `{v}` is not a positive integer"))?
            }
        };
        Shard::new(index, count).map(Some)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}`: expected I/N with 0 <= I < N, e.g. 0/3");
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let i = i.trim().parse::<u32>().map_err(|_| bad())?;
        let n = n.trim().parse::<u32>().map_err(|_| bad())?;
        Shard::new(i, n).map_err(|e| format!("`{s}`: {e}"))
    }
}

/// 64-bit FNV-1a: a stable hash of bytes (no dependency; collisions matter only between
/// plans someone merges by mistake).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash of the plan as run unsharded: its canonical JSON (field order fixed by the
/// schema) without the per-shard fields, so every shard of one plan computes the same.
pub fn plan_hash(plan: &LoadPlan) -> PlanHash {
    let unsharded = LoadPlan {
        shard: None,
        start: None,
        ..plan.clone()
    };
    let json = serde_json::to_string(&unsharded).expect("a load plan serialises");
    PlanHash(fnv1a64(json.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(n: u32) -> Vec<Shard> {
        (0..n).map(|i| Shard::new(i, n).unwrap()).collect()
    }

    #[test]
    fn workers_split_with_remainders_to_the_first_shards() {
        let w = |total, n| all(n).iter().map(|s| s.workers(total)).collect::<Vec<_>>();
        assert_eq!(w(8, 3), vec![3, 3, 2]);
        assert_eq!(w(1, 3), vec![1, 0, 0]);
        assert_eq!(w(2, 3), vec![1, 1, 0]);
        assert_eq!(w(9, 3), vec![3, 3, 3]);
        assert_eq!(w(5, 1), vec![5]);
        for n in 1..=7 {
            for total in 0..=40 {
                let v = w(total, n);
                assert_eq!(v.iter().sum::<u32>(), total, "{total} over {n}");
                assert!(v.windows(2).all(|p| p[0] >= p[1] && p[0] - p[1] <= 1));
            }
        }
    }

    #[test]
    fn request_budgets_follow_the_workers_and_add_up() {
        let r = |total, workers, n| {
            all(n)
                .iter()
                .map(|s| s.requests(total, workers))
                .collect::<Vec<_>>()
        };
        // One worker: all 16 requests go to the shard that runs it.
        assert_eq!(r(16, 1, 3), vec![16, 0, 0]);
        // Three workers of 6, 5, 5 requests, one per shard.
        assert_eq!(r(16, 3, 3), vec![6, 5, 5]);
        // Eight workers dealt 3, 3, 2; the first four of them get 3 requests, the rest 2:
        // 3+3+3, 3+2+2, 2+2.
        assert_eq!(r(20, 8, 3), vec![9, 7, 4]);
        for n in 1..=5 {
            for workers in 0..=12u32 {
                for total in 0..=50u64 {
                    let v = r(total, workers, n);
                    let want = if workers == 0 { 0 } else { total };
                    assert_eq!(v.iter().sum::<u64>(), want, "{total}/{workers}/{n}");
                    for (s, got) in all(n).iter().zip(&v) {
                        if s.workers(workers) == 0 {
                            assert_eq!(*got, 0);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_shards_arrivals_partition_the_schedule() {
        let schedule: Vec<u32> = (100..117).collect();
        let mut union: Vec<(u64, u32)> =
            all(3).iter().flat_map(|s| s.arrivals(&schedule)).collect();
        assert_eq!(
            all(3)[1].arrivals(&schedule)[..3],
            [(1, 101), (4, 104), (7, 107)]
        );
        union.sort_unstable();
        let whole: Vec<(u64, u32)> = (0..).zip(schedule.iter().copied()).collect();
        assert_eq!(union, whole);
    }

    #[test]
    fn each_group_has_exactly_one_shard_and_groups_are_dealt_in_turn() {
        let shards = all(4);
        for group in 0..40usize {
            let owners: Vec<u32> = shards
                .iter()
                .filter(|s| s.owns_group(group))
                .map(|s| s.index())
                .collect();
            assert_eq!(owners, [group as u32 % 4], "group {group}");
        }
        assert!(Shard::new(0, 1).unwrap().owns_group(usize::MAX));
    }

    #[test]
    fn shard_flags_parse_and_bad_ones_say_why() {
        assert_eq!("2/3".parse::<Shard>(), Shard::new(2, 3));
        assert_eq!(Shard::new(2, 3).unwrap().to_string(), "2/3");
        for bad in ["3/3", "1", "a/3", "0/0", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert!("3/3".parse::<Shard>().unwrap_err().contains("0-based"));
    }

    #[test]
    fn the_shard_comes_from_the_flag_or_the_indexed_jobs_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let none = env(&[]);
        assert_eq!(Shard::resolve(None, None, none), Ok(None));
        let s = Shard::new(1, 3).unwrap();
        assert_eq!(Shard::resolve(Some(s), Some(3), env(&[])), Ok(Some(s)));
        assert!(Shard::resolve(Some(s), Some(4), env(&[])).is_err());
        let job = env(&[("JOB_COMPLETION_INDEX", "1"), ("JOB_COMPLETIONS", "3")]);
        assert_eq!(Shard::resolve(None, None, job), Ok(Some(s)));
        let index_only = env(&[("JOB_COMPLETION_INDEX", "1")]);
        assert_eq!(Shard::resolve(None, Some(3), index_only), Ok(Some(s)));
        let e = Shard::resolve(None, None, index_only).unwrap_err();
        assert!(e.contains("--shards N"), "{e}");
        assert!(Shard::resolve(None, Some(3), env(&[])).is_err());
        let bad = env(&[("JOB_COMPLETION_INDEX", "x"), ("JOB_COMPLETIONS", "3")]);
        assert!(Shard::resolve(None, None, bad).is_err());
        let past = env(&[("JOB_COMPLETION_INDEX", "3"), ("JOB_COMPLETIONS", "3")]);
        assert!(Shard::resolve(None, None, past).is_err());
    }

    #[test]
    fn fnv1a_matches_its_reference_values() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
