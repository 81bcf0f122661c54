//! Fitted scaling laws: TTFT(n) ≈ a + b·n + c·n² and decode step time ≈ d + e·n.

use crate::record::Summary;
use serde_json::Value;

/// The fit of a summary's medians, as JSON (`null` when too few points).
pub fn fit_summary(_summary: &Summary) -> Value {
    Value::Null
}
