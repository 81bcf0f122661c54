//! The model as the planner sees it: attention kind and shape, per-layer windows, context
//! limit, parameter count and checkpoint dtype, read from a `config.json` or a preset.

use super::config::ConfigDoc;
use super::dtype::WeightsDtype;
use super::error::ConfigError;
use super::params::{ParamCount, count_parameters};
use super::window::layer_windows;

/// How a layer's KV cache is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    /// Multi-head or grouped-query attention: K and V of `num_kv_heads` heads per token.
    Gqa { num_kv_heads: u64, head_dim: u64 },
    /// Multi-head latent attention: one latent of `kv_lora_rank + qk_rope_head_dim` per token.
    Mla {
        kv_lora_rank: u64,
        qk_rope_head_dim: u64,
    },
}

/// Where the parameter count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamSource {
    /// The config's (or preset's) `num_parameters`.
    Given,
    /// Counted from the architecture.
    Computed,
}

impl ParamSource {
    pub fn name(self) -> &'static str {
        match self {
            ParamSource::Given => "num_parameters",
            ParamSource::Computed => "computed from the architecture",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ModelSpec {
    /// `_name_or_path`, else the preset name or file name.
    pub name: String,
    /// `preset NAME` or `config.json at PATH`.
    pub origin: String,
    pub model_type: Option<String>,
    pub num_layers: u64,
    pub num_attention_heads: u64,
    pub attention: Attention,
    /// Per layer: the sliding window in tokens, or `None` for full attention.
    pub layer_windows: Vec<Option<u64>>,
    /// `max_position_embeddings`.
    pub max_context_tokens: Option<u64>,
    /// The parameter count, or why it could not be derived.
    pub params: Result<(ParamCount, ParamSource), ConfigError>,
    /// What the checkpoint stores its weights as, when the config says.
    pub checkpoint_dtype: Option<WeightsDtype>,
    /// Assumptions made while reading (defaults applied, things not modelled).
    pub notes: Vec<String>,
}

impl ModelSpec {
    /// Read the fields the planner needs; `fallback_name` is used without `_name_or_path`.
    pub fn from_doc(doc: &ConfigDoc, fallback_name: &str) -> Result<ModelSpec, ConfigError> {
        let mut notes = Vec::new();
        let num_layers = doc.dim_req("num_hidden_layers", "the number of decoder layers")?;
        let num_attention_heads = doc.dim_req("num_attention_heads", "the query heads")?;
        let attention = read_attention(doc, num_attention_heads, &mut notes)?;
        let layer_windows = layer_windows(doc, num_layers, &mut notes)?;
        let params = match doc.u64_opt("num_parameters")? {
            Some(n) if n > 0 => {
                let experts = count_parameters(doc).map(|p| p.experts).unwrap_or(0);
                Ok((ParamCount { total: n, experts }, ParamSource::Given))
            }
            _ => count_parameters(doc).map(|p| (p, ParamSource::Computed)),
        };
        let checkpoint_dtype = checkpoint_dtype(doc, &mut notes)?;
        if doc.u64_opt("num_nextn_predict_layers")?.unwrap_or(0) > 0 {
            notes.push(
                "the checkpoint carries an MTP (next-token prediction) layer; served as a draft \
                 model it needs its own weights and KV: count it in --reserve-gib"
                    .into(),
            );
        }
        Ok(ModelSpec {
            name: doc
                .str_opt("_name_or_path")?
                .unwrap_or(fallback_name)
                .to_string(),
            origin: doc.origin().to_string(),
            model_type: doc.str_opt("model_type")?.map(str::to_string),
            num_layers,
            num_attention_heads,
            attention,
            layer_windows,
            max_context_tokens: doc.u64_opt("max_position_embeddings")?,
            params,
            checkpoint_dtype,
            notes,
        })
    }

    /// Treat every layer as full attention (for servers that keep the whole history).
    pub fn without_windows(mut self) -> ModelSpec {
        self.layer_windows.iter_mut().for_each(|w| *w = None);
        self
    }

    pub fn sliding_layers(&self) -> usize {
        self.layer_windows.iter().filter(|w| w.is_some()).count()
    }
}

fn read_attention(
    doc: &ConfigDoc,
    heads: u64,
    notes: &mut Vec<String>,
) -> Result<Attention, ConfigError> {
    if doc.has("kv_lora_rank") {
        return Ok(Attention::Mla {
            kv_lora_rank: doc.dim_req("kv_lora_rank", "the MLA latent width")?,
            qk_rope_head_dim: doc.dim_req(
                "qk_rope_head_dim",
                "the MLA rotary key width, stored beside the latent",
            )?,
        });
    }
    let num_kv_heads = match doc.dim_opt("num_key_value_heads")? {
        Some(n) => n,
        None => {
            notes.push(format!(
                "num_key_value_heads is absent: assuming multi-head attention ({heads} KV heads)"
            ));
            heads
        }
    };
    if num_kv_heads > heads || !heads.is_multiple_of(num_kv_heads) {
        return Err(doc.invalid(
            "num_key_value_heads",
            format!("is {num_kv_heads}, which does not divide num_attention_heads {heads}"),
        ));
    }
    let head_dim = match doc.dim_opt("head_dim")? {
        Some(d) => d,
        None => {
            let hidden = doc.dim_req("hidden_size", "the model width, to derive head_dim")?;
            if !hidden.is_multiple_of(heads) {
                return Err(doc.missing(
                    "head_dim",
                    "hidden_size is not a multiple of num_attention_heads, so it cannot be derived",
                ));
            }
            hidden / heads
        }
    };
    Ok(Attention::Gqa {
        num_kv_heads,
        head_dim,
    })
}

/// The weights dtype the config declares: a known `quantization_config`, else `torch_dtype`.
fn checkpoint_dtype(
    doc: &ConfigDoc,
    notes: &mut Vec<String>,
) -> Result<Option<WeightsDtype>, ConfigError> {
    if let Some(method) = doc.nested_str("quantization_config", "quant_method") {
        let bits = doc
            .nested_u64("quantization_config", "bits")
            .or(doc.nested_u64("quantization_config", "w_bit"));
        return Ok(match (method, bits) {
            ("fp8", _) => Some(WeightsDtype::Fp8),
            ("mxfp4", _) => Some(WeightsDtype::Mxfp4),
            ("awq" | "gptq", Some(4)) => Some(WeightsDtype::Int4),
            _ => {
                notes.push(format!(
                    "quantization_config.quant_method {method:?} is not modelled; pass \
                     --weights-dtype or --weights-gib"
                ));
                None
            }
        });
    }
    let dtype = match doc.str_opt("torch_dtype")? {
        Some(d) => Some(d),
        None => doc.str_opt("dtype")?,
    };
    Ok(match dtype {
        Some("bfloat16" | "float16") => Some(WeightsDtype::Bf16),
        Some("float32") => {
            notes.push("torch_dtype is float32; assuming it is served in bf16".into());
            Some(WeightsDtype::Bf16)
        }
        _ => None,
    })
}
