//! `ctxbench schema`: the committed copies under docs/schema/ are what the code generates,
//! and every record the tests hold or write validates against it: the committed result-file
//! fixtures, the records the report fixtures build, and files written by sweeps (plain,
//! two-point, needle, depth, with failures) and loads (closed loop sharded, knee, trace)
//! against simulators. Every record kind is seen at least once. `report` reads the
//! committed schema-1 files.

use crate::common::dist;
use crate::common::report as report_fixtures;

use ctxbench::record::Record;
use ctxbench::schema::{RECORD_FILE, RecordKind, kind_schema, record_schema, render};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_ctxbench");

/// The committed schema-1 result files (written by ctxbench 0.1.0).
const V1_FILES: &[&str] = &[
    "tests/fixtures/results/v1-sweep.jsonl",
    "tests/fixtures/results/v1-load.jsonl",
    // `load --price-per-hour 2.5 --telemetry-url` (a fake DCGM exporter): gpu_metrics
    // records, cells with dollars and joules per token.
    "tests/fixtures/results/v1-load-cost.jsonl",
    "fuzz/seeds/resultfile/small.jsonl",
];

fn schema_dir() -> PathBuf {
    Path::new(ROOT).join("docs/schema")
}

#[test]
fn the_committed_schemas_are_the_generated_ones() {
    let regen = "regenerate them with `bash scripts/gen-schema.sh` and commit docs/schema/";
    let mut want: Vec<(String, String)> = vec![(RECORD_FILE.into(), render(None).unwrap())];
    for &k in RecordKind::ALL {
        want.push((k.file_name(), render(Some(k)).unwrap()));
    }
    for (file, text) in &want {
        let path = schema_dir().join(file);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; {regen}", path.display()));
        assert!(
            committed == *text,
            "{} differs from `ctxbench schema`: {regen}",
            path.display()
        );
    }
    // Nothing stale beside them.
    let mut on_disk: Vec<String> = std::fs::read_dir(schema_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    on_disk.sort();
    let mut names: Vec<String> = want.into_iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(on_disk, names, "{regen}");
}

#[test]
fn each_kind_is_one_branch_chosen_by_type_with_its_definitions() {
    let root = record_schema();
    let types: Vec<&str> = root["oneOf"]
        .as_array()
        .expect("a oneOf list")
        .iter()
        .map(|b| {
            b["properties"]["type"]["const"]
                .as_str()
                .expect("a fixed type")
        })
        .collect();
    let kinds: Vec<&str> = RecordKind::ALL.iter().map(|k| k.type_name()).collect();
    assert_eq!(types, kinds);
    for &k in RecordKind::ALL {
        let s = kind_schema(k).unwrap();
        assert_eq!(s["properties"]["type"]["const"], k.type_name());
        // Every reference it keeps resolves inside it.
        let text = s.to_string();
        for r in text.split("\"#/$defs/").skip(1) {
            let name = r.split('"').next().unwrap();
            assert!(
                s["$defs"].get(name).is_some(),
                "{k:?}: dangling $ref {name}"
            );
        }
        // The kind's name on the command line is its type on disk.
        let out = Command::new(BIN)
            .args(["schema", k.type_name()])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            render(Some(k)).unwrap()
        );
    }
    let out = Command::new(BIN).arg("schema").output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        render(None).unwrap()
    );
    let out = Command::new(BIN)
        .args(["schema", "no_such_kind"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap refuses an unknown kind");
}

/// Validators: one for any record, one per kind.
struct Validators {
    any: jsonschema::Validator,
    kinds: BTreeMap<RecordKind, jsonschema::Validator>,
}

impl Validators {
    fn new() -> Validators {
        let compile = |s: &Value| {
            jsonschema::validator_for(s).unwrap_or_else(|e| panic!("the schema compiles: {e}"))
        };
        Validators {
            any: compile(&record_schema()),
            kinds: RecordKind::ALL
                .iter()
                .map(|&k| (k, compile(&kind_schema(k).unwrap())))
                .collect(),
        }
    }

    fn errors(v: &jsonschema::Validator, line: &Value) -> Vec<String> {
        v.iter_errors(line)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    /// Validates one record against the schema of any record and its kind's; returns its kind.
    fn check(&self, line: &Value, whence: &str) -> RecordKind {
        let errors = Self::errors(&self.any, line);
        assert!(errors.is_empty(), "{whence}: {errors:?}\n{line}");
        let record: Record = serde_json::from_value(line.clone())
            .unwrap_or_else(|e| panic!("{whence}: valid by the schema but unread: {e}\n{line}"));
        let kind = RecordKind::of(&record);
        let errors = Self::errors(&self.kinds[&kind], line);
        assert!(
            errors.is_empty(),
            "{whence}: as {kind:?}: {errors:?}\n{line}"
        );
        kind
    }
}

/// The complete records of a JSONL file (a torn last line, as a crash leaves, is not one).
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some((line, tail)) = rest.split_once('\n') {
        if !line.trim().is_empty() {
            out.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{line}", path.display())),
            );
        }
        rest = tail;
    }
    out
}

