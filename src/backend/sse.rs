//! Server-sent events: pure bytes -> events, robust to any chunking, linear in the input.
//!
//! Follows the WHATWG event-stream rules (lines end in `\n`, `\r\n` or `\r`; `data` lines
//! join with `\n`; one space after the colon is stripped; unknown fields are ignored; a
//! blank line dispatches; an event without data lines is not dispatched; a leading BOM is
//! ignored), except that invalid UTF-8 is an error instead of being replaced: a benchmark
//! must not quietly measure a corrupted stream. `id` and `retry` are parsed as fields and
//! dropped, since a benchmark never reconnects.

use std::fmt;

/// The largest line, and the largest event (data plus name), accepted by default.
pub const DEFAULT_MAX_BYTES: usize = 16 << 20;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `data` lines, joined with `\n`.
    pub data: String,
    /// The `event` field; `None` when absent or empty (the WHATWG default type "message").
    pub event: Option<String>,
    /// Byte offset, in the whole stream, of the event's first field line.
    pub offset: u64,
}

/// What one complete line or block of lines produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    Event(SseEvent),
    /// A line starting with `:`: a keep-alive. It proves the connection is alive, not that
    /// the server is making progress.
    Comment,
}

impl SseItem {
    /// The item as an [`SseBatch`] lends it.
    pub fn borrowed(&self) -> ItemRef<'_> {
        match self {
            SseItem::Event(e) => ItemRef::Event(EventRef {
                data: &e.data,
                event: e.event.as_deref(),
                offset: e.offset,
            }),
            SseItem::Comment => ItemRef::Comment,
        }
    }
}

/// An [`SseEvent`] lent by an [`SseBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventRef<'a> {
    pub data: &'a str,
    pub event: Option<&'a str>,
    pub offset: u64,
}

impl EventRef<'_> {
    pub fn to_event(&self) -> SseEvent {
        SseEvent {
            data: self.data.to_string(),
            event: self.event.map(str::to_string),
            offset: self.offset,
        }
    }
}

/// An [`SseItem`] lent by an [`SseBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemRef<'a> {
    Event(EventRef<'a>),
    Comment,
}

impl ItemRef<'_> {
    pub fn to_item(&self) -> SseItem {
        match self {
            ItemRef::Event(e) => SseItem::Event(e.to_event()),
            ItemRef::Comment => SseItem::Comment,
        }
    }
}

/// Items completed by [`SseParser::push_batch`], their text held in one buffer: `clear`
/// keeps every allocation, so a stream read chunk by chunk into one batch allocates nothing
/// per event once the buffers have grown to its largest chunk.
#[derive(Debug, Clone, Default)]
pub struct SseBatch {
    text: String,
    items: Vec<Slot>,
}

/// An item of a batch: an event's data is `text[start..data_end]`, its name
/// `text[data_end..name_end]` (empty: none).
#[derive(Debug, Clone, Copy)]
enum Slot {
    Event {
        start: usize,
        data_end: usize,
        name_end: usize,
        offset: u64,
    },
    Comment,
}

impl SseBatch {
    pub fn clear(&mut self) {
        self.text.clear();
        self.items.clear();
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items, in stream order.
    pub fn iter(&self) -> impl Iterator<Item = ItemRef<'_>> + '_ {
        self.items.iter().map(|slot| match *slot {
            Slot::Event {
                start,
                data_end,
                name_end,
                offset,
            } => ItemRef::Event(EventRef {
                data: &self.text[start..data_end],
                event: (name_end > data_end).then(|| &self.text[data_end..name_end]),
                offset,
            }),
            Slot::Comment => ItemRef::Comment,
        })
    }
}

/// Where the parser puts what it completes.
trait Sink {
    fn comment(&mut self);
    /// `event` is empty when the event has no name.
    fn event(&mut self, data: &str, event: &str, offset: u64);
}

impl Sink for Vec<SseItem> {
    fn comment(&mut self) {
        self.push(SseItem::Comment);
    }

