//! The sessions command from flags to printed summary: validate, connect (or start the
//! simulator), write the header, run each cell from a flushed cache, then the capacity.

use super::args::SessionsArgs;
use super::capacity::capacity;
use super::cell::{self, Shared};
use super::chat::ChatTarget;
use super::file::SessionsRecords;
use super::plan::SessionsPlan;
use super::record::{SessionCapacityRecord, SessionsCellRecord, SessionsPlanRecord, TurnRecord};
use super::render::{self, View};
use super::texts::Texts;
use crate::backend::Backend;
use crate::backend::http::strip_credentials;
use crate::choices::{ApiChoice, Endpoint};
use crate::record::{Record, RunConfig, RunRecord, Target};
use crate::run::target::{Connection, TargetArgs};
use crate::run::writer::ResultWriter;
use crate::workload::{NonceSource, PromptSource};
use std::sync::Arc;
use std::time::Duration;

/// Each request's deadline: a long prefill fails alone, the session with it.
const REQUEST_DEADLINE: Duration = Duration::from_secs(600);

/// What a sessions run measured (what `run` prints; tests read it).
#[derive(Debug, Clone)]
pub struct SessionsOutcome {
    pub run: RunRecord,
    pub plan: SessionsPlanRecord,
    /// This invocation's turns (a resumed file's earlier turns are in the file only).
    pub turns: Vec<TurnRecord>,
    /// Every cell of the plan, kept or measured, ascending.
    pub cells: Vec<SessionsCellRecord>,
    pub capacity: SessionCapacityRecord,
}

/// Run `ctxbench sessions` and print its summary; the exit code says whether turns failed.
pub async fn run(args: SessionsArgs) -> anyhow::Result<u8> {
    let format = args.format;
    let html = args.html.clone();
    let out = execute(args).await?;
    let view = View {
        plan: Some(&out.plan),
        cells: &out.cells,
        capacity: Some(&out.capacity),
    };
    crate::stdout::print_stdout(render::render(&view, format).as_bytes())?;
    if let Some(path) = &html {
        let records = SessionsRecords {
            plan: Some(out.plan.clone()),
            turns: out.turns.clone(),
            cells: out.cells.clone(),
            capacity: Some(out.capacity.clone()),
        };
        crate::report::write_atomic(path, &super::html::page(&out.run, &records))?;
        eprintln!("wrote {}", path.display());
    }
    let ok: u64 = out.cells.iter().map(|c| c.turns_ok).sum();
    let failed: u64 = out.cells.iter().map(|c| c.turns_failed).sum();
    Ok(match (ok, failed) {
        (0, _) => crate::exit::NOTHING_VALID,
        (_, 0) => crate::exit::OK,
        _ => crate::exit::PARTIAL,
    })
}

/// The run record of a sessions run: the target as probed, the plan as a config, and the
/// simulator's flags when it runs against one.
fn run_record(
    plan: &SessionsPlan,
    url: &str,
    model: &str,
    info: &crate::backend::server_info::ServerInfo,
    prompts: &PromptSource,
    simulator: Option<String>,
) -> anyhow::Result<RunRecord> {
    Ok(RunRecord {
        schema: crate::record::SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        target: Target {
            url: strip_credentials(url),
            api: info.kind.name().to_string(),
            model: Some(model.to_string()),
            server_info: serde_json::to_value(info)?,
            checks: Default::default(),
        },
        config: RunConfig {
            lengths: Vec::new(),
            output_tokens: *plan.output_tokens.end(),
            reps: plan.turns,
            method: "sessions".into(),
            cache_bust: "nonce+flush".into(),
            needle: plan.needle,
            needle_depths: if plan.needle { vec![0.5] } else { Vec::new() },
            timeout: REQUEST_DEADLINE.as_secs().to_string(),
            seed: plan.seed,
            prompt_mode: prompts.mode().name().to_string(),
            rtt_s: info.rtt_s,
            simulator,
            depth: None,
            content: Some(prompts.content_label()),
            tasks: Vec::new(),
            samples: None,
            accuracy_threshold: None,
            prompt_style: Some("chat".into()),
        },
    })
}

/// "sessions: cells [1, 4], 8 turns each, model m, page 16 tokens, pool 524288 tokens"
fn header_line(plan: &SessionsPlan, model: &str, page: Option<u64>, pool: Option<u64>) -> String {
    format!(
        "sessions: cells {:?}, {} turns each, model {model}, page {}, pool {}",
        plan.cells,
        plan.turns,
        page.map_or("unknown (hits counted to the token)".to_string(), |p| {
            format!("{p} tokens")
        }),
        pool.map_or("unknown".to_string(), |p| format!("{p} tokens"))
    )
}

