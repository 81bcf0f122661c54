//! The simulator's content-dependent speculative acceptance (`--spec-model ngram`) against
//! its own ground truth: α from the prompt's repeated bigrams, the realized accept length
//! against (1 − α^K)/(1 − α), and every persona's counters (SGLang's `meta_info`,
//! `/server_info` and gauge, vLLM's `/metrics` counters) equal to the truth log.

use crate::common;

use common::sim_http::*;
use ctxbench::cli::{Cli, Command};
use ctxbench::sim::RequestTruth;
use ctxbench::sim::SpecModel;
use ctxbench::sim::spec::{ALPHA_MAX, ALPHA_MIN, accept_prob, expected_tokens_per_step};
use ctxbench::sim::stats::DECODE_LOG_INTERVAL;

const K: u32 = 4;

/// One 80-token paragraph repeated, like the filler ctxbench sends.
fn filler(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 300 + i % 80).collect()
}

/// No bigram twice.
fn distinct(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 300 + i).collect()
}

/// Mean and variance of the tokens one unconstrained verify step emits: X = 1 + accepted,
/// P(X = x) = α^(x−1)(1 − α) for x < K, P(X = K) = α^(K−1).
fn step_moments(alpha: f64, k: u32) -> (f64, f64) {
    let (mut mean, mut square) = (0.0, 0.0);
    for x in 1..=k {
        let p = if x < k {
            alpha.powi(x as i32 - 1) * (1.0 - alpha)
        } else {
            alpha.powi(k as i32 - 1)
        };
        mean += p * f64::from(x);
        square += p * f64::from(x * x);
    }
    (mean, square - mean * mean)
}

