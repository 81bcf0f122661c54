//! How many sessions of this depth the server holds: the largest cell meeting the SLO, the
//! first whose hits fall below the floor, and the pool arithmetic beside them. Pure.

use super::record::{SessionCapacityRecord, SessionsCellRecord};

/// Tokens in thousands (1024), rounded: `22k`; plain below 1k.
pub fn approx_k(tokens: f64) -> String {
    if tokens >= 1024.0 {
        format!("{}k", (tokens / 1024.0).round())
    } else {
        format!("{}", tokens.round())
    }
}

/// The capacity found over `cells` (ascending by sessions, one per value).
pub fn capacity(
    cells: &[SessionsCellRecord],
    slo: &str,
    hit_floor: f64,
    pool_tokens: Option<u64>,
) -> SessionCapacityRecord {
    // Holds: the cells meet the SLO from the smallest up; the last of that run.
    let holds = cells
        .iter()
        .take_while(|c| c.slo_met == Some(true))
        .last()
        .map(|c| c.sessions);
    let thrash_cell = cells
        .iter()
        .find(|c| c.hits.pooled.ratio.is_some_and(|r| r < hit_floor));
    let contexts: Vec<f64> = cells
        .iter()
        .filter_map(|c| c.context_at_last_turn)
        .collect();
    let context =
        (!contexts.is_empty()).then(|| contexts.iter().sum::<f64>() / contexts.len() as f64);
    let predicted_fit = match (pool_tokens, context) {
        (Some(p), Some(c)) if c >= 1.0 => Some((p as f64 / c).floor() as u64),
        _ => None,
    };
    let ratio = |n: u32| {
        cells
            .iter()
            .find(|c| c.sessions == n)
            .and_then(|c| c.hits.pooled.ratio)
            .map_or("n/a".to_string(), |r| format!("{r:.2}"))
    };
    let ctx = context.map_or("?".to_string(), |c| format!("~{}", approx_k(c)));
    let held = match holds {
        Some(n) => format!(
            "{n} sessions of {ctx} tokens hold the SLO (hits {})",
            ratio(n)
        ),
        None => format!("no cell of sessions of {ctx} tokens holds the SLO ({slo})"),
    };
    let thrash = thrash_cell.map(|c| c.sessions);
    let arithmetic = |n: u32| match (context, pool_tokens) {
        (Some(c), Some(p)) => {
            let need = n as f64 * c;
            let cmp = if need > p as f64 { ">" } else { "<=" };
            format!(
                ": {n} × {} = {} {cmp} pool {}",
                approx_k(c),
                approx_k(need),
                approx_k(p as f64)
            )
        }
        _ => ": the server does not report its pool".to_string(),
    };
    let line = match thrash {
        Some(n) => format!("{held}; {n} thrash (hits {}){}", ratio(n), arithmetic(n)),
        None => {
            let largest = cells.last().map_or(0, |c| c.sessions);
            format!(
                "{held}; no cell thrashes below hits {hit_floor} up to {largest}{}",
                arithmetic(largest)
            )
        }
    };
    SessionCapacityRecord {
        holds,
        thrash,
        slo: slo.to_string(),
        hit_floor,
        pool_tokens,
        context_at_last_turn: context,
        predicted_fit,
        line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::record::HitCount;

    fn cell(n: u32, met: bool, ratio: f64) -> SessionsCellRecord {
        let mut c = SessionsCellRecord {
            sessions: n,
            slo_met: Some(met),
            context_at_last_turn: Some(22528.0),
            ..Default::default()
        };
        c.hits.pooled = HitCount {
            observed_tokens: 0,
            possible_tokens: 1,
            ratio: Some(ratio),
        };
        c
    }

    #[test]
    fn the_issue_line() {
        let cells = [cell(16, true, 0.97), cell(32, false, 0.31)];
        let c = capacity(&cells, "ttft_p95<=2000ms", 0.5, Some(524 * 1024));
        assert_eq!(
            (c.holds, c.thrash, c.predicted_fit),
            (Some(16), Some(32), Some(23))
        );
        assert_eq!(
            c.line,
            "16 sessions of ~22k tokens hold the SLO (hits 0.97); 32 thrash (hits 0.31): \
             32 × 22k = 704k > pool 524k"
        );
    }

    #[test]
    fn holds_stops_at_the_first_miss_and_none_may_thrash() {
        let cells = [cell(1, true, 1.0), cell(2, false, 0.9), cell(4, true, 0.9)];
        let c = capacity(&cells, "s", 0.5, None);
        assert_eq!((c.holds, c.thrash), (Some(1), None));
        assert!(
            c.line.contains("no cell thrashes") && c.line.contains("pool"),
            "{}",
            c.line
        );
    }
}
