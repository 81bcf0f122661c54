//! What `--resume` keeps from the file it continues: the target checks for the same target,
//! the warmth only for the same instance, and nothing from a restarted or other server.

use crate::common;

use ctxbench::backend::instance::InstanceMarker;
use ctxbench::record::{Instance, RunRecord, TargetChecks, TransportCheck};
use ctxbench::sweep::resume::{Earlier, compare};

/// A run header for `url` with checks made (and `instance` where the server exposed one);
/// `sim` names the built-in simulator's settings when it was the target.
fn run(url: &str, instance: Option<Instance>, sim: Option<&str>) -> RunRecord {
    let mut r = common::records::run_record("m", &[1024], 1);
    r.target.url = url.into();
    r.target.server_info = serde_json::json!({"version": "1", "rtt_s": 0.001,
        "instance_marker": "a"});
    r.target.checks = TargetChecks {
        api_prefix_tokens: Some(3),
        transport: Some(TransportCheck::default()),
        instance,
    };
    r.config.simulator = sim.map(str::to_string);
    r
}

const U: &str = "http://127.0.0.1:1";

#[test]
fn the_same_instance_keeps_the_checks_and_counts_as_warm() {
    let old = run(U, Some(Instance::StartTime(5.0)), None);
    let mut new = run(U, None, None);
    new.target.server_info["rtt_s"] = 0.002.into();
    let e = compare(&old, &new, Some(&InstanceMarker::StartTime(5.0)));
    assert_eq!(e, Earlier::SameInstance(old.target.checks.clone()));
    // A counter that grew is the same process.
    let old = run(U, Some(Instance::Counter(10)), None);
    let e = compare(&old, &new, Some(&InstanceMarker::Counter(40)));
    assert!(matches!(e, Earlier::SameInstance(_)), "{e:?}");
}

#[test]
fn no_marker_keeps_the_checks_but_not_the_warmth() {
    let old = run(U, None, None);
    let new = run(U, None, None);
    let e = compare(&old, &new, Some(&InstanceMarker::StartTime(5.0)));
    assert!(matches!(e, Earlier::SameTarget(_)), "{e:?}");
    let old = run(U, Some(Instance::StartTime(5.0)), None);
    assert!(matches!(compare(&old, &new, None), Earlier::SameTarget(_)));
}

#[test]
fn a_restart_or_another_server_measures_again() {
    let new = run(U, None, None);
    let old = run(U, Some(Instance::StartTime(5.0)), None);
    let e = compare(&old, &new, Some(&InstanceMarker::StartTime(6.0)));
    assert!(
        matches!(&e, Earlier::Changed(w) if w.contains("restarted")),
        "{e:?}"
    );
    let old = run("http://127.0.0.1:2", None, None);
    assert!(matches!(compare(&old, &new, None), Earlier::Changed(w) if w.contains("URL")));
    let mut old = run(U, None, None);
    old.target.server_info["version"] = "2".into();
    assert!(matches!(compare(&old, &new, None), Earlier::Changed(_)));
    let mut old = run(U, None, None);
    old.target.checks = TargetChecks::default();
    let e = compare(&old, &new, None);
    assert!(
        matches!(&e, Earlier::Changed(w) if w.contains("no checks")),
        "{e:?}"
    );
}

#[test]
fn a_new_built_in_simulator_with_the_same_settings_is_the_same_target() {
    let old = run(U, Some(Instance::Id("a".into())), Some("sim"));
    let new = run("http://127.0.0.1:2", None, Some("sim"));
    let e = compare(&old, &new, Some(&InstanceMarker::Id("b".into())));
    assert!(matches!(e, Earlier::SameTarget(_)), "{e:?}");
    let new = run(U, None, Some("other"));
    assert!(matches!(compare(&old, &new, None), Earlier::Changed(_)));
}
