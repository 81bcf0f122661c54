//! A chat template's fixed preamble: real chat routes wrap the messages in template text
//! (a system prompt, role markers) that the server counts in `usage.prompt_tokens` but
//! the client never sent, so a client sizing text by the server's counts must allow for it.

use super::tokenizer::{BOS, tokenize};

/// The template's words, cycled: not vocabulary words, so each costs several tokens, as
/// role markers such as `<|im_start|>` do under a real tokenizer.
const TEMPLATE_WORDS: [&str; 4] = [
    "<|im_start|>system",
    "You-are-helpful.",
    "<|im_end|>",
    "<|im_start|>user",
];

/// `prompt` (the chat route's ids, BOS first) with `words` template words after the BOS.
pub fn apply(prompt: Vec<u32>, words: usize) -> Vec<u32> {
    if words == 0 {
        return prompt;
    }
    let text: Vec<&str> = TEMPLATE_WORDS.iter().copied().cycle().take(words).collect();
    let preamble = tokenize(&text.join(" "));
    let (head, rest) = match prompt.first() {
        Some(&BOS) => (vec![BOS], &prompt[1..]),
        _ => (Vec::new(), &prompt[..]),
    };
    let mut out = head;
    out.extend(preamble);
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preamble_is_fixed_and_follows_the_bos() {
        let p = vec![BOS, 400, 401];
        assert_eq!(apply(p.clone(), 0), p);
        let a = apply(p.clone(), 12);
        let b = apply(vec![BOS, 500], 12);
        assert_eq!(a[0], BOS);
        assert_eq!(&a[a.len() - 2..], &[400, 401]);
        // The same overhead whatever the messages: a fixed count a client can calibrate.
        assert_eq!(a.len() - p.len(), b.len() - 2);
        assert!(
            a.len() - p.len() > 12,
            "template words cost more than one token each"
        );
    }
}
