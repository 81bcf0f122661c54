//! Prompt datasets: JSONL (`prompt`/`text`), ShareGPT (`conversations`, first human turn)
//! and LongBench (`context` + `input`), read one record at a time so that a dataset of
//! hundreds of megabytes costs only the text kept.

use super::{
    Content, ContentError, ContentKind, DatasetFormat, Doc, Location, Problem, cap_note, display,
    plural,
};
use serde::Deserializer as _;
use serde::de::{self, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// Why the format could not be told from the first record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undetected {
    NoKnownKeys,
    Ambiguous(Vec<DatasetFormat>),
}

impl fmt::Display for Undetected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Undetected::NoKnownKeys => f.write_str(
                "it has none of \"prompt\"/\"text\" (jsonl), \"conversations\" (sharegpt) or \
                 \"context\"+\"input\" (longbench)",
            ),
            Undetected::Ambiguous(formats) => {
                let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
                write!(f, "it fits more than one format ({})", names.join(", "))
            }
        }
    }
}

/// The records read so far, and the state a stop leaves behind.
struct Records<'p> {
    path: &'p Path,
    format: Option<DatasetFormat>,
    docs: Vec<Doc>,
    empty: usize,
    remaining: usize,
    capped: bool,
    failed: Option<ContentError>,
}

pub(super) fn load(
    path: &Path,
    format: Option<DatasetFormat>,
    cap: usize,
) -> Result<Content, ContentError> {
    let file = File::open(path).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            ContentError::DatasetNotFound {
                path: path.to_owned(),
            }
        } else {
            ContentError::Io {
                path: path.to_owned(),
                source,
            }
        }
    })?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(ContentError::DatasetIsFolder {
            path: path.to_owned(),
        });
    }
    let mut input = BufReader::with_capacity(1 << 16, file);
    let mut records = Records {
        path,
        format,
        docs: Vec::new(),
        empty: 0,
        remaining: cap,
        capped: false,
        failed: None,
    };
    let io_err = |source| ContentError::Io {
        path: path.to_owned(),
        source,
    };
    let head = input.fill_buf().map_err(io_err)?;
    let bom = head.starts_with(b"\xef\xbb\xbf");
    if bom {
        input.consume(3);
    }
    let head = input.fill_buf().map_err(io_err)?;
    if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        read_array(input, &mut records)?;
    } else {
        read_lines(input, &mut records)?;
    }

    let Some(format) = records.format else {
        return Err(ContentError::EmptyDataset {
            path: path.to_owned(),
            skipped: 0,
        });
    };
    if records.docs.is_empty() {
        return Err(ContentError::EmptyDataset {
            path: path.to_owned(),
            skipped: records.empty,
        });
    }
    let mut label = format!(
        "dataset {} ({format}, {}",
        display(path),
        plural(records.docs.len(), "entry", "entries")
    );
    if records.empty > 0 {
        label += &format!("; {} empty skipped", records.empty);
    }
    if records.capped {
        label += &format!("; {}", cap_note(cap));
    }
    label.push(')');
    Ok(Content {
        kind: ContentKind::Dataset,
        label,
        docs: records.docs,
        skipped: Vec::new(),
    })
}

/// JSONL: one object a line; blank lines are allowed.
fn read_lines(mut input: impl BufRead, records: &mut Records) -> Result<(), ContentError> {
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|source| ContentError::Io {
                path: records.path.to_owned(),
                source,
            })?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        let at = Location::Line(line_no);
        let Ok(line) = std::str::from_utf8(&buf) else {
            return Err(records.malformed(at, Problem::NotUtf8));
        };
        if line.trim().is_empty() {
            continue;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        let value: Value = serde_json::from_str(line).map_err(|e| {
            // serde_json counts lines within the one line it was given: keep the column.
            let full = e.to_string();
            let what = full
                .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
                .unwrap_or(&full);
            records.malformed(
                at,
                Problem::BadJson(format!(
                    "{what} at column {}; JSONL holds one whole JSON object a line",
                    e.column()
                )),
            )
        })?;
        records.record(at, value)?;
        if records.capped {
            return Ok(());
        }
    }
}

