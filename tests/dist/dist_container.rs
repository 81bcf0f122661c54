//! The Containerfile checked without a container engine (none here): every `COPY --from`
//! names a stage of the file, the path it copies is where that stage's release build puts
//! the `ctxbench` binary, the entrypoint is where it lands, and deploy/k8s's Job runs that
//! same binary (exec form, no shell: the same Job runs the `FROM scratch` image of
//! scripts/build-image.sh, which tests/dist/dist_image.rs builds and runs).

use std::collections::BTreeMap;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{rel}")).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// One instruction: keyword (upper case) and its arguments, continuation lines joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let t = line.trim();
        if pending.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(t);
        let (kw, args) = pending
            .split_once(char::is_whitespace)
            .unwrap_or((&pending, ""));
        out.push((kw.to_ascii_uppercase(), args.trim().to_string()));
        pending.clear();
    }
    assert!(pending.is_empty(), "a continuation line ends the file");
    out
}

#[derive(Debug, Default)]
struct Stage {
    name: String,
    workdir: String,
    runs: Vec<String>,
    /// (`--from` stage, source, destination).
    copies: Vec<(Option<String>, String, String)>,
    entrypoint: Option<Vec<String>>,
}

fn stages(text: &str) -> Vec<Stage> {
    let mut out: Vec<Stage> = Vec::new();
    for (kw, args) in instructions(text) {
        if kw == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => name.to_string(),
                _ => String::new(),
            };
            out.push(Stage {
                name,
                workdir: "/".into(),
                ..Stage::default()
            });
            continue;
        }
        let stage = out.last_mut().expect("FROM comes first");
        match kw.as_str() {
            "WORKDIR" => stage.workdir = args,
            "RUN" => stage.runs.push(args),
            "COPY" => {
                let mut from = None;
                let mut paths = Vec::new();
                for w in args.split_whitespace() {
                    match w.strip_prefix("--from=") {
                        Some(f) => from = Some(f.to_string()),
                        None if w.starts_with("--") => {}
                        None => paths.push(w.to_string()),
                    }
                }
                assert_eq!(paths.len(), 2, "COPY {args}: one source, one destination");
                stage
                    .copies
                    .push((from, paths[0].clone(), paths[1].clone()));
            }
            "ENTRYPOINT" => {
                let exec: Vec<String> = serde_json::from_str(&args)
                    .unwrap_or_else(|e| panic!("ENTRYPOINT {args}: not the exec form ({e})"));
                stage.entrypoint = Some(exec);
            }
            _ => {}
        }
    }
    out
}

/// The package's binary name: the package name, with no `[[bin]]` renaming it.
fn binary_name() -> String {
    let cargo = read("Cargo.toml");
    assert!(
        !cargo.contains("[[bin]]"),
        "a [[bin]] section: check its name"
    );
    let name = cargo
        .lines()
        .find_map(|l| l.trim().strip_prefix("name = "))
        .expect("the package's name")
        .trim_matches('"')
        .to_string();
    assert_eq!(name, "ctxbench");
    name
}

