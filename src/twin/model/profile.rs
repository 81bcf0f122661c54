//! A twin profile: the engine's step model and limits as measured from one server, each
//! number with its 95 % interval and where it came from, versioned so that a profile from
//! another ctxbench is read or refused with a message, never misread.

use crate::sim::CostModel;
use crate::sim::scheduler::{EngineConfig, TokenBudget};
use crate::sim::stepcost::{SpecDraftCost, StepCost};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// The profile format this build writes and reads. Bump on any change a reader of the
/// old format would misread; adding an optional field is not such a change. Version 2
/// added `step.budget`: a version-1 profile of llama.cpp or vLLM, read as counting prefill
/// tokens only, would predict a different schedule than its server runs. Version 3 added
/// `unidentified` terms and the `uncertainty` the bands rest on, and never holds a
/// non-finite number (version 2 could write a NaN as `null`, which no reader accepted).
/// Version 4 added `step.interference` (a prefill beside decoding requests costs more than
/// alone): a version-3 profile would be read as charging none.
pub const PROFILE_VERSION: u32 = 4;

/// One measured number: its value, 95 % interval (when the fit left degrees of freedom)
/// and its provenance, e.g. "sweep TTFT fit, 5 lengths 1k..16k" or "probe: /slots".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub value: f64,
    pub ci95: Option<[f64; 2]>,
    pub source: String,
    /// Why the calibration did not pin this term down, and what would: its interval spans
    /// zero, its cell was bimodal, or the fit fixed it. Predictions that lean on it warn
    /// and widen their bands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unidentified: Option<String>,
}

impl Estimate {
    pub fn new(value: f64, ci95: Option<[f64; 2]>, source: impl Into<String>) -> Estimate {
        Estimate {
            value,
            ci95,
            source: source.into(),
            unidentified: None,
        }
    }

    /// The same estimate, marked unidentified for `why` (which says what would identify it).
    pub fn unidentified(mut self, why: impl Into<String>) -> Estimate {
        self.unidentified = Some(why.into());
        self
    }

    /// Its numbers that are not finite, named after `name`.
    fn problems(&self, name: &str, out: &mut Vec<String>) {
        if !self.value.is_finite() {
            out.push(format!("{name} = {}", self.value));
        }
        if let Some([lo, hi]) = self.ci95
            && !(lo.is_finite() && hi.is_finite())
        {
            out.push(format!("{name}'s interval [{lo}, {hi}]"));
        }
    }
}

/// The step model's fitted coefficients as plain numbers: one bootstrap replicate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coefficients {
    pub t0_s: f64,
    pub p0_tps: f64,
    pub q_s_per_token2: f64,
    pub d0_s: f64,
    pub d1_s_per_token: f64,
    pub d2_s_per_request: f64,
    /// The interference refitted on the replicate's resampled mixed steps; absent where
    /// none was measured (the profile's value stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<f64>,
}

impl Coefficients {
    fn named(&self) -> [(&'static str, f64); 6] {
        [
            ("t0_s", self.t0_s),
            ("p0_tps", self.p0_tps),
            ("q_s_per_token2", self.q_s_per_token2),
            ("d0_s", self.d0_s),
            ("d1_s_per_token", self.d1_s_per_token),
            ("d2_s_per_request", self.d2_s_per_request),
        ]
    }

    /// Usable by the engine: finite, p0 positive, the rest non-negative.
    pub fn usable(&self) -> bool {
        self.named()
            .iter()
            .chain(self.interference.map(|x| ("interference", x)).iter())
            .all(|(n, v)| v.is_finite() && if *n == "p0_tps" { *v > 0.0 } else { *v >= 0.0 })
    }

    /// These coefficients set on `cost`: the prefill and decode laws and d2, and the
    /// interference where these carry one (the step overhead and draft cost unchanged).
    pub fn apply_to(&self, cost: &mut StepCost) {
        let m = &mut cost.model;
        m.t0 = self.t0_s;
        m.p0 = self.p0_tps;
        m.q = self.q_s_per_token2;
        m.d0 = self.d0_s;
        m.d1 = self.d1_s_per_token;
        cost.d2 = self.d2_s_per_request;
        if let Some(x) = self.interference {
            cost.interference = x;
        }
    }

    /// The step cost of these coefficients alone: no overhead, no draft cost, and no
    /// interference unless these carry one.
    pub fn step_cost(&self) -> StepCost {
        let mut cost = StepCost {
            model: CostModel {
                t0: 0.0,
                p0: 0.0,
                q: 0.0,
                d0: 0.0,
                d1: 0.0,
            },
            overhead: 0.0,
            d2: 0.0,
            interference: 0.0,
            spec_draft: SpecDraftCost::NONE,
        };
        self.apply_to(&mut cost);
        cost
    }
}

/// A step cost's coefficients (its interference included).
impl From<&StepCost> for Coefficients {
    fn from(c: &StepCost) -> Coefficients {
        Coefficients {
            t0_s: c.model.t0,
            p0_tps: c.model.p0,
            q_s_per_token2: c.model.q,
            d0_s: c.model.d0,
            d1_s_per_token: c.model.d1,
            d2_s_per_request: c.d2,
            interference: Some(c.interference),
        }
    }
}

/// The server's run-to-run spread of each predicted figure, as a relative standard
/// deviation, measured from the calibration's own repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub ttft_p50: f64,
    pub ttft_p99: f64,
    pub tpot_p50: f64,
    pub output_tps: f64,
    pub goodput_rps: f64,
    /// How each was measured, for a reader.
    pub source: String,
}

