//! `twin calibrate`: a small plan of its own on the library's sweep and load entry points
//! (a short sweep for the prefill and batch-1 decode laws, closed-loop cells at concurrency
//! 1, 2, 4, … for the batching cost, mixed cells for the interference of a prefill beside
//! decoding requests, acceptance per content when the server speculates), the records kept
//! beside the profile, then exactly `twin fit` on them.

use crate::backend::detect::{self, ServerInfo};
use crate::backend::http::{Http, strip_credentials};
use crate::twin::args::CalibrateArgs;
use crate::twin::fit::inputs;
use crate::twin::fit::laws as fit;
use crate::twin::model::profile::Profile;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Largest calibrated concurrency where the server states no slot limit.
pub const DEFAULT_CONCURRENCY: u32 = 8;
/// The default never calibrates above this many clients (a server with 256 slots would
/// make a plan of minutes): larger batches are a prediction, and say so.
pub const MAX_DEFAULT_CONCURRENCY: u32 = 16;
/// Sweep lengths are the powers of two from this up to the cap (and the cap itself).
const SHORTEST: u64 = 512;
/// Prompt lengths of the mixed cells (each capped like the sweep).
const MIXED_PROMPTS: &[u64] = &[512, 1024];

/// Contents whose acceptance is measured when the server speculates.
const SPEC_CONTENTS: &[&str] = &["builtin:prose", "builtin:code"];

/// What calibration will send, decided before anything is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub lengths: Vec<u64>,
    pub load_length: u64,
    pub concurrency: Vec<u32>,
    /// Mixed cells: (requests decoding, prompt tokens prefilled beside them).
    pub mixed: Vec<(u32, u64)>,
    /// Corpora measured for acceptance (empty unless the server speculates).
    pub spec_contents: Vec<String>,
}

/// The lengths, capped by `--max-length` and the server's limit less the output.
pub fn plan(args: &CalibrateArgs, info: &ServerInfo) -> anyhow::Result<Plan> {
    let limit = info
        .max_input_tokens
        .or(info.context_length)
        .map(|c| c.saturating_sub(args.output_tokens + 1));
    let cap = limit.map_or(args.max_length, |l| l.min(args.max_length));
    let mut lengths: Vec<u64> = std::iter::successors(Some(SHORTEST), |n| Some(n * 2))
        .take_while(|&n| n <= cap)
        .collect();
    if lengths.last().is_some_and(|&l| l < cap) {
        lengths.push(cap);
    }
    if lengths.len() < crate::fit::MIN_TTFT_POINTS {
        anyhow::bail!(
            "--max-length {}: the prefill law needs {} lengths from {SHORTEST} tokens up; the \
             server allows prompts up to {} tokens with --output-tokens {}",
            args.max_length,
            crate::fit::MIN_TTFT_POINTS,
            limit.map_or("?".into(), |l| l.to_string()),
            args.output_tokens
        );
    }
    let speculates = !info.speculative.is_null();
    let top = match args.concurrency_up_to {
        Some(0) => anyhow::bail!("--concurrency-up-to must be at least 1"),
        Some(n) => n,
        None => info
            .slots
            .or(info.max_running_requests)
            .map_or(DEFAULT_CONCURRENCY, |s| {
                s.min(u64::from(MAX_DEFAULT_CONCURRENCY)) as u32
            })
            .max(1),
    };
    let mut concurrency: Vec<u32> = std::iter::successors(Some(1u32), |c| Some(c * 2))
        .take_while(|&c| c < top)
        .collect();
    concurrency.push(top);
    // One decoder, and as many as leave a slot for the prompt.
    let mut decoders = vec![1, top.saturating_sub(1)];
    decoders.dedup();
    let mixed = decoders
        .into_iter()
        .filter(|&k| k >= 1 && k < top)
        .flat_map(|k| {
            MIXED_PROMPTS
                .iter()
                .filter(move |&&p| p <= cap)
                .map(move |&p| (k, p))
        })
        .collect();
    Ok(Plan {
        mixed,
        load_length: args.load_length.min(cap),
        lengths,
        concurrency,
        spec_contents: if speculates {
            SPEC_CONTENTS.iter().map(|s| s.to_string()).collect()
        } else {
            Vec::new()
        },
    })
}

