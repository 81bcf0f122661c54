//! Server-sent events: pure bytes -> events, robust to any chunking.
//! (Interim version; replaced by the full parser.)

#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub data: String,
    pub event: Option<String>,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SseItem {
    Event(SseEvent),
    Comment,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("malformed event at byte {offset}: {message}")]
pub struct SseError {
    pub offset: u64,
    pub message: String,
}

#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
    consumed: u64,
    data: Option<String>,
    event: Option<String>,
    start: u64,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseItem>, SseError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
            let line_offset = self.consumed;
            let line: Vec<u8> = self.buf.drain(..=nl).collect();
            self.consumed += line.len() as u64;
            let line = std::str::from_utf8(&line).map_err(|e| SseError {
                offset: line_offset + e.valid_up_to() as u64,
                message: "invalid UTF-8".into(),
            })?;
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    out.push(SseItem::Event(SseEvent {
                        data,
                        event: self.event.take(),
                        offset: self.start,
                    }));
                }
                continue;
            }
            if line.starts_with(':') {
                out.push(SseItem::Comment);
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "data" => match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => {
                        self.start = line_offset;
                        self.data = Some(value.to_string());
                    }
                },
                "event" => self.event = Some(value.to_string()),
                _ => {}
            }
        }
        Ok(out)
    }
}
