//! The sweep: planning the points, running them small to large, timeouts, resume.

pub mod allowance;
pub mod depth;
pub mod exact_text;
pub mod measure;
pub mod points;
pub mod prompts;
pub mod session;
pub mod timeout;
pub mod transport;
pub mod writer;

use crate::backend::{self, detect::ServerInfo, http::strip_credentials};
use crate::cli::{Format, Method, SweepArgs};
use crate::exit;
use crate::lengths::{format_count, parse_lengths};
use crate::prompt::{NonceSource, needle_for};
use crate::record::{ErrorRecord, Record, RunConfig, RunRecord, Sample, Target};
use indicatif::{ProgressBar, ProgressStyle};
use session::{Outcome, Session};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use timeout::TimeoutPolicy;
use writer::ResultWriter;

/// Warm-up prompt size, tokens (capped by the smallest length).
const WARMUP_TOKENS: u64 = 256;

/// Everything a finished sweep produced.
pub struct SweepResult {
    pub run: RunRecord,
    pub samples: Vec<Sample>,
    pub errors: Vec<ErrorRecord>,
    pub summary: crate::record::Summary,
    pub interrupted: bool,
}

impl SweepResult {
    pub fn exit_code(&self) -> u8 {
        let pts = &self.summary.points;
        if self.interrupted {
            exit::INTERRUPTED
        } else if pts.is_empty() || pts.iter().all(|p| p.n_valid == 0) {
            exit::NOTHING_VALID
        } else if pts.iter().any(|p| p.n_valid == 0)
            || self.summary.depth.iter().any(|d| d.n_valid == 0)
        {
            exit::PARTIAL
        } else {
            exit::OK
        }
    }
}

/// `ctxbench sweep`: run, print the summary, return the exit code.
pub async fn run(args: SweepArgs) -> anyhow::Result<u8> {
    let format = args.format;
    let html = args.html.clone();
    let result = execute(args).await?;
    let text = crate::report::render(&result.run, &result.summary, format);
    print!("{text}");
    if let Some(path) = html {
        crate::report::write_html(
            &path,
            &result.run,
            &result.samples,
            &result.errors,
            &result.summary,
        )?;
    }
    Ok(result.exit_code())
}

/// Validate every option before anything is sent or written.
struct Plan {
    lengths: Vec<crate::lengths::LengthSpec>,
    depths: Vec<f64>,
    timeout: TimeoutPolicy,
    /// `--depth`: turns on cached prefixes, beside cold points at the same totals.
    depth: Option<depth::DepthPlan>,
}

