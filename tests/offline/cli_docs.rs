//! `ctxbench --version` (version, commit, target), `ctxbench completions bash|zsh|fish`
//! (bash's script sourced and asked to complete) and the man pages (`ctxbench man`).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ctxbench");

fn stdout_of(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ctxbench {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn version_names_the_commit_and_the_target() {
    let line = stdout_of(&["--version"]);
    // The commit this checkout is at (the build script read it), or `unknown` without git.
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let want = format!(
        "ctxbench {} (commit {head}, x86_64-unknown-linux-gnu)\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(line, want);
    assert_eq!(stdout_of(&["-V"]), want);
}

#[test]
fn bash_completion_completes_subcommands_and_flags() {
    let script = stdout_of(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ctxbench.bash");
    std::fs::write(&file, &script).unwrap();
    // Source it and call the function bash would, as for `ctxbench sw<TAB>` and
    // `ctxbench sweep --out<TAB>`.
    let probe = format!(
        r#"source {file}
fn=$(complete -p ctxbench | sed -E 's/.*-F ([^ ]+).*/\1/')
COMP_WORDS=(ctxbench sw); COMP_CWORD=1; COMP_LINE="ctxbench sw"; COMP_POINT=${{#COMP_LINE}}
"$fn" ctxbench sw ctxbench; echo "words: ${{COMPREPLY[*]}}"
COMP_WORDS=(ctxbench sweep --resu); COMP_CWORD=2; COMP_LINE="ctxbench sweep --resu"; COMP_POINT=${{#COMP_LINE}}
"$fn" ctxbench --resu sweep; echo "flags: ${{COMPREPLY[*]}}""#,
        file = file.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("words: sweep"), "{text}");
    assert!(text.contains("flags: --resume"), "{text}");
}

#[test]
fn zsh_and_fish_completions_name_every_subcommand() {
    let zsh = stdout_of(&["completions", "zsh"]);
    let fish = stdout_of(&["completions", "fish"]);
    assert!(zsh.starts_with("#compdef ctxbench"), "{}", &zsh[..80]);
    assert!(fish.contains("complete -c ctxbench"));
    for sub in [
        "sweep",
        "sim",
        "probe",
        "load",
        "plan",
        "report",
        "compare",
        "schema",
        "completions",
    ] {
        assert!(zsh.contains(&format!("'{sub}:")), "zsh lacks {sub}");
        assert!(fish.contains(&format!("-a \"{sub}\"")), "fish lacks {sub}");
    }
    let out = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown shell is refused");
}

#[test]
fn man_pages_cover_the_commands_and_their_flags() {
    let page = stdout_of(&["man"]);
    // The title line names the plain version (not the commit: a page does not change
    // with each build).
    let title = format!(".TH ctxbench 1  \"ctxbench {}\"", env!("CARGO_PKG_VERSION"));
    assert!(
        page.lines().any(|l| l.trim_end() == title),
        "{}",
        &page[..200]
    );
    assert!(page.contains(".SH SUBCOMMANDS") && page.contains("sweep"));
    // One page per visible subcommand, with its flags.
    let dir = tempfile::tempdir().unwrap();
    stdout_of(&["man", "--dir", dir.path().to_str().unwrap()]);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for want in [
        "ctxbench.1",
        "ctxbench-sweep.1",
        "ctxbench-load.1",
        "ctxbench-schema.1",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    assert!(
        !names.iter().any(|n| n == "ctxbench-man.1"),
        "`man` is hidden"
    );
    let sweep = std::fs::read_to_string(dir.path().join("ctxbench-sweep.1")).unwrap();
    assert!(sweep.contains("\\-\\-lengths") && sweep.contains("\\-\\-resume"));
}
