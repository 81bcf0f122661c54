//! Real text on a chat-only route: the simulator as a generic OpenAI-compatible server
//! (no `/tokenize`) whose chat template adds a dozen fixed words. Prompts from prose, code
//! and a dataset reach each requested length within 1 %, every sample is valid and no
//! truncation is claimed; a server that does truncate is still named, from counts that stop
//! growing with the text.

use crate::common;
use common::proxy::Proxy;
use common::{flags, sim};
use ctxbench::record::Sample;

const CHAT_ONLY: &[&str] = &[
    "--persona",
    "openai",
    "--chat-template-words",
    "12",
    "--context-length",
    "65536",
];

fn chat(content: &[&str]) -> common::SweepFlags {
    flags("1k,4k,16k", 2, 8)
        .with(&["--api", "openai", "--endpoint", "chat"])
        .with(content)
}

/// Every sample valid, its server-counted prompt within 1 % of the request, and no note
/// claiming truncation.
fn exact_and_valid(r: &ctxbench::sweep::SweepResult, what: &str) {
    assert_eq!(r.run.config.prompt_mode, "probed_text", "{what}");
    let stream: Vec<&Sample> = r.samples.iter().filter(|s| s.method == "stream").collect();
    assert_eq!(stream.len(), 6, "{what}: {:?}", r.errors);
    for s in &stream {
        let p = s.prompt_tokens.unwrap() as f64;
        let want = s.context_tokens as f64;
        assert!(
            (p - want).abs() <= 0.01 * want,
            "{what}: {} tokens for {want}",
            p
        );
        assert!(s.valid, "{what}: {s:?}");
        println!(
            "{what}: {} requested, {p} counted by the server",
            s.context_tokens
        );
    }
    assert!(
        !r.summary.notes.iter().any(|n| n.contains("truncat")),
        "{what}: {:?}",
        r.summary.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prose_and_code_reach_their_lengths_on_a_chat_only_route() {
    let server = sim(CHAT_ONLY).await;
    for corpus in ["builtin:prose", "builtin:code"] {
        let r = chat(&["--corpus", corpus]).run(&server.url()).await;
        exact_and_valid(&r, corpus);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dataset_reaches_its_lengths_on_a_chat_only_route() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.jsonl");
    // Entries of mixed density: words, numbers and identifiers (each a different number of
    // tokens per word under the simulator's tokenizer).
    let lines: Vec<String> = (0..400u64)
        .map(|i| {
            let body: Vec<String> = (0..80u64)
                .map(|j| match (i + j) % 4 {
                    0 => "the".to_string(),
                    1 => format!("value_{}", i * 97 + j),
                    2 => "river".to_string(),
                    _ => format!("{}", (i * 31 + j) * 1_000_003),
                })
                .collect();
            serde_json::json!({ "prompt": body.join(" ") }).to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    let server = sim(CHAT_ONLY).await;
    let r = chat(&["--dataset", path.to_str().unwrap()])
        .run(&server.url())
        .await;
    exact_and_valid(&r, "dataset");
}

/// The same route on a server that keeps only the last 4096 tokens: the counts stop
/// growing (4096 for an 8k and a 16k request), which no sizing error produces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncating_chat_only_server_is_still_named() {
    let server = sim(&[
        "--persona",
        "openai",
        "--chat-template-words",
        "12",
        "--context-length",
        "4096",
        "--truncate",
    ])
    .await;
    let proxy = Proxy::hiding_limits(&server.url()).await;
    let r = flags("2k,8k,16k", 1, 8)
        .with(&[
            "--api",
            "openai",
            "--endpoint",
            "chat",
            "--corpus",
            "builtin:prose",
        ])
        .run(&proxy.url)
        .await;
    let by_len = |n: u64| r.samples.iter().find(|s| s.context_tokens == n).unwrap();
    assert!(by_len(2048).valid, "{:?}", by_len(2048));
    for n in [8192, 16384] {
        let s = by_len(n);
        assert!(!s.valid && s.prompt_tokens.unwrap() <= 4096, "{s:?}");
    }
    let note = common::truncation_note(&r.summary.notes);
    assert!(note.contains("from 8192 tokens"), "{note}");
}
