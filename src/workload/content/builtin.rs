//! The corpora shipped inside the binary, so that a benchmark on realistic text needs no
//! files of the user's: English prose and source code from the Python 3.11 distribution,
//! under the PSF licence (corpus/README.md names the files and the licence terms).

use super::{BuiltinCorpus, Content, ContentKind, Doc, human_bytes};

/// Chapters of the Python language reference, as pydoc renders them to plain text.
const PROSE: &[(&str, &str)] = &[
    (
        "prose/assignment.txt",
        include_str!("../../../corpus/prose/assignment.txt"),
    ),
    (
        "prose/async.txt",
        include_str!("../../../corpus/prose/async.txt"),
    ),
    (
        "prose/attribute-access.txt",
        include_str!("../../../corpus/prose/attribute-access.txt"),
    ),
    (
        "prose/calls.txt",
        include_str!("../../../corpus/prose/calls.txt"),
    ),
    (
        "prose/class.txt",
        include_str!("../../../corpus/prose/class.txt"),
    ),
    (
        "prose/comparisons.txt",
        include_str!("../../../corpus/prose/comparisons.txt"),
    ),
    (
        "prose/customization.txt",
        include_str!("../../../corpus/prose/customization.txt"),
    ),
    (
        "prose/execmodel.txt",
        include_str!("../../../corpus/prose/execmodel.txt"),
    ),
    (
        "prose/formatstrings.txt",
        include_str!("../../../corpus/prose/formatstrings.txt"),
    ),
    (
        "prose/function.txt",
        include_str!("../../../corpus/prose/function.txt"),
    ),
    (
        "prose/identifiers.txt",
        include_str!("../../../corpus/prose/identifiers.txt"),
    ),
    (
        "prose/import.txt",
        include_str!("../../../corpus/prose/import.txt"),
    ),
    (
        "prose/lambda.txt",
        include_str!("../../../corpus/prose/lambda.txt"),
    ),
    (
        "prose/objects.txt",
        include_str!("../../../corpus/prose/objects.txt"),
    ),
    (
        "prose/raise.txt",
        include_str!("../../../corpus/prose/raise.txt"),
    ),
    (
        "prose/strings.txt",
        include_str!("../../../corpus/prose/strings.txt"),
    ),
    (
        "prose/truth.txt",
        include_str!("../../../corpus/prose/truth.txt"),
    ),
    (
        "prose/try.txt",
        include_str!("../../../corpus/prose/try.txt"),
    ),
    (
        "prose/typesmapping.txt",
        include_str!("../../../corpus/prose/typesmapping.txt"),
    ),
    (
        "prose/with.txt",
        include_str!("../../../corpus/prose/with.txt"),
    ),
];

/// Modules of the Python standard library, unchanged.
const CODE: &[(&str, &str)] = &[
    (
        "code/bisect.py",
        include_str!("../../../corpus/code/bisect.py"),
    ),
    (
        "code/colorsys.py",
        include_str!("../../../corpus/code/colorsys.py"),
    ),
    (
        "code/fnmatch.py",
        include_str!("../../../corpus/code/fnmatch.py"),
    ),
    (
        "code/fractions.py",
        include_str!("../../../corpus/code/fractions.py"),
    ),
    ("code/glob.py", include_str!("../../../corpus/code/glob.py")),
    (
        "code/graphlib.py",
        include_str!("../../../corpus/code/graphlib.py"),
    ),
    (
        "code/heapq.py",
        include_str!("../../../corpus/code/heapq.py"),
    ),
    (
        "code/queue.py",
        include_str!("../../../corpus/code/queue.py"),
    ),
    (
        "code/reprlib.py",
        include_str!("../../../corpus/code/reprlib.py"),
    ),
    (
        "code/sched.py",
        include_str!("../../../corpus/code/sched.py"),
    ),
    (
        "code/shlex.py",
        include_str!("../../../corpus/code/shlex.py"),
    ),
    (
        "code/string.py",
        include_str!("../../../corpus/code/string.py"),
    ),
];

