//! The knobs a configuration is named by: engine limits and load dimensions. `twin whatif`
//! varies them and tags each configuration's cells; `compare --config` picks one
//! configuration's cells by the same names and values.

use std::collections::BTreeMap;

/// What a configuration may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// Requests running at once.
    MaxRunning,
    /// KV pool, tokens.
    Pool,
    /// Prefill tokens per step (chunked-prefill budget).
    Chunk,
    /// The load dimension: closed-loop workers (load's `--concurrency`).
    Concurrency,
    /// The load dimension: open-loop rates (load's `--rate`).
    Rate,
    /// The load dimension of a trace: load's `--time-scale`.
    TimeScale,
}

/// A configuration's tag, as cells carry it: `{"max_running": 2}`.
pub type Tag = BTreeMap<String, f64>;

impl Knob {
    const NAMES: [(&'static str, Knob); 6] = [
        ("max-running", Knob::MaxRunning),
        ("pool", Knob::Pool),
        ("chunk", Knob::Chunk),
        ("concurrency", Knob::Concurrency),
        ("rate", Knob::Rate),
        ("time-scale", Knob::TimeScale),
    ];

    pub fn name(self) -> &'static str {
        Knob::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// The knob named `name` (`max-running` or `max_running`).
    pub fn from_name(name: &str) -> Option<Knob> {
        let name = name.trim().replace('_', "-");
        Knob::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
    }

    /// Every knob's name, for error messages.
    pub fn names() -> String {
        let names: Vec<&str> = Knob::NAMES.iter().map(|(n, _)| *n).collect();
        names.join(", ")
    }

    /// A limit of the engine (not a dimension of the load).
    pub fn is_engine(self) -> bool {
        matches!(self, Knob::MaxRunning | Knob::Pool | Knob::Chunk)
    }

    /// A knob a configuration's tag carries: the engine's and a trace's time scale (the
    /// other load dimensions are cells of one configuration).
    pub fn is_tagged(self) -> bool {
        !matches!(self, Knob::Concurrency | Knob::Rate)
    }

    /// `value` as this knob takes it (engine limits as counts, `64k` too; workers as a
    /// whole number; rates and scales as positive numbers); `None` when it is not one.
    pub fn value(self, value: &str) -> Option<f64> {
        let v = value.trim();
        match self {
            Knob::MaxRunning | Knob::Pool | Knob::Chunk => crate::lengths::parse_count(v)
                .ok()
                .filter(|n| *n > 0)
                .map(|n| n as f64),
            Knob::Concurrency => v.parse::<u32>().ok().filter(|n| *n > 0).map(f64::from),
            Knob::Rate | Knob::TimeScale => {
                v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0)
            }
        }
    }

    /// The key this knob has in a tag.
    pub fn tag_key(self) -> String {
        self.name().replace('-', "_")
    }
}

/// A tag as the user writes it: `max-running=2 pool=65536`.
pub fn label(tag: &Tag) -> String {
    if tag.is_empty() {
        return "as profiled".into();
    }
    tag.iter()
        .map(|(k, v)| format!("{}={v}", k.replace('_', "-")))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_read_as_each_knob_takes_them() {
        assert_eq!(Knob::from_name("max_running"), Some(Knob::MaxRunning));
        assert_eq!(Knob::from_name("time-scale"), Some(Knob::TimeScale));
        assert_eq!(Knob::from_name("slots"), None);
        assert_eq!(Knob::Pool.value("64k"), Some(65536.0));
        assert_eq!(Knob::Concurrency.value("2.5"), None);
        assert_eq!(Knob::Rate.value("2.5"), Some(2.5));
        for bad in ["0", "-1", "nan", "lots"] {
            assert_eq!(Knob::MaxRunning.value(bad), None, "{bad}");
        }
        assert_eq!(Knob::MaxRunning.tag_key(), "max_running");
        assert!(Knob::Chunk.is_engine() && !Knob::TimeScale.is_engine());
        assert!(Knob::TimeScale.is_tagged() && !Knob::Rate.is_tagged());
    }
}