/// What a prediction's band rests on: the step model refitted on resamples of the
/// calibration's repetitions (sweep repetitions per length, cells' requests), and the
/// server's own spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Uncertainty {
    pub replicates: Vec<Coefficients>,
    pub spread: Spread,
    /// One run's own spread over a block of requests, from calibration's cells against
    /// the twin's prediction of them (`runspread.rs`); absent where none could be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<crate::twin::model::runspread::RunSpread>,
}

/// The engine's step model (see `sim::stepcost`): seconds, tokens/s, s/token, s/token².
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepModel {
    /// Fixed prefill overhead on a request's first chunk, s.
    pub t0_s: Estimate,
    /// Linear prefill rate, tokens/s.
    pub p0_tps: Estimate,
    /// Quadratic (attention) prefill coefficient, s/token².
    pub q_s_per_token2: Estimate,
    /// Tokens per step (chunked-prefill budget).
    pub chunk_tokens: Estimate,
    /// What the chunk budget counts: prefill tokens only, or every token of the step.
    pub budget: TokenBudget,
    /// Fixed decode step time, s.
    pub d0_s: Estimate,
    /// Decode step time per context token summed over the batch, s/token.
    pub d1_s_per_token: Estimate,
    /// Decode step time per decoding request, s.
    pub d2_s_per_request: Estimate,
    /// Fixed cost of every step, s.
    pub step_overhead_s: Estimate,
    /// Extra share of a step's prefill work per request decoding in the same step: the
    /// prefill part of a step beside k decodes costs (1 + interference·k) times alone.
    pub interference: Estimate,
}

impl StepModel {
    /// The estimates' values as coefficients, the interference included.
    pub fn coefficients(&self) -> Coefficients {
        Coefficients {
            t0_s: self.t0_s.value,
            p0_tps: self.p0_tps.value,
            q_s_per_token2: self.q_s_per_token2.value,
            d0_s: self.d0_s.value,
            d1_s_per_token: self.d1_s_per_token.value,
            d2_s_per_request: self.d2_s_per_request.value,
            interference: Some(self.interference.value),
        }
    }
}

/// The server's limits, as probed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Requests running at once (SGLang max-running, llama.cpp slots, vLLM max-num-seqs).
    pub max_running: Estimate,
    /// KV pool, tokens.
    pub pool_tokens: Estimate,
    /// Pool page, tokens.
    pub page_tokens: Estimate,
    /// Context limit, tokens.
    pub context_tokens: Estimate,
    /// Whether the server reuses cached prefixes.
    pub prefix_cache: bool,
}

/// What the calibration covered: a prediction outside it is an extrapolation, and says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Longest context measured, tokens.
    pub max_context_tokens: u64,
    /// Largest concurrency (decoding batch) measured.
    pub max_concurrency: u64,
}

/// Speculative decoding, when the server speculates: tokens per verification step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Speculation {
    /// Draft tokens per step at most.
    pub draft_tokens: u32,
    /// Mean accepted length (tokens per verification step), by content where measured.
    pub accept_length: Vec<(String, Estimate)>,
}

/// A behaviour of the real server the engine model cannot express, and what it costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Caveat {
    pub what: String,
    pub effect: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always `PROFILE_VERSION` when written by this build.
    pub profile_version: u32,
    pub tool_version: String,
    pub created_at: String,
    /// Who was measured: the run record's target (url without credentials, api, model,
    /// server_info as probed).
    pub server: Value,
    pub step: StepModel,
    pub limits: Limits,
    pub envelope: Envelope,
    pub speculation: Option<Speculation>,
    #[serde(default)]
    pub caveats: Vec<Caveat>,
    /// Fit quality for a reader: R², residuals, points used, per law.
    #[serde(default)]
    pub fit_quality: Value,
    /// The bands' ground (`None`: exact, e.g. a profile stating the simulator's parameters).
    #[serde(default)]
    pub uncertainty: Option<Uncertainty>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a ctxbench twin profile (no profile_version field); make one with `ctxbench twin calibrate` or `ctxbench twin fit`"
    )]
    NotAProfile { path: String },
    #[error(
        "{path} is a version-{found} twin profile; this ctxbench reads version {PROFILE_VERSION}: recalibrate with `ctxbench twin calibrate` or `ctxbench twin fit`"
    )]
    Version { path: String, found: u64 },
    #[error("{path}: malformed twin profile: {message}")]
    Malformed { path: String, message: String },
}

