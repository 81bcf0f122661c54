//! Block ids to tokens: within a run a block id always becomes the same token ids, a new id
//! new ones, so two prompts share exactly the prefix their ids share. Content is salted per
//! run, so a cache a previous run left cannot serve this one.

use super::format::TraceRequest;
use crate::backend::Backend;
use crate::workload::PromptSource;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// Leading tokens of a content block replaced by salted draws: enough that no earlier run's
/// block matches a page, few enough to leave the text the content's.
const SALT_TOKENS: usize = 4;

/// How a run's blocks are made.
pub struct Blocks {
    block_tokens: u64,
    salt: u64,
    /// Ids to draw filler and salt from (distinct ids the server's tokenizer made).
    pool: Vec<u32>,
    /// Blocks cut from the user's content, by id (empty for filler).
    content: HashMap<u64, Vec<u32>>,
}

impl Blocks {
    /// Filler blocks: each a seeded draw of `block_tokens` ids from `pool`.
    pub fn filler(block_tokens: u64, pool: Vec<u32>, salt: u64) -> anyhow::Result<Self> {
        if pool.len() < 2 {
            anyhow::bail!("the server's tokenizer gave too few distinct ids to build blocks");
        }
        Ok(Blocks {
            block_tokens,
            salt,
            pool,
            content: HashMap::new(),
        })
    }

    /// Content blocks: each new id (in trace order) takes the next span of the content
    /// `prompts` holds, its first tokens salted.
    pub async fn from_content(
        mut self,
        prompts: &mut PromptSource,
        backend: &dyn Backend,
        trace: &[TraceRequest],
    ) -> anyhow::Result<Self> {
        for r in trace {
            for &id in &r.hash_ids {
                if self.content.contains_key(&id) {
                    continue;
                }
                let built = prompts
                    .build(backend, self.block_tokens, None, None)
                    .await?;
                let crate::backend::Prompt::Ids(mut ids) = built.prompt else {
                    anyhow::bail!("content blocks need token ids");
                };
                let mut rng = self.rng(id);
                for t in ids.iter_mut().take(SALT_TOKENS) {
                    *t = self.pool[rng.random_range(0..self.pool.len())];
                }
                self.content.insert(id, ids);
            }
        }
        Ok(self)
    }

    fn rng(&self, id: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.salt ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The first `len` tokens of block `id`.
    fn block(&self, id: u64, len: usize, out: &mut Vec<u32>) {
        match self.content.get(&id) {
            Some(ids) => out.extend_from_slice(&ids[..len.min(ids.len())]),
            None => {
                let mut rng = self.rng(id);
                let n = self.pool.len();
                out.extend((0..len).map(|_| self.pool[rng.random_range(0..n)]));
            }
        }
    }

    /// Every block `trace` names made now, whole, as [`Blocks::prompt`] would make it (a
    /// filler block's first tokens are the same whatever length is asked of it): a trace
    /// predicted many times (the twin's bands) then builds its prompts by copying.
    pub fn made(mut self, trace: &[TraceRequest]) -> Self {
        let len = self.block_tokens as usize;
        for r in trace {
            for &id in &r.hash_ids {
                if !self.content.contains_key(&id) {
                    let mut ids = Vec::with_capacity(len);
                    self.block(id, len, &mut ids);
                    self.content.insert(id, ids);
                }
            }
        }
        self
    }

    /// The prompt of `r`: its blocks in order, the last cut to `input_length`.
    pub fn prompt(&self, r: &TraceRequest) -> Vec<u32> {
        let mut out = Vec::with_capacity(r.input_length as usize);
        for (i, &id) in r.hash_ids.iter().enumerate() {
            self.block(id, r.block_len(i, self.block_tokens) as usize, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ids: &[u64], input: u64) -> TraceRequest {
        TraceRequest::at(1, 0.0, input, 1, ids.to_vec())
    }

    #[test]
    fn equal_ids_give_equal_tokens_and_prompts_share_exactly_their_common_ids() {
        let b = Blocks::filler(64, (100..160).collect(), 7).unwrap();
        let a = b.prompt(&req(&[1, 2, 3], 150));
        let c = b.prompt(&req(&[1, 2, 4], 192));
        assert_eq!(a.len(), 150);
        assert_eq!(c.len(), 192);
        assert_eq!(a[..128], c[..128]);
        assert_ne!(a[128..150], c[128..150]);
        assert_eq!(b.prompt(&req(&[1, 2, 3], 150)), a, "the same within a run");
        let other_run = Blocks::filler(64, (100..160).collect(), 8).unwrap();
        let x = other_run.prompt(&req(&[1], 64));
        assert_ne!(
            x[..16],
            a[..16],
            "another salt, other tokens from the first page on"
        );
    }

    #[test]
    fn blocks_made_ahead_give_the_same_prompts() {
        let fresh = Blocks::filler(64, (100..160).collect(), 7).unwrap();
        let reqs = [req(&[1, 2, 3], 150), req(&[1, 5], 100), req(&[9], 10)];
        let made = Blocks::filler(64, (100..160).collect(), 7)
            .unwrap()
            .made(&reqs);
        for r in &reqs {
            assert_eq!(made.prompt(r), fresh.prompt(r));
        }
    }
}
