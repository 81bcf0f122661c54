//! The text prompts are cut from: the built-in filler, the user's own documents (a file or
//! a folder), a dataset of prompts (JSONL, ShareGPT, LongBench) or a corpus shipped with
//! the binary. Speculative decoding accepts more or fewer drafted tokens depending on the
//! text, so a benchmark on filler words alone says little about a real workload.

mod builtin;
mod corpus;
mod dataset;

pub use dataset::Undetected;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Placed between two documents when they are joined into one prompt: visible to a reader
/// of the prompt, and unlikely to run on into the text around it.
pub const DOC_SEPARATOR: &str = "\n\n-----\n\n";

/// Text read from a corpus or a dataset stops at this many bytes: enough for prompts of
/// millions of tokens, and a bound on memory when a path points at something huge.
pub const MAX_TEXT_BYTES: usize = 64 << 20;

/// What the user asked prompts to be made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentSpec {
    Filler,
    Corpus(PathBuf),
    Builtin(BuiltinCorpus),
    Dataset {
        path: PathBuf,
        /// `None`: detect it from the first record.
        format: Option<DatasetFormat>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetFormat {
    /// One JSON object a line with a `prompt` (or `text`) string.
    Jsonl,
    /// `conversations: [{from, value}]`; the first human turn is the prompt.
    Sharegpt,
    /// `context` and `input`, joined with a blank line, context first.
    Longbench,
}

impl DatasetFormat {
    pub fn name(self) -> &'static str {
        match self {
            DatasetFormat::Jsonl => "jsonl",
            DatasetFormat::Sharegpt => "sharegpt",
            DatasetFormat::Longbench => "longbench",
        }
    }
}

impl fmt::Display for DatasetFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The corpora shipped inside the binary (see corpus/README.md for their source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinCorpus {
    /// English prose: chapters of the Python language reference.
    Prose,
    /// Source code: modules of the Python standard library.
    Code,
    /// The two above, one document of each in turn.
    Mixed,
}

impl BuiltinCorpus {
    pub const ALL: [BuiltinCorpus; 3] = [
        BuiltinCorpus::Prose,
        BuiltinCorpus::Code,
        BuiltinCorpus::Mixed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BuiltinCorpus::Prose => "prose",
            BuiltinCorpus::Code => "code",
            BuiltinCorpus::Mixed => "mixed",
        }
    }
}

impl fmt::Display for BuiltinCorpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{BUILTIN_PREFIX}{}", self.name())
    }
}

impl FromStr for BuiltinCorpus {
    type Err = ContentError;

    /// The name after `builtin:`.
    fn from_str(s: &str) -> Result<Self, ContentError> {
        BuiltinCorpus::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| ContentError::UnknownBuiltin { name: s.to_owned() })
    }
}

const BUILTIN_PREFIX: &str = "builtin:";

impl ContentSpec {
    /// The value of `--corpus`: `builtin:prose|code|mixed`, else a path.
    /// A file really named `builtin:…` can be given as `./builtin:…`.
    pub fn from_corpus_arg(s: &str) -> Result<Self, ContentError> {
        if s.trim().is_empty() {
            return Err(ContentError::EmptyCorpusArg);
        }
        match s.strip_prefix(BUILTIN_PREFIX) {
            Some(name) => name.parse().map(ContentSpec::Builtin),
            None => Ok(ContentSpec::Corpus(PathBuf::from(s))),
        }
    }
}

/// One document: a file of a corpus, or one entry of a dataset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doc {
    /// The path relative to the corpus root (`/`-separated), or `line 12` / `entry 12` of
    /// a dataset.
    pub name: String,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    Filler,
    Corpus,
    Dataset,
}

/// Loaded content, ready to be cut into prompts.
#[derive(Clone, Debug)]
pub struct Content {
    pub kind: ContentKind,
    /// One line for report headers, e.g. `corpus ./docs (14 files, 1.2 MB; 2 binary files
    /// skipped)`.
    pub label: String,
    /// Never empty, and no doc is empty.
    pub docs: Vec<Doc>,
    /// Names of files skipped as binary or not UTF-8.
    pub skipped: Vec<String>,
}

impl Content {
    /// Bytes of text in all documents.
    pub fn total_bytes(&self) -> usize {
        self.docs.iter().map(|d| d.text.len()).sum()
    }