impl Profile {
    /// Read a profile, refusing other versions with a message rather than misreading them.
    pub fn read(path: &Path) -> Result<Profile, ProfileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
            path: shown.clone(),
            source,
        })?;
        Profile::parse(&text, &shown)
    }

    pub fn parse(text: &str, shown: &str) -> Result<Profile, ProfileError> {
        let malformed = |message: String| ProfileError::Malformed {
            path: shown.to_string(),
            message,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| malformed(e.to_string()))?;
        let found = value
            .get("profile_version")
            .ok_or_else(|| ProfileError::NotAProfile {
                path: shown.to_string(),
            })?
            .as_u64()
            .ok_or_else(|| malformed("profile_version is not a whole number".into()))?;
        if found != PROFILE_VERSION as u64 {
            return Err(ProfileError::Version {
                path: shown.to_string(),
                found,
            });
        }
        serde_json::from_value(value).map_err(|e| malformed(e.to_string()))
    }

    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a profile serialises")
    }

    /// The typed terms, each with its name in the file.
    pub fn terms(&self) -> Vec<(&'static str, &Estimate)> {
        let s = &self.step;
        let l = &self.limits;
        vec![
            ("t0", &s.t0_s),
            ("p0", &s.p0_tps),
            ("q", &s.q_s_per_token2),
            ("chunk", &s.chunk_tokens),
            ("d0", &s.d0_s),
            ("d1", &s.d1_s_per_token),
            ("d2", &s.d2_s_per_request),
            ("step overhead", &s.step_overhead_s),
            ("interference", &s.interference),
            ("max running", &l.max_running),
            ("pool", &l.pool_tokens),
            ("page", &l.page_tokens),
            ("context", &l.context_tokens),
        ]
    }

    /// Every number that JSON cannot carry (a NaN or an infinity would be written as
    /// `null`, which no reader accepts), named. Empty for a profile that reads back.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, e) in self.terms() {
            e.problems(name, &mut out);
        }
        for (content, e) in self.speculation.iter().flat_map(|s| &s.accept_length) {
            e.problems(&format!("accept length ({content})"), &mut out);
        }
        if let Some(u) = &self.uncertainty {
            for (i, r) in u.replicates.iter().enumerate() {
                for (n, v) in r
                    .named()
                    .into_iter()
                    .chain(r.interference.map(|x| ("interference", x)))
                {
                    if !v.is_finite() {
                        out.push(format!("bootstrap replicate {i}: {n} = {v}"));
                    }
                }
            }
            let sp = &u.spread;
            for (n, v) in [
                ("ttft_p50", sp.ttft_p50),
                ("ttft_p99", sp.ttft_p99),
                ("tpot_p50", sp.tpot_p50),
                ("output_tps", sp.output_tps),
                ("goodput_rps", sp.goodput_rps),
            ] {
                if !v.is_finite() {
                    out.push(format!("spread of {n} = {v}"));
                }
            }
            for (n, v) in u.run.iter().flat_map(|r| r.values()) {
                if !v.is_finite() {
                    out.push(format!("run spread of {n} = {v}"));
                }
            }
        }
        out
    }

    /// The profile as written: refused, naming each term, when a number is not finite.
    pub fn to_json_checked(&self) -> Result<String, String> {
        match self.problems() {
            p if p.is_empty() => Ok(self.to_json_pretty()),
            p => Err(format!(
                "the fit produced numbers a profile cannot hold: {}",
                p.join("; ")
            )),
        }
    }

    /// The terms marked unidentified, with why.
    pub fn unidentified(&self) -> Vec<(&'static str, &str)> {
        self.terms()
            .into_iter()
            .filter_map(|(n, e)| Some((n, e.unidentified.as_deref()?)))
            .collect()
    }

    /// The engine configuration this profile describes.
    pub fn engine_config(&self) -> EngineConfig {
        let s = &self.step;
        let l = &self.limits;
        EngineConfig {
            cost: StepCost {
                overhead: s.step_overhead_s.value,
                ..s.coefficients().step_cost()
            },
            max_batch_tokens: (s.chunk_tokens.value.round() as u64).max(1),
            budget: s.budget,
            max_running: (l.max_running.value.round() as usize).max(1),
            spec: self
                .speculation
                .as_ref()
                .map_or(1, |sp| sp.draft_tokens.max(1)),
            new_token_ratio: 1.0,
            page_tokens: (l.page_tokens.value.round() as u64).max(1),
            pool_tokens: (l.pool_tokens.value.round() as u64).max(1),
            cache: l.prefix_cache,
        }
    }
}
