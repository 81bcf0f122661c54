//! Shared fixtures for the report tests: runs built in code from the simulator's cost model
//! (no server), and a small attribute reader for structural checks of the HTML and SVG.

pub use super::records::run_record;
use ctxbench::record::{ErrorRecord, NeedleResult, Record, RunRecord, Sample, flag};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// The simulator's default cost model (`ctxbench sim` flags): prefill of n cold tokens costs
/// t0 + n/p0 + q·n²/2, a decode step at context k costs d0 + d1·k.
#[derive(Debug, Clone, Copy)]
pub struct Cost {
    pub t0: f64,
    pub p0: f64,
    pub q: f64,
    pub d0: f64,
    pub d1: f64,
}

pub const SIM_DEFAULT: Cost = Cost {
    t0: 0.010,
    p0: 100_000.0,
    q: 4.0e-10,
    d0: 0.004,
    d1: 5.0e-8,
};

impl Cost {
    pub fn ttft_s(&self, n: u64) -> f64 {
        let n = n as f64;
        self.t0 + n / self.p0 + self.q * n * n / 2.0
    }

    /// Mean decode step over `out` tokens generated after a prompt of `n`.
    pub fn step_s(&self, n: u64, out: u64) -> f64 {
        self.d0 + self.d1 * (n as f64 + out as f64 / 2.0)
    }
}

/// One valid streamed sample with the given TTFT and decode step time.
pub fn sample(n: u64, rep: u32, ttft_s: f64, step_s: f64) -> Sample {
    Sample {
        context_tokens: n,
        prompt_tokens: Some(n),
        cached_tokens: Some(0),
        output_tokens: Some(64),
        method: "stream".into(),
        rep,
        ttft_s: Some(ttft_s),
        e2e_s: Some(ttft_s + 63.0 * step_s),
        prefill_tps: Some(n as f64 / ttft_s),
        decode_tps: Some(1.0 / step_s),
        itl_p50_s: Some(step_s),
        itl_p99_s: Some(step_s * 1.5),
        tokens_per_event_mean: Some(1.0),
        valid: true,
        flags: vec![],
        needle: None,
        server_timings: None,
        ..Sample::default()
    }
}

/// Samples from the cost model with multiplicative noise of ±`noise` (uniform, seeded).
pub fn sim_samples(cost: Cost, lengths: &[u64], reps: u32, noise: f64, seed: u64) -> Vec<Sample> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut jitter = move || 1.0 + noise * (2.0 * rng.random::<f64>() - 1.0);
    let mut out = Vec::new();
    for &n in lengths {
        for rep in 0..reps {
            let t = cost.ttft_s(n) * jitter();
            let s = cost.step_s(n, 64) * jitter();
            out.push(sample(n, rep, t, s));
        }
    }
    out
}

pub const LENGTHS: [u64; 7] = [1024, 2048, 4096, 8192, 16384, 32768, 65536];

/// A whole run with the trouble a report must show: a cache hit (invalid), a needle failure,
/// a failed request with a hostile message, and a model name that needs escaping.
pub struct Fixture {
    pub run: RunRecord,
    pub samples: Vec<Sample>,
    pub errors: Vec<ErrorRecord>,
}

pub fn troubled_run() -> Fixture {
    let run = run_record("<b>evil</b> & \"model\"", &LENGTHS, 3);
    let mut samples = sim_samples(SIM_DEFAULT, &LENGTHS, 3, 0.01, 1);
    for s in samples.iter_mut() {
        s.needle = Some(NeedleResult {
            depth: 0.5,
            expected: "otter".into(),
            answer: "otter".into(),
            ok: true,
        });
    }
    // A cached repeat at 4k: far too fast, invalid.
    let mut hit = sample(4096, 3, 0.002, SIM_DEFAULT.step_s(4096, 64));
    hit.cached_tokens = Some(4080);
    hit.valid = false;
    hit.flags = vec![flag::CACHE_HIT];
    samples.push(hit);
    // The needle lost at 64k rep 2.
    if let Some(s) = samples
        .iter_mut()
        .find(|s| s.context_tokens == 65536 && s.rep == 2)
    {
        s.flags.push(flag::NEEDLE_FAILED);
        if let Some(n) = s.needle.as_mut() {
            n.ok = false;
            n.answer = "<script>alert(1)</script>".into();
        }
    }
    let errors = vec![ErrorRecord {
        context_tokens: 65536,
        rep: 3,
        kind: "http_5xx".into(),
        message: "500 Internal Server Error: <html>boom</html>".into(),
        method: Some("stream".into()),
    }];
    Fixture {
        run,
        samples,
        errors,
    }
}

/// The JSONL text of a result file (run, samples, errors; no summary, as after a crash).
pub fn jsonl(run: &RunRecord, samples: &[Sample], errors: &[ErrorRecord]) -> String {
    let mut s = Record::Run(run.clone()).to_line();
    for x in samples {
        s.push_str(&Record::Sample(Box::new(x.clone())).to_line());
    }
    for e in errors {
        s.push_str(&Record::Error(e.clone()).to_line());
    }
    s
}

/// Attributes of every `<tag …>` start tag whose `class` attribute contains `class`
/// (as a whole word). Attribute values are read as written (entities left escaped).
pub fn elements(doc: &str, tag: &str, class: &str) -> Vec<BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        let end = rest.find('>').unwrap_or(rest.len());
        let attrs = parse_attrs(&rest[..end]);
        let has = attrs
            .get("class")
            .is_some_and(|c| c.split_whitespace().any(|w| w == class));
        if has {
            out.push(attrs);
        }
    }
    out
}

fn parse_attrs(s: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut rest = s.trim_start();
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].trim().to_string();
        let after = &rest[eq + 2..];
        let Some(close) = after.find('"') else { break };
        m.insert(name, after[..close].to_string());
        rest = after[close + 1..].trim_start();
    }
    m
}

/// The text of the `<svg …>…</svg>` element with `id`.
pub fn svg_by_id<'a>(doc: &'a str, id: &str) -> &'a str {
    let start = doc
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element with id {id}"));
    let start = doc[..start].rfind("<svg").expect("svg start");
    let end = doc[start..].find("</svg>").expect("svg end") + start + "</svg>".len();
    &doc[start..end]
}

/// The text of every `<text class="…{class}…">` element, in order.
pub fn texts(doc: &str, class: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find("<text ") {
        rest = &rest[i + 6..];
        let end = rest.find('>').unwrap_or(0);
        let attrs = parse_attrs(&rest[..end]);
        let body_end = rest.find("</text>").unwrap_or(end);
        if attrs
            .get("class")
            .is_some_and(|c| c.split_whitespace().any(|w| w == class))
        {
            out.push(rest[end + 1..body_end].to_string());
        }
    }
    out
}

pub fn f(attrs: &BTreeMap<String, String>, key: &str) -> f64 {
    attrs
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {attrs:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key} not a number in {attrs:?}"))
}