/// Where the records of a calibration go: beside the profile, named after it.
pub fn records_path(profile: &Path, part: &str) -> PathBuf {
    let stem = profile
        .file_stem()
        .map_or("profile".into(), |s| s.to_string_lossy().into_owned());
    profile.with_file_name(format!("{stem}.{part}.jsonl"))
}

fn target_flags(args: &CalibrateArgs) -> Vec<String> {
    let api = clap::ValueEnum::to_possible_value(&args.api)
        .map_or("auto".to_string(), |v| v.get_name().to_string());
    let mut v = vec!["--url".into(), args.url.clone(), "--api".into(), api];
    if let Some(m) = &args.model {
        v.extend(["--model".into(), m.clone()]);
    }
    if let Some(k) = &args.api_key_env {
        v.extend(["--api-key-env".into(), k.clone()]);
    }
    v
}

/// `argv` as built by `step_argv`: the subcommand's name, then its flags.
fn parse<T: clap::Args + clap::FromArgMatches>(mut argv: Vec<String>) -> anyhow::Result<T> {
    let name = argv.remove(0);
    crate::twin::args::parse(&name, argv)
}

/// A fresh records file (an old one from an earlier calibration is replaced).
fn fresh(path: &Path) -> anyhow::Result<String> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("--out: cannot replace {}: {e}", path.display()),
    }
    Ok(path.display().to_string())
}

async fn sweep(
    args: &CalibrateArgs,
    lengths: &str,
    content: Option<&str>,
    out: &Path,
) -> anyhow::Result<()> {
    let mut argv = step_argv(
        "sweep",
        args,
        &["--lengths", lengths, "--reps", &args.reps.to_string()],
        out,
    )?;
    if let Some(c) = content {
        argv.extend(["--corpus".to_string(), c.to_string()]);
    }
    let a: crate::sweep::args::SweepArgs = parse(argv)?;
    crate::sweep::execute(a).await?;
    Ok(())
}

/// The argv of a calibration step: `cmd`, the target's flags, the step's `own` flags, then
/// the flags every step shares (output tokens, seed, a fresh `out`).
fn step_argv(
    cmd: &str,
    args: &CalibrateArgs,
    own: &[&str],
    out: &Path,
) -> anyhow::Result<Vec<String>> {
    let mut argv = vec![cmd.to_string()];
    argv.extend(target_flags(args));
    argv.extend(own.iter().map(|s| s.to_string()));
    argv.extend(
        [
            "--output-tokens",
            &args.output_tokens.to_string(),
            "--seed",
            &args.seed.to_string(),
            "--out",
            &fresh(out)?,
        ]
        .map(String::from),
    );
    Ok(argv)
}

async fn load(args: &CalibrateArgs, plan: &Plan, out: &Path) -> anyhow::Result<()> {
    let conc = plan
        .concurrency
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let own = [
        "--lengths",
        &plan.load_length.to_string(),
        "--concurrency",
        &conc,
        "--requests",
        &args.requests.to_string(),
    ];
    let argv = step_argv("load", args, &own, out)?;
    let a: crate::load::args::LoadArgs = parse(argv)?;
    crate::load::execute(a).await?;
    Ok(())
}