fn plan(args: &SweepArgs) -> anyhow::Result<Plan> {
    let lengths = parse_lengths(&args.lengths).map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
    if args.reps == 0 {
        anyhow::bail!("--reps must be at least 1");
    }
    if args.output_tokens < 2 {
        anyhow::bail!("--output-tokens must be at least 2 (decode needs tokens after the first)");
    }
    if args.resume && args.out.is_none() {
        anyhow::bail!("--resume needs --out FILE (the file to continue)");
    }
    let depths = args
        .needle_depths
        .split(',')
        .map(|d| match d.trim().parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
            _ => Err(anyhow::anyhow!(
                "--needle-depths: `{}` is not a fraction in [0, 1] (e.g. 0.1,0.5,0.9)",
                d.trim()
            )),
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    let depth = match &args.depth {
        Some(d) => Some(depth::DepthPlan::parse(d, args.turn_tokens)?),
        None => None,
    };
    Ok(Plan {
        lengths: match &depth {
            Some(d) => d
                .totals()
                .into_iter()
                .map(crate::lengths::LengthSpec::Tokens)
                .collect(),
            None => lengths,
        },
        depths,
        timeout: TimeoutPolicy::parse(&args.timeout)?,
        depth,
    })
}

/// Run the sweep (library entry point used by tests).
pub async fn execute(args: SweepArgs) -> anyhow::Result<SweepResult> {
    let plan = plan(&args)?;
    let key = crate::run::target::api_key(args.api_key_env.as_deref())?;
    // Keep the simulator alive for the whole sweep.
    let (_sim, url) = match &args.url {
        Some(u) => (None, u.clone()),
        None => {
            let sim = crate::run::target::start_sim(&args.sim, args.seed).await?;
            let url = sim.url();
            eprintln!(
                "ctxbench: no --url given: benchmarking the built-in simulator at {url} \
                 (persona {}, spec {}, context {})",
                format!("{:?}", args.sim.persona).to_lowercase(),
                args.sim.spec,
                args.sim.context_length
            );
            (Some(sim), url)
        }
    };
    let conn = backend::connect(&url, args.api, args.endpoint, args.model.clone(), key).await?;
    run_connected(args, plan, &url, conn).await
}

/// Run the sweep against a backend already connected (an in-process fake in tests): the
/// same loop as `execute`, minus starting a simulator and probing.
pub async fn execute_with(
    args: SweepArgs,
    url: &str,
    conn: backend::Connected,
) -> anyhow::Result<SweepResult> {
    let plan = plan(&args)?;
    run_connected(args, plan, url, conn).await
}

async fn run_connected(
    args: SweepArgs,
    mut plan: Plan,
    url: &str,
    conn: backend::Connected,
) -> anyhow::Result<SweepResult> {
    let info = conn.info.clone();
    let limit = info.context_length.map(|t| points::Limit {
        tokens: t,
        source: info
            .context_source
            .clone()
            .unwrap_or_else(|| "server".into()),
    });
    if let Some(d) = &plan.depth {
        d.check_limit(args.output_tokens, limit.as_ref())?;
    }
    let lengths = points::resolve(&plan.lengths, args.output_tokens, limit.as_ref())?;
    let prompt_limit = info.max_input_tokens.map(|t| points::Limit {
        tokens: t,
        source: "/info max_input_tokens".into(),
    });
    let max_resolved = limit.as_ref().and_then(|l| {
        let wants_max = plan.lengths.contains(&crate::lengths::LengthSpec::Max);
        wants_max.then(|| l.tokens.saturating_sub(args.output_tokens))
    });
    let lengths = points::cap_prompt(lengths, max_resolved, prompt_limit.as_ref())?;
    let reps = if args.needle {
        args.reps.max(plan.depths.len() as u32)
    } else {
        args.reps
    };
    eprintln!("{}", describe_target(&info, &conn.model, &lengths, reps));
    if info.ignore_eos == Some(false) {
        eprintln!(
            "note: the {} API cannot force the output length (no ignore_eos): it is asked \
             with max tokens only, and a sample whose answer ends sooner is flagged early_stop",
            info.kind.name()
        );
    }
    if info.reports_cached_tokens != Some(true) {
        eprintln!(
            "note: the server does not say it reports cached tokens: cache hits can only be \
             inferred from timing (a TTFT far below the trend is flagged cache_hit_inferred)"
        );
    }
    let backend = if args.fresh_connection {
        conn.fresh.as_ref()
    } else {
        conn.backend.as_ref()
    };
    let ceiling = limit
        .as_ref()
        .map(|l| l.tokens.saturating_sub(args.output_tokens));
    let mut nonce = NonceSource::from_entropy();
    let prompts = prompts::PromptSource::prepare(backend, args.needle, ceiling, &mut nonce).await?;
    let page = info.page_size.unwrap_or(16).max(1);
    let mut session = Session {
        backend,
        prompts,
        nonce,
        cache_bust: args.cache_bust,
        output_tokens: args.output_tokens,
        cache_allowance_tokens: page,
        reports_cached_tokens: info.reports_cached_tokens == Some(true),
    };
    let api_prefix = match allowance::measure_api_prefix(
        &mut session,
        plan.timeout.deadline(allowance::PROBE_TOKENS, 1),
    )
    .await
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("warning: measuring the prefix the API adds failed: {e}");
            None
        }
    };
    session.cache_allowance_tokens = page + api_prefix.unwrap_or(0);
    eprintln!("{}", allowance_line(api_prefix, page));
    let transport = transport::check(
        &mut session,
        conn.fresh.as_ref(),
        conn.backend.as_ref(),
        url,
        info.rtt_s,
        plan.timeout.deadline(allowance::PROBE_TOKENS, 1),
    )
    .await;
    eprintln!("{}", transport::describe(&transport));
    if transport.delayed && args.fresh_connection {
        eprintln!(
            "  (this sweep opens a fresh connection per request: its samples are not delayed)"
        );
    }
    // With a fresh connection per request no sample travels on a delayed connection.
    let transport_delayed = transport.delayed && !args.fresh_connection;
    let run = RunRecord {
        schema: crate::record::SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        target: Target {
            url: strip_credentials(url),
            api: backend.api().to_string(),
            model: Some(conn.model.clone()),
            server_info: serde_json::to_value(&info)?,
            checks: crate::record::TargetChecks {
                api_prefix_tokens: api_prefix,
                transport: Some(transport),
            },
        },
        config: RunConfig {
            lengths: lengths.clone(),
            output_tokens: args.output_tokens,
            reps,
            method: args.method.name().to_string(),
            cache_bust: args.cache_bust.name().to_string(),
            needle: args.needle,
            needle_depths: if args.needle {
                plan.depths.clone()
            } else {
                Vec::new()
            },
            timeout: args.timeout.clone(),
            seed: args.seed,
            prompt_mode: session.prompts.mode().name().to_string(),
            rtt_s: info.rtt_s,
            simulator: args.url.is_none().then(|| format!("{:?}", args.sim)),
            depth: plan
                .depth
                .as_ref()
                .map(|d| d.config(backend.api(), info.reports_cached_tokens == Some(true))),
        },
    };
    let (mut writer, mut samples, mut errors) = match &args.out {
        Some(path) if args.resume && path.exists() => {
            let (w, old) = ResultWriter::resume(path, &run)?;
            eprintln!(
                "resuming {}: {} samples and {} errors already there{}",
                path.display(),
                old.samples.len(),
                old.errors.len(),
                if old.torn_tail {
                    " (a torn last line was dropped)"
                } else {
                    ""
                }
            );
            (w, old.samples, old.errors)
        }
        Some(path) => {
            let mut w = ResultWriter::create(path)?;
            w.append(&Record::Run(run.clone()))?;
            w.sync()?;
            (w, Vec::new(), Vec::new())
        }
        None => (ResultWriter::none(), Vec::new(), Vec::new()),
    };
    let done: HashSet<(u64, u32, String)> = samples
        .iter()
        .map(|s| (s.context_tokens, s.rep, s.method.clone()))
        .collect();
    let methods: Vec<Method> = match args.method {
        Method::Both => vec![Method::Stream, Method::TwoPoint],
        m => vec![m],
    };
    let mut jobs: Vec<(u64, u32, Method)> = Vec::new();
    for &n in &lengths {
        for r in 0..reps {
            for &m in &methods {
                if !done.contains(&(n, r, method_name(m).to_string())) {
                    jobs.push((n, r, m));
                }
            }
        }
    }

    // Depth turns are warm: their TTFT says nothing about a cold request's deadline.
    for s in samples
        .iter()
        .filter(|s| s.valid && s.depth_tokens.is_none())
    {
        if let Some(t) = s.ttft_s {
            plan.timeout.observe(s.context_tokens, t, s.decode_tps);
        }
    }
    if !args.no_warmup && !jobs.is_empty() {
        let n = WARMUP_TOKENS.min(lengths[0]);
        if let Err(e) = session.warm_up(n, plan.timeout.deadline(n, 8)).await {
            eprintln!("warning: the warm-up request failed: {e}");
        }
    }

    let mut marker = backend.instance_marker().await;
    // A restart seen after a failed request: the next sample meets a cold server.
    let mut restart_pending = false;
    let stop = Arc::new(AtomicBool::new(false));
    let listener = spawn_interrupt_listener(stop.clone());
    let bar = progress_bar(jobs.len() as u64);
    let mut interrupted = false;
    for (i, &(n, rep, method)) in jobs.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        bar.set_message(format!(
            "{} tokens, rep {}, {}",
            format_count(n),
            rep + 1,
            method_name(method)
        ));
        let needle = args.needle.then(|| {
            needle_for(
                args.seed,
                n,
                rep,
                plan.depths[rep as usize % plan.depths.len()],
            )
        });
        let deadline = plan.timeout.deadline(n, args.output_tokens);
        let outcome = session
            .measure(n, rep, method, needle.as_ref(), deadline)
            .await;
        // A restart empties caches and may change the configuration: samples it overlaps
        // are flagged, and the sweep carries on against the new instance.
        let restarted = match &marker {
            Some(before) => {
                let now = backend.instance_marker().await;
                let changed = now.as_ref().is_some_and(|m| m.restarted_since(before));
                if changed {
                    bar.suspend(|| {
                        eprintln!(
                            "warning: the server restarted during {} rep {}",
                            format_count(n),
                            rep + 1
                        )
                    });
                }
                // A counter grows between readings: compare the next with the latest.
                if now.is_some() {
                    marker = now;
                }
                changed
            }
            None => false,
        };
        match outcome {
            Outcome::Sample(mut s) => {
                let after_failed = std::mem::take(&mut restart_pending);
                if restarted || after_failed {
                    s.push_flag(crate::record::flag::SERVER_RESTARTED);
                }
                if transport_delayed && s.new_connection == Some(false) {
                    s.push_flag(crate::record::flag::TRANSPORT_DELAY);
                }
                // Per sample, not per server: a sample that came back without a cached-token
                // count is checked by timing even when the server says it reports counts.
                let smaller = median_ttft(&samples, |p| p < n, &s.method);
                let same = median_ttft(&samples, |p| p == n, &s.method);
                session::infer_cache_hit(&mut s, smaller, same);
                if s.valid
                    && let Some(t) = s.ttft_s
                {
                    plan.timeout.observe(n, t, s.decode_tps);
                }
                writer.append(&Record::Sample(s.clone()))?;
                samples.push(*s);
            }
            Outcome::Error(e) => {
                restart_pending |= restarted;
                bar.suspend(|| {
                    eprintln!(
                        "  {} rep {}: {} ({})",
                        format_count(n),
                        rep + 1,
                        e.message,
                        e.kind
                    )
                });
                writer.append(&Record::Error(e.clone()))?;
                errors.push(e);
            }
        }
        bar.inc(1);
        let point_done = jobs.get(i + 1).is_none_or(|next| next.0 != n);
        if point_done {
            writer.sync()?;
            let line = point_line(n, &samples, &errors);
            bar.suspend(|| eprintln!("{line}"));
            if let Some(path) = &args.html {
                let summary = crate::summary::summarize(&samples, &errors);
                if let Err(e) = crate::report::write_html(path, &run, &samples, &errors, &summary) {
                    bar.suspend(|| eprintln!("warning: writing {}: {e:#}", path.display()));
                }
            }
        }
    }
    if let Some(d) = plan.depth.as_ref().filter(|_| !interrupted) {
        let turns = depth::Turns {
            session: &mut session,
            writer: &mut writer,
            samples: &mut samples,
            errors: &mut errors,
            timeout: &plan.timeout,
            stop: &stop,
            bar: &bar,
            reps,
        };
        interrupted = depth::run(d, turns).await?;
    }
    bar.finish_and_clear();
    listener.abort();
    let mut summary = crate::summary::summarize_with_fit(&samples, &errors);
    if transport_delayed {
        summary
            .notes
            .push(format!("transport delay found: {}", transport::CURE));
    } else if args.fresh_connection
        && run
            .target
            .checks
            .transport
            .as_ref()
            .is_some_and(|t| t.delayed)
    {
        summary.notes.push(
            "transport delay found on reused connections (the server does not set \
             TCP_NODELAY): measured with a fresh connection per request, so no sample holds it"
                .into(),
        );
    }
    writer.append(&Record::Summary(summary.clone()))?;
    writer.sync()?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    if interrupted {
        match writer.path() {
            Some(p) => eprintln!(
                "interrupted: {} measurements are in {}; continue with the same command plus --resume",
                samples.len() + errors.len(),
                p.display()
            ),
            None => eprintln!("interrupted: pass --out FILE next time to be able to --resume"),
        }
    }
    Ok(SweepResult {
        run,
        samples,
        errors,
        summary,
        interrupted,
    })
}

