//! The sessions records of a result file, and what `--resume` keeps of them: finished cells
//! stay; a cell cut short is run again as its next attempt (its sessions restart with new
//! nonces: a lost reply cannot be resent as the server streamed it).

use super::record::{SessionCapacityRecord, SessionsCellRecord, SessionsPlanRecord, TurnRecord};

/// The records only sessions files hold, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionsRecords {
    pub plan: Option<SessionsPlanRecord>,
    pub turns: Vec<TurnRecord>,
    pub cells: Vec<SessionsCellRecord>,
    pub capacity: Option<SessionCapacityRecord>,
}

impl SessionsRecords {
    pub fn is_empty(&self) -> bool {
        self.plan.is_none() && self.turns.is_empty() && self.cells.is_empty()
    }

    /// The finished cell of `sessions` (its last attempt), if any.
    pub fn finished(&self, sessions: u32) -> Option<&SessionsCellRecord> {
        self.cells.iter().rev().find(|c| c.sessions == sessions)
    }

    /// The attempt a new run of cell `sessions` takes: one past any seen.
    pub fn next_attempt(&self, sessions: u32) -> u32 {
        self.turns
            .iter()
            .filter(|t| t.sessions == sessions)
            .map(|t| t.attempt + 1)
            .chain(
                self.cells
                    .iter()
                    .filter(|c| c.sessions == sessions)
                    .map(|c| c.attempt + 1),
            )
            .max()
            .unwrap_or(0)
    }

    /// The turns of a finished cell's attempt.
    pub fn turns_of(&self, cell: &SessionsCellRecord) -> Vec<TurnRecord> {
        self.turns
            .iter()
            .filter(|t| t.sessions == cell.sessions && t.attempt == cell.attempt)
            .cloned()
            .collect()
    }

    /// The last finished attempt of each cell, ascending by sessions.
    pub fn latest_cells(&self) -> Vec<SessionsCellRecord> {
        let mut by: std::collections::BTreeMap<u32, &SessionsCellRecord> = Default::default();
        for c in &self.cells {
            by.insert(c.sessions, c);
        }
        by.into_values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_cell_runs_again_as_its_next_attempt() {
        let mut f = SessionsRecords::default();
        let t = |sessions, attempt| TurnRecord {
            sessions,
            attempt,
            ..Default::default()
        };
        f.turns = vec![t(1, 0), t(4, 0), t(4, 1)];
        f.cells = vec![SessionsCellRecord {
            sessions: 1,
            ..Default::default()
        }];
        assert!(f.finished(1).is_some() && f.finished(4).is_none());
        assert_eq!((f.next_attempt(4), f.next_attempt(16)), (2, 0));
        assert_eq!(f.turns_of(f.finished(1).unwrap()).len(), 1);
    }
}
