//! `ctxbench plan` end to end through the binary: the JSON contract other tools read, the
//! table's terms, and errors that name the field or flag.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Output};

fn plan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .arg("plan")
        .args(args)
        .output()
        .expect("run ctxbench")
}

/// A command line's words, split at spaces.
fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// `--config path --gpu-mem-gib 80 --gpus gpus`.
fn on_config<'a>(path: &'a str, gpus: &'a str) -> Vec<&'a str> {
    vec!["--config", path, "--gpu-mem-gib", "80", "--gpus", gpus]
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let out = plan(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn config_file(json: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(json.as_bytes()).unwrap();
    file
}

#[test]
fn json_carries_the_contract_fields_and_the_inputs() {
    // Llama 3 70B on 8 × 80 GiB: weights 70,553,706,496 × 2 B / 8 = 16.43 GiB per GPU;
    // pool 72 − 16.43 = 55.57 GiB / 40,960 B (80 layers × 2 × 1 head × 128 × 2 B)
    // = 1,456,811 tokens; at 32k: 44 requests.
    let v = json(&words(
        "--preset llama-3-70b --gpu-mem-gib 80 --gpus 8 --context 32k",
    ));
    assert_eq!(v["kv_bytes_per_token"], 40_960);
    assert_eq!(v["pool_tokens"], 1_456_811);
    assert_eq!(v["max_concurrency"], 44);
    assert_eq!(v["max_concurrency_total"], 44);
    for (key, expected) in [
        ("gpu_mem_gib", Value::from(80.0)),
        ("gpus", Value::from(8)),
        ("tp", Value::from(8)),
        ("dp", Value::from(1)),
        ("mem_fraction", Value::from(0.9)),
        ("kv_dtype", Value::from("bf16")),
        ("weights_dtype", Value::from("bf16")),
        ("reserve_gib", Value::from(0.0)),
        ("page_size_tokens", Value::from(1)),
        ("context_tokens", Value::from(32_768)),
        ("preset", Value::from("llama-3-70b")),
        ("attention", Value::from("gqa")),
    ] {
        assert_eq!(v[key], expected, "{key}");
    }
    assert!(v["kv_bytes_per_token"].is_u64() && v["max_concurrency"].is_u64());
}

#[test]
fn dp_and_target_in_json() {
    // 8 GPUs as TP 4 × DP 2: two pools, twice the requests in all.
    let v = json(&words(
        "--preset llama-3.1-70b --gpu-mem-gib 80 --gpus 8 --tp 4 --context 128k --target-concurrency 4",
    ));
    assert_eq!(v["tp"], 4);
    assert_eq!(v["dp"], 2);
    let per = v["max_concurrency"].as_u64().unwrap();
    assert_eq!(v["max_concurrency_total"].as_u64().unwrap(), 2 * per);
    assert_eq!(
        v["pool_tokens_total"].as_u64().unwrap(),
        2 * v["pool_tokens"].as_u64().unwrap()
    );
    let f = v["required_mem_fraction"].as_f64().unwrap();
    assert!(f > 0.0 && f < 1.0, "{f}");
    assert_eq!(v["target_fits"], true);
}

#[test]
fn the_table_shows_every_term() {
    let out = plan(&words(
        "--preset deepseek-v3 --gpu-mem-gib 140.4 --gpus 8 --context 128k",
    ));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    for term in [
        "GPU memory",
        "usable",
        "weights",
        "reserve",
        "KV pool",
        "KV per token",
        "70,272 B",
        "pool tokens",
        "longest context",
        "concurrent",
        "MLA",
    ] {
        assert!(text.contains(term), "missing {term:?} in\n{text}");
    }
}

#[test]
fn a_config_file_works_like_a_preset() {
    let file = config_file(
        r#"{"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
            "max_position_embeddings": 8192}"#,
    );
    let path = file.path().to_str().unwrap();
    let v = json(&on_config(path, "1"));
    assert_eq!(v["kv_bytes_per_token"], 131_072);
    assert_eq!(v["model_source"], "config");
    assert_eq!(v["context_tokens"], 8192);
    assert_eq!(v["context_source"], "model");
    assert_eq!(v["num_parameters"], 8_030_261_248u64);
}

#[test]
fn missing_config_fields_are_named() {
    let file = config_file(r#"{"hidden_size": 4096, "num_attention_heads": 32}"#);
    let out = plan(&on_config(file.path().to_str().unwrap(), "1"));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("num_hidden_layers"), "{err}");
    assert!(err.contains("--preset"), "{err}");

    // MLA without its rope width.
    let file = config_file(
        r#"{"hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
            "kv_lora_rank": 512}"#,
    );
    let out = plan(&on_config(file.path().to_str().unwrap(), "8"));
    assert!(
        stderr(&out).contains("qk_rope_head_dim"),
        "{}",
        stderr(&out)
    );

    // Weights cannot be derived without the MLP width: the error says to pass --weights-gib.
    let file = config_file(
        r#"{"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "vocab_size": 32000}"#,
    );
    let path = file.path().to_str().unwrap();
    let out = plan(&on_config(path, "1"));
    let err = stderr(&out);
    assert!(
        err.contains("intermediate_size") && err.contains("--weights-gib"),
        "{err}"
    );
    // … and with --weights-gib it plans.
    let v = json(&[on_config(path, "1"), words("--weights-gib 14")].concat());
    assert_eq!(v["weights_source"], "flag");
}

#[test]
fn bad_flags_are_named() {
    let base: Vec<&str> = "--preset llama-3-8b --gpu-mem-gib 80 --gpus 1"
        .split(' ')
        .collect();
    let with = |extra: &[&str]| {
        let mut args = base.clone();
        args.extend_from_slice(extra);
        plan(&args)
    };
    for (extra, needle) in [
        (&["--mem-fraction", "1.2"][..], "--mem-fraction 1.2"),
        (&["--mem-fraction", "0"][..], "outside (0, 1)"),
        (&["--weights-gib", "100"][..], "no room for a KV cache"),
        (&["--tp", "3"][..], "--tp 3"),
        (&["--reserve-gib=-1"][..], "--reserve-gib"),
        (&["--page-size", "0"][..], "--page-size"),
        (&["--target-concurrency", "0"][..], "--target-concurrency"),
        (&["--format", "csv"][..], "--format csv"),
    ] {
        let out = with(extra);
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
    }
    // clap's own checks: a bad --context and a missing --gpus are usage errors (exit 2).
    let out = with(&["--context", "20x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("200k"), "{}", stderr(&out));
    let out = plan(&["--preset", "llama-3-8b", "--gpu-mem-gib", "80"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--gpus"));

    let out = plan(&["--preset", "nope", "--gpu-mem-gib", "80", "--gpus", "1"]);
    assert!(
        stderr(&out).contains("llama-3-8b"),
        "lists the presets: {}",
        stderr(&out)
    );
    let out = plan(&words(
        "--gpu-mem-gib 80 --gpus 8 --tp 4 --dp 4 --preset kimi-k2",
    ));
    assert!(stderr(&out).contains("--tp 4 × --dp 4"), "{}", stderr(&out));
}

#[test]
fn presets_can_be_listed() {
    let out = plan(&["--list-presets"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("kimi-k2") && text.contains("MLA"));
    let out = plan(&["--list-presets", "--format", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.as_array().unwrap().len() >= 10);
}