/// A JSON array of objects, streamed element by element.
fn read_array(input: impl io::Read, records: &mut Records) -> Result<(), ContentError> {
    struct Elements<'r, 'p>(&'r mut Records<'p>);

    impl<'de> Visitor<'de> for Elements<'_, '_> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of JSON objects")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut n = 0;
            while let Some(value) = seq.next_element::<Value>()? {
                n += 1;
                if let Err(e) = self.0.record(Location::Entry(n), value) {
                    self.0.failed = Some(e);
                    return Err(de::Error::custom("stopped on a bad entry"));
                }
                if self.0.capped {
                    return Err(de::Error::custom("stopped at the cap"));
                }
            }
            Ok(())
        }
    }

    let mut de = serde_json::Deserializer::from_reader(input);
    let result = (&mut de).deserialize_seq(Elements(records));
    if let Some(e) = records.failed.take() {
        return Err(e);
    }
    if records.capped {
        return Ok(());
    }
    result.and_then(|()| de.end()).map_err(|e| {
        records.malformed(
            Location::Line(e.line()),
            Problem::BadJson(format!("{e}; the file starts as a JSON array")),
        )
    })
}

impl Records<'_> {
    fn malformed(&self, at: Location, problem: Problem) -> ContentError {
        ContentError::Malformed {
            path: self.path.to_owned(),
            at,
            problem,
            format: self.format,
        }
    }

    fn record(&mut self, at: Location, value: Value) -> Result<(), ContentError> {
        let obj = match value {
            Value::Object(obj) => obj,
            other => {
                return Err(self.malformed(
                    at,
                    Problem::NotAnObject {
                        found: kind(&other),
                    },
                ));
            }
        };
        let format = match self.format {
            Some(f) => f,
            None => {
                let f = detect(&obj).map_err(|reason| ContentError::UnknownFormat {
                    path: self.path.to_owned(),
                    keys: obj.keys().take(12).cloned().collect(),
                    reason,
                })?;
                self.format = Some(f);
                f
            }
        };
        let text = extract(format, &obj).map_err(|p| self.malformed(at, p))?;
        let Some(mut text) = text.filter(|t| !t.trim().is_empty()) else {
            self.empty += 1;
            return Ok(());
        };
        // Marked only when text is left unread: a dataset that fits exactly was read whole.
        if self.remaining == 0 {
            self.capped = true;
            return Ok(());
        }
        if text.len() > self.remaining {
            text.truncate(text.floor_char_boundary(self.remaining));
            self.capped = true;
        }
        self.remaining -= text.len();
        if !text.trim().is_empty() {
            self.docs.push(Doc {
                name: at.to_string(),
                text,
            });
        }
        Ok(())
    }
}

fn detect(obj: &Map<String, Value>) -> Result<DatasetFormat, Undetected> {
    let has = |k: &str| obj.contains_key(k);
    let fits: Vec<DatasetFormat> = [
        (has("prompt") || has("text"), DatasetFormat::Jsonl),
        (has("conversations"), DatasetFormat::Sharegpt),
        (has("context") && has("input"), DatasetFormat::Longbench),
    ]
    .into_iter()
    .filter_map(|(fits, f)| fits.then_some(f))
    .collect();
    match fits.as_slice() {
        [one] => Ok(*one),
        [] => Err(Undetected::NoKnownKeys),
        _ => Err(Undetected::Ambiguous(fits)),
    }
}