/// Runs the test binary to completion within `limit`; panics with its stderr on failure.
fn ctxbench(args: &[&str], limit: Duration) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("ctxbench {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = reader.join().unwrap();
    // 0: fine; 3 and 4: ran, but some point or SLO failed (faults were injected on purpose).
    assert!(
        matches!(status.code(), Some(0 | 3 | 4)),
        "ctxbench {args:?}: {status}\n{err}"
    );
}

/// Result files written by sweeps and loads against simulators: every record kind.
fn written_files(dir: &Path) -> Vec<PathBuf> {
    let out = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let limit = Duration::from_secs(120);
    // Built-in simulator: stream and two-point, needle.
    let sweep = out("sweep.jsonl");
    ctxbench(
        &[
            "sweep",
            "--lengths",
            "1k,2k",
            "--reps",
            "2",
            "--output-tokens",
            "8",
            "--method",
            "both",
            "--needle",
            "--raw-completion",
            "--out",
            &sweep,
        ],
        limit,
    );
    // Graded tasks: task results, accuracy, effective-context records.
    let tasks = out("tasks.jsonl");
    ctxbench(
        &[
            "sweep",
            "--lengths",
            "1k,2k",
            "--tasks",
            "niah,vt",
            "--samples",
            "2",
            "--output-tokens",
            "8",
            "--effective-context",
            "1500",
            "--out",
            &tasks,
        ],
        limit,
    );
    // A turn deep in a conversation: depth samples.
    let depth = out("depth.jsonl");
    ctxbench(
        &[
            "sweep",
            "--depth",
            "0,2k",
            "--turn-tokens",
            "256",
            "--reps",
            "1",
            "--output-tokens",
            "8",
            "--out",
            &depth,
        ],
        limit,
    );
    // A simulator that fails some requests and speculates: error records, spec stats; the
    // load is one shard of two (shard tags on its records).
    let faulty = dist::SimProcess::start(
        Path::new(BIN),
        &[
            "--fault-rate",
            "0.4",
            "--fault-kinds",
            "http500",
            "--spec",
            "3",
            "--seed",
            "7",
        ],
    );
    let errors = out("errors.jsonl");
    ctxbench(
        &[
            "sweep",
            "--url",
            &faulty.url,
            "--lengths",
            "1k",
            "--reps",
            "4",
            "--output-tokens",
            "8",
            "--no-warmup",
            "--out",
            &errors,
        ],
        limit,
    );
    let load = out("load.jsonl");
    ctxbench(
        &[
            "load",
            "--url",
            &faulty.url,
            "--lengths",
            "1k",
            "--concurrency",
            "1,2",
            "--requests",
            "6",
            "--output-tokens",
            "8",
            "--shard",
            "0/2",
            "--out",
            &load,
        ],
        limit,
    );
    drop(faulty);
    // The knee.
    let sim = dist::SimProcess::start(Path::new(BIN), &[]);
    let knee = out("knee.jsonl");
    ctxbench(
        &[
            "load",
            "--url",
            &sim.url,
            "--lengths",
            "1k",
            "--find-knee",
            "--knee-max",
            "4",
            "--requests",
            "4",
            "--output-tokens",
            "8",
            "--slo",
            "e2e=2s",
            "--out",
            &knee,
        ],
        limit,
    );
    // Graded load: tasks on the requests, accuracy on the cell.
    let graded = out("graded-load.jsonl");
    ctxbench(
        &[
            "load",
            "--url",
            &sim.url,
            "--lengths",
            "1k",
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--output-tokens",
            "8",
            "--tasks",
            "niah",
            "--samples",
            "2",
            "--out",
            &graded,
        ],
        limit,
    );
    // A replayed trace: trace fields on the plan and the requests.
    let trace = out("trace.jsonl");
    ctxbench(
        &[
            "trace",
            "synth",
            "--conversations",
            "2",
            "--turns",
            "2..2",
            "--system-prompts",
            "1",
            "--system-tokens",
            "256",
            "--doc-tokens",
            "1k..1k",
            "--user-tokens",
            "64..64",
            "--output-tokens",
            "8..8",
            "--think-time",
            "1s..1s",
            "--rate",
            "10",
            "--out",
            &trace,
        ],
        limit,
    );
    let replay = out("replay.jsonl");
    ctxbench(
        &[
            "load",
            "--url",
            &sim.url,
            "--trace",
            &trace,
            "--time-scale",
            "0.1",
            "--out",
            &replay,
        ],
        limit,
    );
    // Agent sessions on the built-in simulator: the plan, turns, cells and the capacity.
    let sessions = out("sessions.jsonl");
    ctxbench(
        &[
            "sessions",
            "--sessions",
            "1,2",
            "--turns",
            "2",
            "--system-tokens",
            "64",
            "--first-tokens",
            "256",
            "--turn-tokens",
            "32",
            "--output-tokens",
            "8",
            "--out",
            &sessions,
        ],
        limit,
    );
    [
        sweep, tasks, depth, errors, load, knee, graded, replay, sessions,
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

#[test]
fn every_record_the_tests_hold_or_write_validates() {
    let v = Validators::new();
    let mut seen: BTreeMap<RecordKind, usize> = BTreeMap::new();
    let mut check_file = |v: &Validators, path: &Path| {
        let records = lines(path);
        assert!(!records.is_empty(), "{}: no record", path.display());
        for (i, line) in records.iter().enumerate() {
            let kind = v.check(line, &format!("{}:{}", path.display(), i + 1));
            *seen.entry(kind).or_default() += 1;
        }
    };
    for f in V1_FILES {
        check_file(&v, &Path::new(ROOT).join(f));
    }
    // The report tests' fixtures, built in code.
    let fx = report_fixtures::troubled_run();
    let built = report_fixtures::jsonl(&fx.run, &fx.samples, &fx.errors);
    for (i, line) in built.lines().enumerate() {
        let line: Value = serde_json::from_str(line).unwrap();
        v.check(&line, &format!("report_fixtures::troubled_run:{}", i + 1));
    }
    let dir = tempfile::tempdir().unwrap();
    for f in written_files(dir.path()) {
        check_file(&v, &f);
    }
    let missing: Vec<_> = RecordKind::ALL
        .iter()
        .filter(|k| !seen.contains_key(k))
        .collect();
    assert!(
        missing.is_empty(),
        "no record of {missing:?} was checked: {seen:?}"
    );
    // Depth samples, needle results, two-point samples and trace requests were among them.
    let all: Vec<Value> = std::fs::read_dir(dir.path())
        .unwrap()
        .flat_map(|e| lines(&e.unwrap().path()))
        .collect();
    let has = |pred: &dyn Fn(&Value) -> bool| all.iter().any(pred);
    assert!(has(&|r| r["type"] == "sample" && r["depth_tokens"].is_u64()));
    assert!(has(&|r| r["type"] == "sample" && r["needle"].is_object()));
    assert!(has(&|r| r["type"] == "sample" && r["method"] == "two-point"));
    assert!(has(&|r| r["type"] == "sample" && r["spec"].is_object()));
    assert!(has(&|r| r["type"] == "request" && r["trace"].is_object()));
    assert!(has(&|r| r["type"] == "request" && r["error"].is_object()));
    assert!(has(&|r| r["type"] == "cell" && r["shard"].is_u64()));
}

#[test]
fn the_schema_tells_kinds_apart_and_refuses_what_a_reader_would() {
    let v = Validators::new();
    let sample = lines(&Path::new(ROOT).join(V1_FILES[0]))
        .into_iter()
        .find(|r| r["type"] == "sample")
        .expect("the v1 sweep fixture has samples");
    assert!(v.any.is_valid(&sample));
    // Chosen by `type`: a sample is not a run, nor a request.
    assert!(!v.kinds[&RecordKind::Run].is_valid(&sample));
    assert!(!v.kinds[&RecordKind::Request].is_valid(&sample));
    // Additive changes keep old readers' files valid: an unknown field is allowed.
    let mut extra = sample.clone();
    extra["added_in_a_later_version"] = json!([1, 2]);
    assert!(v.any.is_valid(&extra));
    // What a reader refuses, the schema refuses.
    for (field, bad) in [
        ("type", json!("no_such_kind")),
        ("ttft_s", json!("fast")),
        ("context_tokens", json!(-1)),
        ("flags", json!(["no_such_flag"])),
        ("valid", Value::Null),
    ] {
        let mut broken = sample.clone();
        broken[field] = bad;
        assert!(!v.any.is_valid(&broken), "{field}: {broken}");
        assert!(serde_json::from_value::<Record>(broken).is_err(), "{field}");
    }
    let mut missing = sample.clone();
    missing.as_object_mut().unwrap().remove("rep");
    assert!(!v.any.is_valid(&missing));
}

#[test]
fn report_reads_schema_1_files() {
    for (file, want) in [
        (V1_FILES[0], &["1024", "2048"][..]),
        (V1_FILES[1], &["c=1", "c=2"][..]),
    ] {
        let path = Path::new(ROOT).join(file);
        let first = &lines(&path)[0];
        assert_eq!(first["type"], "run");
        assert_eq!(first["schema"], 1, "{file} is a schema-1 file");
        let out = Command::new(BIN).arg("report").arg(&path).output().unwrap();
        let table = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "report {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for w in want {
            assert!(table.contains(w), "report {file} lacks {w}:\n{table}");
        }
    }
}
