//! Production traces: Mooncake-format requests with their arrival times and block hashes,
//! generated (`trace synth`) or read for replay.

pub mod groups;
pub mod synth;
pub mod synth_cmd;

/// Prompt tokens an unbounded prefix cache could serve: for each request, its leading blocks
/// already seen in an earlier request (a block id names its whole prefix, so a seen block's
/// predecessors were seen too), whole blocks only, capped below the request's own length.
pub fn possible_hit_tokens<'a>(
    requests: impl IntoIterator<Item = (&'a [u64], u64)>,
    block: u64,
) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    for (ids, input) in requests {
        let shared = ids.iter().take_while(|id| seen.contains(*id)).count() as u64;
        total += (shared * block).min(input.saturating_sub(1));
        seen.extend(ids.iter().copied());
    }
    total
}
