//! A corpus on disk: one file, or a folder read recursively in sorted order, so the same
//! folder always yields the same prompts.

use super::{
    Content, ContentError, ContentKind, Doc, cap_note, display, human_bytes, plural, utf8_prefix,
};
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

const BINARY_SNIFF_BYTES: u64 = 8192;

/// What a walk has gathered so far.
struct Walk {
    docs: Vec<Doc>,
    skipped: Vec<String>,
    /// Bytes of text still allowed under the cap.
    remaining: usize,
    /// The cap was reached: text was left unread.
    capped: bool,
}

/// Read `path` (a file or a folder) as a corpus of at most `cap` bytes of text.
pub(super) fn load(path: &Path, cap: usize) -> Result<Content, ContentError> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ContentError::CorpusNotFound {
                path: path.to_owned(),
            });
        }
        Err(source) => {
            return Err(ContentError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut walk = Walk {
        docs: Vec::new(),
        skipped: Vec::new(),
        remaining: cap,
        capped: false,
    };
    if meta.is_dir() {
        walk_dir(path, "", &mut walk)?;
    } else {
        // Anything else the user names is read as a file: a pipe such as <(…) included.
        let name = path
            .file_name()
            .map_or_else(|| display(path), |n| n.to_string_lossy().into_owned());
        read_file(path, name, &mut walk)?;
    }
    if walk.docs.is_empty() {
        return Err(ContentError::EmptyCorpus {
            path: path.to_owned(),
            skipped: walk.skipped.len(),
        });
    }
    let mut label = format!(
        "corpus {} ({}, {}",
        display(path),
        plural(walk.docs.len(), "file", "files"),
        human_bytes(cap - walk.remaining)
    );
    if !walk.skipped.is_empty() {
        label += &format!(
            "; {} skipped",
            plural(walk.skipped.len(), "binary file", "binary files")
        );
    }
    if walk.capped {
        label += &format!("; {}", cap_note(cap));
    }
    label.push(')');
    Ok(Content {
        kind: ContentKind::Corpus,
        label,
        docs: walk.docs,
        skipped: walk.skipped,
    })
}

/// Depth first, entries in byte order of their names; hidden entries (`.git`, `.env`) are
/// left out, and so are symlinked folders (a link back up would loop) and anything that is
/// not a regular file (reading a FIFO would block).
fn walk_dir(dir: &Path, prefix: &str, walk: &mut Walk) -> Result<(), ContentError> {
    let io_err = |source| ContentError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut entries: Vec<(std::ffi::OsString, PathBuf)> = fs::read_dir(dir)
        .map_err(io_err)?
        .map(|e| e.map(|e| (e.file_name(), e.path())))
        .collect::<io::Result<_>>()
        .map_err(io_err)?;
    entries.sort();
    for (name, path) in entries {
        if walk.capped {
            return Ok(());
        }
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let rel = format!("{prefix}{name}");
        let meta = fs::symlink_metadata(&path).map_err(|source| ContentError::Io {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            walk_dir(&path, &format!("{rel}/"), walk)?;
        } else if meta.is_file()
            || (meta.file_type().is_symlink() && fs::metadata(&path).is_ok_and(|m| m.is_file()))
        {
            read_file(&path, rel, walk)?;
        }
    }
    Ok(())
}

fn read_file(path: &Path, name: String, walk: &mut Walk) -> Result<(), ContentError> {
    if walk.remaining == 0 {
        walk.capped = true;
        return Ok(());
    }
    let io_err = |source| ContentError::Io {
        path: path.to_owned(),
        source,
    };
    let mut bytes = Vec::new();
    // One byte past the cap tells a file that fits exactly from one that does not.
    let mut file = File::open(path)
        .map_err(io_err)?
        .take(walk.remaining as u64 + 1);
    // Binaries nearly always show a NUL early: a build folder's worth of them is then
    // skipped without reading each one whole.
    (&mut file)
        .take(BINARY_SNIFF_BYTES)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if memchr::memchr(0, &bytes).is_none() {
        file.read_to_end(&mut bytes).map_err(io_err)?;
    }
    let cut = bytes.len() > walk.remaining;
    bytes.truncate(walk.remaining);
    if memchr::memchr(0, &bytes).is_some() {
        walk.skipped.push(name);
        return Ok(());
    }
    let Some(mut text) = utf8_prefix(bytes, cut) else {
        walk.skipped.push(name);
        return Ok(());
    };
    if let Some(rest) = text.strip_prefix('\u{feff}') {
        text = rest.to_owned();
    }
    if cut {
        walk.capped = true;
    }
    if text.trim().is_empty() {
        return Ok(());
    }
    walk.remaining -= text.len();
    walk.docs.push(Doc { name, text });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::content::{ContentSpec, load as load_spec};

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    fn names(c: &Content) -> Vec<&str> {
        c.docs.iter().map(|d| d.name.as_str()).collect()
    }

    #[test]
    fn nested_folders_read_in_sorted_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Written out of order on purpose: the walk must sort, not follow creation order.
        write(root, "c/z.md", b"zed");
        write(root, "b.txt", b"bee");
        write(root, "a/y/x.txt", b"ex");
        write(root, "a/b.txt", b"a-bee");
        write(root, "c/a.md", b"c-a");
        let c = load_spec(&ContentSpec::Corpus(root.to_owned())).unwrap();
        assert_eq!(c.kind, ContentKind::Corpus);
        assert_eq!(
            names(&c),
            ["a/b.txt", "a/y/x.txt", "b.txt", "c/a.md", "c/z.md"]
        );
        assert_eq!(c.docs[1].text, "ex");
        assert!(c.skipped.is_empty());
        assert!(c.label.contains("(5 files, 16 B)"), "{}", c.label);
    }

    #[test]
    fn binary_files_are_skipped_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "notes.txt", "café au lait\n".as_bytes());
        write(root, "img/logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
        write(root, "latin1.txt", b"caf\xe9\n");
        write(root, "empty.txt", b"");
        write(root, "blank.txt", b"  \n\n");
        // Past the first 8 KB sniffed for NULs: found by the full check all the same.
        let mut late = vec![b'a'; 10_000];
        late.push(0);
        write(root, "late-nul.txt", &late);
        let c = load(root, 1 << 20).unwrap();
        assert_eq!(names(&c), ["notes.txt"]);
        assert_eq!(c.skipped, ["img/logo.png", "late-nul.txt", "latin1.txt"]);
        assert!(
            c.label.ends_with("; 3 binary files skipped)"),
            "{}",
            c.label
        );
    }

    #[test]
    fn hidden_entries_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".git/HEAD", b"ref: refs/heads/main");
        write(root, ".env", b"SECRET=1");
        write(root, "src/.cache/x.txt", b"cached");
        write(root, "src/main.rs", b"fn main() {}");
        let c = load(root, 1 << 20).unwrap();
        assert_eq!(names(&c), ["src/main.rs"]);
    }

    #[test]
    fn a_single_file_is_a_corpus_and_a_bom_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("one.txt");
        fs::write(&p, "\u{feff}hello world").unwrap();
        let c = load(&p, 1 << 20).unwrap();
        assert_eq!(names(&c), ["one.txt"]);
        assert_eq!(c.docs[0].text, "hello world");
        assert!(c.label.contains("(1 file, 11 B)"), "{}", c.label);
    }

    #[test]
    fn missing_path_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope");
        let e = load(&p, 1 << 20).unwrap_err();
        assert!(matches!(e, ContentError::CorpusNotFound { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(msg.contains("builtin:prose"), "{msg}");
    }

    #[test]
    fn a_corpus_without_text_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(dir.path(), 1 << 20).unwrap_err();
        assert!(matches!(e, ContentError::EmptyCorpus { skipped: 0, .. }));
        write(dir.path(), "blob.bin", b"\0\x01\x02");
        write(dir.path(), "empty.txt", b"");
        let e = load(dir.path(), 1 << 20).unwrap_err();
        assert!(
            matches!(e, ContentError::EmptyCorpus { skipped: 1, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("no usable text"), "{e}");
    }

    #[test]
    fn reading_stops_at_the_cap_on_a_character_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "a.txt", b"0123456789");
        // The cap (14) falls inside the two-byte 'é' at bytes 3..5 of b.txt: it must be cut
        // before that character, not in its middle.
        write(root, "b.txt", "cafés".as_bytes());
        write(root, "c.txt", b"never read");
        let c = load(root, 14).unwrap();
        assert_eq!(names(&c), ["a.txt", "b.txt"]);
        assert_eq!(c.docs[1].text, "caf");
        assert!(c.label.contains("stopped at the 14 B cap"), "{}", c.label);

        // A corpus that fits exactly is not reported as cut.
        let c = load(&root.join("a.txt"), 10).unwrap();
        assert!(!c.label.contains("cap"), "{}", c.label);
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_folders_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "sub/a.txt", b"text");
        std::os::unix::fs::symlink(root, root.join("sub/loop")).unwrap();
        std::os::unix::fs::symlink(root.join("sub/a.txt"), root.join("link.txt")).unwrap();
        let c = load(root, 1 << 20).unwrap();
        assert_eq!(names(&c), ["link.txt", "sub/a.txt"]);
    }
}
