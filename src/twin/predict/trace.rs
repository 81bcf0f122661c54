//! `twin predict --trace`: a trace replayed against the profile's engine in virtual time,
//! selected and timed as `load --trace` does (its own arrival plan, `load::replay`) (`--trace-window`, `--trace-limit`,
//! `--time-scale`, `--max-concurrency`), equal block ids made equal tokens so the engine's
//! prefix cache hits what the server's could. The trace is read once ([`Replay`]) and
//! predicted on as many twins as the bands ask for.

use crate::load::LoadResult;
use crate::load::args::LoadArgs;
use crate::load::replay;
use crate::record::load::CellKey;
use crate::trace::blocks::Blocks;
use crate::trace::expect;
use crate::trace::format::TraceRequest;
use crate::trace::select::Window;
use crate::twin::model::twin::Twin;
use crate::twin::predict::cell;
use crate::twin::predict::clients::Prompts;
use crate::twin::predict::records as output;
use crate::twin::predict::records::push;
use std::sync::Arc;

/// Token ids block contents are drawn from: any ids do, the engine only compares them.
const BLOCK_IDS: std::ops::Range<u32> = 1_000..33_000;

/// The trace's requests, their prompts built from their block ids.
struct TracePrompts<'a> {
    blocks: &'a Blocks,
    requests: &'a [TraceRequest],
}

impl Prompts for TracePrompts<'_> {
    fn request(&mut self, index: u64) -> (Vec<u32>, u64) {
        let r = &self.requests[index as usize];
        (self.blocks.prompt(r), r.output_length)
    }
}

/// A trace read and selected by `load`'s flags, ready to be predicted on any twin.
#[derive(Clone)]
pub struct Replay {
    args: LoadArgs,
    requests: Vec<TraceRequest>,
    window: Option<Window>,
    /// The cell's length: the longest input (a sample keeps its whole replay's).
    longest: u64,
    /// A sample's requests whose figures count (the others lead its slices in,
    /// `uncertainty/sample.rs`); `None`: every request.
    measured: Option<Vec<bool>>,
    /// Every block's tokens, made once for every prediction of the replay (and its sample).
    blocks: Arc<Blocks>,
}

impl Replay {
    /// Read and select `args.trace` as `load --trace` would.
    pub fn read(args: &LoadArgs) -> anyhow::Result<Replay> {
        let (requests, window) = replay::prepare(args)?;
        crate::load::slo::parse(&args.slo).map_err(anyhow::Error::msg)?;
        let longest = requests.iter().map(|r| r.input_length).max().unwrap_or(0);
        let blocks = Blocks::filler(args.block_tokens, BLOCK_IDS.collect(), args.seed)?;
        let blocks = Arc::new(blocks.made(&requests));
        Ok(Replay {
            args: args.clone(),
            requests,
            window,
            longest,
            measured: None,
            blocks,
        })
    }

    /// The selected requests, in trace order.
    pub fn requests(&self) -> &[TraceRequest] {
        &self.requests
    }

    /// A replay of `requests` (taken from this one, retimed) in this one's cell, whose
    /// figures count only the requests `measured` marks.
    pub fn sampled(&self, requests: Vec<TraceRequest>, measured: Vec<bool>) -> Replay {
        Replay {
            args: self.args.clone(),
            requests,
            window: self.window,
            longest: self.longest,
            measured: Some(measured),
            blocks: self.blocks.clone(),
        }
    }

    /// The replay predicted on `twin`.
    pub fn predict(&self, twin: &Twin) -> anyhow::Result<LoadResult> {
        let (args, requests) = (&self.args, &self.requests[..]);
        let limit = twin.context_limit();
        replay::check_context(requests, Some(limit.tokens))?;
        let page = twin.engine.page_tokens;
        let (expected, working_set) = expect::expected(requests, args.block_tokens, page);
        let (arrivals, groups) = replay::arrival_plan(args, requests);
        let longest = self.longest;
        let plan = replay::load_plan(
            args,
            requests,
            self.window,
            (page, working_set, Some(twin.engine.pool_tokens)),
            "filler".into(),
        )?;
        let mut out = output::result(twin, args, &plan, vec![longest]);
        let key = CellKey {
            context_tokens: longest,
            concurrency: None,
            rate: None,
        };
        let Some(planned) = arrivals.cells(0, longest).into_iter().next() else {
            anyhow::bail!("--trace: the replay's arrival plan has no cell");
        };
        let pace = crate::twin::predict::clients::pace(&planned.arrivals);
        let prompts = TracePrompts {
            blocks: &self.blocks,
            requests,
        };
        let mut p = cell::run(
            &twin.engine,
            key,
            pace,
            prompts,
            args.seed,
            args.timeout,
            twin.schedule,
        );
        if let Some(m) = &self.measured {
            p.requests.retain(|r| m[r.index as usize]);
        }
        let t0_ms = requests[0].timestamp_ms;
        for r in &mut p.requests {
            let i = r.index as usize;
            let (t, e) = (&requests[i], expected[i]);
            r.trace = Some(replay::info(t, e, t0_ms, groups[i]));
        }
        push(twin, &plan, &mut out, key, p);
        Ok(out)
    }
}

/// Predict the replay of `args.trace`.
pub fn execute(twin: &Twin, args: &LoadArgs) -> anyhow::Result<LoadResult> {
    Replay::read(args)?.predict(twin)
}