pub(super) fn load(which: BuiltinCorpus) -> Content {
    let docs = |set: &[(&str, &str)]| -> Vec<Doc> {
        set.iter()
            .map(|(name, text)| Doc {
                name: (*name).to_owned(),
                text: (*text).to_owned(),
            })
            .collect()
    };
    let (docs, source) = match which {
        BuiltinCorpus::Prose => (docs(PROSE), "Python 3.11 language reference"),
        BuiltinCorpus::Code => (docs(CODE), "Python 3.11 standard library source"),
        BuiltinCorpus::Mixed => (
            interleave(docs(PROSE), docs(CODE)),
            "Python 3.11 reference and library source, interleaved",
        ),
    };
    let bytes: usize = docs.iter().map(|d| d.text.len()).sum();
    Content {
        kind: ContentKind::Corpus,
        label: format!(
            "{which} ({source}, PSF licence; {} documents, {})",
            docs.len(),
            human_bytes(bytes)
        ),
        docs,
        skipped: Vec::new(),
    }
}

/// One of each in turn, the longer list's tail last.
fn interleave(a: Vec<Doc>, b: Vec<Doc>) -> Vec<Doc> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return out,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::content::{ContentSpec, load as load_spec};
    use std::collections::HashSet;

    /// Distinct non-blank lines over all non-blank lines: 1.0 for text that never repeats
    /// a line, 1/n for one paragraph repeated n times.
    fn distinct_line_ratio(c: &Content) -> f64 {
        let lines: Vec<&str> = c
            .docs
            .iter()
            .flat_map(|d| d.text.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let distinct: HashSet<&str> = lines.iter().copied().collect();
        distinct.len() as f64 / lines.len() as f64
    }

    fn load(b: BuiltinCorpus) -> Content {
        let spec = ContentSpec::from_corpus_arg(&b.to_string()).unwrap();
        load_spec(&spec).unwrap()
    }

    #[test]
    fn builtin_corpora_are_large_and_varied() {
        let prose = load(BuiltinCorpus::Prose);
        let code = load(BuiltinCorpus::Code);
        for (c, min_bytes, min_ratio) in [
            // Measured when the corpus was cut: 162 KB (23,100 words), 0.93 distinct; the
            // ratio sits below 1 only for headings and example lines the chapters share.
            (&prose, 150_000, 0.85),
            // 132 KB, 0.78 distinct: code repeats `return`, `else:` and the like.
            (&code, 120_000, 0.7),
        ] {
            let ratio = distinct_line_ratio(c);
            println!(
                "{}: {} docs, {} bytes, {} words, distinct-line ratio {ratio:.3}",
                c.label,
                c.docs.len(),
                c.total_bytes(),
                c.joined().split_whitespace().count()
            );
            assert!(c.total_bytes() >= min_bytes, "{}", c.label);
            assert!(ratio >= min_ratio, "{}: {ratio}", c.label);
            assert!(c.docs.iter().all(|d| !d.text.trim().is_empty()));
            assert!(c.label.contains("PSF licence"), "{}", c.label);
            let names: HashSet<&str> = c.docs.iter().map(|d| d.name.as_str()).collect();
            assert_eq!(names.len(), c.docs.len(), "a document is listed twice");
        }
        // About 4 characters a token for English prose: tens of thousands of tokens.
        assert!(prose.joined().split_whitespace().count() >= 20_000);
        assert!(prose.docs.iter().all(|d| d.name.starts_with("prose/")));
        assert!(code.docs.iter().all(|d| d.name.starts_with("code/")));
        assert!(code.joined().contains("def "));

        let mixed = load(BuiltinCorpus::Mixed);
        assert_eq!(
            mixed.total_bytes(),
            prose.total_bytes() + code.total_bytes()
        );
        assert_eq!(mixed.docs.len(), prose.docs.len() + code.docs.len());
        let kinds: Vec<bool> = mixed.docs[..6]
            .iter()
            .map(|d| d.name.starts_with("prose/"))
            .collect();
        assert_eq!(kinds, [true, false, true, false, true, false]);
        assert!(
            mixed.label.starts_with("builtin:mixed ("),
            "{}",
            mixed.label
        );

        // The filler, repeated to the same size, is what these corpora replace.
        let filler = crate::workload::prompt::FILLER;
        let repeated = Content {
            kind: ContentKind::Filler,
            label: String::new(),
            docs: vec![Doc {
                name: "filler".into(),
                text: format!("{filler}\n").repeat(prose.total_bytes() / filler.len()),
            }],
            skipped: Vec::new(),
        };
        assert!(distinct_line_ratio(&repeated) < 0.01);
    }

    #[test]
    fn interleave_keeps_the_longer_tail() {
        let d = |n: &str| Doc {
            name: n.into(),
            text: n.into(),
        };
        let out = interleave(vec![d("a1"), d("a2"), d("a3")], vec![d("b1")]);
        let names: Vec<&str> = out.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a1", "b1", "a2", "a3"]);
    }
}
