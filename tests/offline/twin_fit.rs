//! The twin's model half: `twin calibrate` against the simulator run with parameters the
//! profile never saw recovers them; `twin fit` on the kept records gives the same profile;
//! `sim --profile` serves as the profile (explicit flags win); other profile versions and
//! non-profiles are refused with a message.

use crate::common;

use clap::Parser;
use common::calibrate_args;
use ctxbench::cli::{Cli, Command};
use ctxbench::twin::calibrate;
use ctxbench::twin::profile::{Estimate, Profile, ProfileError};

// The hidden server (issue 29's example, lengths scaled to 16k so that the test takes
// about half a minute): t0 25 ms, p0 40k tok/s, d0 8 ms, d2 1 ms, max-running 6, pool
// 200k, chunked prefill 2048; q and d1 at the simulator's defaults.
const T0: f64 = 0.025;
const P0: f64 = 40_000.0;
const Q: f64 = 4.0e-10;
const D0: f64 = 0.008;
const D1: f64 = 5.0e-8;
const D2: f64 = 0.001;

fn hidden_flags() -> Vec<String> {
    [
        "--sim-t0",
        "0.025",
        "--sim-p0",
        "40000",
        "--sim-q",
        "4e-10",
        "--sim-d0",
        "0.008",
        "--sim-d1",
        "5e-8",
        "--sim-d2",
        "0.001",
        "--max-running",
        "6",
        "--kv-pool-tokens",
        "200000",
        "--max-batch-tokens",
        "2048",
        "--context-length",
        "32768",
    ]
    .map(String::from)
    .to_vec()
}

fn rel(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs()
}

