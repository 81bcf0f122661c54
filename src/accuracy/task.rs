//! The task names `--tasks` takes, parsed once, and the order a run sends them in.

use std::fmt;

/// One task family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskKind {
    /// Single needle: one key's number in the haystack.
    Niah,
    /// Multi-key: the asked key's number among distractor needles with other keys.
    Multikey,
    /// Multi-value: every number of one key.
    Multivalue,
    /// Variable tracking: every variable a chain of assignments binds to a value.
    Vt,
    /// Common-word extraction: the most frequent keywords among scattered keyword lines.
    Cwe,
    /// Question answering on the `--dataset` items (LongBench-style).
    Qa,
}

impl TaskKind {
    pub const ALL: [TaskKind; 6] = [
        TaskKind::Niah,
        TaskKind::Multikey,
        TaskKind::Multivalue,
        TaskKind::Vt,
        TaskKind::Cwe,
        TaskKind::Qa,
    ];
    /// The tasks ctxbench generates from a seed (all but `qa`, which needs `--dataset`).
    pub const SYNTHETIC: [TaskKind; 5] = [
        TaskKind::Niah,
        TaskKind::Multikey,
        TaskKind::Multivalue,
        TaskKind::Vt,
        TaskKind::Cwe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Niah => "niah",
            TaskKind::Multikey => "multikey",
            TaskKind::Multivalue => "multivalue",
            TaskKind::Vt => "vt",
            TaskKind::Cwe => "cwe",
            TaskKind::Qa => "qa",
        }
    }

    pub fn parse(s: &str) -> Result<TaskKind, String> {
        let s = s.trim();
        TaskKind::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "unknown task `{s}`; known tasks: {}",
                    TaskKind::ALL.map(TaskKind::name).join(", ")
                )
            })
    }
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The tasks of a run, in the order given, each once.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSet {
    pub tasks: Vec<TaskKind>,
    /// Graded samples per (length, task).
    pub samples: u32,
}

impl TaskSet {
    /// `--tasks a,b,c` and `--samples N`: an unknown name or `--samples 0` is an error.
    pub fn parse(list: &str, samples: u32) -> Result<TaskSet, String> {
        if samples == 0 {
            return Err("--samples must be at least 1 (graded samples per length and task)".into());
        }
        let mut tasks = Vec::new();
        for name in list.split(',').filter(|s| !s.trim().is_empty()) {
            let t = TaskKind::parse(name).map_err(|e| format!("--tasks: {e}"))?;
            if !tasks.contains(&t) {
                tasks.push(t);
            }
        }
        if tasks.is_empty() {
            return Err(format!(
                "--tasks: no task named; known tasks: {}",
                TaskKind::ALL.map(TaskKind::name).join(", ")
            ));
        }
        Ok(TaskSet { tasks, samples })
    }

    /// Samples per length: every task's samples.
    pub fn per_length(&self) -> u32 {
        self.samples * self.tasks.len() as u32
    }

    /// The task and its sample index for repetition `rep` of a length: tasks interleave, so
    /// an interrupted point still holds some of each.
    pub fn at(&self, rep: u32) -> (TaskKind, u32) {
        let k = self.tasks.len() as u32;
        (self.tasks[(rep % k) as usize], rep / k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_refuses_unknown_names_and_zero_samples() {
        let t = TaskSet::parse("niah, VT,niah,cwe", 2).unwrap();
        assert_eq!(t.tasks, vec![TaskKind::Niah, TaskKind::Vt, TaskKind::Cwe]);
        assert_eq!(t.per_length(), 6);
        assert_eq!(t.at(4), (TaskKind::Vt, 1));
        let e = TaskSet::parse("niah,passkey", 1).unwrap_err();
        assert!(
            e.contains("passkey") && e.contains("multikey, multivalue, vt, cwe, qa"),
            "{e}"
        );
        assert!(TaskSet::parse("niah", 0).unwrap_err().contains("--samples"));
        assert!(TaskSet::parse(" , ", 1).is_err());
    }
}
