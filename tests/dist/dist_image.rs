//! The container image of scripts/build-image.sh (Containerfile.scratch: FROM scratch, the
//! static binary, CA certificates) run with buildah, as CI runs it: `ctxbench --version`
//! inside it names this build's commit, and deploy/k8s's own Job command (a load shard, exec
//! form) runs inside it against a simulator on the host's loopback, its stdout the result
//! file and nothing else. The image is named by CTXBENCH_IMAGE, which scripts/test.sh
//! exports after building it.

use crate::common;
use crate::common::dist;
use crate::common::k8s;

use common::bin::{run_bounded, text};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

/// Process start, the clock read against the server and the warm-up of a release build take
/// well under a second; the shard is told to start this far ahead so none of it is late.
const START_AHEAD: Duration = Duration::from_secs(4);

/// The Job's `--duration 60s` per cell, cut for the test (6 cells: 12 s of schedule).
const CELL_DURATION: &str = "2s";

/// Bound on one `buildah run`: the 12 s schedule, its drain and the start, with room for a
/// loaded machine; a hang fails the test instead of CI.
const RUN_LIMIT: Duration = Duration::from_secs(120);

fn image() -> String {
    std::env::var("CTXBENCH_IMAGE").unwrap_or_else(|_| {
        panic!(
            "CTXBENCH_IMAGE is not set: scripts/build-image.sh builds the image, and \
             `bash scripts/test.sh` runs it before the tests (or by hand: \
             eval \"$(bash scripts/build-image.sh)\"; export CTXBENCH_IMAGE)"
        )
    })
}

fn buildah() -> Command {
    let mut c = Command::new("buildah");
    c.args(["--storage-driver", "vfs"]);
    c
}

/// A buildah working container of the image, removed on drop.
struct Container(String);

impl Container {
    fn from(image: &str) -> Container {
        let name = format!("ctxbench-test-{}", std::process::id());
        let out = buildah()
            .args(["from", "--name", &name, image])
            .output()
            .unwrap_or_else(|e| {
                panic!("buildah is needed (scripts/build-image.sh installs it): {e}")
            });
        assert!(
            out.status.success(),
            "buildah from {image}: {}",
            text(&out.stderr)
        );
        Container(name)
    }

    /// `buildah run` with chroot isolation, which keeps the host's network namespace (so
    /// 127.0.0.1 is the host's loopback), as the image's user.
    fn run(
        &self,
        env: &[(&str, &str)],
        volume: Option<&Path>,
        argv: &[String],
    ) -> std::process::Output {
        let mut c = buildah();
        c.args(["run", "--isolation", "chroot", "--network", "host"]);
        for (k, v) in env {
            c.args(["--env", &format!("{k}={v}")]);
        }
        if let Some(dir) = volume {
            c.args(["--volume", &format!("{}:/results", dir.display())]);
        }
        c.arg(&self.0).arg("--").args(argv);
        run_bounded(&mut c, RUN_LIMIT)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = buildah().args(["rm", &self.0]).output();
    }
}

