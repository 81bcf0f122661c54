//! RULER's scoring: the share of expected strings present in the answer, case-insensitive
//! (`qa`: any one accepted answer present scores 1, as RULER's `string_match_part`). The
//! answer graded is the start of the forced output (see [`answer_window`]).

use super::task::TaskKind;

/// Bytes of output graded: the answer's first tokens, not what a forced output goes on to
/// produce after it (which may repeat the prompt's numbers by chance).
pub const ANSWER_BYTES: usize = 200;

/// The part of a completion that is graded: its first [`ANSWER_BYTES`] bytes (at a char
/// boundary), ended early at the first blank line.
pub fn answer_window(text: &str) -> &str {
    let mut end = text.len().min(ANSWER_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    let trimmed = head.trim_start();
    let lead = head.len() - trimmed.len();
    match trimmed.find("\n\n") {
        Some(i) => &head[..lead + i],
        None => head,
    }
}

/// The score in [0, 1] of `answer` against `expected`; an empty answer scores 0.
pub fn score(task: TaskKind, expected: &[String], answer: &str) -> f64 {
    let answer = answer.to_lowercase();
    if answer.trim().is_empty() || expected.is_empty() {
        return 0.0;
    }
    let hits = expected
        .iter()
        .filter(|e| answer.contains(&e.to_lowercase()))
        .count();
    match task {
        TaskKind::Qa => f64::from(u8::from(hits > 0)),
        _ => hits as f64 / expected.len() as f64,
    }
}

/// A `--tasks` item's answer graded on the start of `text`; `None` for a needle that is
/// no task (the `--needle` check).
pub fn grade(n: &crate::workload::Needle, text: &str) -> Option<crate::record::TaskResult> {
    let g = n.graded.as_ref()?;
    let answer = answer_window(text);
    // Names come from `TaskKind::name`; an unknown one scores as a share of strings.
    let task = TaskKind::parse(&g.task).unwrap_or(TaskKind::Niah);
    Some(crate::record::TaskResult {
        name: g.task.clone(),
        expected: g.expected.clone(),
        answer: answer.to_string(),
        score: score(task, &g.expected, answer),
        depth: Some(n.depth),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn share_of_expected_strings_case_insensitive() {
        let e = v(&["1234567", "QUARTZ"]);
        assert_eq!(score(TaskKind::Multivalue, &e, "quartz and 1234567"), 1.0);
        assert_eq!(score(TaskKind::Multivalue, &e, "Quartz only"), 0.5);
        assert_eq!(score(TaskKind::Niah, &e, ""), 0.0);
        assert_eq!(score(TaskKind::Niah, &e, "   "), 0.0);
        assert_eq!(
            score(
                TaskKind::Qa,
                &v(&["Paris", "paris, france"]),
                "It is paris."
            ),
            1.0
        );
        assert_eq!(score(TaskKind::Qa, &v(&["Paris"]), "Lyon"), 0.0);
    }

    #[test]
    fn the_window_is_the_start_of_the_answer() {
        assert_eq!(answer_window(" 42 is it.\n\nmore text 43"), " 42 is it.");
        assert_eq!(answer_window("\n\n42"), "\n\n42");
        let long = "é".repeat(300);
        assert!(answer_window(&long).len() <= ANSWER_BYTES);
    }
}