fn show(name: &str, e: &Estimate, hidden: f64) {
    println!(
        "{name:<4} hidden {hidden:<10.4e} recovered {:<10.4e} ({:+.2} %) ci {:?}  {}",
        e.value,
        (e.value / hidden - 1.0) * 100.0,
        e.ci95,
        e.source
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibration_recovers_the_hidden_simulator() {
    let flags = hidden_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let sim = common::sim(&flags).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hidden.json");
    let args = calibrate_args(
        &sim.url(),
        &out,
        &[
            "--max-length",
            "16k",
            "--reps",
            "5",
            "--output-tokens",
            "32",
            "--requests",
            "16",
        ],
    );
    let c = calibrate(&args).await.expect("calibration runs");
    let p = &c.profile;
    println!("{}", ctxbench::twin::render_profile(p));
    println!("calibration took {:.1} s", c.elapsed_s);
    let s = &p.step;
    for (name, e, hidden) in [
        ("t0", &s.t0_s, T0),
        ("p0", &s.p0_tps, P0),
        ("q", &s.q_s_per_token2, Q),
        ("d0", &s.d0_s, D0),
        ("d1", &s.d1_s_per_token, D1),
        ("d2", &s.d2_s_per_request, D2),
    ] {
        show(name, e, hidden);
    }
    // Limits come from the probe: exact.
    assert_eq!(p.limits.max_running.value, 6.0);
    assert_eq!(p.limits.pool_tokens.value, 200_000.0);
    assert_eq!(s.chunk_tokens.value, 2048.0);
    assert!(
        s.chunk_tokens.source.contains("probe"),
        "{:?}",
        s.chunk_tokens
    );
    // Calibrated up to the slot limit (powers of two, then the limit).
    assert_eq!(c.plan.concurrency, vec![1, 2, 4, 6]);
    assert_eq!(p.envelope.max_concurrency, 6);
    // The records are kept beside the profile, and `twin fit` on them gives the same laws.
    assert!(c.records.iter().all(|r| r.exists()), "{:?}", c.records);
    let refit = ctxbench::twin::fit(&ctxbench::twin::gather(&c.records, 6).expect("records read"))
        .expect("refit");
    assert_eq!(refit.step, p.step);
    assert_eq!(refit.limits, p.limits);

    // Tolerances (see docs/twin.md, "Calibration: fidelity"):
    // - t0: the client's TTFT adds the loopback transport and the simulator's HTTP handling
    //   (≈ 0.2–1 ms, under 4 % of 25 ms); p0 rests on the linear part, 0.01–0.4 s of TTFT.
    //   Both within 5 %.
    // - d0, d2: differences of step medians the engine times to tens of µs; within 5 %.
    for (name, e, hidden) in [
        ("t0", &s.t0_s, T0),
        ("p0", &s.p0_tps, P0),
        ("d0", &s.d0_s, D0),
        ("d2", &s.d2_s_per_request, D2),
    ] {
        assert!(
            rel(e.value, hidden) < 0.05,
            "{name}: {e:?} vs hidden {hidden}"
        );
    }
    // - d1·n is 9 % of a decode step at 16k, but decode steps are timed to µs: within 5 %.
    assert!(
        rel(s.d1_s_per_token.value, D1) < 0.05,
        "d1: {:?}",
        s.d1_s_per_token
    );
    // - q·n²/2 is only 12 % of TTFT at 16k and is fitted jointly with the linear term over
    //   512..16k: a few ms of TTFT noise leave q identified only to tens of per cent (one
    //   run on a busy machine: −30 %, interval ±60 %; quiet runs: within 0.3 %). It is held
    //   to what the profile claims, its 95 % interval, widened by the 5 % the others are
    //   held to: the interval counts noise, not the client's systematic transport (quiet
    //   runs gave intervals of ±0.2 % around a value 0.23 % off).
    let [lo, hi] = s.q_s_per_token2.ci95.expect("q has an interval");
    assert!(
        lo * 0.95 <= Q && Q <= hi * 1.05,
        "q: {:?} vs hidden {Q}",
        s.q_s_per_token2
    );
}

fn profile_text(version: u64) -> String {
    let p = serde_json::json!({"profile_version": version, "tool_version": "0.0.1"});
    p.to_string()
}

#[test]
fn other_profile_versions_and_non_profiles_are_refused_with_a_message() {
    let e = Profile::parse(&profile_text(0), "old.json").unwrap_err();
    assert!(matches!(e, ProfileError::Version { found: 0, .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("version-0") && msg.contains("twin calibrate"),
        "{msg}"
    );
    // Version 1 had no `step.budget`: its llama.cpp profiles would be misread as counting
    // prefill tokens only.
    let e = Profile::parse(&profile_text(1), "v1.json").unwrap_err();
    assert!(matches!(e, ProfileError::Version { found: 1, .. }), "{e:?}");
    // Version 2 could hold a NaN written as `null` and had no bands' ground.
    let e = Profile::parse(&profile_text(2), "v2.json").unwrap_err();
    assert!(matches!(e, ProfileError::Version { found: 2, .. }), "{e:?}");
    assert!(e.to_string().contains("recalibrate"), "{e}");
    // Version 3 had no interference term: it would be read as charging none.
    let e = Profile::parse(&profile_text(3), "v3.json").unwrap_err();
    assert!(matches!(e, ProfileError::Version { found: 3, .. }), "{e:?}");
    assert!(e.to_string().contains("recalibrate"), "{e}");
    let e = Profile::parse(&profile_text(99), "new.json").unwrap_err();
    assert!(e.to_string().contains("version-99"), "{e}");
    // A result file's run record is JSON, but not a profile.
    let run = r#"{"type":"run","schema":1,"tool_version":"0.1.0"}"#;
    let e = Profile::parse(run, "run.json").unwrap_err();
    assert!(matches!(e, ProfileError::NotAProfile { .. }), "{e:?}");
    assert!(e.to_string().contains("not a ctxbench twin profile"), "{e}");
    let e = Profile::parse("not json", "x.json").unwrap_err();
    assert!(matches!(e, ProfileError::Malformed { .. }), "{e:?}");
}

#[test]
fn sim_refuses_an_old_profile_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.json");
    std::fs::write(&path, profile_text(0)).unwrap();
    let out = assert_cmd::Command::cargo_bin("ctxbench")
        .unwrap()
        .args(["sim", "--port", "0", "--profile", path.to_str().unwrap()])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--profile") && err.contains("version-0"),
        "{err}"
    );
}

fn exact(v: f64) -> Estimate {
    Estimate::new(v, None, "test")
}

/// A profile as `twin fit` would write it, with round numbers.
fn round_profile() -> Profile {
    use ctxbench::twin::profile::*;
    Profile {
        profile_version: PROFILE_VERSION,
        tool_version: "test".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        server: serde_json::json!({"model": "twin-model", "server_info": {"kind": "vllm"}}),
        step: StepModel {
            t0_s: exact(0.020),
            p0_tps: exact(50_000.0),
            q_s_per_token2: exact(0.0),
            chunk_tokens: exact(1024.0),
            budget: ctxbench::sim::TokenBudget::All,
            d0_s: exact(0.005),
            d1_s_per_token: exact(0.0),
            d2_s_per_request: exact(0.0005),
            step_overhead_s: exact(0.0),
            interference: exact(0.0),
        },
        limits: Limits {
            max_running: exact(5.0),
            pool_tokens: exact(100_000.0),
            page_tokens: exact(16.0),
            context_tokens: exact(16_384.0),
            prefix_cache: true,
        },
        envelope: Envelope {
            max_context_tokens: 8192,
            max_concurrency: 2,
        },
        speculation: None,
        caveats: vec![],
        fit_quality: serde_json::Value::Null,
        uncertainty: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_with_a_profile_serves_as_that_server_and_explicit_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    std::fs::write(&path, round_profile().to_json_pretty()).unwrap();
    let argv = [
        "ctxbench",
        "sim",
        "--port",
        "0",
        "--max-running",
        "3",
        "--profile",
    ];
    let argv: Vec<&str> = argv.into_iter().chain([path.to_str().unwrap()]).collect();
    let Command::Sim(mut args) = Cli::try_parse_from(argv.clone()).unwrap().command else {
        unreachable!()
    };
    ctxbench::twin::serve::load_into(&mut args, &ctxbench::twin::serve::given_in(argv.clone()))
        .expect("profile applies");
    assert_eq!(args.cost.max_running, 3, "the explicit flag wins");
    assert_eq!(args.cost.kv_pool_tokens, Some(100_000));
    assert_eq!(args.cost.max_batch_tokens, 1024);
    assert_eq!(args.cost.context_length, 16_384);
    assert_eq!(args.model_name, "twin-model");
    assert_eq!(args.cost.persona, ctxbench::sim::Persona::Vllm);
    let sim = ctxbench::sim::SimServer::start("127.0.0.1", 0, args.into())
        .await
        .expect("sim starts");
    let info = common::probe_url(&sim.url()).await;
    assert_eq!(info.context_length, Some(16_384));
    // In real time: one 4k request alone takes the profile's prefill; the simulator's
    // engine sleeps to the step's end, the client adds its transport (under 5 ms here).
    let r = common::sweep(
        &sim.url(),
        &["--lengths", "4k", "--reps", "2", "--output-tokens", "8"],
    )
    .await;
    let ttft = r.summary.points[0].ttft_s.unwrap().median;
    let want = 0.020 + 4096.0 / 50_000.0;
    assert!(
        ttft >= want && ttft < want + 0.005,
        "TTFT {ttft} vs profile {want}"
    );
}
