//! What a prefix cache could serve of each trace request: the longest block prefix it shares
//! with any earlier request, in tokens, cut to what servers can reuse.
//!
//! The rule ("possible cached tokens"): the shared prefix, at most `input_length − 1` tokens
//! (a server computes at least the last prompt token to produce the first output), rounded
//! down to whole cache pages (a paged cache reuses whole pages only). Earlier means earlier
//! in the replayed trace, whatever has finished: a request sent while the one it shares with
//! is still in prefill may find less.

use super::format::TraceRequest;
use std::collections::HashMap;

/// One request's sharing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Expected {
    /// Leading blocks whose ids an earlier request had at the same place.
    pub shared_blocks: u32,
    /// Tokens of those blocks this request and the earlier one both hold.
    pub shared_tokens: u64,
    /// What a cache could serve: `shared_tokens` by the rule above.
    pub possible_cached_tokens: u64,
}

/// A node of the prefix tree: the most tokens of its block any request held.
struct Node {
    held: u64,
}

/// Per request, in order, what its predecessors make possible; and the distinct prompt
/// tokens of the whole trace (its working set, what a cache needs to miss nothing).
pub fn expected(
    requests: &[TraceRequest],
    block_tokens: u64,
    page_tokens: u64,
) -> (Vec<Expected>, u64) {
    let page = page_tokens.max(1);
    let mut nodes: Vec<Node> = Vec::new();
    let mut children: HashMap<(usize, u64), usize> = HashMap::new();
    let mut out = Vec::with_capacity(requests.len());
    for r in requests {
        let mut e = Expected::default();
        let mut parent = usize::MAX;
        let mut matching = true;
        for (i, &id) in r.hash_ids.iter().enumerate() {
            let len = r.block_len(i, block_tokens);
            let node = match children.get(&(parent, id)) {
                Some(&n) => n,
                None => {
                    matching = false;
                    nodes.push(Node { held: 0 });
                    children.insert((parent, id), nodes.len() - 1);
                    nodes.len() - 1
                }
            };
            if matching {
                let held = nodes[node].held;
                e.shared_blocks += 1;
                e.shared_tokens += held.min(len);
                // A partial block on either side ends the common prefix.
                matching = held >= len && len == block_tokens;
            }
            nodes[node].held = nodes[node].held.max(len);
            parent = node;
        }
        let usable = e.shared_tokens.min(r.input_length.saturating_sub(1));
        e.possible_cached_tokens = usable / page * page;
        out.push(e);
    }
    let working_set = nodes.iter().map(|n| n.held).sum();
    (out, working_set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ids: &[u64], input: u64) -> TraceRequest {
        TraceRequest::at(1, 0.0, input, 1, ids.to_vec())
    }

    #[test]
    fn shared_block_prefixes_in_tokens_by_the_page_and_last_token_rule() {
        let trace = [
            req(&[1, 2, 3], 1500),    // 512, 512, 476
            req(&[1, 2, 4], 1536),    // shares 2 whole blocks
            req(&[1, 2, 3], 1400),    // 3rd block partial on both: min(476, 376)
            req(&[1, 2], 1024),       // everything shared: capped at n − 1, then pages
            req(&[5, 2, 3], 1500),    // same ids after a different first: nothing
            req(&[1, 2, 3, 6], 1600), // the 3rd block was only ever partial: stops there
        ];
        let (e, working_set) = expected(&trace, 512, 16);
        let shared: Vec<u64> = e.iter().map(|x| x.shared_tokens).collect();
        assert_eq!(shared, [0, 1024, 1024 + 376, 1024, 0, 1024 + 476]);
        let possible: Vec<u64> = e.iter().map(|x| x.possible_cached_tokens).collect();
        // 1400: 1392 (87 pages); 1024 → 1023 → 1008; 1500 → 1488.
        assert_eq!(possible, [0, 1024, 1392, 1008, 0, 1488]);
        assert_eq!(e[1].shared_blocks, 2);
        // Blocks 1, 2, 3 (whole since the last request), 4, 5, 2' (under 5), 3' (476), 6 (64).
        assert_eq!(working_set, 512 * 6 + 476 + 64);
        let (e1, _) = expected(&trace, 512, 1);
        assert_eq!(e1[3].possible_cached_tokens, 1023);
    }
}
