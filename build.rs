//! Build facts for `ctxbench --version`: the git commit the binary was built from and the
//! target it was built for. Outside a git checkout (a build from the sdist, or without git)
//! the commit is `unknown`, unless `CTXBENCH_GIT_COMMIT` names it.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Watch a git file, if it exists (a missing one would make every build rerun this script).
fn watch(git_path: &str) {
    if let Some(p) = git(&["rev-parse", "--git-path", git_path]).map(PathBuf::from)
        && p.exists()
    {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=CTXBENCH_GIT_COMMIT");
    let commit = match std::env::var("CTXBENCH_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            // Rebuild when HEAD moves: HEAD itself, the branch it points at, packed refs.
            watch("HEAD");
            watch("packed-refs");
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch(&branch);
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=CTXBENCH_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=CTXBENCH_TARGET={target}");
}