/// The prompt of one record; `None` when it has none (a conversation with no human turn).
fn extract(format: DatasetFormat, obj: &Map<String, Value>) -> Result<Option<String>, Problem> {
    match format {
        DatasetFormat::Jsonl => {
            let field = if obj.contains_key("prompt") {
                "prompt"
            } else {
                "text"
            };
            string_field(obj, field, "\"prompt\" (or \"text\")").map(Some)
        }
        DatasetFormat::Longbench => {
            let context = string_field(obj, "context", "\"context\"")?;
            let input = string_field(obj, "input", "\"input\"")?;
            Ok(Some(
                match (context.trim().is_empty(), input.trim().is_empty()) {
                    (_, true) => context,
                    (true, false) => input,
                    (false, false) => format!("{context}\n\n{input}"),
                },
            ))
        }
        DatasetFormat::Sharegpt => {
            let turns = match obj.get("conversations") {
                None => {
                    return Err(Problem::MissingField {
                        field: "\"conversations\"".into(),
                    });
                }
                Some(Value::Array(turns)) => turns,
                Some(other) => {
                    return Err(Problem::WrongType {
                        field: "conversations".into(),
                        expected: "an array",
                        found: kind(other),
                    });
                }
            };
            for (i, turn) in turns.iter().enumerate() {
                let Value::Object(turn) = turn else {
                    return Err(Problem::WrongType {
                        field: format!("conversations[{i}]"),
                        expected: "an object",
                        found: kind(turn),
                    });
                };
                // {from, value} is ShareGPT's own; {role, content} is the chat API's, which
                // some ShareGPT-style sets use.
                let (who_key, text_key) = if turn.contains_key("from") {
                    ("from", "value")
                } else {
                    ("role", "content")
                };
                let who = match turn.get(who_key) {
                    Some(Value::String(s)) => s,
                    None => {
                        return Err(Problem::MissingField {
                            field: format!("\"from\" in conversations[{i}]"),
                        });
                    }
                    Some(other) => {
                        return Err(Problem::WrongType {
                            field: format!("conversations[{i}].{who_key}"),
                            expected: "a string",
                            found: kind(other),
                        });
                    }
                };
                if who.eq_ignore_ascii_case("human") || who.eq_ignore_ascii_case("user") {
                    return match turn.get(text_key) {
                        Some(Value::String(s)) => Ok(Some(s.clone())),
                        None => Err(Problem::MissingField {
                            field: format!("\"{text_key}\" in conversations[{i}]"),
                        }),
                        Some(other) => Err(Problem::WrongType {
                            field: format!("conversations[{i}].{text_key}"),
                            expected: "a string",
                            found: kind(other),
                        }),
                    };
                }
            }
            Ok(None)
        }
    }
}