fn method_name(m: Method) -> &'static str {
    m.sample_name()
}

fn median_ttft(samples: &[Sample], pick: impl Fn(u64) -> bool, method: &str) -> Option<f64> {
    let best = samples
        .iter()
        .filter(|s| s.valid && s.method == method && pick(s.context_tokens))
        .map(|s| s.context_tokens)
        .max()?;
    let xs: Vec<f64> = samples
        .iter()
        .filter(|s| s.valid && s.method == method && s.context_tokens == best)
        .filter_map(|s| s.ttft_s)
        .collect();
    crate::stats::median(&xs)
}

fn describe_target(info: &ServerInfo, model: &str, lengths: &[u64], reps: u32) -> String {
    let ls: Vec<String> = lengths.iter().map(|n| format_count(*n)).collect();
    format!(
        "target: {} server, model {model}, context limit {}, flush {}, RTT {}; lengths {} x {reps} reps",
        info.kind.name(),
        info.context_length
            .map(|c| c.to_string())
            .unwrap_or_else(|| "unknown".into()),
        info.flush,
        info.rtt_s
            .map(|r| format!("{:.2} ms", r * 1e3))
            .unwrap_or_else(|| "n/a".into()),
        ls.join(",")
    )
}

fn allowance_line(api_prefix: Option<u64>, page: u64) -> String {
    match api_prefix {
        Some(p) => format!(
            "cache check: the API adds {p} shared tokens ahead of every prompt (template, BOS; \
             measured with probes whose nonces differ); cached counts up to {p} + one page \
             ({page}) are tolerated"
        ),
        None => format!(
            "cache check: the server gave no cached-token count to measure the API's own prefix \
             with; cached counts up to one page ({page}) are tolerated"
        ),
    }
}

