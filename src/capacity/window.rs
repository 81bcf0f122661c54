//! Which layers use sliding-window attention, and with what window, from a `config.json`.
//!
//! Configs say it several ways: an explicit `layer_types` list (newer transformers, gpt-oss),
//! Gemma-2's alternation, Gemma-3's `sliding_window_pattern`, Qwen2's `use_sliding_window` +
//! `max_window_layers`, or Mistral's plain `sliding_window` on every layer.

use super::config::ConfigDoc;
use super::error::ConfigError;

/// Per layer: `Some(window_tokens)` for a sliding-window layer, `None` for full attention.
pub fn layer_windows(
    doc: &ConfigDoc,
    num_layers: u64,
    notes: &mut Vec<String>,
) -> Result<Vec<Option<u64>>, ConfigError> {
    let layers = usize::try_from(num_layers)
        .map_err(|_| doc.invalid("num_hidden_layers", "is too large"))?;
    let window = doc.u64_opt("sliding_window")?;
    let model_type = doc.str_opt("model_type")?.unwrap_or("");

    if let Some(types) = doc.str_list_opt("layer_types")? {
        if types.len() != layers {
            return Err(doc.invalid(
                "layer_types",
                format!(
                    "has {} entries but num_hidden_layers is {num_layers}; they must match",
                    types.len()
                ),
            ));
        }
        return types
            .iter()
            .enumerate()
            .map(|(i, kind)| match *kind {
                "full_attention" => Ok(None),
                "sliding_attention" => match window {
                    Some(w) if w > 0 => Ok(Some(w)),
                    _ => Err(doc.missing(
                        "sliding_window",
                        "the window of the layers that layer_types marks sliding_attention",
                    )),
                },
                other => Err(doc.invalid(
                    "layer_types",
                    format!(
                        "entry {i} is {other:?}, which ctxbench plan does not model (it knows \
                         full_attention and sliding_attention); plan a model without it"
                    ),
                )),
            })
            .collect();
    }

    let Some(window) = window.filter(|w| *w > 0) else {
        return Ok(vec![None; layers]);
    };
    if doc.bool_opt("use_sliding_window")? == Some(false) {
        return Ok(vec![None; layers]);
    }
    let sliding: Vec<bool> = if model_type == "gemma2" {
        // Gemma-2: even layers are local, odd layers global.
        (0..layers).map(|i| i.is_multiple_of(2)).collect()
    } else if let Some(pattern) = sliding_pattern(doc, model_type)? {
        // Gemma-3: every `pattern`-th layer is global, the rest local.
        (0..layers)
            .map(|i| !(i + 1).is_multiple_of(pattern))
            .collect()
    } else if doc.bool_opt("use_sliding_window")? == Some(true)
        && let Some(first) = doc.u64_opt("max_window_layers")?
    {
        // Qwen2-style: layers from `max_window_layers` on use the window.
        (0..layers).map(|i| i as u64 >= first).collect()
    } else {
        notes.push(format!(
            "sliding_window {window} applies to every layer (no layer_types or pattern in the \
             config), as Mistral-7B-v0.1 does"
        ));
        vec![true; layers]
    };
    Ok(sliding.into_iter().map(|s| s.then_some(window)).collect())
}

/// Gemma-3's global-layer period: from the config, or 6 (the Gemma-3 default) by model type.
fn sliding_pattern(doc: &ConfigDoc, model_type: &str) -> Result<Option<usize>, ConfigError> {
    let pattern = match doc.u64_opt("sliding_window_pattern")? {
        Some(p) => Some(p),
        None if model_type.starts_with("gemma3") => Some(6),
        None => None,
    };
    match pattern {
        Some(0) => Err(doc.invalid("sliding_window_pattern", "is 0; it must be at least 1")),
        Some(p) => Ok(usize::try_from(p).ok()),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::layer_windows;
    use crate::capacity::config::ConfigDoc;

    fn windows(json: &str, layers: u64) -> Vec<Option<u64>> {
        let doc = ConfigDoc::parse("test", json).unwrap();
        layer_windows(&doc, layers, &mut Vec::new()).unwrap()
    }

    #[test]
    fn explicit_layer_types_win() {
        let w = windows(
            r#"{"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"]}"#,
            2,
        );
        assert_eq!(w, vec![Some(128), None]);
    }

    #[test]
    fn gemma2_alternates_and_gemma3_uses_the_pattern() {
        let g2 = windows(r#"{"model_type": "gemma2", "sliding_window": 4096}"#, 4);
        assert_eq!(g2, vec![Some(4096), None, Some(4096), None]);
        let g3 = windows(
            r#"{"model_type": "gemma3_text", "sliding_window": 1024}"#,
            7,
        );
        assert_eq!(g3.iter().filter(|w| w.is_none()).count(), 1);
        assert_eq!(g3[5], None);
    }

    #[test]
    fn qwen_window_is_off_unless_enabled() {
        let off = windows(
            r#"{"sliding_window": 131072, "use_sliding_window": false}"#,
            3,
        );
        assert_eq!(off, vec![None; 3]);
        let on = windows(
            r#"{"sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 2}"#,
            3,
        );
        assert_eq!(on, vec![None, None, Some(4096)]);
    }

    #[test]
    fn mistral_window_covers_every_layer() {
        assert_eq!(
            windows(r#"{"sliding_window": 4096}"#, 2),
            vec![Some(4096); 2]
        );
        assert_eq!(windows(r#"{"sliding_window": null}"#, 2), vec![None; 2]);
    }

    #[test]
    fn bad_layer_types_are_errors() {
        let doc = ConfigDoc::parse("t", r#"{"layer_types": ["full_attention"]}"#).unwrap();
        assert!(layer_windows(&doc, 2, &mut Vec::new()).is_err());
        let doc = ConfigDoc::parse("t", r#"{"layer_types": ["linear_attention"]}"#).unwrap();
        let err = layer_windows(&doc, 1, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("linear_attention"));
        let doc = ConfigDoc::parse("t", r#"{"layer_types": ["sliding_attention"]}"#).unwrap();
        assert!(layer_windows(&doc, 1, &mut Vec::new()).is_err());
    }
}