#[test]
fn the_image_copies_the_release_binary_of_its_build_stage_and_runs_it() {
    let stages = stages(&read("Containerfile"));
    assert!(stages.len() >= 2, "a build stage and a runtime stage");
    let names: BTreeMap<&str, usize> = stages
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.name.is_empty())
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    let runtime = stages.last().unwrap();
    let bin = binary_name();

    // Every COPY --from names an earlier stage of this file.
    for (i, s) in stages.iter().enumerate() {
        for (from, src, _) in &s.copies {
            if let Some(f) = from {
                let j = *names
                    .get(f.as_str())
                    .unwrap_or_else(|| panic!("COPY --from={f} {src}: no stage named {f}"));
                assert!(j < i, "stage {f} comes after its use");
            }
        }
    }

    // The runtime stage copies the binary from the build stage, from where cargo puts it.
    let (from, src, dest) = runtime
        .copies
        .iter()
        .find(|(f, _, _)| f.is_some())
        .expect("the runtime stage copies from another stage");
    let build = &stages[names[from.as_deref().unwrap()]];
    assert!(
        build.copies.iter().any(|(f, s, d)| f.is_none()
            && s == "."
            && (d == "." || d == "./" || *d == build.workdir)),
        "the build stage copies the source tree into its WORKDIR: {build:?}"
    );
    let cargo = build
        .runs
        .iter()
        .find(|r| r.contains("cargo build"))
        .expect("the build stage runs cargo build");
    assert!(cargo.contains("--release"), "{cargo}");
    assert!(cargo.contains("--locked"), "{cargo}");
    assert!(cargo.contains(&format!("--bin {bin}")), "{cargo}");
    assert_eq!(
        *src,
        format!(
            "{}/target/release/{bin}",
            build.workdir.trim_end_matches('/')
        )
    );

    // The entrypoint is that binary where it lands, on the base's default PATH.
    let entry = runtime.entrypoint.as_ref().expect("an ENTRYPOINT");
    assert_eq!(
        entry.len(),
        1,
        "the entrypoint is the binary alone: {entry:?}"
    );
    assert_eq!(entry[0], *dest);
    let (dir, file) = dest.rsplit_once('/').unwrap();
    assert_eq!(file, bin);
    assert!(
        ["/usr/local/bin", "/usr/bin", "/bin"].contains(&dir),
        "{dir} is on the default PATH"
    );
    // CA certificates for https targets.
    assert!(
        runtime.runs.iter().any(|r| r.contains("ca-certificates")),
        "{runtime:?}"
    );
    // The build context leaves out target/ and .git (gigabytes, and not sources).
    let ignore = read(".dockerignore");
    let ignored: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        ignored.contains(&"target") && ignored.contains(&".git"),
        "{ignored:?}"
    );
}

#[test]
fn the_job_runs_the_images_entrypoint() {
    let stages = stages(&read("Containerfile"));
    let entry = stages.last().unwrap().entrypoint.clone().unwrap();

    let job = read("deploy/k8s/job.yaml");
    let image = job
        .lines()
        .find_map(|l| l.trim().strip_prefix("image: "))
        .expect("the Job names an image");
    assert_eq!(image, "ctxbench:latest");
    let command: Vec<String> = job
        .lines()
        .find_map(|l| l.trim().strip_prefix("command: "))
        .map(|c| serde_json::from_str(c).expect("command is a flow list"))
        .expect("the Job sets a command");
    assert_eq!(command, entry, "the exec form runs the entrypoint's binary");

    // The image the Job names is the one the documented build tags, and kustomize keeps it.
    let readme = read("deploy/k8s/README.md");
    assert!(
        readme.contains("build -f Containerfile -t ctxbench:latest"),
        "deploy/k8s/README.md names the build command"
    );
    assert!(readme.contains("kind load docker-image ctxbench:latest"));
    let kustomization = read("deploy/k8s/kustomization.yaml");
    assert!(
        kustomization.contains("newName: ctxbench") && kustomization.contains("newTag: latest")
    );
}

#[test]
fn the_parser_reads_stages_copies_and_continuations() {
    let s = stages(
        "# c\nFROM a:1 AS one\nWORKDIR /w\nRUN x \\\n  && y\nCOPY . .\n\
         FROM b\nCOPY --from=one /w/out /usr/bin/o\nENTRYPOINT [\"/usr/bin/o\"]\n",
    );
    assert_eq!(s.len(), 2);
    assert_eq!((s[0].name.as_str(), s[0].workdir.as_str()), ("one", "/w"));
    assert_eq!(s[0].runs, ["x  && y"]);
    assert_eq!(
        s[1].copies,
        [(Some("one".into()), "/w/out".into(), "/usr/bin/o".into())]
    );
    assert_eq!(
        s[1].entrypoint.as_deref(),
        Some(&["/usr/bin/o".to_string()][..])
    );
}
