//! Newline-delimited JSON (Ollama's stream): pure bytes -> JSON values, robust to any chunking.

use super::sse::find_byte;
use serde_json::Value;
use std::fmt;

/// The longest line accepted by default.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 20;

/// A line that is not one JSON value, or is too long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdjsonError {
    /// Byte offset, in the whole stream, of the offending line's first byte.
    pub offset: u64,
    pub message: String,
}

impl fmt::Display for NdjsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed NDJSON line at byte {}: {}",
            self.offset, self.message
        )
    }
}

impl std::error::Error for NdjsonError {}

impl From<NdjsonError> for super::RequestError {
    fn from(e: NdjsonError) -> Self {
        super::RequestError::Malformed {
            offset: e.offset,
            message: e.message,
        }
    }
}

/// Incremental NDJSON parser: feed it chunks as they arrive, in order.
///
/// Lines end in `\n` (a `\r` before it is JSON whitespace); blank lines are skipped.
#[derive(Debug, Clone)]
pub struct NdjsonParser {
    max_line_bytes: usize,
    /// Stream offset of the next byte to be pushed.
    pos: u64,
    /// An unterminated line carried over from earlier chunks.
    partial: Vec<u8>,
    /// Stream offset of `partial[0]`.
    partial_offset: u64,
    failed: Option<NdjsonError>,
}

impl Default for NdjsonParser {
    fn default() -> Self {
        Self::new()
    }
}

impl NdjsonParser {
    /// A parser for a new stream, accepting lines up to [`DEFAULT_MAX_LINE_BYTES`].
    pub fn new() -> Self {
        Self::with_max_line_bytes(DEFAULT_MAX_LINE_BYTES)
    }

    /// A parser refusing any line longer than `max_line_bytes`.
    pub fn with_max_line_bytes(max_line_bytes: usize) -> Self {
        NdjsonParser {
            max_line_bytes,
            pos: 0,
            partial: Vec::new(),
            partial_offset: 0,
            failed: None,
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_pushed(&self) -> u64 {
        self.pos
    }

    /// Bytes of a line not yet terminated.
    pub fn pending_bytes(&self) -> u64 {
        self.partial.len() as u64
    }

    /// Parse the next chunk; returns `(line offset, value)` for each line it completed.
    ///
    /// After an error the parser stays failed: every later call returns the same error.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<(u64, Value)>, NdjsonError> {
        let mut out = Vec::new();
        self.push_into(chunk, &mut out)?;
        Ok(out)
    }

    /// Like [`push`](Self::push), appending to `out`. On error, `out` holds the values
    /// completed before the bad line.
    pub fn push_into(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<(u64, Value)>,
    ) -> Result<(), NdjsonError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let base = self.pos;
        self.pos += chunk.len() as u64;
        let result = self.parse_bytes(chunk, base, out);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    /// End of stream: parses an unterminated last line, if any (Ollama ends its stream with
    /// a newline, but nothing requires it).
    pub fn finish(mut self) -> Result<Option<(u64, Value)>, NdjsonError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let offset = self.partial_offset;
        match parse_line(&self.partial, offset)? {
            Some(v) => Ok(Some((offset, v))),
            None => Ok(None),
        }
    }

    fn parse_bytes(
        &mut self,
        bytes: &[u8],
        at: u64,
        out: &mut Vec<(u64, Value)>,
    ) -> Result<(), NdjsonError> {
        let mut i = 0usize;
        while i < bytes.len() {
            let rest = &bytes[i..];
            let offset = at + i as u64;
            let Some(eol) = find_byte(rest, b'\n') else {
                if self.partial.is_empty() {
                    self.partial_offset = offset;
                }
                if self.partial.len() + rest.len() > self.max_line_bytes {
                    return Err(self.too_long(self.partial_offset));
                }
                self.partial.extend_from_slice(rest);
                return Ok(());
            };
            if self.partial.is_empty() {
                if eol > self.max_line_bytes {
                    return Err(self.too_long(offset));
                }
                if let Some(v) = parse_line(&rest[..eol], offset)? {
                    out.push((offset, v));
                }
            } else {
                if self.partial.len() + eol > self.max_line_bytes {
                    return Err(self.too_long(self.partial_offset));
                }
                self.partial.extend_from_slice(&rest[..eol]);
                let line_offset = self.partial_offset;
                let parsed = parse_line(&self.partial, line_offset);
                self.partial.clear();
                if let Some(v) = parsed? {
                    out.push((line_offset, v));
                }
            }
            i += eol + 1;
        }
        Ok(())
    }

    fn too_long(&self, offset: u64) -> NdjsonError {
        NdjsonError {
            offset,
            message: format!("line longer than the {} byte limit", self.max_line_bytes),
        }
    }
}

/// One line's value; `None` for a blank line.
fn parse_line(line: &[u8], offset: u64) -> Result<Option<Value>, NdjsonError> {
    if line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
        return Ok(None);
    }
    serde_json::from_slice(line)
        .map(Some)
        .map_err(|e| NdjsonError {
            offset,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_blank_lines_and_crlf() {
        let s = b"{\"a\":1}\n\n  \r\n{\"b\":2}\r\n[3]\n";
        let got = NdjsonParser::new().push(s).unwrap();
        assert_eq!(
            got,
            vec![(0, json!({"a":1})), (13, json!({"b":2})), (22, json!([3]))]
        );
    }

    #[test]
    fn any_split_gives_the_same_values() {
        let s = "{\"response\":\"h\u{e9}\"}\n{\"done\":true,\"eval_count\":5}\n".as_bytes();
        let whole = NdjsonParser::new().push(s).unwrap();
        for cut in 0..=s.len() {
            let mut p = NdjsonParser::new();
            let mut got = p.push(&s[..cut]).unwrap();
            got.extend(p.push(&s[cut..]).unwrap());
            assert_eq!(p.finish(), Ok(None));
            assert_eq!(got, whole, "cut {cut}");
        }
    }

    #[test]
    fn invalid_line_names_its_offset() {
        let mut p = NdjsonParser::new();
        p.push(b"{\"a\":1}\n{\"b\":").unwrap();
        let err = p.push(b"}\n").unwrap_err();
        assert_eq!(err.offset, 8);
        assert!(err.to_string().contains("byte 8"), "{err}");
        assert_eq!(p.push(b"{}\n").unwrap_err(), err);

        let err = NdjsonParser::new().push(b"{} {}\n").unwrap_err();
        assert_eq!(err.offset, 0);
        let err = NdjsonParser::new().push(b"\n\"\xFF\"\n").unwrap_err();
        assert_eq!(err.offset, 1);
    }

    #[test]
    fn unterminated_tail_is_parsed_by_finish() {
        let mut p = NdjsonParser::new();
        assert_eq!(p.push(b"{\"a\":1}\n{\"done\":").unwrap().len(), 1);
        assert_eq!(p.pending_bytes(), 8);
        p.push(b"true}").unwrap();
        assert_eq!(p.finish(), Ok(Some((8, json!({"done": true})))));

        let mut p = NdjsonParser::new();
        p.push(b"{\"a\":1}\n{\"done\":tr").unwrap();
        assert_eq!(p.finish().unwrap_err().offset, 8);
        assert_eq!(NdjsonParser::new().finish(), Ok(None));
    }

    #[test]
    fn line_limit() {
        let mut p = NdjsonParser::with_max_line_bytes(8);
        p.push(b"[1]\n[1,").unwrap();
        let err = p.push(b"2,3,4,5]\n").unwrap_err();
        assert_eq!(err.offset, 4);
        assert!(err.message.contains("longer"), "{err}");
    }
}