fn string_field(obj: &Map<String, Value>, key: &str, name: &str) -> Result<String, Problem> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        // A null prompt is an empty one: skipped, not refused.
        Some(Value::Null) => Ok(String::new()),
        Some(other) => Err(Problem::WrongType {
            field: key.into(),
            expected: "a string",
            found: kind(other),
        }),
        None => Err(Problem::MissingField { field: name.into() }),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::content::{ContentSpec, load as load_spec};
    use std::path::PathBuf;

    /// A dataset file written for one test; the folder lives as long as the value.
    struct Data {
        _dir: tempfile::TempDir,
        path: PathBuf,
    }

    fn data(name: &str, text: &str) -> Data {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        Data { _dir: dir, path }
    }

    fn read(d: &Data, format: Option<DatasetFormat>) -> Result<Content, ContentError> {
        load_spec(&ContentSpec::Dataset {
            path: d.path.clone(),
            format,
        })
    }

    fn texts(c: &Content) -> Vec<(&str, &str)> {
        c.docs
            .iter()
            .map(|d| (d.name.as_str(), d.text.as_str()))
            .collect()
    }

    #[test]
    fn jsonl_prompt_or_text() {
        let d = data(
            "p.jsonl",
            "{\"prompt\": \"first\", \"id\": 1}\n\n{\"prompt\": \"second\"}\n{\"prompt\": \"  \"}\n",
        );
        for format in [None, Some(DatasetFormat::Jsonl)] {
            let c = read(&d, format).unwrap();
            assert_eq!(c.kind, ContentKind::Dataset);
            // Line 2 is blank (not an entry), line 4 an empty prompt (an empty entry).
            assert_eq!(texts(&c), [("line 1", "first"), ("line 3", "second")]);
            assert!(
                c.label.ends_with("(jsonl, 2 entries; 1 empty skipped)"),
                "{}",
                c.label
            );
        }
        let d = data("t.jsonl", "{\"text\": \"only text\"}\r\n");
        let c = read(&d, None).unwrap();
        assert_eq!(texts(&c), [("line 1", "only text")]);
    }

    #[test]
    fn sharegpt_array_and_lines_take_the_first_human_turn() {
        let array = r#"[
  {"id": "a", "conversations": [
    {"from": "system", "value": "be brief"},
    {"from": "human", "value": "What is a river?"},
    {"from": "gpt", "value": "Water that flows."},
    {"from": "human", "value": "second question"}]},
  {"id": "b", "conversations": []},
  {"id": "c", "conversations": [{"from": "gpt", "value": "hello"}]},
  {"id": "d", "conversations": [{"role": "user", "content": "chat style"}]}
]"#;
        let d = data("sg.json", array);
        let c = read(&d, None).unwrap();
        assert_eq!(
            texts(&c),
            [("entry 1", "What is a river?"), ("entry 4", "chat style")]
        );
        assert!(
            c.label.ends_with("(sharegpt, 2 entries; 2 empty skipped)"),
            "{}",
            c.label
        );

        let lines = "{\"conversations\": [{\"from\": \"user\", \"value\": \"one\"}]}\n\
                     {\"conversations\": [{\"from\": \"human\", \"value\": \"two\"}]}\n";
        let d = data("sg.jsonl", lines);
        let c = read(&d, Some(DatasetFormat::Sharegpt)).unwrap();
        assert_eq!(texts(&c), [("line 1", "one"), ("line 2", "two")]);
    }

    #[test]
    fn longbench_joins_context_then_input() {
        let d = data(
            "lb.jsonl",
            "{\"input\": \"Who?\", \"context\": \"A long story.\", \"answers\": [\"x\"]}\n\
             {\"input\": \"\", \"context\": \"Only context.\"}\n",
        );
        let c = read(&d, None).unwrap();
        assert_eq!(
            texts(&c),
            [
                ("line 1", "A long story.\n\nWho?"),
                ("line 2", "Only context.")
            ]
        );
        assert!(c.label.contains("(longbench, 2 entries)"), "{}", c.label);
    }

    #[test]
    fn detection_refuses_ambiguous_and_unknown_records() {
        let d = data("amb.jsonl", "{\"prompt\": \"p\", \"conversations\": []}\n");
        let e = read(&d, None).unwrap_err();
        assert!(
            matches!(&e, ContentError::UnknownFormat { reason: Undetected::Ambiguous(f), .. }
                if f == &[DatasetFormat::Jsonl, DatasetFormat::Sharegpt]),
            "{e:?}"
        );
        assert!(e.to_string().contains("--dataset-format"), "{e}");
        // The same file is fine once the format is given.
        let c = read(&d, Some(DatasetFormat::Jsonl)).unwrap();
        assert_eq!(texts(&c), [("line 1", "p")]);

        let d = data("unk.jsonl", "{\"question\": \"q\", \"answer\": \"a\"}\n");
        let e = read(&d, None).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("keys: answer, question"), "{msg}");
        assert!(msg.contains("--dataset-format"), "{msg}");
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line_number() {
        let cases: [(&str, &str, &str); 5] = [
            (
                "{\"prompt\": \"ok\"}\n{\"prompt\": \"cut\n",
                "line 2: not valid JSON",
                "column",
            ),
            (
                "{\"prompt\": \"ok\"}\n\n{\"id\": 3}\n",
                "line 3: missing field \"prompt\" (or \"text\")",
                "jsonl",
            ),
            (
                "{\"prompt\": \"ok\"}\n{\"prompt\": 42}\n",
                "line 2: field \"prompt\" is a number, expected a string",
                "",
            ),
            (
                "{\"prompt\": \"ok\"}\n[\"a\"]\n",
                "line 2: expected a JSON object, found an array",
                "",
            ),
            (
                "{\"conversations\": [{\"from\": \"human\", \"value\": \"ok\"}]}\n\
                 {\"conversations\": \"hi\"}\n",
                "line 2: field \"conversations\" is a string, expected an array",
                "",
            ),
        ];
        for (text, want, also) in cases {
            let d = data("bad.jsonl", text);
            let e = read(&d, None).unwrap_err();
            assert!(matches!(e, ContentError::Malformed { .. }), "{e:?}");
            let msg = e.to_string();
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
            assert!(msg.contains(also), "{msg:?} lacks {also:?}");
        }

        let mut bytes = b"{\"prompt\": \"ok\"}\n{\"prompt\": \"caf".to_vec();
        bytes.extend_from_slice(b"\xe9\"}\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latin1.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let e = load(&path, None, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("line 2: not UTF-8"), "{e}");
    }

    #[test]
    fn malformed_array_entries_are_named() {
        let d = data(
            "a.json",
            "[{\"prompt\": \"a\"},\n {\"prompt\": \"b\"},\n {\"prompt\": false}]",
        );
        let e = read(&d, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("entry 3: field \"prompt\" is a boolean"),
            "{e}"
        );
        let d = data(
            "sg.json",
            "[{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]},\n\
             {\"conversations\": [{\"from\": \"human\"}]}]",
        );
        let e = read(&d, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("entry 2: missing field \"value\" in conversations[0]"),
            "{e}"
        );
        let d = data(
            "b.json",
            "[{\"prompt\": \"a\"},\n {\"prompt\": \"b\" oops}]",
        );
        let e = read(&d, None).unwrap_err();
        assert!(e.to_string().contains("line 2: not valid JSON"), "{e}");
        let d = data("c.json", "[{\"prompt\": \"a\"}] trailing");
        let e = read(&d, None).unwrap_err();
        assert!(e.to_string().contains("not valid JSON"), "{e}");
    }

    #[test]
    fn empty_datasets_are_refused() {
        for text in [
            "",
            "\n \n",
            "[]",
            "{\"prompt\": \"\"}\n{\"prompt\": null}\n",
        ] {
            let d = data("e.jsonl", text);
            let e = read(&d, None).unwrap_err();
            assert!(
                matches!(e, ContentError::EmptyDataset { .. }),
                "{text:?}: {e:?}"
            );
        }
        let d = data("e.jsonl", "{\"prompt\": \"\"}\n");
        assert!(
            read(&d, None)
                .unwrap_err()
                .to_string()
                .contains("1 empty skipped")
        );
        let e = read(
            &Data {
                _dir: tempfile::tempdir().unwrap(),
                path: PathBuf::from("/nonexistent/ctxbench/x.jsonl"),
            },
            None,
        )
        .unwrap_err();
        assert!(matches!(e, ContentError::DatasetNotFound { .. }), "{e:?}");
        assert!(e.to_string().contains("/nonexistent/ctxbench/x.jsonl"));
        let dir = tempfile::tempdir().unwrap();
        let e = load(dir.path(), None, 1 << 20).unwrap_err();
        assert!(matches!(e, ContentError::DatasetIsFolder { .. }), "{e:?}");
        assert!(e.to_string().contains("--corpus"), "{e}");
    }

    #[test]
    fn reading_stops_at_the_cap() {
        let lines: String = (0..100)
            .map(|i| format!("{{\"prompt\": \"entry number {i:03}\"}}\n"))
            .collect();
        let d = data("many.jsonl", &lines);
        // Each prompt is 16 bytes: a 40-byte cap keeps two whole entries and 8 bytes of
        // the third, and never reads on.
        let c = load(&d.path, None, 40).unwrap();
        assert_eq!(c.docs.len(), 3);
        assert_eq!(c.docs[2].text, "entry nu");
        assert_eq!(c.total_bytes(), 40);
        assert!(c.label.contains("stopped at the 40 B cap"), "{}", c.label);

        let array = format!(
            "[{}]",
            (0..100)
                .map(|i| format!("{{\"text\": \"entry number {i:03}\"}}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let d = data("many.json", &array);
        let c = load(&d.path, None, 32).unwrap();
        assert_eq!(
            texts(&c),
            [
                ("entry 1", "entry number 000"),
                ("entry 2", "entry number 001")
            ]
        );
        assert!(c.label.contains("cap"), "{}", c.label);
    }

    #[test]
    fn a_leading_bom_is_ignored() {
        let d = data("bom.jsonl", "\u{feff}{\"prompt\": \"x\"}\n");
        assert_eq!(texts(&read(&d, None).unwrap()), [("line 1", "x")]);
        let d = data("bom.json", "\u{feff} [{\"prompt\": \"y\"}]");
        assert_eq!(texts(&read(&d, None).unwrap()), [("entry 1", "y")]);
    }
}
