//! One session, closed-loop: each turn sends the whole conversation (the model's streamed
//! reply to the previous turn included), waits for the reply, then its think time. A
//! failed turn ends the session with the error recorded; the cell's other sessions go on.

use super::cell::{CellCtx, Event};
use super::conversation::{Conversation, Role};
use super::hits;
use super::record::{NeedleGrade, SessionEnd, TurnError, TurnRecord};
use crate::backend::Completion;
use crate::record::Flag;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::mpsc::UnboundedSender;

/// What the next turn would need, to decide whether it may be sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NextTurn {
    /// Prompt and reply tokens so far (the server's counts).
    pub context_tokens: u64,
    pub turn_tokens: u64,
    /// The template's markers around a new message (estimated from the turns so far).
    pub overhead_tokens: u64,
    pub output_tokens: u64,
}

impl NextTurn {
    pub fn tokens(&self) -> u64 {
        self.context_tokens + self.turn_tokens + self.overhead_tokens + self.output_tokens
    }
}

/// Why the session must end before `next`, if it must: `--max-context` first, then the
/// server's limit.
pub fn end_before(
    next: &NextTurn,
    max_context: Option<u64>,
    server: Option<u64>,
) -> Option<SessionEnd> {
    let need = next.tokens();
    if max_context.is_some_and(|m| need > m) {
        return Some(SessionEnd::MaxContext);
    }
    server
        .filter(|l| need > *l)
        .map(|_| SessionEnd::ServerLimit)
}

/// Run session `index` (1-based) of the cell to its end.
pub async fn run(ctx: Arc<CellCtx>, index: u32, tx: UnboundedSender<Event>) {
    let plan = &ctx.plan;
    let mut rng = ChaCha8Rng::seed_from_u64(
        plan.seed
            ^ (u64::from(ctx.sessions) << 40)
            ^ (u64::from(ctx.attempt) << 32)
            ^ u64::from(index),
    );
    let system = (index - 1) % plan.shared_system;
    let base = TurnRecord {
        sessions: ctx.sessions,
        attempt: ctx.attempt,
        session: index,
        system,
        ..TurnRecord::default()
    };
    // `--tasks niah`: a fact in the first message, its question on the last turn.
    let needle = plan.needle.then(|| {
        crate::workload::prompt::needle_for(plan.seed, u64::from(ctx.sessions), index, 0.5)
    });
    let Some(first) = first_message(&ctx, &base, needle.as_ref(), &tx).await else {
        return;
    };
    let id = format!(
        "s{index}-c{}-a{}-{:x}",
        ctx.sessions, ctx.attempt, plan.seed
    );
    let target = ctx.target.for_session(plan.session_header.as_deref(), &id);
    let mut conv = Conversation::new(&ctx.systems[system as usize]);
    conv.push(Role::User, first);
    let _ = tx.send(Event::Opened(ctx.now_s()));
    let mut previous: Option<(u64, u64)> = None;
    let mut overhead = 0;
    let mut think_s = 0.0;
    let mut turn_tokens = plan.first_tokens;
    for turn in 1..=plan.turns {
        if think_s > 0.0 {
            tokio::time::sleep(std::time::Duration::from_secs_f64(think_s)).await;
        }
        let max_tokens = rng.random_range(plan.output_tokens.clone());
        // Counted as possible once any turn carrying it was sent: a turn in prefill beside
        // this one may serve it, so possible stays an upper bound on what is observed.
        let system_seen = if ctx.system_seen[system as usize].swap(true, Ordering::SeqCst) {
            plan.system_tokens
        } else {
            0
        };
        let mut r = base.clone();
        r.turn = turn;
        r.think_s = think_s;
        r.sent_s = ctx.now_s();
        let _ = tx.send(Event::Sent(r.sent_s));
        let outcome = target.send(&conv, max_tokens, ctx.deadline).await;
        let c = match outcome {
            Ok(c) => c,
            Err(e) => {
                r.error = Some(TurnError {
                    kind: e.kind().to_string(),
                    message: e.to_string(),
                });
                r.end = Some(SessionEnd::Error);
                let _ = tx.send(Event::Done(Box::new(r), true));
                break;
            }
        };
        fill(&mut r, &c, max_tokens);
        if let Some(n) = needle.as_ref().filter(|_| turn == plan.turns && turn > 1) {
            r.needle = Some(NeedleGrade {
                expected: n.expected.clone(),
                answer: c.text.chars().take(80).collect(),
                ok: n.check(&c.text),
            });
        }
        let prompt = c.prompt_tokens.unwrap_or_else(|| {
            previous.map_or(plan.system_tokens, |(p, o)| p + o) + turn_tokens + overhead
        });
        let output = c.completion_tokens.unwrap_or(max_tokens);
        r.new_tokens = c
            .prompt_tokens
            .map(|p| p.saturating_sub(previous.map_or(0, |(p, o)| p + o)));
        r.possible_cached_tokens = hits::possible(previous, system_seen, prompt, ctx.page);
        // The markers a new message brings: what the prompt holds beyond its messages.
        let sent_message = if turn == 1 {
            plan.system_tokens + plan.first_tokens
        } else {
            turn_tokens
        };
        overhead = r
            .new_tokens
            .map_or(overhead, |n| n.saturating_sub(sent_message));
        previous = Some((prompt, output));
        conv.push(Role::Assistant, c.text);
        if turn == plan.turns {
            r.end = Some(SessionEnd::Turns);
        } else {
            turn_tokens = rng.random_range(plan.turn_tokens.clone());
            think_s = rng.random_range(plan.think_s.clone());
            r.end = ends_before_next(&ctx, prompt + output, turn_tokens, overhead, think_s);
        }
        let end = r.end;
        let _ = tx.send(Event::Done(Box::new(r), true));
        if end.is_some() {
            break;
        }
        let message = ctx.texts.lock().await.message(turn_tokens, false).await;
        match message {
            Ok(mut m) => {
                if let Some(n) = needle.as_ref().filter(|_| turn + 1 == plan.turns) {
                    m.push_str(&n.question);
                }
                conv.push(Role::User, m)
            }
            Err(e) => {
                eprintln!("  session {index}: {e:#}; the session ends");
                break;
            }
        }
    }
    let _ = tx.send(Event::Closed(ctx.now_s()));
}

