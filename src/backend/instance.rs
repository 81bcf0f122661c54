//! What a server exposes that tells one run of it from the next, read per backend behind
//! the `Backend` trait, so a restart mid-sweep is seen whatever the server.

use super::http::Http;
use serde_json::Value;
use std::time::Duration;

const MARKER_TIMEOUT: Duration = Duration::from_secs(5);

/// A reading of a server's instance.
#[derive(Debug, Clone, PartialEq)]
pub enum InstanceMarker {
    /// An id that differs on every start (the simulator's `sim_instance_id`).
    Id(String),
    /// Prometheus `process_start_time_seconds` in `/metrics` (vLLM, SGLang with metrics, …).
    StartTime(f64),
    /// A counter that only grows while the process lives (llama-server's
    /// `llamacpp:n_decode_total` in `/metrics`): a fall means a new process.
    Counter(u64),
    /// llama-server's largest `id_task` in `/slots`, read when `/metrics` did not answer: it
    /// grows too, but slower than the decode count, so the two are never compared.
    TaskId(u64),
}

impl InstanceMarker {
    /// Whether `self`, read after `before`, belongs to another instance.
    pub fn restarted_since(&self, before: &InstanceMarker) -> bool {
        match (before, self) {
            (InstanceMarker::Id(a), InstanceMarker::Id(b)) => a != b,
            (InstanceMarker::StartTime(a), InstanceMarker::StartTime(b)) => a != b,
            (InstanceMarker::Counter(a), InstanceMarker::Counter(b))
            | (InstanceMarker::TaskId(a), InstanceMarker::TaskId(b)) => b < a,
            // Read from different sources: no comparison to make.
            _ => false,
        }
    }
}

/// SGLang-style `/server_info` id (the simulator), else Prometheus start time.
pub async fn sglang(http: &Http) -> Option<InstanceMarker> {
    if let Some(id) = get_json(http, "/server_info")
        .await
        .and_then(|v| v.get("sim_instance_id")?.as_str().map(str::to_string))
    {
        return Some(InstanceMarker::Id(id));
    }
    prometheus_start(http).await
}

/// llama-server: a start time if its metrics have one, else its growing counters.
pub async fn llamacpp(http: &Http) -> Option<InstanceMarker> {
    let metrics = get_text(http, "/metrics").await;
    if let Some(m) = &metrics {
        if let Some(t) = prometheus_value(m, "process_start_time_seconds") {
            return Some(InstanceMarker::StartTime(t));
        }
        if let Some(n) = prometheus_value(m, "llamacpp:n_decode_total") {
            return Some(InstanceMarker::Counter(n as u64));
        }
    }
    let slots = get_json(http, "/slots").await?;
    slots
        .as_array()?
        .iter()
        .filter_map(|s| s.get("id_task").and_then(Value::as_u64))
        .max()
        .map(InstanceMarker::TaskId)
}

/// An OpenAI-compatible server: whichever of the above it answers.
pub async fn openai(http: &Http, llamacpp_like: bool) -> Option<InstanceMarker> {
    if llamacpp_like {
        llamacpp(http).await
    } else {
        sglang(http).await
    }
}

async fn prometheus_start(http: &Http) -> Option<InstanceMarker> {
    let m = get_text(http, "/metrics").await?;
    prometheus_value(&m, "process_start_time_seconds").map(InstanceMarker::StartTime)
}

/// The value of an unlabelled (or first labelled) sample of `name` in Prometheus text.
pub fn prometheus_value(text: &str, name: &str) -> Option<f64> {
    super::prometheus::read(text).scalars(name).next()
}

async fn get_json(http: &Http, path: &str) -> Option<Value> {
    http.get_json(path, MARKER_TIMEOUT).await.ok().flatten()
}

async fn get_text(http: &Http, path: &str) -> Option<String> {
    match http
        .call(reqwest::Method::GET, path, None, MARKER_TIMEOUT)
        .await
    {
        Ok((200, text)) => Some(text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_values_are_read_by_exact_name() {
        let text = "# HELP process_start_time_seconds Start time\n\
                    # TYPE process_start_time_seconds gauge\n\
                    process_start_time_seconds 1.7e9\n\
                    process_start_time_seconds_extra 5\n\
                    llamacpp:n_decode_total{slot=\"0\"} 42\n";
        assert_eq!(
            prometheus_value(text, "process_start_time_seconds"),
            Some(1.7e9)
        );
        assert_eq!(
            prometheus_value(text, "llamacpp:n_decode_total"),
            Some(42.0)
        );
        assert_eq!(prometheus_value(text, "missing"), None);
    }

    #[test]
    fn restarts_by_marker_kind() {
        use InstanceMarker::*;
        assert!(Id("b".into()).restarted_since(&Id("a".into())));
        assert!(!Id("a".into()).restarted_since(&Id("a".into())));
        assert!(StartTime(2.0).restarted_since(&StartTime(1.0)));
        assert!(!Counter(10).restarted_since(&Counter(3)), "a counter grows");
        assert!(
            !TaskId(3).restarted_since(&Counter(500)),
            "a /slots task id read when /metrics failed is not a fallen decode count"
        );
        assert!(
            Counter(2).restarted_since(&Counter(30)),
            "a fall is a new process"
        );
        assert!(!Counter(2).restarted_since(&StartTime(1.0)));
    }
}
