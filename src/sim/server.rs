//! The simulated server's lifecycle: the persona's routes, binding (port 0 = a free port),
//! ground-truth access for tests, and shutdown.

use super::driver::StepTiming;
use super::scheduler::SeriesPoint;
use super::state::SimState;
use super::stats::EngineStats;
use super::truth::RequestTruth;
use super::{Persona, SimConfig, debug, info, metrics, ollama, openai, sglang, tgi, vllm};
use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// Long prompts as JSON id lists run to megabytes.
const MAX_BODY_BYTES: usize = 512 << 20;

/// A running simulator; shuts down when dropped.
pub struct SimServer {
    pub addr: SocketAddr,
    state: Arc<SimState>,
    task: Option<JoinHandle<()>>,
}

impl SimServer {
    /// Bind `host:port` (port 0 picks a free one) and serve in the background.
    pub async fn start(host: &str, port: u16, config: SimConfig) -> anyhow::Result<SimServer> {
        let state = Arc::new(SimState::new(config)?);
        let listener = tokio::net::TcpListener::bind((host, port))
            .await
            .with_context(|| format!("cannot listen on {host}:{port}; pick another --port"))?;
        let addr = listener.local_addr()?;
        // Events are small writes that must leave at once (unless `--nagle` asks otherwise).
        let nodelay = !state.config.cost.nagle;
        let listener = listener.tap_io(move |tcp| {
            let _ = tcp.set_nodelay(nodelay);
        });
        let app = router(Arc::clone(&state));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(SimServer {
            addr,
            state,
            task: Some(task),
        })
    }

    /// Base URL, e.g. `http://127.0.0.1:30000`.
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}")
    }

    /// Ground truth per finished request, in the order they finished.
    pub fn truth(&self) -> Vec<RequestTruth> {
        self.state.truth.snapshot()
    }

    pub fn clear_truth(&self) {
        self.state.truth.clear();
    }

    /// The engine's clock, s: the time base of every truth record and series point.
    pub fn now_s(&self) -> f64 {
        self.state.engine.now_s()
    }

    /// The engine's running/waiting/pool time series, oldest first.
    pub fn series(&self) -> Vec<SeriesPoint> {
        self.state
            .engine
            .with(|sched, _| sched.series().copied().collect())
    }

    /// The engine's cumulative counters and histograms (what `/metrics` exports).
    pub fn stats(&self) -> EngineStats {
        self.state.engine.with(|sched, _| sched.stats().clone())
    }

    /// Resize the KV pool now (running requests keep their pages; growth that no longer
    /// fits preempts).
    pub fn resize_pool(&self, tokens: u64) {
        self.state
            .engine
            .with(|sched, now| sched.resize_pool(tokens, now));
    }

    /// How late each engine step woke and how long its own work took (most recent last);
    /// for benches.
    pub fn step_timings(&self) -> Vec<StepTiming> {
        self.state.engine.step_timings()
    }

    /// How late recent outputs reached their connections, s (most recent last).
    pub fn output_lateness_s(&self) -> Vec<f64> {
        self.state.engine.output_lateness_s()
    }

    pub fn clear_step_timings(&self) {
        self.state.engine.clear_step_timings();
    }

    /// One line saying what is simulated, for the listening banner.
    pub fn describe(&self) -> String {
        let args = &self.state.config.cost;
        let persona = match args.persona {
            Persona::Sglang => "sglang",
            Persona::Openai => "openai",
            Persona::Vllm => "vllm",
            Persona::Ollama => "ollama",
            Persona::Tgi => "tgi",
        };
        let cache = if args.no_cache {
            "off".to_string()
        } else {
            format!("page {}", args.page_size)
        };
        let faults = if self.state.faults.is_active() {
            format!(
                "faults {} at rate {}",
                self.state.faults.kind_names().join(","),
                self.state.faults.rate()
            )
        } else {
            "no faults".to_string()
        };
        let persona = match args.persona {
            Persona::Ollama => format!(
                "{persona} (default num_ctx {}, reload {} s)",
                args.ollama_num_ctx, args.ollama_load_s
            ),
            _ => persona.to_string(),
        };
        format!(
            "persona {persona}, model {}, context {} tokens{}, cache {cache}, spec {}, max-running {}{}, pool {} tokens, {faults}{}",
            self.state.config.model_name,
            args.context_length,
            if args.truncate { " (truncating)" } else { "" },
            if args.spec > 1 && args.spec_model == super::SpecModel::Ngram {
                format!("{} (ngram acceptance)", args.spec)
            } else {
                args.spec.to_string()
            },
            args.max_running,
            if args.reject_when_full {
                " (503 beyond)"
            } else {
                ""
            },
            self.state
                .engine
                .with(|sched, _| sched.pool().capacity_tokens()),
            if args.nagle {
                ", Nagle on (no TCP_NODELAY)"
            } else {
                ""
            },
        )
    }

    /// Stop serving; in-flight streams end at their next event.
    pub async fn shutdown(mut self) {
        self.state.stop();
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.state.stop();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn router(state: Arc<SimState>) -> Router {
    let openai_routes = Router::new()
        .route("/v1/models", get(info::models))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/health", get(info::health));
    let routes = match state.config.cost.persona {
        Persona::Openai => openai_routes.route("/metrics", get(metrics::metrics)),
        Persona::Vllm => vllm::routes(openai_routes, state.config.cost.dev_mode),
        Persona::Ollama => openai_routes.merge(ollama::routes(Arc::clone(&state))),
        Persona::Tgi => openai_routes.merge(tgi::routes(Arc::clone(&state))),
        Persona::Sglang => openai_routes
            .route("/metrics", get(metrics::metrics))
            .route("/generate", post(sglang::generate))
            .route(
                "/flush_cache",
                get(sglang::flush_cache).post(sglang::flush_cache),
            )
            .route("/server_info", get(info::server_info))
            .route("/get_server_info", get(info::server_info))
            .route("/model_info", get(info::model_info))
            .route("/get_model_info", get(info::model_info))
            .route("/health_generate", get(info::health))
            .route("/tokenize", post(sglang::tokenize_route)),
    };
    routes
        .route("/sim/truth", get(debug::truth))
        .fallback(info::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