    /// All documents in order, with [`DOC_SEPARATOR`] between them.
    pub fn joined(&self) -> String {
        let mut out = String::with_capacity(
            self.total_bytes() + DOC_SEPARATOR.len() * self.docs.len().saturating_sub(1),
        );
        for (i, d) in self.docs.iter().enumerate() {
            if i > 0 {
                out.push_str(DOC_SEPARATOR);
            }
            out.push_str(&d.text);
        }
        out
    }
}

/// Load what `spec` names.
pub fn load(spec: &ContentSpec) -> Result<Content, ContentError> {
    match spec {
        ContentSpec::Filler => Ok(Content {
            kind: ContentKind::Filler,
            label: "filler (a repeated paragraph)".into(),
            docs: vec![Doc {
                name: "filler".into(),
                text: super::prompt::FILLER.into(),
            }],
            skipped: Vec::new(),
        }),
        ContentSpec::Corpus(path) => corpus::load(path, MAX_TEXT_BYTES),
        ContentSpec::Builtin(b) => Ok(builtin::load(*b)),
        ContentSpec::Dataset { path, format } => dataset::load(path, *format, MAX_TEXT_BYTES),
    }
}

/// Where in a dataset a record sits, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// A line of a JSONL file.
    Line(usize),
    /// An element of a JSON array.
    Entry(usize),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Entry(n) => write!(f, "entry {n}"),
        }
    }
}

/// What is wrong with one dataset record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    BadJson(String),
    NotUtf8,
    NotAnObject {
        found: &'static str,
    },
    MissingField {
        field: String,
    },
    WrongType {
        field: String,
        expected: &'static str,
        found: &'static str,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::BadJson(e) => write!(f, "not valid JSON ({e})"),
            Problem::NotUtf8 => f.write_str("not UTF-8 text"),
            Problem::NotAnObject { found } => {
                write!(f, "expected a JSON object, found {found}")
            }
            Problem::MissingField { field } => write!(f, "missing field {field}"),
            Problem::WrongType {
                field,
                expected,
                found,
            } => write!(f, "field \"{field}\" is {found}, expected {expected}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    #[error(
        "--corpus is empty: give a file or folder of UTF-8 text, or builtin:prose, \
         builtin:code or builtin:mixed"
    )]
    EmptyCorpusArg,
    #[error(
        "unknown built-in corpus \"builtin:{name}\": choose builtin:prose, builtin:code or \
         builtin:mixed (a file of that name can be given as ./builtin:{name})"
    )]
    UnknownBuiltin { name: String },
    #[error(
        "corpus {}: no such file or folder; --corpus takes a file or folder of UTF-8 text, \
         or builtin:prose, builtin:code or builtin:mixed", .path.display()
    )]
    CorpusNotFound { path: PathBuf },
    #[error(
        "corpus {}: no usable text ({skipped} binary or non-UTF-8 files skipped, empty files \
         and hidden files ignored); point --corpus at UTF-8 text files", .path.display()
    )]
    EmptyCorpus { path: PathBuf, skipped: usize },
    #[error("dataset {}: no such file; --dataset takes a JSONL or JSON file", .path.display())]
    DatasetNotFound { path: PathBuf },
    #[error(
        "dataset {} is a folder; --dataset takes one JSONL or JSON file (--corpus reads a \
         folder of documents)", .path.display()
    )]
    DatasetIsFolder { path: PathBuf },
    #[error("could not read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "dataset {} {at}: {problem}{}", .path.display(), format_hint(*.format)
    )]
    Malformed {
        path: PathBuf,
        at: Location,
        problem: Problem,
        format: Option<DatasetFormat>,
    },
    #[error(
        "dataset {}: cannot tell its format from the first record (keys: {}): {reason}; \
         pass --dataset-format jsonl|sharegpt|longbench", .path.display(), keys_list(.keys)
    )]
    UnknownFormat {
        path: PathBuf,
        keys: Vec<String>,
        reason: dataset::Undetected,
    },
    #[error(
        "dataset {}: no non-empty entries{}; it needs at least one prompt", .path.display(),
        empty_note(*.skipped)
    )]
    EmptyDataset { path: PathBuf, skipped: usize },
}

