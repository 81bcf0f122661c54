//! deploy/k8s checked offline, without a cluster: kubectl renders the kustomization and
//! converts it to JSON locally, and the Indexed Job's fields and its ctxbench command are
//! checked (the command by ctxbench's own argument parser).

use clap::Parser;
use ctxbench::cli::{Cli, Command};
use serde_json::Value;
use std::io::Write;
use std::process::{Command as Proc, Stdio};

fn kubectl(args: &[&str], input: Option<&[u8]>) -> Vec<u8> {
    let mut child = Proc::new("kubectl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl is needed to check deploy/k8s offline ({e}); install it \
                 (Debian: apt-get install kubernetes-client) — scripts/test.sh does"
            )
        });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.unwrap_or_default()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The rendered manifest as JSON (`annotate --local` parses and prints without a server).
fn rendered_job() -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/k8s");
    let yaml = kubectl(&["kustomize", dir], None);
    let json = kubectl(
        &[
            "annotate",
            "--local",
            "-f",
            "-",
            "-o",
            "json",
            "ctxbench/checked=1",
        ],
        Some(&yaml),
    );
    serde_json::from_slice(&json).expect("kubectl prints one JSON object")
}

fn env_value<'a>(container: &'a Value, name: &str) -> &'a str {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("env {name} is set"))
}

#[test]
fn the_indexed_job_runs_one_shard_per_pod_of_a_valid_load_command() {
    let job = rendered_job();
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let n = spec["completions"]
        .as_u64()
        .expect("completions is a number");
    assert!(n >= 2, "a sharded plan has at least 2 pods");
    assert_eq!(
        spec["parallelism"].as_u64(),
        Some(n),
        "all shards run at once"
    );
    assert_eq!(spec["backoffLimit"].as_u64(), Some(0));
    let pod = &spec["template"]["spec"];
    assert!(matches!(pod["restartPolicy"].as_str(), Some("Never")));
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert!(c["image"].as_str().is_some_and(|i| !i.is_empty()));
    assert_eq!(env_value(c, "JOB_COMPLETIONS"), n.to_string());
    let start_at = env_value(c, "START_AT");

    // The shell line's ctxbench command parses as `load` with a valid --start-at.
    let script = c["args"][0].as_str().expect("one shell script");
    let line = script.split(';').next().unwrap().split('>').next().unwrap();
    let argv: Vec<String> = line
        .split_whitespace()
        .map(|w| w.trim_matches('"').replace("$START_AT", start_at))
        .collect();
    assert_eq!(argv[..2], ["ctxbench", "load"]);
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let Command::Load(a) = cli.command else {
        panic!("not a load command")
    };
    assert!(a.start_at.is_some() && a.out.is_some());
    assert!(
        a.shard.is_none(),
        "the index comes from JOB_COMPLETION_INDEX"
    );
    // Without the index set by Kubernetes the shard is unknown; with it, it is i/n.
    let env = |k: &str| match k {
        "JOB_COMPLETION_INDEX" => Some("1".to_string()),
        "JOB_COMPLETIONS" => Some(n.to_string()),
        _ => None,
    };
    let s = ctxbench::run::shard::Shard::resolve(a.shard, a.shards, env)
        .unwrap()
        .unwrap();
    assert_eq!(s.to_string(), format!("1/{n}"));
    // The results volume is mounted where the script writes.
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert!(mounts.iter().any(|m| m["mountPath"] == "/results"));
    assert!(script.contains("cat /results/shard.jsonl"));
}
