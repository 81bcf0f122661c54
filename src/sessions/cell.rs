//! One cell: N sessions open at once from a flushed cache, each closed-loop; every turn
//! written to the result file as it finishes, open sessions and requests in flight kept
//! over time, the server's hit counter read around the cell.

use super::chat::ChatTarget;
use super::plan::SessionsPlan;
use super::record::{SessionsCellRecord, TimelinePoint, TurnRecord};
use super::summary::{self, CellInput};
use super::texts::Texts;
use crate::record::Record;
use crate::run::writer::ResultWriter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

/// Timeline points kept per cell (later changes are dropped): bounds the record's size.
const MAX_TIMELINE_POINTS: usize = 20_000;

/// What sessions report to the cell's collector.
#[derive(Debug)]
pub enum Event {
    Opened(f64),
    Closed(f64),
    Sent(f64),
    /// A turn's record, and whether its request was sent (it was in flight).
    Done(Box<TurnRecord>, bool),
}

/// What a cell's sessions share.
pub struct CellCtx {
    pub target: ChatTarget,
    pub plan: SessionsPlan,
    pub sessions: u32,
    pub attempt: u32,
    pub texts: Arc<Mutex<Texts>>,
    pub systems: Arc<Vec<String>>,
    /// Whether a turn carrying each system prompt was sent (so the cache may hold it).
    pub system_seen: Vec<AtomicBool>,
    pub page: u64,
    pub server_limit: Option<u64>,
    pub deadline: Duration,
    start: Instant,
    stop_at: Option<Instant>,
    next_session: AtomicU32,
}

impl CellCtx {
    pub fn now_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Whether `--duration` is up, or will be after `wait_s`.
    pub fn past_stop(&self, wait_s: f64) -> bool {
        self.stop_at
            .is_some_and(|t| Instant::now() + Duration::from_secs_f64(wait_s) >= t)
    }
}

/// What every cell of a run shares.
pub struct Shared {
    pub target: ChatTarget,
    pub plan: SessionsPlan,
    pub texts: Arc<Mutex<Texts>>,
    pub systems: Arc<Vec<String>>,
    pub page: u64,
    pub server_limit: Option<u64>,
    pub deadline: Duration,
}

/// Run one cell of `sessions` sessions; its turn records and its cell record are written
/// to `writer` as they are made.
pub async fn run(
    shared: &Shared,
    sessions: u32,
    attempt: u32,
    writer: &mut ResultWriter,
) -> anyhow::Result<(Vec<TurnRecord>, SessionsCellRecord)> {
    let flush = shared.target.flush().await;
    if flush.starts_with("failed") {
        eprintln!("  cell {sessions}: the cache flush {flush}; hits may include earlier cells");
    }
    let before = shared.target.hit_counter().await;
    let start = Instant::now();
    let ctx = Arc::new(CellCtx {
        target: shared.target.clone(),
        plan: shared.plan.clone(),
        sessions,
        attempt,
        texts: shared.texts.clone(),
        systems: shared.systems.clone(),
        system_seen: (0..shared.plan.shared_system)
            .map(|_| AtomicBool::new(false))
            .collect(),
        page: shared.page,
        server_limit: shared.server_limit,
        deadline: shared.deadline,
        start,
        stop_at: shared
            .plan
            .duration_s
            .map(|d| start + Duration::from_secs_f64(d)),
        next_session: AtomicU32::new(1),
    });
    let (tx, mut rx) = unbounded_channel();
    let mut tasks = Vec::new();
    for _ in 0..sessions {
        tasks.push(tokio::spawn(slot(ctx.clone(), tx.clone())));
    }
    drop(tx);
    let mut turns = Vec::new();
    let mut timeline = vec![TimelinePoint {
        t_s: 0.0,
        open_sessions: 0,
        in_flight: 0,
    }];
    let (mut open, mut in_flight) = (0u32, 0u32);
    while let Some(ev) = rx.recv().await {
        let t_s = match &ev {
            Event::Opened(t) => {
                open += 1;
                *t
            }
            Event::Closed(t) => {
                open = open.saturating_sub(1);
                *t
            }
            Event::Sent(t) => {
                in_flight += 1;
                *t
            }
            Event::Done(r, sent) => {
                if *sent {
                    in_flight = in_flight.saturating_sub(1);
                }
                writer.append(&Record::Turn(r.clone()))?;
                let t = r.sent_s + r.e2e_s.unwrap_or(0.0);
                turns.push(*r.clone());
                t
            }
        };
        if timeline.len() < MAX_TIMELINE_POINTS {
            timeline.push(TimelinePoint {
                t_s,
                open_sessions: open,
                in_flight,
            });
        }
    }
    for t in tasks {
        t.await
            .map_err(|e| anyhow::anyhow!("a session of cell {sessions} panicked: {e}"))?;
    }
    let window_s = ctx.now_s();
    let after = shared.target.hit_counter().await;
    let cell = summary::cell(&CellInput {
        slo: &shared.plan.slo,
        sessions,
        attempt,
        flush,
        turns: &turns,
        window_s,
        timeline,
        counter: before.zip(after),
    });
    writer.append(&Record::SessionsCell(Box::new(cell.clone())))?;
    writer.sync()?;
    Ok((turns, cell))
}

/// One of the cell's N places: a session, replaced by a new one while `--duration` lasts.
async fn slot(ctx: Arc<CellCtx>, tx: UnboundedSender<Event>) {
    loop {
        let index = ctx.next_session.fetch_add(1, Ordering::SeqCst);
        super::session::run(ctx.clone(), index, tx.clone()).await;
        if ctx.stop_at.is_none() || ctx.past_stop(0.0) {
            break;
        }
    }
}