    fn event(&mut self, data: &str, event: &str, offset: u64) {
        self.push(SseItem::Event(owned_event(data, event, offset)));
    }
}

impl Sink for SseBatch {
    fn comment(&mut self) {
        self.items.push(Slot::Comment);
    }

    fn event(&mut self, data: &str, event: &str, offset: u64) {
        let start = self.text.len();
        self.text.push_str(data);
        let data_end = self.text.len();
        self.text.push_str(event);
        self.items.push(Slot::Event {
            start,
            data_end,
            name_end: self.text.len(),
            offset,
        });
    }
}

/// `finish`'s sink: the last event, comments dropped.
impl Sink for Option<SseEvent> {
    fn comment(&mut self) {}

    fn event(&mut self, data: &str, event: &str, offset: u64) {
        *self = Some(owned_event(data, event, offset));
    }
}

fn owned_event(data: &str, event: &str, offset: u64) -> SseEvent {
    SseEvent {
        data: data.to_string(),
        event: (!event.is_empty()).then(|| event.to_string()),
        offset,
    }
}

/// A stream that is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseError {
    /// Byte offset, in the whole stream, of the offending byte, line or event.
    pub offset: u64,
    pub message: String,
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed event stream at byte {}: {}",
            self.offset, self.message
        )
    }
}

impl std::error::Error for SseError {}

impl From<SseError> for super::RequestError {
    fn from(e: SseError) -> Self {
        super::RequestError::Malformed {
            offset: e.offset,
            message: e.message,
        }
    }
}

/// Incremental event-stream parser: feed it chunks as they arrive, in order.
///
/// Work is linear in the bytes pushed: a line split across chunks is copied once into a
/// carry-over buffer, a line inside one chunk is parsed in place.
#[derive(Debug, Clone)]
pub struct SseParser {
    max_bytes: usize,
    /// Stream offset of the next byte to be pushed.
    pos: u64,
    /// Bytes of a line not yet terminated.
    partial: Vec<u8>,
    /// Stream offset of `partial[0]`.
    partial_offset: u64,
    /// The previous chunk ended in `\r`: a `\n` opening the next one belongs to that line end.
    skip_lf: bool,
    /// Still inside the first bytes of the stream, where a BOM may appear.
    at_start: bool,
    /// How many bytes of a BOM have been seen and held back at the stream start.
    bom_len: usize,
    data: String,
    data_lines: usize,
    /// The event's name; empty when it has none (both buffers are kept from event to event).
    event: String,
    /// Stream offset of the first field line of the event being collected.
    event_offset: Option<u64>,
    failed: Option<SseError>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser for a new stream, accepting lines and events up to [`DEFAULT_MAX_BYTES`].
    pub fn new() -> Self {
        Self::with_max_bytes(DEFAULT_MAX_BYTES)
    }

    /// A parser refusing any line, or any event's data plus name, longer than `max_bytes`.
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        SseParser {
            max_bytes,
            pos: 0,
            partial: Vec::new(),
            partial_offset: 0,
            skip_lf: false,
            at_start: true,
            bom_len: 0,
            data: String::new(),
            data_lines: 0,
            event: String::new(),
            event_offset: None,
            failed: None,
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_pushed(&self) -> u64 {
        self.pos
    }

    /// Bytes of an event not yet dispatched: an unterminated line, or complete lines not yet
    /// closed by a blank line. Non-zero at the end of the stream means it was cut mid-event.
    pub fn pending_bytes(&self) -> u64 {
        if self.at_start && self.bom_len > 0 {
            return self.pos;
        }
        let mut start = self.pos;
        if let Some(off) = self.event_offset {
            start = start.min(off);
        }
        if !self.partial.is_empty() {
            start = start.min(self.partial_offset);
        }
        self.pos - start
    }

    /// Parse the next chunk; returns the comments and events it completed, in stream order.
    ///
    /// After an error the parser stays failed: every later call returns the same error.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseItem>, SseError> {
        let mut out = Vec::new();
        self.push_into(chunk, &mut out)?;
        Ok(out)
    }

