//! Reading result files back (for `report`, `compare` and `--resume`), tolerating the one
//! damage a crash can do: a last line cut short by a kill mid-write.

use crate::record::{ErrorRecord, Record, RunRecord, SCHEMA, Sample, Summary};
use std::path::{Path, PathBuf};

/// The name used in messages for text that did not come from a file.
const NO_FILE: &str = "<input>";

/// A result file's records, sorted by kind, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultFile {
    /// The header; `None` only for a file with no complete record.
    pub run: Option<RunRecord>,
    pub samples: Vec<Sample>,
    pub errors: Vec<ErrorRecord>,
    /// The last summary in the file (a resumed run appends a newer one).
    pub summary: Option<Summary>,
    /// The last line was cut mid-write and has been dropped.
    pub torn_tail: bool,
    /// Length of the good prefix: truncate the file to this before appending.
    pub valid_bytes: u64,
    /// The good prefix does not end in `\n` (its last record is complete but unterminated):
    /// an appender must write one first.
    pub missing_final_newline: bool,
    /// `ctxbench load` records, in file order.
    pub load: LoadRecords,
}

/// The records only load files hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadRecords {
    pub plan: Option<crate::record::load::LoadPlan>,
    pub requests: Vec<crate::record::load::RequestRecord>,
    pub server_metrics: Vec<crate::record::load::ServerMetricsRecord>,
    pub cells: Vec<crate::record::load::CellRecord>,
    pub knees: Vec<crate::record::load::KneeRecord>,
}

impl LoadRecords {
    /// The requests of cell `k`, in file order.
    pub fn requests_in<'a>(
        &'a self,
        k: &'a crate::record::load::CellKey,
    ) -> impl Iterator<Item = &'a crate::record::load::RequestRecord> + 'a {
        self.requests.iter().filter(move |q| q.cell.same(k))
    }
}

/// Why a result file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ResultFileError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: line {line}: {reason}")]
    BadLine {
        file: String,
        line: usize,
        reason: String,
    },
    #[error(
        "{file}: line {line}: unknown record type `{type_name}` (this ctxbench knows run, \
         sample, error, summary, load_plan, request, server_metrics, cell and knee; is the file from a newer version?)"
    )]
    UnknownType {
        file: String,
        line: usize,
        type_name: String,
    },
    #[error(
        "{file}: line {line}: the first record is `{found}`, not `run`: not a ctxbench \
         result file, or its header was lost"
    )]
    NotRunFirst {
        file: String,
        line: usize,
        found: String,
    },
    #[error(
        "{file}: schema {found} is not supported: this ctxbench reads schema {SCHEMA} \
         (use the ctxbench version that wrote the file)"
    )]
    Schema { file: String, found: String },
    #[error("{file}: line {line}: a second `run` record: one file holds one run")]
    SecondRun { file: String, line: usize },
}

/// Parses a result file's text; messages name the input `<input>`.
pub fn parse(text: &str) -> Result<ResultFile, ResultFileError> {
    parse_bytes(text.as_bytes(), NO_FILE)
}

/// Reads and parses the result file at `path`.
pub fn read(path: impl AsRef<Path>) -> Result<ResultFile, ResultFileError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| ResultFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_bytes(&bytes, &path.display().to_string())
}

/// Parses a result file's bytes; `file` names it in messages.
///
/// Bytes rather than text, because a write cut mid-character leaves invalid UTF-8 in the
/// last line only. Blank lines are skipped.
pub fn parse_bytes(bytes: &[u8], file: &str) -> Result<ResultFile, ResultFileError> {
    let mut out = ResultFile::default();
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < bytes.len() {
        line_no += 1;
        let (line, end, terminated) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(i) => (&bytes[start..start + i], start + i + 1, true),
            None => (&bytes[start..], bytes.len(), false),
        };
        let bad = |reason: String| ResultFileError::BadLine {
            file: file.to_string(),
            line: line_no,
            reason,
        };
        let text = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(_) if !terminated => {
                out.torn_tail = true;
                break;
            }
            Err(e) => {
                return Err(bad(format!(
                    "invalid UTF-8 at byte {} of the line",
                    e.valid_up_to()
                )));
            }
        };
        if text.trim().is_empty() {
            // Unterminated whitespace is left outside the good prefix, to be truncated.
            if terminated {
                out.valid_bytes = end as u64;
            }
            start = end;
            continue;
        }
        let record = match serde_json::from_str::<Record>(text) {
            Ok(r) => r,
            Err(e) => {
                let value = serde_json::from_str::<serde_json::Value>(text);
                if value.is_err() && !terminated {
                    // A JSON object cut anywhere is not JSON: this is a torn write.
                    out.torn_tail = true;
                    break;
                }
                return Err(diagnose(value.ok(), e, file, line_no, out.run.is_none()));
            }
        };
        match record {
            Record::Run(run) => {
                if out.run.is_some() {
                    return Err(ResultFileError::SecondRun {
                        file: file.to_string(),
                        line: line_no,
                    });
                }
                if run.schema != SCHEMA {
                    return Err(ResultFileError::Schema {
                        file: file.to_string(),
                        found: run.schema.to_string(),
                    });
                }
                out.run = Some(run);
            }
            other if out.run.is_none() => {
                return Err(ResultFileError::NotRunFirst {
                    file: file.to_string(),
                    line: line_no,
                    found: type_name(&other).to_string(),
                });
            }
            Record::Sample(s) => out.samples.push(*s),
            Record::Error(e) => out.errors.push(e),
            Record::Summary(s) => out.summary = Some(s),
            Record::LoadPlan(p) => out.load.plan = Some(p),
            Record::Request(r) => out.load.requests.push(*r),
            Record::ServerMetrics(m) => out.load.server_metrics.push(m),
            Record::Cell(c) => out.load.cells.push(*c),
            Record::Knee(k) => out.load.knees.push(k),
        }
        out.valid_bytes = end as u64;
        out.missing_final_newline = !terminated;
        start = end;
    }
    Ok(out)
}

