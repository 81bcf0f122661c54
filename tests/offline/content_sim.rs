//! Prompts from real content (`--corpus`, `--dataset`) against the simulator: exact lengths,
//! every sample valid, no span of the content used by two samples of one run, the needle
//! found inside real text, and bad input refused before anything is sent.

use crate::common;

use common::assert_disjoint;
use common::{flags, sim};
use ctxbench::record::Sample;
use rand::{RngExt, SeedableRng};
use std::path::Path;

/// Words drawn at random from a small list: varied text with no repeated paragraph.
fn prose(seed: u64, words: usize) -> String {
    const LIST: &[&str] = &[
        "harbour", "lantern", "quietly", "seven", "copper", "meadow", "argued", "under", "window",
        "bright", "kettle", "across", "winter", "letters", "orchard", "slowly", "market",
        "thunder", "fold", "silver", "garden", "whisper", "north", "candle", "between", "river",
        "engine", "paper", "almost", "stone", "village", "gather",
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = String::new();
    for i in 0..words {
        out.push_str(LIST[rng.random_range(0..LIST.len())]);
        out.push(if i % 13 == 12 { '\n' } else { ' ' });
    }
    out
}

fn corpus(dir: &Path, files: usize, words: usize) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..files {
        let at = if i % 2 == 0 {
            dir.join(format!("doc{i}.txt"))
        } else {
            dir.join("sub").join(format!("doc{i}.md"))
        };
        std::fs::write(at, prose(i as u64, words)).unwrap();
    }
}

fn measured(samples: &[Sample]) -> Vec<&Sample> {
    samples.iter().filter(|s| s.method == "stream").collect()
}

#[tokio::test]
async fn corpus_prompts_are_exact_valid_and_never_share_a_span() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path(), 4, 1500);
    let server = sim(&["--context-length", "16384"]).await;
    let path = dir.path().to_str().unwrap();
    let r = flags("1k,2k,4k", 2, 16)
        .with(&["--corpus", path])
        .run(&server.url())
        .await;
    let content = r.run.config.content.clone().unwrap();
    assert!(
        content.contains("corpus"),
        "header names the content: {content}"
    );
    let samples = measured(&r.samples);
    assert_eq!(samples.len(), 6);
    for s in &samples {
        assert!(s.valid, "invalid sample {s:?}");
        assert_eq!(s.prompt_tokens, Some(s.context_tokens), "exact length");
        assert_eq!(s.source.as_ref().unwrap().unit, "tokens");
    }
    assert_disjoint(&samples);
    // Consecutive samples go on through the corpus: several documents are reached.
    let docs: std::collections::HashSet<&str> = samples
        .iter()
        .flat_map(|s| {
            s.source
                .as_ref()
                .unwrap()
                .spans
                .iter()
                .map(|x| x.doc.as_str())
        })
        .collect();
    assert!(docs.len() >= 2, "documents used: {docs:?}");
}

#[tokio::test]
async fn text_prompts_from_a_corpus_are_cut_exactly_by_the_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path(), 2, 6000);
    let server = sim(&["--persona", "tgi", "--context-length", "16384"]).await;
    let r = flags("1k,3k", 2, 16)
        .with(&["--corpus", dir.path().to_str().unwrap()])
        .run(&server.url())
        .await;
    assert_eq!(r.run.config.prompt_mode, "tokenized_text");
    let samples = measured(&r.samples);
    assert_eq!(samples.len(), 4);
    for s in &samples {
        assert_eq!(s.prompt_tokens, Some(s.context_tokens), "exact: {s:?}");
        assert_eq!(s.source.as_ref().unwrap().unit, "pieces");
    }
    assert_disjoint(&samples);
}

#[tokio::test]
async fn the_needle_is_found_inside_real_text() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path(), 2, 8000);
    let server = sim(&["--context-length", "16384"]).await;
    let r = flags("1k,4k", 3, 16)
        .with(&[
            "--corpus",
            dir.path().to_str().unwrap(),
            "--needle",
            "--raw-completion",
            "--needle-depths",
            "0.1,0.5,0.9",
        ])
        .run(&server.url())
        .await;
    let samples = measured(&r.samples);
    assert_eq!(samples.len(), 6);
    for s in &samples {
        let n = s.needle.as_ref().expect("needle checked on every sample");
        assert!(n.ok, "needle missed in real text: {n:?}");
        assert!(s.source.is_some());
    }
}

#[tokio::test]
async fn dataset_prompts_start_at_an_entry_and_pad_with_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.jsonl");
    let lines: Vec<String> = (0..40)
        .map(|i| serde_json::json!({ "prompt": prose(100 + i, 60) }).to_string())
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    let server = sim(&["--context-length", "16384"]).await;
    let r = flags("1k,2k", 2, 16)
        .with(&["--dataset", path.to_str().unwrap()])
        .run(&server.url())
        .await;
    let samples = measured(&r.samples);
    assert_eq!(samples.len(), 4);
    for s in &samples {
        assert!(s.valid);
        assert_eq!(s.prompt_tokens, Some(s.context_tokens));
        let spans = &s.source.as_ref().unwrap().spans;
        assert_eq!(spans[0].start, 0, "a prompt starts at an entry: {spans:?}");
        assert!(
            spans.len() >= 2,
            "an entry shorter than 1k is padded: {spans:?}"
        );
    }
    assert_disjoint(&samples);
}

#[tokio::test]
async fn a_small_corpus_wraps_once_and_a_too_small_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path(), 1, 500);
    let server = sim(&["--context-length", "16384"]).await;
    let path = dir.path().to_str().unwrap();
    // ~2k tokens of text (the simulator cuts these words into ~3.5 tokens each), four 1k prompts: the content wraps, samples stay valid.
    let r = flags("1k", 4, 16)
        .with(&["--corpus", path])
        .run(&server.url())
        .await;
    assert!(measured(&r.samples).iter().all(|s| s.valid));
    // One prompt longer than the whole corpus: a clear error, no sample.
    let err = ctxbench::sweep::execute(
        flags("8k", 1, 16)
            .with(&["--corpus", path])
            .args(&server.url()),
    )
    .await
    .err()
    .expect("too small a corpus is refused");
    let msg = format!("{err:#}");
    assert!(msg.contains("fewer than one prompt"), "{msg}");
}

#[tokio::test]
async fn a_missing_corpus_is_refused_before_anything_is_sent() {
    let server = sim(&[]).await;
    let err = ctxbench::sweep::execute(
        flags("1k", 1, 16)
            .with(&["--corpus", "/nonexistent/ctxbench-corpus"])
            .args(&server.url()),
    )
    .await
    .err()
    .expect("a missing path is an error");
    assert!(format!("{err:#}").contains("--corpus"), "{err:#}");
    assert!(
        common::measured_truth(&server).is_empty(),
        "nothing was sent"
    );
}
