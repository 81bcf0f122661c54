//! The messages a sessions run sends: system prompts, each session's first message (its
//! own nonce first, so sessions share nothing but the system prompt) and the later turns,
//! each of a given token count, built through the sweep's prompt source.

use crate::backend::{Backend, Prompt};
use crate::workload::{Needle, NonceSource, PromptSource};
use std::sync::Arc;

pub struct Texts {
    pub backend: Arc<dyn Backend>,
    pub source: PromptSource,
    pub nonce: NonceSource,
}

impl Texts {
    /// A message of about `tokens` tokens; `unique` opens it with a fresh nonce, else with
    /// the fixed header every such message shares.
    pub async fn message(&mut self, tokens: u64, unique: bool) -> anyhow::Result<String> {
        let nonce = unique.then_some(&mut self.nonce);
        let built = self
            .source
            .build(self.backend.as_ref(), tokens, nonce, None)
            .await
            .map_err(|e| anyhow::anyhow!("building a {tokens}-token message: {e:#}"))?;
        match built.prompt {
            Prompt::Text(t) => Ok(t),
            Prompt::Shared(p) => p
                .to_text()
                .ok_or_else(|| anyhow::anyhow!("the chat route takes text, not token ids")),
            Prompt::Ids(_) => anyhow::bail!("the chat route takes text, not token ids"),
        }
    }

    /// A first message of about `tokens` tokens, its own nonce first, hiding `needle`'s
    /// fact; its question is left for the last turn (`ask`).
    pub async fn with_fact(&mut self, tokens: u64, needle: &Needle) -> anyhow::Result<String> {
        let built = self
            .source
            .build(
                self.backend.as_ref(),
                tokens,
                Some(&mut self.nonce),
                Some(needle),
            )
            .await
            .map_err(|e| anyhow::anyhow!("building a {tokens}-token message: {e:#}"))?;
        let Prompt::Text(t) = built.prompt else {
            anyhow::bail!("the chat route takes text, not token ids");
        };
        Ok(t.strip_suffix(needle.question.as_str())
            .unwrap_or(&t)
            .to_string())
    }

    /// `count` system prompts: one shared by all (fixed header), or each its own nonce.
    pub async fn systems(&mut self, tokens: u64, count: u32) -> anyhow::Result<Vec<String>> {
        let mut out = Vec::new();
        if tokens == 0 {
            return Ok(vec![String::new(); count as usize]);
        }
        for _ in 0..count {
            out.push(self.message(tokens, count > 1).await?);
        }
        Ok(out)
    }
}