fn type_name(r: &Record) -> &'static str {
    match r {
        Record::Run(_) => "run",
        Record::Sample(_) => "sample",
        Record::Error(_) => "error",
        Record::Summary(_) => "summary",
        Record::LoadPlan(_) => "load_plan",
        Record::Request(_) => "request",
        Record::ServerMetrics(_) => "server_metrics",
        Record::Cell(_) => "cell",
        Record::Knee(_) => "knee",
    }
}

/// The clearest reason a line is not a record: not JSON, no type, an unknown type, a
/// header of another schema, or a field serde refused.
fn diagnose(
    value: Option<serde_json::Value>,
    err: serde_json::Error,
    file: &str,
    line: usize,
    first: bool,
) -> ResultFileError {
    let bad = |reason: String| ResultFileError::BadLine {
        file: file.to_string(),
        line,
        reason,
    };
    let Some(value) = value else {
        return bad(format!("not JSON: {err}"));
    };
    let Some(obj) = value.as_object() else {
        return bad("not a JSON object".to_string());
    };
    let Some(type_name) = obj.get("type").and_then(|t| t.as_str()) else {
        return bad("no string `type` field".to_string());
    };
    if !matches!(type_name, "run" | "sample" | "error" | "summary") {
        return ResultFileError::UnknownType {
            file: file.to_string(),
            line,
            type_name: type_name.to_string(),
        };
    }
    if first && type_name != "run" {
        return ResultFileError::NotRunFirst {
            file: file.to_string(),
            line,
            found: type_name.to_string(),
        };
    }
    if type_name == "run" {
        // A header of another schema may not fit this one's types: say so, not which field.
        match obj.get("schema") {
            Some(s) if s.as_u64() != Some(SCHEMA as u64) => {
                return ResultFileError::Schema {
                    file: file.to_string(),
                    found: s.to_string(),
                };
            }
            None => return bad("`run` record without `schema`".to_string()),
            _ => {}
        }
    }
    bad(format!("bad `{type_name}` record: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RunConfig, Target};

    fn run_record() -> Record {
        Record::Run(RunRecord {
            schema: SCHEMA,
            tool_version: "0.1.0".into(),
            started_at: "2025-01-01T00:00:00Z".into(),
            target: Target {
                url: "http://127.0.0.1:30000".into(),
                api: "sglang".into(),
                model: None,
                server_info: serde_json::Value::Null,
                checks: Default::default(),
            },
            config: RunConfig {
                lengths: vec![1024, 8192],
                output_tokens: 64,
                reps: 3,
                method: "stream".into(),
                cache_bust: "auto".into(),
                needle: false,
                needle_depths: vec![],
                timeout: "auto".into(),
                seed: 1,
                prompt_mode: "token_ids".into(),
                rtt_s: Some(0.001),
                simulator: None,
                depth: None,
                content: None,
            },
        })
    }

    fn sample(ctx: u64, rep: u32) -> Record {
        Record::Sample(Box::new(Sample {
            context_tokens: ctx,
            method: "stream".into(),
            rep,
            ttft_s: Some(0.1),
            valid: true,
            ..Sample::default()
        }))
    }

    fn error(ctx: u64) -> Record {
        Record::Error(ErrorRecord {
            context_tokens: ctx,
            rep: 0,
            kind: "timeout".into(),
            message: "no complete response".into(),
            method: None,
        })
    }

    fn file(records: &[Record]) -> String {
        records.iter().map(Record::to_line).collect()
    }

    #[test]
    fn round_trip() {
        let text = file(&[
            run_record(),
            sample(1024, 0),
            error(8192),
            Record::Summary(Summary::default()),
            sample(1024, 1),
        ]);
        let rf = parse(&text).unwrap();
        assert!(rf.run.is_some());
        assert_eq!(rf.samples.len(), 2);
        assert_eq!(rf.samples[1].rep, 1);
        assert_eq!(rf.errors.len(), 1);
        assert!(rf.summary.is_some());
        assert!(!rf.torn_tail && !rf.missing_final_newline);
        assert_eq!(rf.valid_bytes, text.len() as u64);
    }

    #[test]
    fn empty_and_blank_files() {
        let rf = parse("").unwrap();
        assert_eq!(rf, ResultFile::default());
        let rf = parse("\n\n").unwrap();
        assert!(rf.run.is_none());
        assert_eq!(rf.valid_bytes, 2);
        let head = file(&[run_record()]);
        let rf = parse(&format!("{head}\n  ")).unwrap();
        assert_eq!(rf.valid_bytes, head.len() as u64 + 1);
        assert!(!rf.missing_final_newline);
    }

    #[test]
    fn torn_tail_is_dropped_at_every_cut() {
        let good = file(&[run_record(), sample(1024, 0)]);
        let last = sample(8192, 0).to_line();
        // Every cut that leaves the last record incomplete (the newline excluded).
        for cut in 1..last.len() - 1 {
            let text = format!("{good}{}", &last[..cut]);
            let rf = parse(&text).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            assert!(rf.torn_tail, "cut {cut}");
            assert_eq!(rf.valid_bytes, good.len() as u64);
            assert_eq!(rf.samples.len(), 1);
        }
        // Cut just before the newline: complete but unterminated.
        let text = format!("{good}{}", last.trim_end());
        let rf = parse(&text).unwrap();
        assert!(!rf.torn_tail && rf.missing_final_newline);
        assert_eq!(rf.samples.len(), 2);
        assert_eq!(rf.valid_bytes, text.len() as u64);
    }

    #[test]
    fn torn_first_line() {
        let head = run_record().to_line();
        let rf = parse(&head[..20]).unwrap();
        assert!(rf.run.is_none() && rf.torn_tail);
        assert_eq!(rf.valid_bytes, 0);
    }

    #[test]
    fn torn_mid_character() {
        let mut bytes = file(&[run_record()]).into_bytes();
        let valid = bytes.len() as u64;
        bytes.extend_from_slice("{\"type\":\"error\",\"message\":\"h\u{e9}".as_bytes());
        bytes.pop();
        let rf = parse_bytes(&bytes, "x.jsonl").unwrap();
        assert!(rf.torn_tail);
        assert_eq!(rf.valid_bytes, valid);
    }

    #[test]
    fn bad_line_in_the_middle_names_file_and_line() {
        let text = format!(
            "{}{{\"type\":\"sample\",\"context_\n{}",
            file(&[run_record()]),
            sample(1, 0).to_line()
        );
        let e = parse_bytes(text.as_bytes(), "r.jsonl").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("r.jsonl: line 2: not JSON"), "{msg}");

        let text = format!("{}{{\"type\":\"sample\"}}\n", file(&[run_record()]));
        let msg = parse(&text).unwrap_err().to_string();
        assert!(
            msg.contains("line 2: bad `sample` record: missing field"),
            "{msg}"
        );

        // Complete JSON without a newline is not a torn write.
        let text = format!("{}[1,2]", file(&[run_record()]));
        let msg = parse(&text).unwrap_err().to_string();
        assert!(msg.contains("line 2: not a JSON object"), "{msg}");

        let mut bytes = file(&[run_record()]).into_bytes();
        bytes.extend_from_slice(b"\xFF\n");
        let msg = parse_bytes(&bytes, "r").unwrap_err().to_string();
        assert!(msg.contains("line 2: invalid UTF-8"), "{msg}");
    }

    #[test]
    fn unknown_type() {
        let text = format!("{}{{\"type\":\"gauge\",\"v\":1}}\n", file(&[run_record()]));
        let e = parse(&text).unwrap_err();
        assert!(
            matches!(e, ResultFileError::UnknownType { line: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("`gauge`"));
    }

    #[test]
    fn first_record_must_be_run() {
        let e = parse(&file(&[sample(1, 0), run_record()])).unwrap_err();
        assert!(
            matches!(e, ResultFileError::NotRunFirst { line: 1, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("`sample`, not `run`"), "{e}");
        // Also when the first record would not even parse as a sample.
        let e = parse("{\"type\":\"sample\"}\n").unwrap_err();
        assert!(matches!(e, ResultFileError::NotRunFirst { .. }), "{e}");
        let e = parse(&file(&[run_record(), run_record()])).unwrap_err();
        assert!(
            matches!(e, ResultFileError::SecondRun { line: 2, .. }),
            "{e}"
        );
    }

    #[test]
    fn other_schemas_are_refused() {
        let mut v: serde_json::Value = serde_json::to_value(run_record()).unwrap();
        v["schema"] = 2.into();
        let e = parse(&format!("{v}\n")).unwrap_err();
        assert!(e.to_string().contains("schema 2 is not supported"), "{e}");
        // A future header whose shape changed too.
        let e = parse("{\"type\":\"run\",\"schema\":3,\"whatever\":true}\n").unwrap_err();
        assert!(matches!(e, ResultFileError::Schema { .. }), "{e}");
        let e = parse("{\"type\":\"run\"}\n").unwrap_err();
        assert!(e.to_string().contains("without `schema`"), "{e}");
    }

    #[test]
    fn read_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.jsonl");
        let e = read(&path).unwrap_err();
        assert!(e.to_string().contains("missing.jsonl"), "{e}");

        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, format!("{}{{oops}}\n", file(&[run_record()]))).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("r.jsonl: line 2"), "{e}");
    }
}