/// The run itself, printing nothing on stdout.
pub async fn execute(args: SessionsArgs) -> anyhow::Result<SessionsOutcome> {
    let plan = SessionsPlan::from_args(&args)?;
    // The simulator it starts keeps replies cached, as real prefix caches do.
    let mut sim = args.sim.clone();
    sim.cache_replies = true;
    let target = TargetArgs {
        url: args.url.clone(),
        api: match args.api {
            ApiChoice::Vllm => ApiChoice::Vllm,
            _ => ApiChoice::Openai,
        },
        endpoint: Endpoint::Chat,
        model: args.model.clone(),
        api_key_env: args.api_key_env.clone(),
    };
    let Connection {
        sim: started,
        url,
        conn,
    } = crate::run::target::connect(&target, &sim, args.seed, |s| {
        format!(
            "ctxbench: no --url given: running sessions against the built-in simulator at {} \
             (persona {}, context {}, KV pool {} tokens)",
            s.url(),
            format!("{:?}", sim.persona).to_lowercase(),
            sim.context_length,
            sim.kv_pool_tokens
                .map_or("4 × context".to_string(), |p| p.to_string())
        )
    })
    .await?;
    let info = conn.info.clone();
    let source = info
        .context_source
        .clone()
        .unwrap_or_else(|| "server".into());
    plan.check_first_fits(
        info.context_length,
        &format!("the server's context limit ({source}) of"),
    )?;
    // A server that states no page (llama.cpp reuses a prefix to the token) is counted
    // token by token: possible hits stay an upper bound on what it can serve.
    let page = info.page_size.unwrap_or(1).max(1);
    let pool = info.kv_pool_tokens;
    let backend: Arc<dyn Backend> = Arc::from(conn.backend);
    let content = crate::workload::load_content(args.corpus.as_deref(), None, None)?;
    let mut nonce = NonceSource::from_entropy();
    let prompts = PromptSource::prepare_with(
        backend.as_ref(),
        plan.needle,
        info.context_length,
        &mut nonce,
        content.as_ref(),
    )
    .await?;
    let run = run_record(
        &plan,
        &url,
        &conn.model,
        &info,
        &prompts,
        started.as_ref().map(|_| format!("{sim:?}")),
    )?;
    let plan_record = plan.record(page, pool);
    let (mut writer, mut kept) = open_writer(&args, &run, &plan_record)?;
    let mut texts = Texts {
        backend: backend.clone(),
        source: prompts,
        nonce,
    };
    let systems = texts
        .systems(plan.system_tokens, plan.shared_system)
        .await?;
    let shared = Shared {
        target: ChatTarget {
            http: conn.http.clone(),
            model: conn.model.clone(),
            flusher: info.flusher.clone(),
        },
        plan: plan.clone(),
        texts: Arc::new(tokio::sync::Mutex::new(texts)),
        systems: Arc::new(systems),
        page,
        server_limit: info.context_length,
        deadline: REQUEST_DEADLINE,
    };
    eprintln!("{}", header_line(&plan, &conn.model, info.page_size, pool));
    let mut cells: Vec<SessionsCellRecord> = Vec::new();
    let mut turns: Vec<TurnRecord> = Vec::new();
    for &n in &plan.cells {
        if let Some(done) = kept.finished(n) {
            eprintln!("cell {n}: kept from {}", describe_out(&args));
            cells.push(done.clone());
            continue;
        }
        let attempt = kept.next_attempt(n);
        let (t, c) = cell::run(&shared, n, attempt, &mut writer).await?;
        turns.extend(t);
        eprintln!("{}", cell_line(&c));
        kept.cells.push(c.clone());
        cells.push(c);
    }
    let cap = capacity(&cells, &plan.slo.to_string(), plan.hit_floor, pool);
    writer.append(&Record::SessionCapacity(cap.clone()))?;
    writer.sync()?;
    eprintln!("{}", cap.line);
    Ok(SessionsOutcome {
        run,
        plan: plan_record,
        turns,
        cells,
        capacity: cap,
    })
}

fn describe_out(args: &SessionsArgs) -> String {
    args.out
        .as_ref()
        .map_or("the file".to_string(), |p| p.display().to_string())
}

/// The result file: new, or continued with its sessions records (the plan must match).
fn open_writer(
    args: &SessionsArgs,
    run: &RunRecord,
    plan: &SessionsPlanRecord,
) -> anyhow::Result<(ResultWriter, SessionsRecords)> {
    let Some(path) = &args.out else {
        return Ok((ResultWriter::none(), SessionsRecords::default()));
    };
    if args.resume && path.exists() {
        let (mut w, existing) = ResultWriter::resume(path, run)?;
        let kept = existing.sessions;
        match &kept.plan {
            Some(old) if old != plan => anyhow::bail!(
                "--resume: {} was written for another sessions plan ({}); use a new --out file",
                path.display(),
                serde_json::to_string(old).unwrap_or_default()
            ),
            Some(_) => {}
            None => w.append(&Record::SessionsPlan(plan.clone()))?,
        }
        return Ok((w, kept));
    }
    let mut w = ResultWriter::create(path)?;
    w.append(&Record::Run(run.clone()))?;
    w.append(&Record::SessionsPlan(plan.clone()))?;
    w.sync()?;
    Ok((w, SessionsRecords::default()))
}

/// One line per finished cell on stderr.
pub fn cell_line(c: &SessionsCellRecord) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3));
    let t1 = c
        .ttft_s_by_turn
        .iter()
        .find(|t| t.turn == 1)
        .map(|t| t.ttft_s.p50);
    let server = c.server_hits.as_ref().map_or(String::new(), |s| {
        format!(
            ", server counter {} Δ {:.0} vs client {}{}",
            s.counter,
            s.delta_tokens,
            s.client_tokens,
            if s.agrees { "" } else { " (differs)" }
        )
    });
    format!(
        "cell {} sessions: {} turns ok, {} failed; TTFT turn 1 p50 {} ms, warm p50 {} ms p95 {} ms; \
         hits {}{server}",
        c.sessions,
        c.turns_ok,
        c.turns_failed,
        ms(t1),
        ms(c.ttft_s_warm.map(|q| q.p50)),
        ms(c.ttft_s_warm.map(|q| q.p95)),
        c.hits
            .pooled
            .ratio
            .map_or("n/a".to_string(), |r| format!("{r:.2}"))
    )
}