    /// Like [`push`](Self::push), appending to `out` to spare an allocation per chunk.
    /// On error, `out` holds the items completed before the bad byte.
    pub fn push_into(&mut self, chunk: &[u8], out: &mut Vec<SseItem>) -> Result<(), SseError> {
        self.push_to(chunk, out)
    }

    /// Like [`push_into`](Self::push_into), into a batch that lends its items: no
    /// allocation per event.
    pub fn push_batch(&mut self, chunk: &[u8], out: &mut SseBatch) -> Result<(), SseError> {
        self.push_to(chunk, out)
    }

    fn push_to<S: Sink>(&mut self, chunk: &[u8], out: &mut S) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.parse_chunk(chunk, out);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    /// End of stream: returns the event that was being collected, if it had data, as if a
    /// blank line had closed it (an unterminated last line counts as a line).
    ///
    /// WHATWG discards such an event; whether to trust it is the caller's call. A comment
    /// left unterminated is dropped.
    pub fn finish(mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        // A comment produces nothing an `Option<SseEvent>` can carry.
        let mut last: Option<SseEvent> = None;
        if self.at_start && self.bom_len > 0 {
            self.parse_bytes(&BOM[..self.bom_len], 0, &mut last)?;
        }
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            let offset = self.partial_offset;
            self.process_line(&line, offset, &mut last)?;
        }
        self.dispatch(&mut last);
        Ok(last)
    }

    fn parse_chunk<S: Sink>(&mut self, chunk: &[u8], out: &mut S) -> Result<(), SseError> {
        let base = self.pos;
        self.pos = base + chunk.len() as u64;
        let mut i = 0usize;
        if self.at_start {
            // The bytes held so far are always a prefix of the BOM, so only their count is kept.
            while self.bom_len < BOM.len() && i < chunk.len() && chunk[i] == BOM[self.bom_len] {
                self.bom_len += 1;
                i += 1;
            }
            if self.bom_len == BOM.len() {
                self.at_start = false;
            } else if i == chunk.len() {
                return Ok(());
            } else {
                self.at_start = false;
                self.parse_bytes(&BOM[..self.bom_len], 0, out)?;
            }
        }
        self.parse_bytes(&chunk[i..], base + i as u64, out)
    }

    /// Parses `bytes`, the first of which sits at stream offset `at`.
    fn parse_bytes<S: Sink>(&mut self, bytes: &[u8], at: u64, out: &mut S) -> Result<(), SseError> {
        let mut i = 0usize;
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                i = 1;
            }
        }
        while i < bytes.len() {
            let rest = &bytes[i..];
            let Some(eol) = find_eol(rest) else {
                if self.partial.is_empty() {
                    self.partial_offset = at + i as u64;
                }
                if self.partial.len() + rest.len() > self.max_bytes {
                    return Err(self.too_long_line(self.partial_offset));
                }
                self.partial.extend_from_slice(rest);
                return Ok(());
            };
            let term_len = if rest[eol] == b'\r' {
                if eol + 1 < rest.len() {
                    if rest[eol + 1] == b'\n' { 2 } else { 1 }
                } else {
                    self.skip_lf = true;
                    1
                }
            } else {
                1
            };
            if self.partial.is_empty() {
                if eol > self.max_bytes {
                    return Err(self.too_long_line(at + i as u64));
                }
                self.process_line(&rest[..eol], at + i as u64, out)?;
            } else {
                if self.partial.len() + eol > self.max_bytes {
                    return Err(self.too_long_line(self.partial_offset));
                }
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&rest[..eol]);
                let offset = self.partial_offset;
                let r = self.process_line(&line, offset, out);
                // Keep the allocation for the next split line.
                line.clear();
                self.partial = line;
                r?;
            }
            i += eol + term_len;
        }
        Ok(())
    }

    fn too_long_line(&self, offset: u64) -> SseError {
        SseError {
            offset,
            message: format!("line longer than the {} byte limit", self.max_bytes),
        }
    }

    fn process_line<S: Sink>(
        &mut self,
        line: &[u8],
        offset: u64,
        out: &mut S,
    ) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|e| SseError {
            offset: offset + e.valid_up_to() as u64,
            message: "invalid UTF-8".to_string(),
        })?;
        if line.starts_with(':') {
            out.comment();
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        let event_offset = *self.event_offset.get_or_insert(offset);
        match field {
            "data" => {
                if self.data.len() + 1 + value.len() + self.event.len() > self.max_bytes {
                    return Err(self.too_big_event(event_offset));
                }
                if self.data_lines > 0 {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.data_lines += 1;
            }
            "event" => {
                if self.data.len() + value.len() > self.max_bytes {
                    return Err(self.too_big_event(event_offset));
                }
                self.event.clear();
                self.event.push_str(value);
            }
            _ => {}
        }
        Ok(())
    }

    fn too_big_event(&self, offset: u64) -> SseError {
        SseError {
            offset,
            message: format!("event larger than the {} byte limit", self.max_bytes),
        }
    }

    /// Ends the event being collected; hands it to `out` if it had data lines.
    fn dispatch<S: Sink>(&mut self, out: &mut S) {
        let offset = self.event_offset.take();
        if let (true, Some(offset)) = (self.data_lines > 0, offset) {
            out.event(&self.data, &self.event, offset);
        }
        self.data_lines = 0;
        self.data.clear();
        self.event.clear();
    }
}

