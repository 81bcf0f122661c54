//! The executor of an arrival plan over HTTP: each cell's share run on the shared request
//! runner beside the telemetry scraper, every record written as it comes, the cell
//! summarised; cells resumed from the file are not run again.

use super::request::{Shot, Tail};
use super::result::LoadResult;
use super::setup::{Heads, Output};
use super::{cell, clock, gpu, knee, progress, telemetry};
use crate::backend::{Backend, http::Http};
use crate::record::Record;
use crate::record::load::{CellKey, CellRecord, LoadPlan};
use crate::run::arrivals::{ArrivalPlan, Arrivals, PlannedCell, Shape, Share};
use crate::run::shard::Shard;
use crate::run::{self, Budget, Collector, Load, Pacing, runner::InFlight};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// How long the pacing thread spins before each open-loop send (see `runner::Pacing`):
/// longer than the OS timer's usual lateness (its 50 µs slack plus a wake-up).
const SEND_SPIN: Duration = Duration::from_micros(250);
/// The longest a cell's connection warm-up may take.
const WARM_TIMEOUT: Duration = Duration::from_secs(30);

/// The state cells share.
pub(crate) struct Ctx {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) http: Http,
    pub(crate) collector: Collector,
    pub(crate) heads: Arc<Heads>,
    pub(crate) plan: LoadPlan,
    pub(crate) metrics: bool,
    /// `--telemetry-url` exporters, each scraped during every cell.
    pub(crate) telemetry: Vec<Http>,
    pub(crate) deadline: Duration,
    pub(crate) done: Vec<CellRecord>,
    pub(crate) out: LoadResult,
    pub(crate) shard: Option<Shard>,
    /// `--start-at` on this machine's clock, until the first cell takes it.
    pub(crate) gate: Option<std::time::SystemTime>,
}

impl Ctx {
    /// The state of a run writing to `output`, before its first cell: no telemetry, no
    /// shard, no `--start-at` (set those on the result).
    pub(crate) fn new(
        output: Output,
        plan: &LoadPlan,
        backend: Arc<dyn Backend>,
        http: Http,
        heads: Arc<Heads>,
        deadline: Duration,
    ) -> Ctx {
        Ctx {
            backend,
            http,
            collector: Collector::new(output.writer),
            heads,
            plan: plan.clone(),
            metrics: false,
            telemetry: Vec::new(),
            deadline,
            done: output.done,
            out: LoadResult {
                run: output.run,
                plan: plan.clone(),
                cells: Vec::new(),
                knees: Vec::new(),
                requests: output.requests,
                server_metrics: output.server_metrics,
                gpu_metrics: output.gpu_metrics,
            },
            shard: None,
            gate: None,
        }
    }
}

/// Run the plan's cells at each length, small to large; `tails(n)` makes length `n`'s
/// shared prompt tails. A knee plan probes closed cells as its search asks.
pub(crate) async fn run_plan<T>(
    ctx: &mut Ctx,
    plan: &ArrivalPlan,
    lengths: &[u64],
    mut tails: T,
    planned_knee: impl Fn(u64) -> Option<(f64, String)>,
) -> anyhow::Result<()>
where
    T: AsyncFnMut(u64) -> anyhow::Result<Arc<[Tail]>>,
{
    for (li, &n) in lengths.iter().enumerate() {
        let tail = tails(n).await?;
        if let Shape::Knee { max } = plan.shape {
            let found = knee::search(max, async |c| {
                let cell = plan.closed(n, c);
                Ok(run_shot(ctx, cell, &tail).await?.meets_target)
            })
            .await?;
            let mut k = knee::knee_record(&ctx.out.cells, n, &found, planned_knee(n));
            k.shard = ctx.plan.shard;
            ctx.collector.append(&Record::Knee(k.clone()))?;
            ctx.collector.sync()?;
            ctx.out.knees.push(k);
            continue;
        }
        for cell in plan.cells(li, n) {
            run_shot(ctx, cell, &tail).await?;
        }
    }
    Ok(())
}

