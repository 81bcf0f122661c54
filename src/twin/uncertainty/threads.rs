//! The bands' reruns spread over the host's cores. Each rerun is a whole prediction on its
//! own twin, independent of the others, so they run on scoped threads sharing the plan (a
//! trace read once) and come back in the order given: a band is the same whichever thread
//! finished first. Progress goes to stderr while they run (hidden when stderr is not a
//! terminal, as the sweep's bar is).

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bar the reruns count on: predictions done of all the bands need, and the time left.
pub fn progress(total: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} bands [{elapsed_precise}] {bar:30} {pos}/{len} predictions, ~{eta} left {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(what.to_string());
    bar
}

/// Threads for `jobs` reruns: one per core, no more than there are jobs.
pub(crate) fn threads(jobs: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs)
        .max(1)
}

/// `f` of every job, in the jobs' order, run on up to one thread per core; each finished
/// job ticks `bar`.
pub fn run<J: Sync, T: Send>(jobs: &[J], f: impl Fn(&J) -> T + Sync, bar: &ProgressBar) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::with_capacity(jobs.len()));
    std::thread::scope(|s| {
        for _ in 0..threads(jobs.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let out = f(job);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, out));
                    bar.inc(1);
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_the_jobs_order() {
        let jobs: Vec<u64> = (0..50).collect();
        let bar = ProgressBar::hidden();
        let out = run(&jobs, |&j| j * j, &bar);
        assert_eq!(out, jobs.iter().map(|j| j * j).collect::<Vec<_>>());
        assert_eq!(bar.position(), 50);
        assert!(run(&[] as &[u64], |&j| j, &bar).is_empty());
    }
}
