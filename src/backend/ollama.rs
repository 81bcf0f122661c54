//! Ollama's native API: `/api/generate` streaming NDJSON, text prompts only (`raw: true`,
//! no template), and the traps a long-context benchmark meets there:
//! - without `options.num_ctx` Ollama serves a default window (2048 or 4096) and silently
//!   cuts longer prompts from the front: every request sets a window that covers it (the
//!   model's real limit from `/api/show`), and a `prompt_eval_count` that fills the window
//!   is `truncated`;
//! - a new window reloads the model: a warm-up at each new window takes the reload, and a
//!   measured request whose `load_duration` still shows one is flagged `model_reload`;
//! - `prompt_eval_count` includes cached tokens while `prompt_eval_duration` does not: the
//!   durations are kept verbatim as server timings, never divided into a rate;
//! - there is no `ignore_eos`: the length is asked with `num_predict`, and a shorter answer
//!   is `early_stop`.

use super::http::Http;
use super::ndjson::NdjsonParser;
use super::{Backend, Completion, Flush, GenRequest, RequestError, StreamEvent};
use crate::record::flag;
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::Duration;

/// A `load_duration` above this is a model (re)load: a loaded model's is scheduling only
/// (milliseconds), while a reload starts a runner and reads the weights (half a second or
/// more even for small models).
pub const RELOAD_S: f64 = 0.1;
/// Keeps the model loaded between the requests of a run (each request restarts the timer).
const KEEP_ALIVE: &str = "15m";
/// Windows are whole multiples of this, so the repetitions of one length share one window.
const WINDOW_STEP: u64 = 1024;
/// Headroom over the tokens-per-byte ratio learned from the server's own counts.
const TOKEN_MARGIN: f64 = 0.02;
/// Tokens a text may hold beyond its bytes (BOS and the like) before any count is known.
const EXTRA_TOKENS: u64 = 16;
const WARM_UP_PROMPT: &str = "Warm-up request.";
const SHOW_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether requests set `options.num_ctx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumCtx {
    /// A window covering each request (the default, and the only correct one).
    Cover,
    /// Leave it to the server's default window: how a naive client measures truncation.
    ServerDefault,
}

pub struct Ollama {
    http: Http,
    model: String,
    /// The model's own context limit (`/api/show`), the largest window worth asking for.
    model_limit: Option<u64>,
    num_ctx: NumCtx,
    window: Mutex<Window>,
    /// One warm-up at a time: concurrent requests needing the same new window wait for it.
    reload: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Window {
    /// The window the server holds the model at, as far as this client knows.
    loaded: Option<u64>,
    /// (bytes, prompt_eval_count) of the longest whole prompt seen: the tokens-per-byte ratio.
    largest: Option<(u64, u64)>,
}

impl Ollama {
    pub fn new(http: Http, model: String, model_limit: Option<u64>, num_ctx: NumCtx) -> Self {
        Ollama {
            http,
            model,
            model_limit,
            num_ctx,
            window: Mutex::new(Window::default()),
            reload: tokio::sync::Mutex::new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The window for a prompt of `bytes` and `max_tokens` of output: the loaded one when it
    /// covers the request without being more than twice too big, else a new one.
    fn window_for(&self, bytes: u64, max_tokens: u64) -> u64 {
        let st = self.state();
        let prompt = match st.largest {
            Some((b, t)) if b > 0 => {
                (bytes as f64 * t as f64 / b as f64 * (1.0 + TOKEN_MARGIN)).ceil() as u64
            }
            // Byte-level tokenizers never make more tokens than bytes.
            _ => bytes,
        };
        let need = prompt + EXTRA_TOKENS + max_tokens;
        let cap = self.model_limit.unwrap_or(u64::MAX);
        if let Some(l) = st.loaded
            && l >= need.min(cap)
            && l <= 2 * need + WINDOW_STEP
        {
            return l;
        }
        need.div_ceil(WINDOW_STEP)
            .saturating_mul(WINDOW_STEP)
            .min(cap)
    }

    fn body(&self, prompt: &str, max_tokens: u64, window: Option<u64>) -> Value {
        let mut options = json!({
            "num_predict": max_tokens,
            "temperature": 0.0,
        });
        if let Some(w) = window {
            options["num_ctx"] = json!(w);
        }
        json!({
            "model": self.model,
            "prompt": prompt,
            "raw": true,
            "stream": true,
            "keep_alive": KEEP_ALIVE,
            "options": options,
        })
    }

    /// Load the model at `window` with a warm-up request, unless it already is.
    async fn ensure_loaded(&self, window: u64, deadline: Duration) -> Result<(), RequestError> {
        if self.state().loaded == Some(window) {
            return Ok(());
        }
        let _one = self.reload.lock().await;
        if self.state().loaded == Some(window) {
            return Ok(());
        }
        let body = self.body(WARM_UP_PROMPT, 1, Some(window));
        ndjson_completion(&self.http, "/api/generate", &body, deadline).await?;
        self.state().loaded = Some(window);
        Ok(())
    }

    /// Learn from a finished request; flag truncation and reloads.
    fn observe(&self, bytes: u64, window: Option<u64>, c: &mut Completion) {
        let mut st = self.state();
        if let Some(w) = window {
            st.loaded = Some(w);
        }
        let load_s = server_s(c, "load_duration");
        if load_s.is_some_and(|s| s > RELOAD_S) {
            c.flags.push(flag::MODEL_RELOAD);
        }
        let Some(p) = c.prompt_tokens else { return };
        if window.is_some_and(|w| p >= w) {
            // The prompt filled the window: Ollama cut it to fit. Its true length is more
            // than the window: aim a quarter higher next time, so the next one is covered.
            c.finish_reason = Some("truncated".into());
            let floor = (bytes, p + p / 4);
            let ratio = |(b, t): (u64, u64)| t as f64 / b.max(1) as f64;
            if st.largest.is_none_or(|l| ratio(floor) > ratio(l)) {
                st.largest = Some(floor);
            }
        } else if window.is_some() && st.largest.is_none_or(|(b, _)| bytes > b) {
            st.largest = Some((bytes, p));
        }
    }
}

fn server_s(c: &Completion, key: &str) -> Option<f64> {
    c.server_timings
        .as_ref()?
        .get(key)?
        .as_f64()
        .map(|ns| ns / 1e9)
}

#[async_trait]
impl Backend for Ollama {
    fn api(&self) -> &'static str {
        "ollama"
    }

    fn takes_token_ids(&self) -> bool {
        false
    }

    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let text = req.prompt.text_only("Ollama's /api/generate")?;
        let text: &str = &text;
        let bytes = text.len() as u64;
        let window = match self.num_ctx {
            NumCtx::Cover => Some(self.window_for(bytes, req.max_tokens)),
            NumCtx::ServerDefault => None,
        };
        if let Some(w) = window {
            self.ensure_loaded(w, req.deadline).await?;
        }
        let body = self.body(text, req.max_tokens, window);
        let mut c = ndjson_completion(&self.http, "/api/generate", &body, req.deadline).await?;
        self.observe(bytes, window, &mut c);
        Ok(c)
    }

    async fn flush(&self) -> Result<Flush, RequestError> {
        Ok(Flush::NotOffered)
    }

    async fn tokenize(&self, _text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        Ok(None)
    }
}

/// The model's context limit from `/api/show` (`model_info.<arch>.context_length`), and the
/// field it came from. A POST, but one that only reads.
pub async fn model_limit(http: &Http, model: &str) -> Option<(u64, String)> {
    let (status, text) = http
        .call(
            reqwest::Method::POST,
            "/api/show",
            Some(&json!({ "model": model })),
            SHOW_TIMEOUT,
        )
        .await
        .ok()?;
    if !(200..300).contains(&status) {
        return None;
    }
    let v: Value = serde_json::from_str(&text).ok()?;
    context_length(&v)
}

/// `<arch>.context_length` in a `/api/show` answer.
pub fn context_length(show: &Value) -> Option<(u64, String)> {
    let info = show.get("model_info")?.as_object()?;
    let arch = info.get("general.architecture").and_then(Value::as_str);
    let key = arch
        .map(|a| format!("{a}.context_length"))
        .filter(|k| info.contains_key(k))
        .or_else(|| {
            info.keys()
                .find(|k| k.ends_with(".context_length"))
                .cloned()
        })?;
    let n = info.get(&key)?.as_u64()?;
    Some((n, format!("/api/show model_info.{key}")))
}

/// The model to measure: the one loaded now (`/api/ps`), else the first listed (`/api/tags`).
pub async fn default_model(http: &Http) -> Option<String> {
    for path in ["/api/ps", "/api/tags"] {
        let v = http.get_json(path, SHOW_TIMEOUT).await.ok().flatten();
        let name = v
            .as_ref()
            .and_then(|v| v.pointer("/models/0/model").or(v.pointer("/models/0/name")))
            .and_then(Value::as_str);
        if let Some(n) = name {
            return Some(n.to_string());
        }
    }
    None
}

/// POST and fold an NDJSON stream into a `Completion`.
async fn ndjson_completion(
    http: &Http,
    path: &str,
    body: &Value,
    deadline: Duration,
) -> Result<Completion, RequestError> {
    let payload = Http::payload(body)?;
    let work = async {
        let (sent, conn, resp) = http.post_streaming(path, &[payload]).await?;
        let mut fold = Pieces::default();
        let mut parser = NdjsonParser::new();
        let mut stream = resp.bytes_stream();
        let mut complete = false;
        'read: while let Some(chunk) = stream.next().await {
            let at = sent.elapsed();
            let chunk = chunk.map_err(|e| http.reset_error(&e))?;
            for (offset, v) in parser.push(&chunk)? {
                if fold
                    .on_value(at, offset, &v)
                    .map_err(|e| http.redact_error(e))?
                {
                    complete = true;
                    break 'read;
                }
            }
        }
        if !complete && let Some((offset, v)) = parser.finish()? {
            complete = fold
                .on_value(sent.elapsed(), offset, &v)
                .map_err(|e| http.redact_error(e))?;
        }
        let mut c = fold.finish(complete, sent.elapsed())?;
        c.new_connection = Some(conn.new);
        c.connect_s = conn.connect.map(|d| d.as_secs_f64());
        Ok(c)
    };
    tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| RequestError::Timeout(deadline.as_secs_f64()))?
}

/// Folds Ollama's objects: text pieces without counts, then the `done:true` object with
/// the counts and durations.
#[derive(Default)]
struct Pieces {
    out: Completion,
}

/// The final object's timings, kept verbatim (nanoseconds).
const TIMING_KEYS: [&str; 6] = [
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
];

impl Pieces {
    /// Take one object; `true` once the `done:true` object is seen.
    fn on_value(&mut self, at: Duration, offset: u64, v: &Value) -> Result<bool, RequestError> {
        let Some(obj) = v.as_object() else {
            return Err(RequestError::Malformed {
                offset,
                message: "not a JSON object".into(),
            });
        };
        if let Some(err) = obj.get("error") {
            return Err(RequestError::ServerEvent(super::event_error_message(err)));
        }
        let piece = obj.get("response").and_then(Value::as_str).unwrap_or("");
        if !piece.is_empty() {
            // Ollama streams about one token per object but says nothing per object: the
            // final `eval_count` is the count, and the per-event split an estimate.
            self.out.events.push(StreamEvent { at, tokens: 1 });
            self.out.text.push_str(piece);
        }
        if obj.get("done").and_then(Value::as_bool) != Some(true) {
            return Ok(false);
        }
        let count = |k: &str| obj.get(k).and_then(Value::as_u64);
        let pieces = self.out.events.len() as u64;
        // Ollama omits zero counts (`omitempty`).
        let eval = count("eval_count").unwrap_or(0);
        self.out.prompt_tokens = count("prompt_eval_count");
        self.out.completion_tokens = Some(eval);
        self.out.counts_from_server = eval == pieces;
        if eval != pieces && pieces > 0 {
            // Spread the server's count over the events, so rates use its total.
            let per = eval as f64 / pieces as f64;
            let mut given = 0u64;
            for (i, e) in self.out.events.iter_mut().enumerate() {
                let upto = (per * (i + 1) as f64).round() as u64;
                e.tokens = upto - given;
                given = upto;
            }
        }
        self.out.finish_reason = Some(
            obj.get("done_reason")
                .and_then(Value::as_str)
                .unwrap_or("stop")
                .to_string(),
        );
        let timings: serde_json::Map<String, Value> = TIMING_KEYS
            .iter()
            .filter_map(|k| obj.get(*k).map(|v| ((*k).to_string(), v.clone())))
            .collect();
        self.out.server_timings = (!timings.is_empty()).then_some(Value::Object(timings));
        Ok(true)
    }

    fn finish(self, complete: bool, elapsed: Duration) -> Result<Completion, RequestError> {
        super::completed(self.out, complete, elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(lines: &str) -> Result<Completion, RequestError> {
        let mut p = Pieces::default();
        let mut done = false;
        for (i, (off, v)) in NdjsonParser::new()
            .push(lines.as_bytes())
            .unwrap()
            .into_iter()
            .enumerate()
        {
            done = p.on_value(Duration::from_millis(10 * (i as u64 + 1)), off, &v)?;
            if done {
                break;
            }
        }
        p.finish(done, Duration::from_millis(100))
    }

    #[test]
    fn fixture_stream_and_final_object() {
        let text = include_str!("../../tests/fixtures/ollama/generate_stream.ndjson");
        let c = fold(text).unwrap();
        assert_eq!(c.text, "The sky is blue.");
        assert_eq!(c.events.len(), 5);
        assert_eq!(c.completion_tokens, Some(5));
        assert!(c.counts_from_server);
        assert_eq!(c.prompt_tokens, Some(26));
        assert_eq!(c.cached_tokens, None, "Ollama does not say");
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        let t = c.server_timings.unwrap();
        assert_eq!(t["prompt_eval_duration"], 130_079_000u64);
        assert_eq!(t["load_duration"], 5_025_959u64);
        assert!(c.flags.is_empty());
    }

    #[test]
    fn a_stream_cut_before_done_is_incomplete_and_errors_fail() {
        let text = include_str!("../../tests/fixtures/ollama/generate_stream.ndjson");
        let cut: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert_eq!(fold(&cut), Err(RequestError::Incomplete));
        let err = fold("{\"error\":\"model 'x' not found\"}\n");
        assert_eq!(
            err,
            Err(RequestError::ServerEvent("model 'x' not found".into()))
        );
    }

    #[test]
    fn counts_differing_from_pieces_are_spread() {
        let c = fold(
            "{\"response\":\"ab\",\"done\":false}\n{\"response\":\"cd\",\"done\":false}\n\
             {\"response\":\"\",\"done\":true,\"done_reason\":\"length\",\"eval_count\":4,\"prompt_eval_count\":9}\n",
        )
        .unwrap();
        assert_eq!(c.events.iter().map(|e| e.tokens).sum::<u64>(), 4);
        assert!(!c.counts_from_server);
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
    }

    fn backend() -> Ollama {
        let http = Http::new("http://127.0.0.1:1", None).unwrap();
        Ollama::new(http, "m".into(), Some(131_072), NumCtx::Cover)
    }

    #[test]
    fn the_documented_cold_final_object_is_a_reload() {
        let last = include_str!("../../tests/fixtures/ollama/generate_final_cold.json");
        let mut c = fold(&format!(
            "{{\"response\":\"a\",\"done\":false}}\n{}\n",
            last.trim()
        ))
        .unwrap();
        // Without `done_reason` (older servers) the answer ended on its own.
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(c.completion_tokens, Some(259));
        backend().observe(100, Some(4096), &mut c);
        assert_eq!(c.flags, vec![flag::MODEL_RELOAD]);
        assert_ne!(c.finish_reason.as_deref(), Some("truncated"));
    }

    #[test]
    fn windows_cover_the_request_and_are_reused() {
        let o = backend();
        // Before any count: bytes bound the tokens.
        assert_eq!(o.window_for(4000, 64), 4096);
        let mut c = Completion {
            prompt_tokens: Some(1000),
            ..Completion::default()
        };
        o.observe(4000, Some(5120), &mut c);
        // 0.25 tokens per byte learned: 32 KB is about 8k tokens (+2 %).
        let w = o.window_for(32_000, 64);
        assert_eq!(w, 9216);
        o.state().loaded = Some(w);
        assert_eq!(
            o.window_for(32_100, 64),
            w,
            "a repetition reuses the window"
        );
        assert_eq!(o.window_for(1_000_000, 64), 131_072, "capped at the model");
    }

    #[test]
    fn a_filled_window_is_truncation_and_a_long_load_a_reload() {
        let o = backend();
        let mut c = Completion {
            prompt_tokens: Some(4096),
            server_timings: Some(json!({"load_duration": 2_500_000_000u64})),
            ..Completion::default()
        };
        o.observe(40_000, Some(4096), &mut c);
        assert_eq!(c.finish_reason.as_deref(), Some("truncated"));
        assert_eq!(c.flags, vec![flag::MODEL_RELOAD]);
        // The next request of that size gets a bigger window than the one that cut it.
        assert!(o.window_for(40_000, 64) > 4096 * 5 / 4);
    }

    #[test]
    fn show_gives_the_architecture_context_length() {
        let v: Value =
            serde_json::from_str(include_str!("../../tests/fixtures/ollama/show.json")).unwrap();
        let (n, src) = context_length(&v).unwrap();
        assert_eq!(n, 8192);
        assert_eq!(src, "/api/show model_info.llama.context_length");
    }
}
