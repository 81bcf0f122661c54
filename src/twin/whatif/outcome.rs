//! One configuration of `twin whatif` and its prediction: the data the comparison and its
//! rendering (`render/whatif.rs`) share.

use crate::load::LoadResult;
use crate::load::knob::Knob;

/// One configuration: a value per engine knob (and time scale) varied.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub settings: Vec<(Knob, String)>,
}

impl Config {
    /// The record's tag: each knob's value, e.g. `{"max_running": 2}`.
    pub fn tag(&self) -> crate::load::knob::Tag {
        self.settings
            .iter()
            .filter_map(|(k, v)| Some((k.tag_key(), k.value(v)?)))
            .collect()
    }

    pub fn label(&self) -> String {
        if self.settings.is_empty() {
            return "as profiled".into();
        }
        self.settings
            .iter()
            .map(|(k, v)| format!("{}={v}", k.name()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One configuration's prediction.
pub struct Outcome {
    pub config: Config,
    pub result: LoadResult,
    pub warnings: Vec<String>,
}