fn point_line(n: u64, samples: &[Sample], errors: &[ErrorRecord]) -> String {
    let summary = crate::summary::summarize(
        &samples
            .iter()
            .filter(|s| s.context_tokens == n)
            .cloned()
            .collect::<Vec<_>>(),
        &errors
            .iter()
            .filter(|e| e.context_tokens == n)
            .cloned()
            .collect::<Vec<_>>(),
    );
    let Some(p) = summary.points.first() else {
        return format!("{}: nothing measured", format_count(n));
    };
    let f = |s: Option<crate::record::Stat>, scale: f64, unit: &str| {
        s.map(|s| format!("{:.1}{unit}", s.median * scale))
            .unwrap_or_else(|| "-".into())
    };
    format!(
        "{:>6}: TTFT {}, prefill {}, decode {}, {}/{} valid",
        format_count(n),
        f(p.ttft_s, 1e3, " ms"),
        f(p.prefill_tps, 1.0, " tok/s"),
        f(p.decode_tps, 1.0, " tok/s"),
        p.n_valid,
        p.attempts
    )
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// First Ctrl-C: finish the request in flight, then stop. Second: leave at once.
fn spawn_interrupt_listener(stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nstopping after the request in flight (Ctrl-C again to quit now)");
            stop.store(true, Ordering::SeqCst);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(i32::from(exit::INTERRUPTED));
            }
        }
    })
}

/// Whether `--format` asks for machine output only on stdout.
pub fn is_machine(format: Format) -> bool {
    matches!(format, Format::Json | Format::Csv)
}