/// The mixed cells: their trace laid out on the step model fitted so far (`records`),
/// replayed with `load --trace`. `Ok(false)` when there is nothing to run.
async fn mixed(
    args: &CalibrateArgs,
    plan: &Plan,
    info: &ServerInfo,
    records: &[PathBuf],
    out: &Path,
) -> anyhow::Result<bool> {
    if plan.mixed.is_empty() {
        return Ok(false);
    }
    let top = plan.concurrency.iter().copied().max().unwrap_or(1);
    let so_far = inputs::gather(records, top)?;
    let c = fit::coefficients(&so_far).ok_or_else(|| {
        anyhow::anyhow!(
            "the sweep and cells gave no usable step model to lay the mixed cells out on"
        )
    })?;
    let context = info.context_length.unwrap_or(8192);
    let lines = crate::twin::measure::mixed_plan::trace(&c, &plan.mixed, args.reps.max(1), context);
    let trace = records_path(&args.out, "mixed-trace");
    std::fs::write(&trace, crate::twin::measure::mixed_plan::jsonl(&lines))
        .map_err(|e| anyhow::anyhow!("--out: cannot write {}: {e}", trace.display()))?;
    eprintln!(
        "twin calibrate: mixed cells {:?} (decoding, prompt) × {} reps, {} requests over {:.1} s",
        plan.mixed,
        args.reps.max(1),
        lines.len(),
        crate::twin::measure::mixed_plan::planned_s(&lines)
    );
    let trace = trace.display().to_string();
    let own = ["--trace", &trace, "--trace-format", "jsonl", "--slo", ""];
    let argv = step_argv("load", args, &own, out)?;
    let a: crate::load::args::LoadArgs = parse(argv)?;
    crate::load::execute(a).await?;
    Ok(true)
}

/// What a calibration produced.
pub struct Calibration {
    pub profile: Profile,
    pub records: Vec<PathBuf>,
    pub plan: Plan,
    pub elapsed_s: f64,
}

/// Probe, measure, fit; the records are written beside `args.out`, the profile is returned.
pub async fn calibrate(args: &CalibrateArgs) -> anyhow::Result<Calibration> {
    let started = Instant::now();
    let key = match &args.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            anyhow::anyhow!("--api-key-env {var}: the environment variable is not set")
        })?),
        None => std::env::var("OPENAI_API_KEY").ok(),
    };
    let shown = strip_credentials(&args.url);
    reqwest::Url::parse(&args.url)
        .map_err(|e| anyhow::anyhow!("--url `{shown}` is not a URL ({e})"))?;
    let http = Http::new(&args.url, key)?;
    let info = detect::probe(&http)
        .await
        .map_err(|e| anyhow::anyhow!("{}", http.redact(&format!("{e:#}"))))?;
    let plan = plan(args, &info)?;
    eprintln!(
        "twin calibrate: {} ({}): sweep {:?} × {} reps, closed loop c={:?} at {} tokens × {} requests",
        shown,
        info.kind.name(),
        plan.lengths,
        args.reps,
        plan.concurrency,
        plan.load_length,
        args.requests
    );
    let lengths = plan
        .lengths
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut records = vec![records_path(&args.out, "sweep")];
    sweep(args, &lengths, None, &records[0]).await?;
    for content in &plan.spec_contents {
        let part = format!("spec-{}", content.trim_start_matches("builtin:"));
        let path = records_path(&args.out, &part);
        sweep(args, &plan.load_length.to_string(), Some(content), &path).await?;
        records.push(path);
    }
    let load_path = records_path(&args.out, "load");
    load(args, &plan, &load_path).await?;
    records.push(load_path.clone());
    let mixed_path = records_path(&args.out, "mixed");
    match mixed(args, &plan, &info, &records, &mixed_path).await {
        Ok(true) => records.push(mixed_path),
        Ok(false) => {}
        // A server that takes no token-id prompts cannot replay a trace: the interference
        // is then left unidentified, and the profile says so.
        Err(e) => eprintln!("twin calibrate: mixed cells not measured: {e:#}"),
    }
    let top = plan.concurrency.iter().copied().max().unwrap_or(1);
    let gathered = inputs::gather(&records, top)?;
    let (profile, skipped) =
        crate::twin::measure::insample::widen(fit::fit(&gathered)?, &load_path);
    if let Some(why) = skipped {
        eprintln!("twin calibrate: {why}");
    }
    Ok(Calibration {
        profile,
        records,
        plan,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}