/// The session's first message (with its needle, under `--tasks niah`); `None` when it could
/// not be made, its error recorded as the session's first turn.
async fn first_message(
    ctx: &CellCtx,
    base: &TurnRecord,
    needle: Option<&crate::workload::prompt::Needle>,
    tx: &UnboundedSender<Event>,
) -> Option<String> {
    let first = match needle {
        Some(n) => {
            ctx.texts
                .lock()
                .await
                .with_fact(ctx.plan.first_tokens, n)
                .await
        }
        None => {
            let mut texts = ctx.texts.lock().await;
            texts.message(ctx.plan.first_tokens, true).await
        }
    };
    match first {
        Ok(t) => Some(t),
        Err(e) => {
            let mut r = base.clone();
            r.turn = 1;
            r.sent_s = ctx.now_s();
            r.error = Some(TurnError {
                kind: "prompt".into(),
                message: format!("{e:#}"),
            });
            r.end = Some(SessionEnd::Error);
            let _ = tx.send(Event::Done(Box::new(r), false));
            None
        }
    }
}

/// Why the session ends before its next turn (`context_tokens` so far, the next message's
/// tokens and the template's overhead), if it does: a limit, or the cell's time up.
fn ends_before_next(
    ctx: &CellCtx,
    context_tokens: u64,
    turn_tokens: u64,
    overhead_tokens: u64,
    think_s: f64,
) -> Option<SessionEnd> {
    let next = NextTurn {
        context_tokens,
        turn_tokens,
        overhead_tokens,
        output_tokens: *ctx.plan.output_tokens.end(),
    };
    end_before(&next, ctx.plan.max_context, ctx.server_limit)
        .or_else(|| ctx.past_stop(think_s).then_some(SessionEnd::Duration))
}

/// The turn's figures from what the server streamed, with the sweep's definitions.
fn fill(r: &mut TurnRecord, c: &Completion, max_tokens: u64) {
    let e = crate::sweep::measure::Expectation {
        context_tokens: c.prompt_tokens.unwrap_or(0),
        sent_tokens: None,
        output_tokens: max_tokens,
        cache_allowance_tokens: u64::MAX,
        needle: None,
        rep: 0,
    };
    let s = crate::sweep::measure::stream_sample(c, &e);
    r.ok = true;
    r.prompt_tokens = c.prompt_tokens;
    r.cached_tokens = c.cached_tokens;
    r.output_tokens = c.completion_tokens;
    r.ttft_s = s.ttft_s;
    r.e2e_s = s.e2e_s;
    r.decode_tps = s.decode_tps;
    r.itl_p50_s = s.itl_p50_s;
    r.itl_p99_s = s.itl_p99_s;
    r.finish_reason = c.finish_reason.clone();
    // Hits are this workload's point, not a corruption; lengths are the server's own.
    r.flags = s
        .flags
        .into_iter()
        .filter(|f| !matches!(f, Flag::CacheHit | Flag::LengthMismatch))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ends_before_a_turn_past_either_limit() {
        let next = NextTurn {
            context_tokens: 6000,
            turn_tokens: 512,
            overhead_tokens: 8,
            output_tokens: 256,
        };
        assert_eq!(next.tokens(), 6776);
        assert_eq!(end_before(&next, Some(6776), Some(6776)), None);
        assert_eq!(
            end_before(&next, Some(6775), Some(100)),
            Some(SessionEnd::MaxContext)
        );
        assert_eq!(
            end_before(&next, None, Some(6775)),
            Some(SessionEnd::ServerLimit)
        );
    }
}