#[test]
fn the_image_runs_its_commits_binary_and_the_jobs_load_shard() {
    let image = image();
    let ctr = Container::from(&image);

    // `--version`: this build's version line (the commit and the target), from the image.
    let out = ctr.run(
        &[],
        None,
        &["/usr/local/bin/ctxbench".into(), "--version".into()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let version = text(&out.stdout);
    assert_eq!(
        version.trim_end(),
        format!("ctxbench {}", ctxbench::cli::VERSION_LINE)
    );
    assert!(!version.contains("commit unknown"), "{version}");

    // The CA bundle is where the TLS client looks: with it an https client is built and the
    // connection to a closed loopback port is what fails; with it hidden, the client is not.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let probe: Vec<String> = ["/usr/local/bin/ctxbench", "probe", "--url"]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("https://127.0.0.1:{closed}")])
        .collect();
    const NO_ROOTS: &str = "No CA certificates were loaded";
    let out = ctr.run(&[], None, &probe);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && err.contains("nothing answers"),
        "{err}"
    );
    assert!(!err.contains(NO_ROOTS), "{err}");
    let out = ctr.run(&[("SSL_CERT_FILE", "/nonexistent")], None, &probe);
    assert!(
        text(&out.stderr).contains(NO_ROOTS),
        "{}",
        text(&out.stderr)
    );

    // The Job's own command, as Kubernetes would run it for pod 1 of N.
    let job = k8s::rendered_job();
    let c = k8s::container(&job);
    let n = k8s::env_value(c, "JOB_COMPLETIONS").to_string();
    let start_at = rfc3339_after(SystemTime::now() + START_AHEAD);
    let mut argv = k8s::argv(c, |k| match k {
        "START_AT" => Some(start_at.clone()),
        _ => Some(k8s::env_value(c, k).to_string()),
    });
    let sim = dist::SimProcess::start(
        Path::new(env!("CARGO_BIN_EXE_ctxbench")),
        common::FIXED_COSTS,
    );
    // Two values change, and nothing else: the Service's URL becomes the simulator's on the
    // host's loopback, and each cell runs seconds instead of a minute.
    set_flag(&mut argv, "--url", &sim.url);
    set_flag(&mut argv, "--duration", CELL_DURATION);

    let dir = tempfile::tempdir().unwrap();
    // An emptyDir is writable by the pod's user (65532 here); so is this.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let env = [
        ("JOB_COMPLETION_INDEX", "1"),
        ("JOB_COMPLETIONS", n.as_str()),
    ];
    let out = ctr.run(&env, Some(dir.path()), &argv);
    let log = std::fs::read_to_string(dir.path().join("log.txt")).unwrap_or_default();
    assert!(
        out.status.success(),
        "{argv:?}: exit {:?}\nstderr: {}\nlog: {log}",
        out.status.code(),
        text(&out.stderr)
    );

    // stdout is the result file, byte for byte, and nothing else; the progress went to the
    // log file, and stderr holds nothing of ctxbench's.
    let file = std::fs::read(dir.path().join("shard.jsonl")).unwrap();
    assert_eq!(text(&out.stdout), text(&file));
    assert!(log.contains(&format!("shard 1/{n} of plan")), "{log}");
    assert!(out.stderr.is_empty(), "stderr: {}", text(&out.stderr));

    // What `kubectl logs` collects is a result file `report` reads: this shard of the plan,
    // every cell of it, its requests answered.
    let path = dir.path().join("collected.jsonl");
    std::fs::write(&path, &out.stdout).unwrap();
    let f = ctxbench::resultfile::read(&path).unwrap();
    let plan = f.load.plan.as_ref().expect("a load plan");
    let tag = plan.shard.as_ref().expect("a shard tag");
    assert_eq!((tag.shard, tag.shards.to_string()), (1, n.clone()));
    assert_eq!(f.load.cells.len(), 2 * 3, "8k,32k × rates 1,2,4");
    let sent: u64 = f.load.cells.iter().map(|c| c.sent).sum();
    let ok = f.load.requests.iter().filter(|r| r.ok).count();
    assert_eq!(sent as usize, f.load.requests.len());
    assert!(
        ok > 0 && ok == f.load.requests.len(),
        "{} requests, {ok} ok",
        f.load.requests.len()
    );
    eprintln!(
        "{image}: {}; the Job's shard 1/{n} in it: {} cells, {ok} requests, {} bytes on stdout",
        version.trim_end(),
        f.load.cells.len(),
        out.stdout.len()
    );
    drop(sim);
}

/// Replace the value after `flag`, which the command must have.
fn set_flag(argv: &mut [String], flag: &str, value: &str) {
    let i = argv
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("the Job's command has no {flag}: {argv:?}"));
    argv[i + 1] = value.to_string();
}

/// RFC 3339 in UTC, whole seconds rounded up (what `--start-at` reads).
fn rfc3339_after(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() + 1;
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .to_string()
}
