//! Element sizes: of the KV cache (`--kv-dtype`) and of the weights (`--weights-dtype`).

use clap::ValueEnum;
use serde::Serialize;

/// What one KV-cache element is stored as.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    /// 2 bytes (bf16 or fp16).
    Bf16,
    /// 1 byte (fp8 e4m3 or e5m2).
    Fp8,
}

impl KvDtype {
    pub fn bytes(self) -> u64 {
        match self {
            KvDtype::Bf16 => 2,
            KvDtype::Fp8 => 1,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::Bf16 => "bf16",
            KvDtype::Fp8 => "fp8",
        }
    }
    /// SGLang's `kv_cache_dtype` (`auto` = the model's dtype, taken to be bf16).
    pub fn from_server(name: &str) -> Option<KvDtype> {
        match name {
            "auto" | "bf16" | "bfloat16" | "fp16" | "float16" => Some(KvDtype::Bf16),
            n if n.starts_with("fp8") => Some(KvDtype::Fp8),
            _ => None,
        }
    }
}

/// What the weights are stored as.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightsDtype {
    /// 2 bytes a parameter (bf16 or fp16).
    Bf16,
    /// 1 byte a parameter (block scales ignored).
    Fp8,
    /// Half a byte a parameter (group scales ignored).
    Int4,
    /// MoE experts in MXFP4 (4.25 bits with scales), everything else bf16 (gpt-oss).
    Mxfp4,
}

impl WeightsDtype {
    pub fn name(self) -> &'static str {
        match self {
            WeightsDtype::Bf16 => "bf16",
            WeightsDtype::Fp8 => "fp8",
            WeightsDtype::Int4 => "int4",
            WeightsDtype::Mxfp4 => "mxfp4",
        }
    }
    /// Quarter-bits per parameter (exact integers): (dense parameters, expert parameters).
    pub fn quarter_bits(self) -> (u64, u64) {
        match self {
            WeightsDtype::Bf16 => (64, 64),
            WeightsDtype::Fp8 => (32, 32),
            WeightsDtype::Int4 => (16, 16),
            WeightsDtype::Mxfp4 => (64, 17),
        }
    }
    /// How a parameter is sized, for the table.
    pub fn describe(self) -> &'static str {
        match self {
            WeightsDtype::Bf16 => "2 B",
            WeightsDtype::Fp8 => "1 B",
            WeightsDtype::Int4 => "0.5 B",
            WeightsDtype::Mxfp4 => "experts 4.25 bits, the rest 2 B",
        }
    }
}