/// One cell of filler or content prompts: each request a fresh nonce head on a shared tail.
async fn run_shot(
    ctx: &mut Ctx,
    cell: PlannedCell,
    tails: &Arc<[Tail]>,
) -> anyhow::Result<CellRecord> {
    let shot = Arc::new(Shot {
        backend: ctx.backend.clone(),
        tails: tails.clone(),
        output_tokens: ctx.plan.output_tokens,
        deadline: ctx.deadline,
        cell: cell.key,
    });
    let heads = ctx.heads.clone();
    let tag = ctx.plan.shard;
    let send = move |slot: run::Slot| {
        let shot = shot.clone();
        let head = heads.next();
        async move {
            let mut r = shot.fire(slot, head).await;
            r.shard = tag;
            Record::Request(Box::new(r))
        }
    };
    run_planned(ctx, cell, send).await
}

/// Run this process's share of a planned cell, each request `send(slot)` with the slot's
/// index in the unsharded cell (or record the cell empty when none of it falls here).
pub(crate) async fn run_planned<F, Fut>(
    ctx: &mut Ctx,
    cell: PlannedCell,
    send: F,
) -> anyhow::Result<CellRecord>
where
    F: Fn(run::Slot) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Record> + Send + 'static,
{
    let key = cell.key;
    let (arrivals, workers, indices) = match cell.arrivals.share(ctx.shard) {
        Share::Nothing { workers, note } => return empty_cell(ctx, key, workers, note).await,
        Share::Run {
            arrivals,
            workers,
            indices,
        } => (arrivals, workers, indices),
    };
    let (load, budget) = match arrivals {
        Arrivals::Closed {
            concurrency,
            budget,
        } => (
            Load::Closed {
                concurrency: concurrency as usize,
            },
            budget,
        ),
        Arrivals::Open {
            at,
            max_concurrency,
            chains,
            ..
        } => (
            Load::Open {
                at,
                max_concurrency: max_concurrency.map(|m| m as usize),
                pacing: Pacing::Thread { spin: SEND_SPIN },
                chains,
            },
            Budget::Requests(0),
        ),
    };
    let send = move |mut slot: run::Slot| {
        // A shard's request keeps its index in the unsharded cell.
        if let Some(ix) = &indices {
            slot.index = ix[slot.index as usize];
        }
        send(slot)
    };
    run_cell_with(ctx, key, load, budget, workers, send).await
}

/// A cell in which this shard has nothing to send: recorded so that its file is complete.
pub(crate) async fn empty_cell(
    ctx: &mut Ctx,
    key: CellKey,
    workers: Option<u32>,
    note: String,
) -> anyhow::Result<CellRecord> {
    if let Some(c) = ctx.done.iter().find(|c| c.cell.same(&key)) {
        let c = c.clone();
        ctx.out.cells.push(c.clone());
        return Ok(c);
    }
    if let Some(at) = ctx.gate.take() {
        clock::wait_until(at).await?;
    }
    let cell = CellRecord {
        cell: key,
        shard: ctx.plan.shard,
        workers,
        notes: vec![note],
        ..Default::default()
    };
    ctx.collector
        .append(&Record::Cell(Box::new(cell.clone())))?;
    ctx.collector.sync()?;
    eprintln!("{}", progress::line(&cell));
    ctx.out.cells.push(cell.clone());
    Ok(cell)
}

