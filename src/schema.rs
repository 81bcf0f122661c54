//! `ctxbench schema [KIND]`: JSON Schema (draft 2020-12) of the result file's records,
//! derived from the record types themselves, so the written-down format is the one the code
//! writes. Without a kind it is one schema that any record validates against, chosen by its
//! `type`; `docs/schema/` holds the committed copies.

use crate::record::Record;
use clap::{Args, ValueEnum};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A record kind: the `type` of one line of a result file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum RecordKind {
    /// The header: tool, target, config (first line of every file).
    Run,
    /// One measured request of a sweep (also a depth turn of `sweep --depth`).
    Sample,
    /// One failed measurement of a sweep.
    Error,
    /// A sweep's per-length medians and fits (last line).
    Summary,
    /// `load`: the plan, after the header.
    #[value(name = "load_plan", alias = "load-plan")]
    LoadPlan,
    /// `load`: one request.
    Request,
    /// `load`: one scrape of the server's metrics.
    #[value(name = "server_metrics", alias = "server-metrics")]
    ServerMetrics,
    /// `load --telemetry-url`: one scrape of a GPU telemetry exporter.
    #[value(name = "gpu_metrics", alias = "gpu-metrics")]
    GpuMetrics,
    /// `load`: one finished cell.
    Cell,
    /// `load --find-knee`: one length's knee.
    Knee,
    /// `--tasks`: the effective context of one task (or `all`), after the summary.
    #[value(name = "effective_context", alias = "effective-context")]
    EffectiveContext,
    /// `sessions`: the plan, once after the run record.
    #[value(name = "sessions_plan", alias = "sessions-plan")]
    SessionsPlan,
    /// `sessions`: one turn of one session.
    Turn,
    /// `sessions`: one finished cell.
    #[value(name = "sessions_cell", alias = "sessions-cell")]
    SessionsCell,
    /// `sessions`: the capacity found.
    #[value(name = "session_capacity", alias = "session-capacity")]
    SessionCapacity,
}

impl RecordKind {
    pub const ALL: &[RecordKind] = &[
        RecordKind::Run,
        RecordKind::Sample,
        RecordKind::Error,
        RecordKind::Summary,
        RecordKind::LoadPlan,
        RecordKind::Request,
        RecordKind::ServerMetrics,
        RecordKind::GpuMetrics,
        RecordKind::Cell,
        RecordKind::Knee,
        RecordKind::EffectiveContext,
        RecordKind::SessionsPlan,
        RecordKind::Turn,
        RecordKind::SessionsCell,
        RecordKind::SessionCapacity,
    ];

    /// The kind of a record (exhaustive: a new record type must be named here).
    pub fn of(record: &Record) -> RecordKind {
        match record {
            Record::Run(_) => RecordKind::Run,
            Record::Sample(_) => RecordKind::Sample,
            Record::Error(_) => RecordKind::Error,
            Record::Summary(_) => RecordKind::Summary,
            Record::LoadPlan(_) => RecordKind::LoadPlan,
            Record::Request(_) => RecordKind::Request,
            Record::ServerMetrics(_) => RecordKind::ServerMetrics,
            Record::GpuMetrics(_) => RecordKind::GpuMetrics,
            Record::Cell(_) => RecordKind::Cell,
            Record::Knee(_) => RecordKind::Knee,
            Record::EffectiveContext(_) => RecordKind::EffectiveContext,
            Record::SessionsPlan(_) => RecordKind::SessionsPlan,
            Record::Turn(_) => RecordKind::Turn,
            Record::SessionsCell(_) => RecordKind::SessionsCell,
            Record::SessionCapacity(_) => RecordKind::SessionCapacity,
        }
    }

    /// Its `type` on disk.
    pub fn type_name(self) -> &'static str {
        match self {
            RecordKind::Run => "run",
            RecordKind::Sample => "sample",
            RecordKind::Error => "error",
            RecordKind::Summary => "summary",
            RecordKind::LoadPlan => "load_plan",
            RecordKind::Request => "request",
            RecordKind::ServerMetrics => "server_metrics",
            RecordKind::GpuMetrics => "gpu_metrics",
            RecordKind::Cell => "cell",
            RecordKind::Knee => "knee",
            RecordKind::EffectiveContext => "effective_context",
            RecordKind::SessionsPlan => "sessions_plan",
            RecordKind::Turn => "turn",
            RecordKind::SessionsCell => "sessions_cell",
            RecordKind::SessionCapacity => "session_capacity",
        }
    }

    /// The file name of its committed schema under `docs/schema/`.
    pub fn file_name(self) -> String {
        format!("{}.schema.json", self.type_name())
    }
}

