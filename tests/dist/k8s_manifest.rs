//! deploy/k8s checked offline, without a cluster: kubectl renders the kustomization and
//! converts it to JSON locally, and the Indexed Job's fields and its ctxbench command are
//! checked (the command by ctxbench's own argument parser).

use crate::common::k8s;

use clap::Parser;
use ctxbench::cli::{Cli, Command};
use k8s::{container, env_value, rendered_job};

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
    let c = container(&job);
    assert!(c["image"].as_str().is_some_and(|i| !i.is_empty()));
    assert_eq!(env_value(c, "JOB_COMPLETIONS"), n.to_string());
    assert!(!env_value(c, "START_AT").is_empty());

    // The exec form (no shell in the image) runs the image's binary with a `load` command
    // that ctxbench's own parser accepts, `$(START_AT)` expanded as Kubernetes does.
    let argv = k8s::argv(c, |k| Some(env_value(c, k).to_string()));
    assert_eq!(argv[..2], ["/usr/local/bin/ctxbench", "load"]);
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let Command::Load(a) = cli.command else {
        panic!("not a load command")
    };
    assert!(a.start_at.is_some() && a.out.is_some());
    // The log is the result file alone: progress to a file, the records printed at the end.
    assert!(a.print_out && a.log.is_some());
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
    // The results volume is mounted where the run writes its file and its log.
    let mounts = c["volumeMounts"].as_array().unwrap();
    let results = std::path::Path::new("/results");
    assert!(mounts.iter().any(|m| m["mountPath"] == "/results"));
    assert!(a.out.as_deref().unwrap().starts_with(results));
    assert!(a.log.as_deref().unwrap().starts_with(results));
}