fn format_hint(format: Option<DatasetFormat>) -> String {
    match format {
        Some(f) => format!(" (read as {f})"),
        None => String::new(),
    }
}

fn empty_note(skipped: usize) -> String {
    if skipped > 0 {
        format!(" ({skipped} empty skipped)")
    } else {
        String::new()
    }
}

fn keys_list(keys: &[String]) -> String {
    if keys.is_empty() {
        "none".into()
    } else {
        keys.join(", ")
    }
}

/// `1.2 MB`, `830 KB`, `12 B`: decimal units, as file managers show them.
fn human_bytes(n: usize) -> String {
    let n = n as f64;
    if n < 1e3 {
        format!("{n} B")
    } else if n < 1e6 {
        format!("{:.0} KB", n / 1e3)
    } else {
        format!("{:.1} MB", n / 1e6)
    }
}

/// Said in a label when reading stopped at `cap` bytes with text left unread.
fn cap_note(cap: usize) -> String {
    if cap >= 1 << 20 && cap.is_multiple_of(1 << 20) {
        format!("stopped at the {} MiB cap", cap >> 20)
    } else {
        format!("stopped at the {cap} B cap")
    }
}

/// `n` thing or things.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The longest prefix of `bytes` that is whole UTF-8 characters, when the only fault is a
/// character cut at the end (a read stopped by the cap); `None` for text that is not UTF-8.
fn utf8_prefix(bytes: Vec<u8>, cut_at_end: bool) -> Option<String> {
    match String::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) if cut_at_end && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).ok()
        }
        Err(_) => None,
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_arg_picks_builtin_or_path() {
        assert_eq!(
            ContentSpec::from_corpus_arg("builtin:prose").unwrap(),
            ContentSpec::Builtin(BuiltinCorpus::Prose)
        );
        assert_eq!(
            ContentSpec::from_corpus_arg("builtin:mixed").unwrap(),
            ContentSpec::Builtin(BuiltinCorpus::Mixed)
        );
        assert_eq!(
            ContentSpec::from_corpus_arg("./builtin:prose").unwrap(),
            ContentSpec::Corpus(PathBuf::from("./builtin:prose"))
        );
        assert_eq!(
            ContentSpec::from_corpus_arg("docs").unwrap(),
            ContentSpec::Corpus(PathBuf::from("docs"))
        );
        let e = ContentSpec::from_corpus_arg("builtin:poetry").unwrap_err();
        assert!(matches!(e, ContentError::UnknownBuiltin { .. }));
        assert!(e.to_string().contains("builtin:code"), "{e}");
        assert!(matches!(
            ContentSpec::from_corpus_arg(" "),
            Err(ContentError::EmptyCorpusArg)
        ));
    }

    #[test]
    fn filler_loads_as_one_doc() {
        let c = load(&ContentSpec::Filler).unwrap();
        assert_eq!(c.kind, ContentKind::Filler);
        assert_eq!(c.docs.len(), 1);
        assert_eq!(c.joined(), super::super::prompt::FILLER);
        assert_eq!(c.label, "filler (a repeated paragraph)");
    }

    #[test]
    fn joined_puts_the_separator_between_docs_only() {
        let c = Content {
            kind: ContentKind::Corpus,
            label: String::new(),
            docs: vec![
                Doc {
                    name: "a".into(),
                    text: "one".into(),
                },
                Doc {
                    name: "b".into(),
                    text: "two".into(),
                },
            ],
            skipped: Vec::new(),
        };
        assert_eq!(c.joined(), format!("one{DOC_SEPARATOR}two"));
        assert_eq!(c.total_bytes(), 6);
    }

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(830_400), "830 KB");
        assert_eq!(human_bytes(1_234_567), "1.2 MB");
    }

    #[test]
    fn utf8_prefix_trims_a_cut_character_only_at_the_end() {
        let e_acute = "é".as_bytes();
        let mut cut = b"caf".to_vec();
        cut.push(e_acute[0]);
        assert_eq!(utf8_prefix(cut.clone(), true).as_deref(), Some("caf"));
        assert_eq!(utf8_prefix(cut, false), None);
        assert_eq!(utf8_prefix(vec![b'a', 0xff, b'b'], true), None);
    }
}