/// Run one cell whose requests `send` makes (or return it from the resumed file): the
/// runner, the telemetry scraper, the collector writing each record as it comes, the
/// cell's summary. `workers`: a shard's part of a closed-loop cell's concurrency.
async fn run_cell_with<F, Fut>(
    ctx: &mut Ctx,
    key: CellKey,
    load: Load,
    budget: Budget,
    workers: Option<u32>,
    send: F,
) -> anyhow::Result<CellRecord>
where
    F: Fn(run::Slot) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Record> + Send + 'static,
{
    if let Some(c) = ctx.done.iter().find(|c| c.cell.same(&key)) {
        let c = c.clone();
        ctx.out.cells.push(c.clone());
        return Ok(c);
    }
    let warmed = match &load {
        Load::Closed { concurrency } => warm(&ctx.http, *concurrency, ctx.deadline).await,
        Load::Open { .. } => None,
    };
    if let Some(at) = ctx.gate.take() {
        clock::wait_until(at).await?;
    }
    let tag = ctx.plan.shard;
    let start = Instant::now();
    let in_flight = InFlight::default();
    let (tx, rx) = mpsc::unbounded_channel::<Record>();
    let (stop_tx, stop_rx) = watch::channel(false);
    let scraper = ctx.metrics.then(|| {
        tokio::spawn(telemetry::scrape_cell(
            ctx.http.clone(),
            key,
            tag,
            start,
            in_flight.clone(),
            tx.clone(),
            stop_rx,
        ))
    });
    let gpu_scrapers: Vec<_> = ctx
        .telemetry
        .iter()
        .map(|http| {
            tokio::spawn(gpu::scrape_cell(
                http.clone(),
                key,
                tag,
                start,
                tx.clone(),
                stop_tx.subscribe(),
            ))
        })
        .collect();
    let runner = tokio::spawn(run::run(load, budget, start, in_flight, send, tx));
    let drive = async move {
        let r = runner.await;
        let _ = stop_tx.send(true);
        if let Some(s) = scraper {
            let _ = s.await;
        }
        for s in gpu_scrapers {
            let _ = s.await;
        }
        r
    };
    let (gathered, ran) = tokio::join!(ctx.collector.gather(rx), drive);
    ran.map_err(|e| anyhow::anyhow!("the request runner failed: {e}"))?;
    let gathered = gathered?;
    let mut requests = Vec::new();
    let mut scrapes = Vec::new();
    let mut gpu = Vec::new();
    for r in gathered.records {
        match r {
            Record::Request(q) => requests.push(*q),
            Record::ServerMetrics(m) => scrapes.push(m),
            Record::GpuMetrics(m) => gpu.push(m),
            _ => {}
        }
    }
    requests.sort_by_key(|r| r.index);
    // A shard's steady state is its own workers in flight.
    let target = CellKey {
        concurrency: workers.or(key.concurrency),
        ..key
    };
    let mut cell = cell::summarise_plan(
        target,
        &requests.iter().collect::<Vec<_>>(),
        &scrapes.iter().collect::<Vec<_>>(),
        &gpu.iter().collect::<Vec<_>>(),
        &ctx.plan,
    );
    cell.cell = key;
    cell.shard = tag;
    cell.workers = workers;
    cell.warm_connections = warmed;
    ctx.collector
        .append(&Record::Cell(Box::new(cell.clone())))?;
    ctx.collector.sync()?;
    eprintln!("{}", progress::line(&cell));
    for note in &cell.notes {
        eprintln!("  note: {note}");
    }
    ctx.out.cells.push(cell.clone());
    ctx.out.requests.extend(requests);
    ctx.out.server_metrics.extend(scrapes);
    ctx.out.gpu_metrics.extend(gpu);
    Ok(cell)
}

/// Open a closed-loop cell's `workers` connections, and [`spare_connections`] more, before
/// its clock starts, so its first requests measure the server, not connects. A failure is a
/// warning: the cell runs cold.
async fn warm(http: &Http, workers: usize, timeout: Duration) -> Option<u64> {
    let want = workers + spare_connections(workers);
    match http.warm(want, timeout.min(WARM_TIMEOUT)).await {
        Ok(n) => {
            if n < workers {
                eprintln!(
                    "note: {n} of {workers} connections warmed before the cell; the others \
                     connect inside their first request's TTFT"
                );
            }
            Some(n as u64)
        }
        Err(e) => {
            eprintln!("warning: warming the cell's connections failed ({e}); it runs cold");
            None
        }
    }
}

/// Idle connections kept beside a closed loop's own: a worker's next request can go out
/// before its last connection is back in the pool, and would then open one inside its TTFT
/// (seen at 256 workers: up to 5 of 1,024 requests per round without spares, none with 8).
pub fn spare_connections(workers: usize) -> usize {
    workers.div_ceil(32)
}
