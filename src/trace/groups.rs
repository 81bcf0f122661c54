//! Prefix groups: which requests of a trace belong together, so a sharded replay keeps each
//! conversation (and the requests reusing its document) on one client and one connection
//! pool, while a prefix every request shares (a system prompt) does not glue the trace into
//! one group.
//!
//! The rule: a request joins the group of the earlier request it shares the longest block
//! prefix with, when that prefix is at least half its own blocks; otherwise it starts a new
//! group. The next turn of a conversation resends its history (nearly all shared), a second
//! question about the same document shares the document; two conversations that share only
//! a system prompt share a small part of each and stay apart.

use std::collections::HashMap;

/// Group index per request (0, 1, … in order of each group's first request).
pub fn prefix_groups<'a>(requests: impl IntoIterator<Item = &'a [u64]>) -> Vec<usize> {
    // The group of the first request that held each block id (ids name whole prefixes, so
    // the deepest id a request shares is the whole of what it shares).
    let mut owner: HashMap<u64, usize> = HashMap::new();
    let mut groups = Vec::new();
    let mut next = 0;
    for ids in requests {
        let shared = ids.iter().take_while(|id| owner.contains_key(*id)).count();
        let group = if shared > 0 && 2 * shared >= ids.len() {
            owner[&ids[shared - 1]]
        } else {
            next += 1;
            next - 1
        };
        for id in ids {
            owner.entry(*id).or_insert(group);
        }
        groups.push(group);
    }
    groups
}

/// Groups numbered 0, 1, … again in order of each one's first request (after some were
/// merged).
pub fn renumbered(groups: &[usize]) -> Vec<usize> {
    let mut seen: HashMap<usize, usize> = HashMap::new();
    groups
        .iter()
        .map(|g| {
            let next = seen.len();
            *seen.entry(*g).or_insert(next)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_stay_together_and_a_shared_system_prompt_does_not_join() {
        let reqs: Vec<Vec<u64>> = vec![
            vec![0, 1, 2, 3],       // conversation A, turn 1
            vec![0, 10, 11, 12],    // conversation B: shares the system block only
            vec![0, 1, 2, 3, 4, 5], // A, turn 2
            vec![0, 1, 2, 20],      // C: a question about A's document
            vec![0, 10, 11, 12, 13],
        ];
        let g = prefix_groups(reqs.iter().map(|r| &r[..]));
        assert_eq!(g, vec![0, 1, 0, 0, 1]);
    }

    #[test]
    fn a_request_sharing_nothing_starts_a_group() {
        let reqs: Vec<Vec<u64>> = vec![vec![1, 2], vec![3], vec![1, 2, 4]];
        assert_eq!(prefix_groups(reqs.iter().map(|r| &r[..])), vec![0, 1, 0]);
    }
}
