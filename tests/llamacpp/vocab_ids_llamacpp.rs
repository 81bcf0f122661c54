//! Issue 21 part 2: llama-server with a vocabulary that can encode no text (the tiny model
//! built without a space piece and without byte fallback: `/tokenize` and text prompts
//! answer `unordered_map::at`) is still measured, with prompts of ordinary ids from its
//! vocabulary: every sample valid, exact length by the server's own count.

use crate::common;
use common::flags;
use common::llama::{LlamaServer, timing};
use ctxbench::backend::Prompt;
use ctxbench::backend::http::Http;
use ctxbench::choices::ApiChoice;
use ctxbench::workload::{NonceSource, PromptSource};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

/// The model's special tokens: `<unk>`, BOS `<s>`, EOS `</s>` (scripts/make-gguf.py).
const SPECIAL_IDS: [u32; 3] = [0, 1, 2];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vocabulary_without_text_is_measured_with_ids_from_it() {
    let server = LlamaServer::start_nospace();

    // The premise: the server can take no text at all, neither to tokenize nor as a prompt.
    let http = Http::new(&server.url, None).unwrap();
    let limit = Duration::from_secs(60);
    for (path, body) in [
        (
            "/tokenize",
            json!({"content": "hello world", "add_special": false}),
        ),
        (
            "/completion",
            json!({"prompt": "hello world", "n_predict": 1}),
        ),
    ] {
        let (status, body) = http
            .call(Method::POST, path, Some(&body), limit)
            .await
            .unwrap();
        assert!(
            status >= 400 && body.contains("unordered_map::at"),
            "{path}: {status} {body}"
        );
    }

    // The prompts: exact length, nonce first, no special id, every id in the vocabulary.
    let conn = common::connect(&server.url, ApiChoice::Auto).await;
    let n_vocab = conn.backend.vocabulary().await.size.expect("n_vocab");
    let mut nonce = NonceSource::seeded(7);
    let mut prompts = PromptSource::prepare(conn.backend.as_ref(), false, None, &mut nonce)
        .await
        .expect("prompts of ids");
    assert_eq!(prompts.mode().name(), "token_ids");
    let mut heads = Vec::new();
    for len in [100u64, 1000] {
        let built = prompts
            .build(conn.backend.as_ref(), len, Some(&mut nonce), None)
            .await
            .unwrap();
        let Prompt::Ids(ids) = built.prompt else {
            panic!("not ids")
        };
        assert_eq!((ids.len() as u64, built.sent_tokens), (len, Some(len)));
        assert!(
            ids.iter().all(|i| *i < n_vocab && !SPECIAL_IDS.contains(i)),
            "{ids:?}"
        );
        heads.push(ids[..ctxbench::workload::NONCE_TOKENS].to_vec());
    }
    assert_ne!(heads[0], heads[1], "each prompt has its own nonce");

    // A needle is text: refused, saying why.
    let e = PromptSource::prepare(conn.backend.as_ref(), true, None, &mut nonce)
        .await
        .err()
        .expect("a needle needs text");
    let e = format!("{e:#}");
    assert!(
        e.contains("--needle") && e.contains("unordered_map::at"),
        "{e}"
    );

    // The sweep: two lengths, every sample valid, exactly the length asked.
    let r = flags("1k,2k", 2, 8).run(&server.url).await;
    assert_eq!(r.run.target.api, "llamacpp");
    assert_eq!(r.run.config.prompt_mode, "token_ids");
    let content = r.run.config.content.as_deref().unwrap_or("");
    assert!(content.contains("vocabulary ids"), "{content}");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.samples.len(), 4);
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        assert_eq!(s.prompt_tokens, Some(s.context_tokens), "exact length");
        assert_eq!(timing(s, "prompt_n") as u64, s.context_tokens);
        assert_eq!(timing(s, "cache_n"), 0.0, "cold");
        assert_eq!(s.output_tokens, Some(8));
    }
}
