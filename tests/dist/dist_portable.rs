//! The portable binary (scripts/build-portable.sh): no glibc symbol newer than 2.17 (by
//! `objdump -T`), no shared library beyond glibc's own, and it runs.

use crate::common::dist;

use std::process::Command;

/// The glibc floor of manylinux2014.
const FLOOR: (u32, u32) = (2, 17);

/// Libraries every glibc system has; anything else (libssl, libstdc++) would not be portable.
const GLIBC_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
];

fn objdump(args: &[&str], bin: &std::path::Path) -> String {
    let out = Command::new("objdump")
        .args(args)
        .arg(bin)
        .output()
        .unwrap_or_else(|e| {
            panic!("objdump is needed to check the glibc floor ({e}): apt-get install binutils")
        });
    assert!(
        out.status.success(),
        "objdump {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every `GLIBC_x.y[.z]` version the dynamic symbol table asks for, as (major, minor).
fn glibc_versions(dynsyms: &str) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for word in dynsyms.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        let Some(v) = word.strip_prefix("GLIBC_") else {
            continue;
        };
        let mut parts = v.split('.').map(|p| p.parse::<u32>());
        if let (Some(Ok(major)), Some(Ok(minor))) = (parts.next(), parts.next()) {
            out.push((major, minor));
        }
    }
    out
}

#[test]
fn glibc_versions_are_read_from_objdump_lines() {
    let sample = "0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.3.4) __memcpy_chk\n\
                  0000000000000000      DF *UND*\t0000000000000000  GLIBC_2.2.5 write\n\
                  0000000000000000  w   D  *UND*\t0000000000000000  GLIBC_PRIVATE foo\n";
    assert_eq!(glibc_versions(sample), [(2, 3), (2, 2)]);
}

#[test]
fn the_portable_binary_needs_nothing_newer_than_glibc_2_17() {
    let bin = dist::artefact("CTXBENCH_PORTABLE");
    let versions = glibc_versions(&objdump(&["-T"], &bin));
    assert!(
        versions.len() > 10,
        "a dynamically linked binary names its glibc symbol versions: {versions:?}"
    );
    let newest = versions.iter().max().unwrap();
    assert!(
        *newest <= FLOOR,
        "{} needs GLIBC_{}.{}, newer than {}.{}",
        bin.display(),
        newest.0,
        newest.1,
        FLOOR.0,
        FLOOR.1
    );

    let headers = objdump(&["-p"], &bin);
    let needed: Vec<&str> = headers
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
        .map(str::trim)
        .collect();
    assert!(needed.contains(&"libc.so.6"), "{needed:?}");
    for lib in &needed {
        assert!(GLIBC_LIBS.contains(lib), "{lib} is not on every Linux");
    }
}

#[test]
fn the_portable_binary_runs() {
    let bin = dist::artefact("CTXBENCH_PORTABLE");
    let out = Command::new(&bin).arg("--version").output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with(&format!("ctxbench {} (commit ", env!("CARGO_PKG_VERSION")))
            && version.trim_end().ends_with(", x86_64-unknown-linux-gnu)"),
        "{version}"
    );
    // Real work: the schema it prints is this source's, and a simulator answers.
    let out = Command::new(&bin).args(["schema", "run"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        ctxbench::schema::render(Some(ctxbench::schema::RecordKind::Run)).unwrap()
    );
    let sim = dist::SimProcess::start(&bin, &[]);
    let out = Command::new(&bin)
        .args(["probe", "--url", &sim.url, "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("probe's JSON");
    assert!(doc.to_string().contains("ctxbench-sim"), "{doc}");
}
