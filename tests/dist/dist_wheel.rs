//! The manylinux2014 wheel as a Python user gets it: installed with pip into a fresh venv
//! (no index, nothing fetched), `ctxbench` is on the venv's PATH, prints its version line,
//! and runs a short sweep against a `ctxbench sim` process started from the same venv.

use crate::common::dist;

use std::path::Path;
use std::process::{Command, Output};

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh venv with the wheel installed, from the wheel file alone.
fn venv_with_wheel(dir: &Path, wheel: &Path) -> std::path::PathBuf {
    let venv = dir.join("venv");
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    run(Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .arg(wheel));
    venv
}

#[test]
fn the_wheel_installs_into_a_fresh_venv_and_sweeps_a_simulator() {
    let wheel = dist::artefact("CTXBENCH_WHEEL");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    // A wheel for any x86-64 Linux with glibc 2.17 or newer, of this crate's version.
    assert!(
        name.starts_with(&format!("ctxbench-{}-", env!("CARGO_PKG_VERSION"))),
        "{name}"
    );
    assert!(name.contains("manylinux_2_17_x86_64"), "{name}");
    assert!(name.ends_with(".whl"), "{name}");

    let dir = tempfile::tempdir().unwrap();
    let venv = venv_with_wheel(dir.path(), &wheel);
    let bin = venv.join("bin/ctxbench");
    assert!(bin.is_file(), "pip put no ctxbench into {}", bin.display());

    // On the PATH of the venv, as `source venv/bin/activate` sets it; version, commit, target.
    let path = format!("{}:/usr/bin:/bin", venv.join("bin").display());
    let out = run(Command::new("sh")
        .args(["-c", "command -v ctxbench && ctxbench --version"])
        .env("PATH", &path));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(bin.to_str().unwrap()));
    let version = lines.next().unwrap_or_default();
    let want = format!("ctxbench {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&want), "{version}");
    let commit = version[want.len()..].split(',').next().unwrap();
    assert!(
        commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "the wheel is built from a git checkout, so it names the commit: {version}"
    );
    assert!(
        version.ends_with(", x86_64-unknown-linux-gnu)"),
        "{version}"
    );

    // A short sweep from the venv against a simulator process from the venv.
    let sim = dist::SimProcess::start(&bin, &[]);
    let file = dir.path().join("run.jsonl");
    let out = run(Command::new(&bin)
        .args([
            "sweep",
            "--url",
            &sim.url,
            "--lengths",
            "1k,2k",
            "--reps",
            "2",
            "--output-tokens",
            "8",
            "--format",
            "json",
            "--out",
        ])
        .arg(&file));
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let points = doc["summary"]["points"].as_array().expect("points");
    let lengths: Vec<u64> = points
        .iter()
        .map(|p| p["context_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(lengths, [1024, 2048]);
    for p in points {
        assert_eq!(p["n_valid"], 2, "{p}");
        assert!(p["ttft_s"]["median"].as_f64().unwrap() > 0.0, "{p}");
    }
    // The file it wrote is a result file this build of ctxbench reads.
    let read = ctxbench::resultfile::read(&file).expect("the venv's result file reads");
    assert_eq!(read.run.as_ref().unwrap().target.url, sim.url);
    assert_eq!(read.samples.iter().filter(|s| s.valid).count(), 4);
}
