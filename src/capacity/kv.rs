//! KV-cache bytes per token on one GPU, and per request of a given length.
//!
//! MHA/GQA: every layer stores K and V for the KV heads on this rank; TP shards the heads,
//! and when TP exceeds the KV head count each rank holds one head (replicated).
//! MLA: one latent of `kv_lora_rank + qk_rope_head_dim` per layer, the same on every rank.
//! Sliding-window layers hold at most their window, so a request's KV stops growing there.

use super::dtype::KvDtype;
use super::error::PlanError;
use super::model::{Attention, ModelSpec};

/// How the per-layer KV splits over tensor-parallel ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvSharding {
    Gqa {
        num_kv_heads: u64,
        kv_heads_per_gpu: u64,
        head_dim: u64,
        /// TP exceeds the KV head count: each head lives on `tp / num_kv_heads` ranks.
        replicated: bool,
    },
    /// The latent is not split: every rank stores all of it.
    Mla { latent_dim: u64 },
}

/// The per-GPU KV layout of one model under one TP size and KV dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct KvLayout {
    pub sharding: KvSharding,
    pub elem_bytes: u64,
    /// Bytes one token adds in one layer on this GPU.
    pub layer_bytes_per_token: u64,
    pub num_layers: u64,
    pub full_layers: u64,
    /// (window tokens, number of layers with it), ascending by window.
    pub windows: Vec<(u64, u64)>,
}

impl KvLayout {
    pub fn per_gpu(model: &ModelSpec, tp: u64, kv_dtype: KvDtype) -> Result<KvLayout, PlanError> {
        if tp == 0 {
            return Err(PlanError::Flag {
                flag: "tp",
                value: "0".into(),
                problem: "must be at least 1".into(),
            });
        }
        if !model.num_attention_heads.is_multiple_of(tp) {
            return Err(PlanError::HeadsNotDivisible {
                tp,
                heads: model.num_attention_heads,
            });
        }
        let elem_bytes = kv_dtype.bytes();
        let (sharding, elems_per_layer) = match model.attention {
            Attention::Gqa {
                num_kv_heads,
                head_dim,
            } => {
                let compatible = if num_kv_heads >= tp {
                    num_kv_heads.is_multiple_of(tp)
                } else {
                    tp.is_multiple_of(num_kv_heads)
                };
                if !compatible {
                    return Err(PlanError::KvHeadsIncompatible {
                        tp,
                        kv_heads: num_kv_heads,
                    });
                }
                let per_gpu = (num_kv_heads / tp).max(1);
                let sharding = KvSharding::Gqa {
                    num_kv_heads,
                    kv_heads_per_gpu: per_gpu,
                    head_dim,
                    replicated: tp > num_kv_heads,
                };
                // K and V.
                (sharding, 2 * per_gpu * head_dim)
            }
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
            } => {
                let latent_dim = kv_lora_rank + qk_rope_head_dim;
                (KvSharding::Mla { latent_dim }, latent_dim)
            }
        };
        let mut windows: Vec<(u64, u64)> = Vec::new();
        for w in model.layer_windows.iter().flatten() {
            match windows.iter_mut().find(|(win, _)| win == w) {
                Some((_, count)) => *count += 1,
                None => windows.push((*w, 1)),
            }
        }
        windows.sort_unstable();
        let windowed: u64 = windows.iter().map(|(_, n)| n).sum();
        let layout = KvLayout {
            sharding,
            elem_bytes,
            layer_bytes_per_token: elems_per_layer * elem_bytes,
            num_layers: model.num_layers,
            full_layers: model.num_layers.saturating_sub(windowed),
            windows,
        };
        // Dimensions are capped at 2^24 when read, so this fits u128; refuse what overflows u64.
        u64::try_from(u128::from(layout.layer_bytes_per_token) * u128::from(layout.num_layers))
            .map_err(|_| PlanError::Flag {
                flag: "kv-dtype",
                value: kv_dtype.name().into(),
                problem: "the model's KV bytes per token overflow; check the config's sizes".into(),
            })?;
        Ok(layout)
    }

    /// Bytes a token costs while it is inside every window (all layers).
    pub fn bytes_per_token(&self) -> u64 {
        self.layer_bytes_per_token * self.num_layers
    }

    /// Bytes a token costs once it is past every window (full-attention layers only).
    pub fn bytes_per_token_beyond_windows(&self) -> u64 {
        self.layer_bytes_per_token * self.full_layers
    }

    /// KV bytes one request of `tokens` holds on this GPU.
    pub fn request_bytes(&self, tokens: u64) -> u128 {
        let full = u128::from(self.full_layers) * u128::from(tokens);
        let windowed: u128 = self
            .windows
            .iter()
            .map(|(w, n)| u128::from(*n) * u128::from(tokens.min(*w)))
            .sum();
        u128::from(self.layer_bytes_per_token) * (full + windowed)
    }

    /// The most a request can hold if it grows without end (`None`: no bound, some layer is full).
    pub fn request_bytes_limit(&self) -> Option<u128> {
        (self.full_layers == 0).then(|| {
            let largest = self.windows.last().map_or(0, |(w, _)| *w);
            self.request_bytes(largest)
        })
    }
}