async fn generate(http: &reqwest::Client, url: &str, ids: &[u32], tokens: u64) -> Value {
    let (status, body) = post_at(http, url, "/generate", generate_body(ids, tokens, false)).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// (a) Filler gets α near α_max, distinct ids α_min; over 512 tokens each realized accept
/// length lands within its derived tolerance of (1 − α^K)/(1 − α).
#[tokio::test]
async fn ngram_acceptance_follows_the_prompts_repeats() {
    let http = client();
    let server = start_seeded(&["--spec", "4", "--spec-model", "ngram"], 5).await;
    let url = server.url();
    let output = 512;
    let mut figures = Vec::new();
    for (name, ids) in [("filler", filler(4000)), ("distinct", distinct(4000))] {
        generate(&http, &url, &ids, output).await;
        let truth = server.truth().pop().expect("a truth record");
        let alpha = truth.spec_accept_prob.expect("ngram sets α");
        assert_eq!(alpha, accept_prob(&ids), "{name}: α is the prompt's");
        let realized = truth.tokens_per_verify_step().expect("verify steps");
        let (mean, var) = step_moments(alpha, K);
        assert!(
            (mean - expected_tokens_per_step(alpha, K)).abs() < 1e-12,
            "the moments agree with the closed form"
        );
        let n = truth.spec_verify_steps as f64;
        // The mean of n steps has standard deviation σ/√n (renewal-reward: the budget fixes
        // the total, not n, which changes the spread only at order 1/n); 5σ/√n leaves a
        // chance below 1e-6 of a false failure. The last steps may propose fewer drafts
        // than K−1 (the budget), pulling the mean down by at most (K−1)/n.
        let tolerance = 5.0 * (var / n).sqrt() + f64::from(K - 1) / n;
        eprintln!(
            "{name}: α = {alpha:.4}, verify steps {n}, tokens/step {realized:.4}, \
             expected {mean:.4} ± {tolerance:.4}, SGLang accept length {:.4}",
            truth.accept_length().unwrap()
        );
        assert!(
            (realized - mean).abs() <= tolerance,
            "{name}: realized {realized} vs expected {mean} ± {tolerance}"
        );
        assert_eq!(truth.output_tokens, output);
        assert_eq!(
            truth.spec_accepted_tokens + truth.spec_verify_steps + truth.first_event_tokens,
            output,
            "every verify step emits its accepted drafts plus one"
        );
        figures.push((alpha, realized));
    }
    let (filler_alpha, filler_rate) = figures[0];
    let (distinct_alpha, distinct_rate) = figures[1];
    // 80 of the 3999 bigrams are new (the first lap): r = 3919/3999.
    let r = 3919.0 / 3999.0;
    assert!((filler_alpha - (ALPHA_MIN + (ALPHA_MAX - ALPHA_MIN) * r)).abs() < 1e-12);
    assert!(filler_alpha > 0.93, "{filler_alpha}");
    assert_eq!(distinct_alpha, ALPHA_MIN);
    assert!(filler_rate > 2.0 * distinct_rate, "{figures:?}");
}

/// The uniform model keeps its draws and counts them the same way: K−1 drafts per step
/// (fewer at the budget), accepted = tokens − 1, no α.
#[tokio::test]
async fn uniform_counts_are_consistent() {
    let http = client();
    let server = start_seeded(&["--spec", "4"], 2).await;
    let url = server.url();
    for tokens in [1, 2, 3, 40] {
        generate(&http, &url, &filler(200), tokens).await;
    }
    let truth = truth_after(&server, 4).await;
    for t in &truth {
        assert_eq!(t.spec_accept_prob, None);
        let mut remaining = t.output_tokens - t.first_event_tokens;
        let (mut drafts, mut accepted) = (0, 0);
        for step in &t.decode_steps {
            drafts += 3.min(remaining - 1);
            accepted += step.tokens - 1;
            remaining -= step.tokens;
        }
        assert_eq!(t.spec_verify_steps, t.decode_steps.len() as u64);
        assert_eq!(
            (t.spec_draft_tokens, t.spec_accepted_tokens),
            (drafts, accepted)
        );
    }
    assert_eq!(
        truth[0].spec_verify_steps, 0,
        "one token: the prefill's only"
    );
    let over = get_json(&http, &format!("{url}/sim/truth")).await;
    assert!(over["requests"][3]["spec_accept_prob"].is_null());
    assert_eq!(
        over["requests"][3]["spec_verify_steps"],
        truth[3].spec_verify_steps
    );
}

/// (b) SGLang's per-request `meta_info` equals each request's truth; `/server_info`'s
/// cumulative accept length and the `spec_accept_length` gauge equal the truth log's.
#[tokio::test]
async fn sglang_reports_the_truth() {
    let http = client();
    let server = start_seeded(&["--spec", "4", "--spec-model", "ngram"], 9).await;
    let url = server.url();
    let info = get_json(&http, &format!("{url}/server_info")).await;
    assert_eq!(info["internal_states"][0]["avg_spec_accept_length"], 0.0);
    // Sequential, so each request's steps are decode batches of one, in order.
    let cases: Vec<(Vec<u32>, u64, bool)> = vec![
        (filler(3000), 150, false),
        (distinct(3000), 100, true),
        (filler(500), 3, false),
        (distinct(700), 120, true),
        (filler(2000), 90, true),
    ];
    let mut metas = Vec::new();
    for (i, (ids, tokens, stream)) in cases.iter().enumerate() {
        let meta = if *stream {
            let streamed = post_stream(
                &http,
                &format!("{url}/generate"),
                generate_body(ids, *tokens, true),
            )
            .await;
            let events = streamed.json_events();
            for e in &events[..events.len() - 1] {
                assert!(e["meta_info"].get("spec_verify_ct").is_none(), "final only");
            }
            events.last().unwrap()["meta_info"].clone()
        } else {
            generate(&http, &url, ids, *tokens).await["meta_info"].clone()
        };
        truth_after(&server, i + 1).await;
        metas.push(meta);
    }
    let truth = server.truth();
    for (meta, t) in metas.iter().zip(&truth) {
        assert_eq!(meta["spec_verify_ct"], t.spec_verify_steps, "{meta}");
        assert_eq!(meta["spec_draft_token_num"], t.spec_draft_tokens);
        assert_eq!(meta["spec_accept_token_num"], t.spec_accepted_tokens);
        assert_eq!(meta["completion_tokens"], t.output_tokens);
        let length = meta["spec_accept_length"].as_f64().unwrap();
        assert_eq!(length, t.accept_length().unwrap());
        let rate = meta["spec_accept_rate"].as_f64().unwrap();
        assert_eq!(
            rate,
            t.spec_accepted_tokens as f64 / t.spec_draft_tokens as f64
        );
    }
    // Cumulative since start: tokens emitted per verify step, the first tokens not included.
    let steps: Vec<u64> = truth
        .iter()
        .flat_map(|t| t.decode_steps.iter().map(|s| s.tokens))
        .collect();
    let emitted: u64 = steps.iter().sum();
    let info = get_json(&http, &format!("{url}/server_info")).await;
    let avg = info["internal_states"][0]["avg_spec_accept_length"]
        .as_f64()
        .unwrap();
    assert!(
        (avg - emitted as f64 / steps.len() as f64).abs() < 1e-12,
        "{avg}"
    );
    // The gauge: the mean over the last whole block of DECODE_LOG_INTERVAL batches.
    let interval = DECODE_LOG_INTERVAL as usize;
    let whole = steps.len() / interval * interval;
    assert!(whole >= interval, "enough steps for one interval");
    let block = &steps[whole - interval..whole];
    let expected_gauge = block.iter().sum::<u64>() as f64 / interval as f64;
    let gauge = scalar(&scrape(&http, &url).await, "sglang:spec_accept_length");
    assert!(
        (gauge - expected_gauge).abs() < 1e-12,
        "{gauge} vs {expected_gauge}"
    );
    eprintln!("sglang: server avg accept length {avg:.4}, gauge {gauge:.4}");
    // A flush restarts the cumulative figure.
    assert_eq!(get_status(&http, &format!("{url}/flush_cache")).await, 200);
    let info = get_json(&http, &format!("{url}/server_info")).await;
    assert_eq!(info["internal_states"][0]["avg_spec_accept_length"], 0.0);
}

const VLLM_SPEC: [&str; 4] = [
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_emitted_tokens_total",
];

fn vllm_counts(m: &Exposition) -> [f64; 4] {
    VLLM_SPEC.map(|name| scalar(m, name))
}

fn truth_counts(t: &RequestTruth) -> [f64; 4] {
    [
        t.spec_verify_steps,
        t.spec_draft_tokens,
        t.spec_accepted_tokens,
        t.output_tokens - t.first_event_tokens,
    ]
    .map(|n| n as f64)
}

/// (c) vLLM's counters (and the generic OpenAI persona's, in vLLM's dialect) move by each
/// request's truth; without speculative decoding they are not exported.
#[tokio::test]
async fn vllm_counters_move_by_the_requests_truth() {
    let http = client();
    for persona in ["vllm", "openai"] {
        let server = start_seeded(
            &["--persona", persona, "--spec", "4", "--spec-model", "ngram"],
            4,
        )
        .await;
        let url = server.url();
        let mut before = vllm_counts(&scrape(&http, &url).await);
        assert_eq!(before, [0.0; 4]);
        for (i, (ids, tokens)) in [(filler(2000), 200), (distinct(2000), 60), (filler(100), 2)]
            .into_iter()
            .enumerate()
        {
            let body = json!({"prompt": ids, "max_tokens": tokens, "ignore_eos": true});
            let (status, _) = post_at(&http, &url, "/v1/completions", body).await;
            assert_eq!(status, 200);
            let truth = truth_after(&server, i + 1).await[i].clone();
            let after = vllm_counts(&scrape(&http, &url).await);
            let delta: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
            assert_eq!(delta, truth_counts(&truth), "{persona} request {i}");
            let expected_prob = accept_prob(&ids);
            assert_eq!(truth.spec_accept_prob, Some(expected_prob));
            before = after;
        }
        eprintln!("{persona}: counters after three requests {before:?}");
    }
    let plain = start(&["--persona", "vllm"]).await;
    let text = http
        .get(format!("{}/metrics", plain.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !text.contains("spec_decode"),
        "no spec counters without --spec"
    );
}

/// The flag reaches `sweep` and `load` (the built-in simulator's shared flags).
#[test]
fn sweep_and_load_take_the_spec_model() {
    for sub in ["sweep", "load"] {
        let cli = Cli::try_parse_from(["ctxbench", sub, "--spec", "4", "--spec-model", "ngram"])
            .unwrap_or_else(|e| panic!("{sub}: {e}"));
        let sim = match cli.command {
            Command::Sweep(a) => a.sim,
            Command::Load(a) => a.sim,
            _ => unreachable!(),
        };
        assert_eq!((sim.spec, sim.spec_model), (4, SpecModel::Ngram));
    }
    let Err(err) = Cli::try_parse_from(["ctxbench", "sim", "--spec-model", "eagle"]) else {
        panic!("an unknown model is refused");
    };
    assert!(err.to_string().contains("--spec-model"), "{err}");
}
