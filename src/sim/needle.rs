//! The simulated model's one skill: answering "What is the secret X?" from a fact
//! "The secret X is Y." earlier in the prompt, if the fact is still there.

use super::tokenizer::detokenize;

/// What the model answers when the fact is missing from its context.
pub const NO_ANSWER: &str = "unknown";

const QUESTION: &str = "What is the secret ";
/// Text allowed after the question mark (a chat template's role word, "Answer:" …).
const MAX_TAIL_BYTES: usize = 32;
const MAX_ANSWER_BYTES: usize = 64;

/// Enough trailing tokens to hold the question, even spelled byte by byte.
const QUESTION_TAIL_TOKENS: usize = 256;

/// [`answer`] for a token prompt; long prompts are only read whole when they end asking.
pub fn answer_ids(prompt: &[u32]) -> Option<String> {
    let tail = &prompt[prompt.len().saturating_sub(QUESTION_TAIL_TOKENS)..];
    if !detokenize(tail).contains(QUESTION.trim_end()) {
        return None;
    }
    answer(&detokenize(prompt))
}

/// `None` when the prompt does not end asking a secret; else the answer (or [`NO_ANSWER`]).
pub fn answer(prompt_text: &str) -> Option<String> {
    let ask_at = prompt_text.rfind(QUESTION)?;
    let after = &prompt_text[ask_at + QUESTION.len()..];
    let (subject, tail) = after.split_once('?')?;
    let subject = subject.trim();
    if subject.is_empty() || tail.trim().len() > MAX_TAIL_BYTES {
        return None;
    }
    let fact = format!("The secret {subject} is ");
    let known = prompt_text[..ask_at].rfind(&fact).and_then(|at| {
        let rest = &prompt_text[at + fact.len()..];
        let (value, _) = rest.split_once('.')?;
        let value = value.trim();
        (!value.is_empty() && value.len() <= MAX_ANSWER_BYTES).then(|| value.to_string())
    });
    Some(known.unwrap_or_else(|| NO_ANSWER.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_the_fact() {
        let p = "filler words The secret animal is owl. more filler What is the secret animal?";
        assert_eq!(answer(p).as_deref(), Some("owl"));
    }

    #[test]
    fn any_subject_and_short_tail() {
        let p = "The secret number is 4711. x y z What is the secret number? Answer: assistant";
        assert_eq!(answer(p).as_deref(), Some("4711"));
    }

    #[test]
    fn truncated_fact_is_unknown() {
        let p = "is owl. more filler What is the secret animal?";
        assert_eq!(answer(p).as_deref(), Some(NO_ANSWER));
    }

    #[test]
    fn other_subject_does_not_count() {
        let p = "The secret color is red. What is the secret animal?";
        assert_eq!(answer(p).as_deref(), Some(NO_ANSWER));
    }

    #[test]
    fn token_prompts_are_read_like_text() {
        let text = format!(
            "The secret animal is fox. {} What is the secret animal?",
            "the sea ".repeat(500)
        );
        assert_eq!(
            answer_ids(&crate::sim::tokenizer::tokenize(&text)).as_deref(),
            Some("fox")
        );
        assert_eq!(
            answer_ids(&crate::sim::tokenizer::tokenize("the sea")),
            None
        );
        assert_eq!(answer_ids(&[]), None);
    }

    #[test]
    fn no_question_or_question_not_at_the_end() {
        assert_eq!(answer("The secret animal is owl."), None);
        let p = "The secret animal is owl. What is the secret animal? and then a long story follows, many words long";
        assert_eq!(answer(p), None);
    }
}
