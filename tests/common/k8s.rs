//! deploy/k8s rendered offline (kubectl's kustomize and `annotate --local`, no cluster) and
//! the Job container's argv as Kubernetes runs it: `command` + `args`, with `$(VAR)`
//! replaced by the container's env.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write;
use std::process::{Command as Proc, Stdio};

pub fn kubectl(args: &[&str], input: Option<&[u8]>) -> Vec<u8> {
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
pub fn rendered_job() -> Value {
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

/// The Job's one container.
pub fn container(job: &Value) -> &Value {
    let containers = job["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("the pod has containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

pub fn env_value<'a>(container: &'a Value, name: &str) -> &'a str {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("env {name} is set"))
}

/// `command` + `args` in exec form, each `$(NAME)` replaced by `env(NAME)` (Kubernetes
/// expands only the variables the container defines; the Job must define every one it uses).
pub fn argv(container: &Value, env: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let words = |k: &str| -> Vec<String> {
        container[k]
            .as_array()
            .unwrap_or_else(|| panic!("the container's {k} is a list (exec form)"))
            .iter()
            .map(|w| w.as_str().expect("a string").to_string())
            .collect()
    };
    let mut argv = words("command");
    argv.extend(words("args"));
    argv.into_iter()
        .map(|w| {
            let mut out = String::new();
            let mut rest = w.as_str();
            while let Some(i) = rest.find("$(") {
                out.push_str(&rest[..i]);
                let end = rest[i..].find(')').expect("$(NAME) is closed") + i;
                let name = &rest[i + 2..end];
                out.push_str(&env(name).unwrap_or_else(|| panic!("$({name}) is not defined")));
                rest = &rest[end + 1..];
            }
            out.push_str(rest);
            out
        })
        .collect()
}