/// The file name of the committed schema of any record.
pub const RECORD_FILE: &str = "record.schema.json";

#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// One record kind (its `type`); without it, the schema of any record, chosen by `type`.
    /// Depth samples (`sweep --depth`) are `sample` records with `depth_tokens` and
    /// `turn_tokens`.
    #[arg(value_enum)]
    pub kind: Option<RecordKind>,
}

/// The schema's shape was not what this module builds on (a schemars change).
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("the generated record schema has no `oneOf` list of record kinds")]
    NoVariants,
    #[error("the generated record schema has no variant whose `type` is `{0}`")]
    MissingKind(&'static str),
}

/// The schema any record validates against: one `oneOf` branch per kind, told apart by the
/// `type` property's constant. Extra properties are allowed, so that files written by a
/// newer ctxbench with added fields still validate (additive changes keep schema 1).
pub fn record_schema() -> Value {
    let mut root = schemars::schema_for!(Record).to_value();
    if let Value::Object(map) = &mut root {
        map.insert("title".into(), "ctxbench result record".into());
        map.insert(
            "description".into(),
            format!(
                "One line of a ctxbench result file (JSONL, schema {}): the kind is its \
                 `type`. The first line is a `run` record whose `schema` is {}.",
                crate::record::SCHEMA,
                crate::record::SCHEMA
            )
            .into(),
        );
    }
    root
}

/// The `type` constant a `oneOf` branch requires.
fn branch_type(branch: &Value) -> Option<&str> {
    branch
        .pointer("/properties/type/const")
        .and_then(Value::as_str)
}

/// The schema of one record kind: its branch of [`record_schema`], with only the
/// definitions it uses.
pub fn kind_schema(kind: RecordKind) -> Result<Value, SchemaError> {
    let root = record_schema();
    let branches = root
        .get("oneOf")
        .and_then(Value::as_array)
        .ok_or(SchemaError::NoVariants)?;
    let branch = branches
        .iter()
        .find(|b| branch_type(b) == Some(kind.type_name()))
        .ok_or(SchemaError::MissingKind(kind.type_name()))?;
    let mut out = Map::new();
    if let Some(s) = root.get("$schema") {
        out.insert("$schema".into(), s.clone());
    }
    out.insert(
        "title".into(),
        format!("ctxbench `{}` record", kind.type_name()).into(),
    );
    if let Value::Object(b) = branch {
        for (k, v) in b {
            out.insert(k.clone(), v.clone());
        }
    }
    // Keep only the definitions reachable from the branch.
    let defs = root.get("$defs").and_then(Value::as_object);
    let mut used = BTreeSet::new();
    let mut todo = refs_in(branch);
    while let Some(name) = todo.pop() {
        if used.insert(name.clone())
            && let Some(def) = defs.and_then(|d| d.get(&name))
        {
            todo.extend(refs_in(def));
        }
    }
    if let Some(defs) = defs {
        let kept: Map<String, Value> = defs
            .iter()
            .filter(|(k, _)| used.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            out.insert("$defs".into(), Value::Object(kept));
        }
    }
    Ok(Value::Object(out))
}

/// Names of the `#/$defs/NAME` references inside a schema.
fn refs_in(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(name) = m
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                {
                    out.push(name.to_string());
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    out
}

/// Keys in sorted order at every level, whether or not serde_json keeps insertion order (its
/// `preserve_order` feature, which any crate in the build may turn on): the printed schema
/// is the same bytes either way.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The schema as printed and committed: pretty JSON and a final newline.
pub fn render(kind: Option<RecordKind>) -> Result<String, SchemaError> {
    let v = match kind {
        Some(k) => kind_schema(k)?,
        None => record_schema(),
    };
    // A `Value` always serialises.
    let mut s = serde_json::to_string_pretty(&sorted(v)).unwrap_or_default();
    s.push('\n');
    Ok(s)
}

/// `ctxbench schema [KIND]`.
pub fn run(args: SchemaArgs) -> anyhow::Result<u8> {
    crate::stdout::print_stdout(render(args.kind)?.as_bytes())?;
    Ok(crate::exit::OK)
}
