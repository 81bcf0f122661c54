//! Parameter count from the architecture: embeddings + per layer attention, MLP or MoE
//! experts, norms + lm_head. Biases and small extras (attention sinks, q/k norms) are left
//! out; they are far below a tenth of a percent.

use super::config::ConfigDoc;
use super::error::ConfigError;

/// Parameters of one model replica; `experts` is the part in routed MoE experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamCount {
    pub total: u64,
    pub experts: u64,
}

/// Count the parameters the config describes (dimensions are capped, so u128 cannot overflow).
pub fn count_parameters(doc: &ConfigDoc) -> Result<ParamCount, ConfigError> {
    let hidden = u128::from(doc.dim_req("hidden_size", "the model width")?);
    let layers = doc.dim_req("num_hidden_layers", "the number of decoder layers")?;
    let vocab = u128::from(doc.dim_req("vocab_size", "the embedding rows")?);
    let embeddings = vocab * hidden * if tie_word_embeddings(doc)? { 1 } else { 2 };

    let attention = attention_params(doc, hidden)?;
    let moe = MoeShape::read(doc)?;
    let moe_layers = match &moe {
        Some(m) => (0..layers).filter(|l| m.is_moe_layer(*l)).count() as u128,
        None => 0,
    };
    let dense_layers = u128::from(layers) - moe_layers;
    let dense_mlp = if dense_layers > 0 {
        3 * hidden * u128::from(doc.dim_req("intermediate_size", "the MLP width")?)
    } else {
        0
    };
    let (routed, shared) = match &moe {
        // Each routed expert is a gated MLP; the router is hidden × experts.
        Some(m) => (
            m.experts * (3 * hidden * m.expert_intermediate + hidden),
            3 * hidden * m.shared_intermediate,
        ),
        None => (0, 0),
    };
    let per_layer = attention.weights + 2 * hidden + attention.norms;
    let experts = moe_layers * routed;
    let total = embeddings
        + u128::from(layers) * per_layer
        + dense_layers * dense_mlp
        + moe_layers * shared
        + experts
        + hidden;
    let too_large = || {
        doc.invalid(
            "hidden_size",
            "and the other dimensions give more than 2^64 parameters; check the file",
        )
    };
    Ok(ParamCount {
        total: u64::try_from(total).map_err(|_| too_large())?,
        experts: u64::try_from(experts).map_err(|_| too_large())?,
    })
}

/// HF leaves `tie_word_embeddings` out when it equals the model class's default:
/// Gemma ties, the other families handled here do not.
fn tie_word_embeddings(doc: &ConfigDoc) -> Result<bool, ConfigError> {
    if let Some(tied) = doc.bool_opt("tie_word_embeddings")? {
        return Ok(tied);
    }
    Ok(doc
        .str_opt("model_type")?
        .is_some_and(|t| t.starts_with("gemma")))
}

struct AttentionParams {
    weights: u128,
    norms: u128,
}

fn attention_params(doc: &ConfigDoc, hidden: u128) -> Result<AttentionParams, ConfigError> {
    let heads = u128::from(doc.dim_req("num_attention_heads", "the query heads")?);
    if doc.has("kv_lora_rank") {
        // MLA (DeepSeek-V3 / Kimi K2): low-rank q and kv projections.
        let dim = |f, m| doc.dim_req(f, m).map(u128::from);
        let kv_rank = dim("kv_lora_rank", "the MLA latent width")?;
        let rope = dim("qk_rope_head_dim", "the MLA rotary width")?;
        let nope = dim("qk_nope_head_dim", "the MLA non-rotary width")?;
        let v_dim = dim("v_head_dim", "the MLA value width")?;
        let q_rank = doc.dim_opt("q_lora_rank")?.map(u128::from);
        let q = match q_rank {
            Some(r) => hidden * r + r * heads * (nope + rope),
            None => hidden * heads * (nope + rope),
        };
        let kv = hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim);
        let o = heads * v_dim * hidden;
        return Ok(AttentionParams {
            weights: q + kv + o,
            norms: kv_rank + q_rank.unwrap_or(0),
        });
    }
    let kv_heads = doc
        .dim_opt("num_key_value_heads")?
        .map_or(heads, u128::from);
    let head_dim = match doc.dim_opt("head_dim")? {
        Some(d) => u128::from(d),
        None => hidden / heads,
    };
    // q and o: hidden × heads × head_dim each; k and v: hidden × kv_heads × head_dim each.
    Ok(AttentionParams {
        weights: 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim,
        norms: 0,
    })
}

/// Mixture-of-experts layout, in the spellings HF configs use.
struct MoeShape {
    experts: u128,
    expert_intermediate: u128,
    shared_intermediate: u128,
    /// DeepSeek: the first `first_k_dense_replace` layers are dense.
    first_dense: u64,
    /// DeepSeek `moe_layer_freq`: MoE where `layer % freq == 0`.
    layer_freq: u64,
    /// Qwen `decoder_sparse_step`: MoE where `(layer + 1) % step == 0`.
    sparse_step: u64,
    /// Qwen `mlp_only_layers`.
    dense_listed: Vec<u64>,
}

impl MoeShape {
    fn read(doc: &ConfigDoc) -> Result<Option<MoeShape>, ConfigError> {
        let mut experts = None;
        for field in ["n_routed_experts", "num_local_experts", "num_experts"] {
            if let Some(n) = doc.dim_opt(field)? {
                experts = Some(n);
                break;
            }
        }
        let Some(experts) = experts.filter(|n| *n > 1) else {
            return Ok(None);
        };
        let expert_intermediate = match doc.dim_opt("moe_intermediate_size")? {
            Some(n) => n,
            None => doc.dim_req("intermediate_size", "the expert MLP width")?,
        };
        let shared_intermediate = match doc.u64_opt("n_shared_experts")? {
            Some(n) => n.min(1 << 16) * expert_intermediate,
            None => doc.dim_opt("shared_expert_intermediate_size")?.unwrap_or(0),
        };
        Ok(Some(MoeShape {
            experts: u128::from(experts),
            expert_intermediate: u128::from(expert_intermediate),
            shared_intermediate: u128::from(shared_intermediate),
            first_dense: doc.u64_opt("first_k_dense_replace")?.unwrap_or(0),
            layer_freq: doc.u64_opt("moe_layer_freq")?.unwrap_or(1).max(1),
            sparse_step: doc.u64_opt("decoder_sparse_step")?.unwrap_or(1).max(1),
            dense_listed: doc.u64_list_opt("mlp_only_layers")?.unwrap_or_default(),
        }))
    }

    fn is_moe_layer(&self, layer: u64) -> bool {
        layer >= self.first_dense
            && !self.dense_listed.contains(&layer)
            && layer.is_multiple_of(self.layer_freq)
            && (layer + 1).is_multiple_of(self.sparse_step)
    }
}
