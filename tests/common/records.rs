//! Result-file records built in code: one run header for every test that needs a file
//! without a server (reports, the result-file reader, `--resume`'s comparison).

use ctxbench::record::{RunConfig, RunRecord, Target};

/// A run header: an SGLang target at 127.0.0.1:30000 (context 131072), `reps` streamed
/// repetitions of 64 output tokens at each of `lengths`.
pub fn run_record(model: &str, lengths: &[u64], reps: u32) -> RunRecord {
    RunRecord {
        schema: 1,
        tool_version: "0.1.0".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        target: Target {
            url: "http://127.0.0.1:30000".into(),
            api: "sglang".into(),
            model: Some(model.into()),
            server_info: serde_json::json!({"context_length": 131072}),
            checks: Default::default(),
        },
        config: RunConfig {
            lengths: lengths.to_vec(),
            output_tokens: 64,
            reps,
            method: "stream".into(),
            cache_bust: "auto".into(),
            needle: false,
            needle_depths: vec![],
            timeout: "auto".into(),
            seed: 0,
            prompt_mode: "token_ids".into(),
            rtt_s: Some(0.0002),
            simulator: None,
            depth: None,
            content: None,
            tasks: Vec::new(),
            samples: None,
            accuracy_threshold: None,
            prompt_style: None,
        },
    }
}
