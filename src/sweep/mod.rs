//! The sweep: planning the points, running them small to large, timeouts, resume.

pub mod allowance;
pub mod args;
pub mod depth;
pub mod finish;
pub mod jobs;
pub mod measure;
pub mod output;
pub mod post;
pub mod resume;
pub mod session;
pub mod target;
pub mod timeout;
pub mod transport;

use crate::backend;
use crate::choices::Format;
use crate::exit;
use crate::lengths::parse_lengths;
use crate::record::{ErrorRecord, RunRecord, Sample};
use crate::run::runner::InFlight;
use crate::run::{Collector, Released, Slot, run_jobs};
use crate::sweep::args::SweepArgs;
use crate::workload::PromptMode;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use timeout::TimeoutPolicy;

/// Output tokens below which graded answers may be cut short (RULER's vt allows 30).
const GRADED_OUTPUT_TOKENS: u64 = 32;

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
    /// `--corpus` / `--dataset`, read; `None` for filler.
    content: Option<crate::workload::content::Content>,
    /// `--tasks`, parsed, with the `qa` items.
    pub accuracy: Option<crate::accuracy::args::AccuracyPlan>,
    /// Graded prompts go through the server's chat template (else raw completions).
    chat: bool,
}

impl Plan {
    /// How graded prompts are put to the model.
    fn style(&self) -> crate::accuracy::generate::Style {
        match self.chat {
            true => crate::accuracy::generate::Style::Chat,
            false => crate::accuracy::generate::Style::Raw,
        }
    }
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
    let accuracy = args.accuracy.plan(args.content.dataset.as_deref())?;
    if let Some(a) = &accuracy {
        if depth.is_some() {
            anyhow::bail!("--tasks grades cold samples: it does not combine with --depth");
        }
        if args.needle {
            anyhow::bail!("--tasks replaces --needle (task niah is the single needle)");
        }
        let explicit: Vec<u64> = lengths
            .iter()
            .filter_map(|l| match l {
                crate::lengths::LengthSpec::Tokens(n) => Some(*n),
                _ => None,
            })
            .collect();
        if args.output_tokens < GRADED_OUTPUT_TOKENS {
            eprintln!(
                "note: --tasks grades the first output tokens: {} may cut an answer short (a \
                 chat model often restates the question first); RULER allows 30 to 128",
                args.output_tokens
            );
        }
        // The raw style's longer questions: the stricter check.
        a.check_lengths(&explicit, &depths, crate::accuracy::generate::Style::Raw)?;
    }
    // Task qa reads --dataset as its items: the haystack stays filler.
    let qa = accuracy.as_ref().is_some_and(|a| !a.qa.is_empty());
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
        content: crate::workload::load_content(
            args.content.corpus.as_deref(),
            args.content.dataset.as_deref().filter(|_| !qa),
            args.content.dataset_format,
        )?,
        accuracy,
        chat: false,
    })
}

