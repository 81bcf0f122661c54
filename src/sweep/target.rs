//! Preparing the target before the first measured request: its limits and the lengths they
//! allow, the notes on what it cannot do, the prompt source, the API's own prefix (cache
//! allowance) and the transport check — or those kept from a resumed file —, and the run
//! record that heads the result file.

use super::session::Session;
use super::{Plan, allowance, transport};

use crate::backend::instance::InstanceMarker;
use crate::backend::{Backend, Connected, detect::ServerInfo, http::strip_credentials};
use crate::lengths::format_count;
use crate::record::{RunConfig, RunRecord, Target, TargetChecks};
use crate::sweep::args::SweepArgs;
use crate::workload::{NonceSource, PromptSource, points};
use std::sync::Arc;

/// A target ready to measure once its checks are made (`Prepared::check`).
pub struct Prepared {
    /// The run record, its checks still to make (the instance marker aside).
    pub run: RunRecord,
    pub session: Session,
    /// The server's instance marker, read before any generate request of this run.
    pub marker: Option<InstanceMarker>,
    probes: Probes,
}

/// What the checks' probes need.
struct Probes {
    fresh: Arc<dyn Backend>,
    keep_alive: Arc<dyn Backend>,
    url: String,
    rtt_s: Option<f64>,
    /// The server's cache page, tokens: the cache allowance beside the API prefix.
    page: u64,
}

pub(super) async fn prepare(
    args: &SweepArgs,
    plan: &Plan,
    url: &str,
    conn: Connected,
) -> anyhow::Result<Prepared> {
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
    let reps = match &plan.accuracy {
        Some(a) => a.tasks.per_length(),
        None if args.needle => args.reps.max(plan.depths.len() as u32),
        None => args.reps,
    };
    if let Some(a) = &plan.accuracy {
        // Lengths resolved from the server (`max`) are checked here, still before any
        // request is sent.
        a.check_lengths(&lengths, &plan.depths, plan.style())?;
    }
    eprintln!("{}", describe_target(&info, &conn.model, &lengths, reps));
    print_notes(&info);
    let keep_alive: Arc<dyn Backend> = Arc::from(conn.backend);
    let fresh: Arc<dyn Backend> = Arc::from(conn.fresh);
    let backend = if args.fresh_connection {
        fresh.clone()
    } else {
        keep_alive.clone()
    };
    let marker = backend.instance_marker().await;
    let ceiling = limit
        .as_ref()
        .map(|l| l.tokens.saturating_sub(args.output_tokens));
    let mut nonce = NonceSource::from_entropy();
    let prompts = PromptSource::prepare_with(
        backend.as_ref(),
        args.needle || plan.accuracy.is_some(),
        ceiling,
        &mut nonce,
        plan.content.as_ref(),
    )
    .await?;
    eprintln!("content: {}", prompts.content_label());
    let mut prompts = prompts;
    if let Some(&longest) = lengths.last() {
        prompts.check_room(backend.as_ref(), longest).await?;
    }
    let page = info.page_size.unwrap_or(16).max(1);
    let session = Session {
        backend: backend.clone(),
        prompts,
        nonce,
        cache_bust: args.cache_bust,
        output_tokens: args.output_tokens,
        cache_allowance_tokens: page,
        reports_cached_tokens: info.reports_cached_tokens == Some(true),
    };
    let run = RunRecord {
        schema: crate::record::SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        target: Target {
            url: strip_credentials(url),
            api: backend.api().to_string(),
            model: Some(conn.model.clone()),
            server_info: serde_json::to_value(&info)?,
            // Made (or kept from a resumed file) by `Prepared::check`.
            checks: crate::record::TargetChecks {
                instance: marker.as_ref().map(super::resume::record),
                ..Default::default()
            },
        },
        config: run_config(args, plan, &info, lengths, reps, &session, backend.as_ref()),
    };
    Ok(Prepared {
        run,
        session,
        marker,
        probes: Probes {
            fresh,
            keep_alive,
            url: url.to_string(),
            rtt_s: info.rtt_s,
            page,
        },
    })
}

/// The run's configuration as the run record states it.
fn run_config(
    args: &SweepArgs,
    plan: &Plan,
    info: &ServerInfo,
    lengths: Vec<u64>,
    reps: u32,
    session: &Session,
    backend: &dyn Backend,
) -> RunConfig {
    RunConfig {
        lengths,
        output_tokens: args.output_tokens,
        reps,
        method: args.method.name().to_string(),
        cache_bust: args.cache_bust.name().to_string(),
        needle: args.needle,
        tasks: plan
            .accuracy
            .as_ref()
            .map(|a| a.names())
            .unwrap_or_default(),
        samples: plan.accuracy.as_ref().map(|a| a.tasks.samples),
        accuracy_threshold: plan
            .accuracy
            .as_ref()
            .map(|_| args.accuracy.accuracy_threshold.clone()),
        prompt_style: (args.needle || plan.accuracy.is_some())
            .then(|| plan.style().name().to_string()),
        needle_depths: if args.needle || plan.accuracy.is_some() {
            plan.depths.clone()
        } else {
            Vec::new()
        },
        timeout: args.timeout.clone(),
        seed: args.seed,
        prompt_mode: session.prompts.mode().name().to_string(),
        content: Some(session.prompts.content_label()),
        rtt_s: info.rtt_s,
        simulator: args.target.url.is_none().then(|| format!("{:?}", args.sim)),
        depth: plan
            .depth
            .as_ref()
            .map(|d| d.config(backend.api(), info.reports_cached_tokens == Some(true))),
    }
}

impl Prepared {
    /// Measure the API prefix and the transport, or take `kept` (a resumed file's, for
    /// the same target) and send nothing; either way they head `run` and set the cache
    /// allowance. Returns whether samples travel on delayed connections.
    pub(super) async fn check(
        &mut self,
        args: &SweepArgs,
        plan: &Plan,
        kept: Option<&TargetChecks>,
    ) -> bool {
        let p = &self.probes;
        let from = if kept.is_some() {
            "kept from the file: "
        } else {
            ""
        };
        let checks = match kept {
            Some(k) => {
                eprintln!("{from}{}", allowance_line(k.api_prefix_tokens, p.page));
                k.clone()
            }
            None => {
                let session = &mut self.session;
                let probe_deadline = plan.timeout.deadline(allowance::PROBE_TOKENS, 1);
                let api_prefix = match allowance::measure_api_prefix(session, probe_deadline).await
                {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("warning: measuring the prefix the API adds failed: {e}");
                        None
                    }
                };
                eprintln!("{}", allowance_line(api_prefix, p.page));
                let transport = transport::check(
                    session,
                    p.fresh.as_ref(),
                    p.keep_alive.as_ref(),
                    &p.url,
                    p.rtt_s,
                    probe_deadline,
                )
                .await;
                TargetChecks {
                    api_prefix_tokens: api_prefix,
                    transport: Some(transport),
                    instance: self.run.target.checks.instance.clone(),
                }
            }
        };
        self.session.cache_allowance_tokens = p.page + checks.api_prefix_tokens.unwrap_or(0);
        let transport = checks.transport.clone().unwrap_or_default();
        eprintln!("{from}{}", transport::describe(&transport));
        if transport.delayed && args.fresh_connection {
            eprintln!(
                "  (this sweep opens a fresh connection per request: its samples are not delayed)"
            );
        }
        self.run.target.checks = checks;
        // With a fresh connection per request no sample travels on a delayed connection.
        transport.delayed && !args.fresh_connection
    }
}

/// What the server cannot do that the samples will show.
fn print_notes(info: &ServerInfo) {
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
