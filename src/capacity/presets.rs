//! Built-in architectures: data files in `presets/` (Hugging Face `config.json` shape, plus
//! `_ctxbench_description` and, where the public figure is exact, `num_parameters`),
//! embedded at build time.

use super::config::ConfigDoc;
use super::error::ConfigError;

/// (name, JSON text), sorted by name.
const PRESETS: &[(&str, &str)] = &[
    (
        "deepseek-v3",
        include_str!("../../presets/deepseek-v3.json"),
    ),
    ("gemma-2-9b", include_str!("../../presets/gemma-2-9b.json")),
    (
        "gemma-3-27b",
        include_str!("../../presets/gemma-3-27b.json"),
    ),
    (
        "gpt-oss-120b",
        include_str!("../../presets/gpt-oss-120b.json"),
    ),
    (
        "gpt-oss-20b",
        include_str!("../../presets/gpt-oss-20b.json"),
    ),
    ("kimi-k2", include_str!("../../presets/kimi-k2.json")),
    (
        "llama-3-70b",
        include_str!("../../presets/llama-3-70b.json"),
    ),
    ("llama-3-8b", include_str!("../../presets/llama-3-8b.json")),
    (
        "llama-3.1-70b",
        include_str!("../../presets/llama-3.1-70b.json"),
    ),
    (
        "llama-3.1-8b",
        include_str!("../../presets/llama-3.1-8b.json"),
    ),
    (
        "mistral-7b-v0.1",
        include_str!("../../presets/mistral-7b-v0.1.json"),
    ),
    ("qwen2.5-7b", include_str!("../../presets/qwen2.5-7b.json")),
    (
        "qwen3-235b-a22b",
        include_str!("../../presets/qwen3-235b-a22b.json"),
    ),
    ("qwen3-32b", include_str!("../../presets/qwen3-32b.json")),
];

/// The preset names, for listings and error messages.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(name, _)| *name).collect()
}

/// The preset's JSON text, if there is one by that name (case-insensitive).
pub fn json(name: &str) -> Option<&'static str> {
    PRESETS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
        .map(|(_, text)| *text)
}

/// Parse a preset; `None` when no preset has that name.
pub fn load(name: &str) -> Option<Result<ConfigDoc, ConfigError>> {
    json(name).map(|text| ConfigDoc::parse(&format!("preset {}", name.trim()), text))
}

/// One line per preset: name and description.
pub fn describe_all() -> Vec<(&'static str, String)> {
    PRESETS
        .iter()
        .map(|(name, text)| {
            let description = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("_ctxbench_description")?.as_str().map(str::to_string))
                .unwrap_or_default();
            (*name, description)
        })
        .collect()
}
