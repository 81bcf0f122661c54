//! Reading result files back: a round trip, empty files, a last line torn at every cut,
//! bad lines named by file and line, unknown types, the run header first and once, other
//! schemas refused.

use crate::common;

use ctxbench::record::{ErrorRecord, Record, Sample, Summary};
use ctxbench::resultfile::{ResultFile, ResultFileError, parse, parse_bytes, read};

fn run_record() -> Record {
    Record::Run(common::records::run_record("m", &[1024, 8192], 3))
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
