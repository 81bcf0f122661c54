//! Prometheus text exposition, read by one parser for every caller: the load's telemetry
//! scrapes, the instance markers, the tests of the simulator's `/metrics`.

/// Prometheus text exposition as read: its samples, names spelled as the server wrote them
/// (`:` included), and the non-comment lines that are not samples.
#[derive(Debug, Clone)]
pub struct Exposition {
    /// A histogram is one sample named after its family, its `_count` and `_sum` are
    /// samples of their own.
    pub samples: Vec<prometheus_parse::Sample>,
    pub unreadable: Vec<String>,
}

impl Exposition {
    /// Counter, gauge and untyped values of `name`, in text order.
    pub fn scalars<'a>(&'a self, name: &'a str) -> impl Iterator<Item = f64> + 'a {
        self.samples
            .iter()
            .filter(move |s| s.metric == name)
            .filter_map(|s| match s.value {
                prometheus_parse::Value::Counter(x)
                | prometheus_parse::Value::Gauge(x)
                | prometheus_parse::Value::Untyped(x) => Some(x),
                _ => None,
            })
    }
}

/// `GET /metrics`: its text when the server answers 200 within `timeout`.
pub async fn fetch(http: &super::http::Http, timeout: std::time::Duration) -> Option<String> {
    let (status, text) = http
        .call(reqwest::Method::GET, "/metrics", None, timeout)
        .await
        .ok()?;
    (status == 200).then_some(text)
}

/// Read Prometheus text exposition (the one parser the crate uses for it).
pub fn read(text: &str) -> Exposition {
    let unreadable = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .filter(|l| {
            let l = colons_out(l);
            !matches!(
                prometheus_parse::LineInfo::parse(&l),
                prometheus_parse::LineInfo::Sample { value, .. } if value.parse::<f64>().is_ok()
            )
        })
        .map(str::to_string)
        .collect();
    let lines = text.lines().map(|l| Ok(colons_out(l)));
    let mut samples = prometheus_parse::Scrape::parse(lines)
        .map(|s| s.samples)
        .unwrap_or_default();
    for s in &mut samples {
        s.metric = s.metric.replace("__colon__", ":");
    }
    Exposition {
        samples,
        unreadable,
    }
}

/// prometheus-parse 0.2 matches metric names with `\w+`, which refuses the `:` that
/// namespaces every SGLang and vLLM metric: spell it `__colon__` in names (before any
/// `{` or blank) while parsing, and back as `:` after.
fn colons_out(line: &str) -> String {
    let (head, rest) = if let Some(r) = line.strip_prefix('#') {
        // `# HELP name …` / `# TYPE name …`: the name is the third word.
        let mut parts = r.splitn(3, ' ').collect::<Vec<_>>();
        if parts.len() == 3 {
            let (name, tail) = parts[2].split_once(' ').unwrap_or((parts[2], ""));
            let fixed = format!("{} {}", name.replace(':', "__colon__"), tail);
            parts[2] = &fixed;
            return format!("#{}", parts.join(" "));
        }
        return line.to_string();
    } else {
        let cut = line.find(['{', ' ', '\t']).unwrap_or(line.len());
        line.split_at(cut)
    };
    format!("{}{rest}", head.replace(':', "__colon__"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_colons_and_bad_lines_are_reported() {
        let text = "# TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{engine=\"0\"} 3\n\
                    vllm:num_requests_running{engine=\"1\"} 4\n\
                    not a sample\n\
                    broken_value{a=\"b\"} x\n\n";
        let m = read(text);
        assert_eq!(
            m.scalars("vllm:num_requests_running").collect::<Vec<_>>(),
            [3.0, 4.0]
        );
        assert_eq!(m.unreadable, ["not a sample", "broken_value{a=\"b\"} x"]);
    }
}
