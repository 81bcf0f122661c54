//! A server restarted mid-sweep is detected from what it exposes that changes on restart
//! (the simulator's instance id in `/server_info`): overlapping samples are flagged
//! `server_restarted`, never averaged, and the summary says so.

use crate::common;
use common::{flags, sim};
use ctxbench::record::flag;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_sweep_is_flagged() {
    let _timing = common::timing_lock().await;
    let first = sim(&[]).await;
    let port = first.addr.port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let args = flags("1k,2k,4k", 3, 32).args(&first.url());
    let mut args = args;
    args.out = Some(out.clone());
    let task = tokio::spawn(ctxbench::sweep::execute(args));

    // Restart once two samples are on disk.
    let start = Instant::now();
    while std::fs::read_to_string(&out)
        .unwrap_or_default()
        .matches("\"type\":\"sample\"")
        .count()
        < 2
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no samples appeared"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.shutdown().await;
    let mut second = None;
    for _ in 0..200 {
        if let Ok(s) = ctxbench::sim::SimServer::start("127.0.0.1", port, sim_config()).await {
            second = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _second = second.expect("the simulator restarts on the same port");

    let r = task.await.unwrap().expect("the sweep goes on");
    let flagged: Vec<_> = r
        .samples
        .iter()
        .filter(|s| s.flags.contains(&flag::SERVER_RESTARTED))
        .collect();
    assert_eq!(
        flagged.len(),
        1,
        "exactly the sample overlapping the restart: {:?}",
        r.samples
    );
    assert!(!flagged[0].valid);
    assert!(
        r.samples[..2].iter().all(|s| s.valid),
        "samples before the restart stay valid"
    );
    assert!(
        r.summary.notes.iter().any(|n| n.contains("restarted")),
        "{:?}",
        r.summary.notes
    );
    // Every (length, rep) ends as a sample or an error record; later samples are valid again.
    assert_eq!(r.samples.len() + r.errors.len(), 9);
    assert!(r.samples.last().unwrap().valid);
}

fn sim_config() -> ctxbench::sim::SimConfig {
    use clap::Parser;
    let ctxbench::cli::Command::Sim(a) = ctxbench::cli::Cli::try_parse_from(["ctxbench", "sim"])
        .unwrap()
        .command
    else {
        unreachable!()
    };
    ctxbench::sim::SimConfig {
        cost: a.cost,
        seed: a.seed,
        model_name: a.model_name,
    }
}