/// Index of the first `\n` or `\r` in `bytes` (the byte scan is most of the parser's work
/// on long `data` lines; `memchr` measured at least as fast as the hand-written SWAR scan it
/// replaced, see docs/testing.md).
pub(crate) fn find_eol(bytes: &[u8]) -> Option<usize> {
    memchr::memchr2(b'\n', b'\r', bytes)
}

/// Index of the first `needle` in `bytes`.
pub(crate) fn find_byte(bytes: &[u8], needle: u8) -> Option<usize> {
    memchr::memchr(needle, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(items: Vec<SseItem>) -> Vec<SseEvent> {
        items
            .into_iter()
            .filter_map(|i| match i {
                SseItem::Event(e) => Some(e),
                SseItem::Comment => None,
            })
            .collect()
    }

    fn parse_all(bytes: &[u8]) -> Vec<SseItem> {
        let mut p = SseParser::new();
        p.push(bytes).unwrap()
    }

    fn ev(data: &str, event: Option<&str>, offset: u64) -> SseEvent {
        SseEvent {
            data: data.to_string(),
            event: event.map(str::to_string),
            offset,
        }
    }

    #[test]
    fn basic_events_and_done() {
        let s = b"data: {\"a\":1}\n\ndata: [DONE]\n\n";
        assert_eq!(
            events(parse_all(s)),
            vec![ev("{\"a\":1}", None, 0), ev("[DONE]", None, 15)]
        );
    }

    #[test]
    fn multi_line_data_event_name_and_unknown_fields() {
        let s = b"event: delta\nid: 7\nretry: 10\nfoo: bar\ndata: a\ndata:b\ndata\n\n";
        assert_eq!(events(parse_all(s)), vec![ev("a\nb\n", Some("delta"), 0)]);
    }

    #[test]
    fn only_one_space_is_stripped() {
        assert_eq!(
            events(parse_all(b"data:  x \n\n")),
            vec![ev(" x ", None, 0)]
        );
    }

    #[test]
    fn empty_data_line_dispatches_but_no_data_line_does_not() {
        assert_eq!(events(parse_all(b"data:\n\n")), vec![ev("", None, 0)]);
        assert!(events(parse_all(b"event: x\n\n")).is_empty());
        assert!(events(parse_all(b"id: 1\n\n\n\n")).is_empty());
    }

    #[test]
    fn comments_are_items_and_do_not_start_events() {
        let items = parse_all(b": ping\n\n:\ndata: x\n\n");
        assert_eq!(
            items,
            vec![
                SseItem::Comment,
                SseItem::Comment,
                SseItem::Event(ev("x", None, 10))
            ]
        );
    }

    #[test]
    fn all_line_endings() {
        for s in [
            &b"data: a\r\n\r\ndata: b\r\n\r\n"[..],
            b"data: a\r\rdata: b\r\r",
            b"data: a\n\ndata: b\n\n",
        ] {
            let got = events(parse_all(s));
            assert_eq!(got.len(), 2, "{s:?}");
            assert_eq!(got[0].data, "a");
            assert_eq!(got[1].data, "b");
        }
    }

    #[test]
    fn cr_at_chunk_end_makes_no_phantom_line() {
        let mut p = SseParser::new();
        let mut out = p.push(b"data: a\r").unwrap();
        out.extend(p.push(b"\ndata: b\r").unwrap());
        out.extend(p.push(b"\n\r").unwrap());
        out.extend(p.push(b"\n").unwrap());
        assert_eq!(events(out), vec![ev("a\nb", None, 0)]);
    }

    #[test]
    fn bom_is_skipped_even_when_split() {
        let s = b"\xEF\xBB\xBFdata: x\n\n";
        for cut in 0..s.len() {
            let mut p = SseParser::new();
            let mut out = p.push(&s[..cut]).unwrap();
            out.extend(p.push(&s[cut..]).unwrap());
            assert_eq!(events(out), vec![ev("x", None, 3)], "cut {cut}");
        }
        // Only at the start of the stream: elsewhere it is part of a field name.
        let got = events(parse_all(b"data: x\n\n\xEF\xBB\xBFdata: y\n\n"));
        assert_eq!(got, vec![ev("x", None, 0)]);
    }

    #[test]
    fn partial_bom_then_other_bytes() {
        let mut p = SseParser::new();
        assert!(p.push(b"\xEF").unwrap().is_empty());
        assert_eq!(p.pending_bytes(), 1);
        let err = p.push(b"x\n").unwrap_err();
        assert_eq!(err.offset, 0);
        assert_eq!(SseParser::new().finish(), Ok(None));
        let mut p = SseParser::new();
        p.push(b"\xEF\xBB").unwrap();
        assert_eq!(p.finish().unwrap_err().offset, 0);
    }

    #[test]
    fn invalid_utf8_names_the_byte() {
        let err = SseParser::new()
            .push(b"data: ok\n\ndata: ab\xFFc\n\n")
            .unwrap_err();
        assert_eq!(err.offset, 18);
        assert!(err.to_string().contains("byte 18"), "{err}");
        // Split across chunks.
        let mut p = SseParser::new();
        p.push(b"data: ok\n\ndata: ab").unwrap();
        let err = p.push(b"\xFFc\n\n").unwrap_err();
        assert_eq!(err.offset, 18);
        // And the parser stays failed.
        assert_eq!(p.push(b"data: x\n\n").unwrap_err(), err);
    }

    #[test]
    fn multibyte_char_split_across_chunks_is_fine() {
        let s = "data: h\u{e9}llo \u{1F600}\n\n".as_bytes();
        for cut in 0..s.len() {
            let mut p = SseParser::new();
            let mut out = p.push(&s[..cut]).unwrap();
            out.extend(p.push(&s[cut..]).unwrap());
            assert_eq!(events(out), vec![ev("h\u{e9}llo \u{1F600}", None, 0)]);
        }
    }

    #[test]
    fn limits() {
        let mut p = SseParser::with_max_bytes(16);
        p.push(b"data: 0123456789\n").unwrap();
        let err = p.push(b"data: 0123456789\n").unwrap_err();
        assert_eq!(err.offset, 0);
        assert!(err.message.contains("event larger"), "{err}");

        let mut p = SseParser::with_max_bytes(16);
        p.push(b"\n\ndata: 0123").unwrap();
        let err = p.push(b"456789abcdef").unwrap_err();
        assert_eq!(err.offset, 2);
        assert!(err.message.contains("line longer"), "{err}");

        let err = SseParser::with_max_bytes(4)
            .push(b"\n: 12345\n")
            .unwrap_err();
        assert_eq!(err.offset, 1);
    }

    #[test]
    fn pending_and_finish() {
        let mut p = SseParser::new();
        p.push(b"data: a\n\n: ka\n").unwrap();
        assert_eq!(p.pending_bytes(), 0);
        p.push(b"data: b\ndata: c").unwrap();
        assert_eq!(p.pending_bytes(), 15);
        assert_eq!(p.bytes_pushed(), 29);
        assert_eq!(p.finish(), Ok(Some(ev("b\nc", None, 14))));

        let mut p = SseParser::new();
        p.push(b"data: a\n\n: unterminated").unwrap();
        assert_eq!(p.pending_bytes(), 14);
        assert_eq!(p.finish(), Ok(None));

        let mut p = SseParser::new();
        p.push(b"data: a\n\nevent: x\n").unwrap();
        assert_eq!(p.finish(), Ok(None));
    }

    #[test]
    fn event_name_resets_per_event() {
        let got = events(parse_all(
            b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\nevent:\ndata: 3\n\n",
        ));
        assert_eq!(
            got,
            vec![ev("1", Some("a"), 0), ev("2", None, 18), ev("3", None, 27)]
        );
    }

    #[test]
    fn batch_lends_what_push_gives_under_every_split() {
        let s = "event: a\ndata: 1\n\n: ka\ndata: 2\ndata: \u{e9}\n\nevent: b\nevent:\ndata: 3\n\nid: 1\n\n"
            .as_bytes();
        let want = SseParser::new().push(s).unwrap();
        for cut in 0..=s.len() {
            let mut p = SseParser::new();
            let mut batch = SseBatch::default();
            let mut got = Vec::new();
            for part in [&s[..cut], &s[cut..]] {
                batch.clear();
                p.push_batch(part, &mut batch).unwrap();
                assert_eq!(batch.len(), batch.iter().count());
                got.extend(batch.iter().map(|i| i.to_item()));
            }
            assert_eq!(got, want, "cut {cut}");
            assert_eq!(p.finish(), Ok(None));
        }
        let borrowed: Vec<ItemRef<'_>> = want.iter().map(SseItem::borrowed).collect();
        let mut batch = SseBatch::default();
        SseParser::new().push_batch(s, &mut batch).unwrap();
        assert_eq!(batch.iter().collect::<Vec<_>>(), borrowed);
    }

    #[test]
    fn batch_keeps_its_buffers_and_items_before_an_error() {
        let mut p = SseParser::new();
        let mut batch = SseBatch::default();
        p.push_batch(b"data: abc\n\n: x\n", &mut batch).unwrap();
        let (text, items) = (batch.text.as_ptr(), batch.items.as_ptr());
        batch.clear();
        assert!(batch.is_empty());
        p.push_batch(b"data: xyz\n\n", &mut batch).unwrap();
        assert_eq!((batch.text.as_ptr(), batch.items.as_ptr()), (text, items));
        batch.clear();
        let err = p.push_batch(b"data: ok\n\ndata: \xFF\n\n", &mut batch);
        assert_eq!(err.unwrap_err().offset, 42);
        let got: Vec<_> = batch.iter().collect();
        assert_eq!(
            got,
            vec![ItemRef::Event(EventRef {
                data: "ok",
                event: None,
                offset: 26
            })]
        );
    }

    #[test]
    fn finders_agree_with_naive_scan() {
        let mut bytes = vec![b'x'; 100];
        for pos in 0..100 {
            for &c in b"\n\r" {
                bytes[pos] = c;
                assert_eq!(find_eol(&bytes), Some(pos));
                assert_eq!(find_byte(&bytes, c), Some(pos));
                bytes[pos] = b'x';
            }
        }
        assert_eq!(find_eol(&bytes), None);
        assert_eq!(find_byte(&bytes, b'\n'), None);
        // High bytes must not look like matches.
        let high = [0x8A, 0x8D, 0x0B, 0x0C, 0xFF, 0x00, 0x09, 0x8A, 0x0E, b'\n'];
        assert_eq!(find_eol(&high), Some(9));
        assert_eq!(find_byte(&high, b'\n'), Some(9));
    }
}