/// Run the sweep (library entry point used by tests).
pub async fn execute(mut args: SweepArgs) -> anyhow::Result<SweepResult> {
    let plan = plan(&args)?;
    let graded = plan.accuracy.is_some() || args.needle;
    if graded && args.accuracy.wants_chat() {
        args.target.endpoint = crate::choices::Endpoint::Chat;
    }
    // Keep the simulator alive for the whole sweep.
    let crate::run::target::Connection {
        sim: _sim,
        url,
        conn,
    } = crate::run::target::connect(&args.target, &args.sim, args.seed, |sim| {
        format!(
            "ctxbench: no --url given: benchmarking the built-in simulator at {} \
             (persona {}, spec {}, context {})",
            sim.url(),
            format!("{:?}", args.sim.persona).to_lowercase(),
            args.sim.spec,
            args.sim.context_length
        )
    })
    .await?;
    let (conn, chat) = if graded {
        crate::run::target::graded_route(&args.target, &url, conn).await?
    } else {
        (conn, false)
    };
    let mut plan = plan;
    plan.chat = chat;
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

/// Prepare the target, open the file, measure the jobs left, then the depth turns, finish.
async fn run_connected(
    args: SweepArgs,
    mut plan: Plan,
    url: &str,
    conn: backend::Connected,
) -> anyhow::Result<SweepResult> {
    // Requests run one at a time: /metrics counter deltas around each are its own
    // (speculative acceptance; vLLM's phase times).
    let conn = backend::metrics_delta::with_metrics_deltas(conn).await;
    let mut prepared = target::prepare(&args, &plan, url, conn).await?;
    // A resumed file is opened (and refused if another target or configuration wrote it)
    // before any check is sent; a new file only once the checks can head it.
    let old_run = resume::earlier_run(&args)?;
    let early = match &old_run {
        Some(_) => Some(output::open(&args, &prepared.run)?),
        None => None,
    };
    let earlier = old_run.map(|old| resume::compare(&old, &prepared.run, prepared.marker.as_ref()));
    if let Some(resume::Earlier::Changed(why)) = &earlier {
        eprintln!("resume: measuring the target's checks again: {why}");
    }
    let kept = earlier.as_ref().and_then(resume::Earlier::checks);
    let transport_delayed = prepared.check(&args, &plan, kept).await;
    let target::Prepared {
        run,
        mut session,
        marker,
        ..
    } = prepared;
    let output::Opened {
        mut collector,
        samples,
        errors,
    } = match early {
        Some(opened) => opened,
        None => output::open(&args, &run)?,
    };
    let reps = run.config.reps;
    let jobs = jobs::list(&run.config.lengths, reps, args.method, &samples);
    eprintln!("{}", cost_line(&jobs));

    observe_resumed(&mut plan.timeout, &samples);
    let cold = needs_warm_up(earlier.as_ref(), session.prompts.mode());
    if !args.no_warmup && !jobs.is_empty() && cold {
        let n = WARMUP_TOKENS.min(run.config.lengths[0]);
        if let Err(e) = session.warm_up(n, plan.timeout.deadline(n, 8)).await {
            eprintln!("warning: the warm-up request failed: {e}");
        }
    }

    let bar = progress_bar(jobs.len() as u64);
    let sender = jobs::Sender::new(session, marker, bar.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let listener = spawn_interrupt_listener(stop.clone());
    let ctx = post::Ctx {
        args: &args,
        depths: &plan.depths,
        accuracy: plan.accuracy.as_ref(),
        style: plan.style(),
        run: &run,
        transport_delayed,
        bar: &bar,
        stop: &stop,
    };
    let (release, released) = crate::run::Released::new();
    let post = post::Post::start(ctx, &mut plan.timeout, jobs, (samples, errors), release);
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let mut handled = measure_all(&sender, released, &mut collector, post).await?;

    let mut sender = sender.lock().await;
    if let Some(d) = plan.depth.as_ref().filter(|_| !handled.interrupted) {
        let turns = depth::Turns {
            session: &mut sender.session,
            writer: &mut collector.writer,
            samples: &mut handled.samples,
            errors: &mut handled.errors,
            timeout: &plan.timeout,
            stop: &stop,
            bar: &bar,
            reps,
        };
        handled.interrupted = depth::run(d, turns).await?;
    }
    bar.finish_and_clear();
    listener.abort();
    finish::finish(
        &args,
        run,
        transport_delayed,
        &mut collector.writer,
        handled,
    )
}

/// The warm-up spares the first sample what a cold server process pays once (weights
/// paged in, kernels compiled, graphs captured, memory allocated); caches are no reason for
/// it, as every sample is nonce-led (and flushed where the server can), and neither is the
/// connection, as a new one's connect time is kept out of TTFT. So a new sweep, or a resume
/// against a changed target (prepared like a new sweep), sends it; a resume does not when
/// the server is the very instance that served the file's samples (its marker unchanged),
/// nor when this run has already run the model on it (the text calibration's requests). A
/// resume whose server cannot tell its instance keeps it: it may have restarted cold since.
fn needs_warm_up(earlier: Option<&resume::Earlier>, mode: PromptMode) -> bool {
    match earlier {
        None | Some(resume::Earlier::Changed(_)) => true,
        Some(resume::Earlier::SameInstance(_)) => false,
        Some(resume::Earlier::SameTarget(_)) => {
            !matches!(mode, PromptMode::CalibratedText | PromptMode::ProbedText)
        }
    }
}

/// Resumed samples feed the `--timeout auto` policy; depth turns do not: they are warm, and
/// their TTFT says nothing about a cold request's deadline.
fn observe_resumed(timeout: &mut TimeoutPolicy, samples: &[Sample]) {
    for s in samples
        .iter()
        .filter(|s| s.valid && s.depth_tokens.is_none())
    {
        if let Some(t) = s.ttft_s {
            timeout.observe(s.context_tokens, t, s.decode_tps);
        }
    }
}

/// The measured samples, the request runner's concurrency-1 case: the collector hands
/// each to `post`, which releases the next job only after handling it.
async fn measure_all(
    sender: &Arc<tokio::sync::Mutex<jobs::Sender>>,
    released: Released<jobs::Job>,
    collector: &mut Collector,
    mut post: post::Post<'_>,
) -> anyhow::Result<post::Handled> {
    let send = {
        let sender = sender.clone();
        move |_: Slot, job| {
            let sender = sender.clone();
            async move { sender.lock().await.send(job).await }
        }
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let runner = async {
        let start = tokio::time::Instant::now();
        run_jobs(1, released, start, InFlight::default(), send, tx).await;
        Ok(())
    };
    tokio::try_join!(collector.collect(rx, |c, m| post.handle(m, c)), runner)?;
    Ok(post.finish())
}

/// What the run will send, said before it starts: requests and the prompt tokens they
/// prefill (a two-point sample prefills its prompt twice).
fn cost_line(jobs: &[jobs::Planned]) -> String {
    let tokens: u64 = jobs
        .iter()
        .map(|j| match j.method {
            crate::choices::Method::TwoPoint => 2 * j.n,
            _ => j.n,
        })
        .sum();
    format!(
        "cost: {} samples will prefill {} prompt tokens (the time left is printed after each \
         point, from the timeout model)",
        jobs.len(),
        crate::lengths::format_count(tokens)
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
