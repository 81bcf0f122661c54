//! Property tests: the stream parsers give the same answer however the bytes are chunked,
//! recover exactly what was serialised, and fail at the right offset, never by panicking.

use ctxbench::backend::ndjson::{NdjsonError, NdjsonParser};
use ctxbench::backend::sse::{SseBatch, SseError, SseEvent, SseItem, SseParser};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::Value;

/// Fixed seed and case count: the suite is deterministic and takes a few seconds.
fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x05ee_dc7b),
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------- SSE ----------

/// Text without line breaks: ASCII, spaces and colons (to test the one-space rule and
/// values holding `:`), and multi-byte UTF-8 of every length. Now and then long enough
/// for the word-at-a-time line scan to run several words.
fn line_text() -> impl Strategy<Value = String> {
    prop_oneof![4 => line_text_up_to(12), 1 => line_text_up_to(90)]
}

fn line_text_up_to(max_chars: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            4 => proptest::char::range('a', 'z'),
            1 => Just(' '),
            1 => Just(':'),
            1 => Just('\u{e9}'),
            1 => Just('\u{20ac}'),
            1 => Just('\u{1F600}'),
            1 => Just('\u{feff}'),
            1 => any::<char>().prop_filter("no line breaks", |c| *c != '\n' && *c != '\r'),
        ],
        0..max_chars,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

#[derive(Debug, Clone)]
enum Block {
    Comment(String),
    Event {
        name: Option<String>,
        data: Vec<String>,
        /// An `id:` line, which the parser must ignore.
        id: Option<String>,
    },
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        1 => line_text().prop_map(Block::Comment),
        4 => (
            proptest::option::of(line_text().prop_filter("a name", |s| !s.is_empty())),
            proptest::collection::vec(line_text(), 0..4),
            proptest::option::of(line_text()),
        )
            .prop_map(|(name, data, id)| Block::Event { name, data, id }),
    ]
}

/// How each line is written: its terminator and whether the value is written `data:v`
/// (only possible when `v` does not start with a space) or `data: v`.
#[derive(Debug, Clone, Copy)]
struct Style {
    eol: usize,
    tight: bool,
}

fn styles() -> impl Strategy<Value = Vec<Style>> {
    proptest::collection::vec(
        (0..3usize, any::<bool>()).prop_map(|(eol, tight)| Style { eol, tight }),
        64,
    )
}

/// Serialises `blocks`; returns the bytes and the events a parser must produce.
fn serialise(blocks: &[Block], styles: &[Style], bom: bool) -> (Vec<u8>, Vec<SseEvent>) {
    const EOLS: [&str; 3] = ["\n", "\r\n", "\r"];
    let mut out = Vec::new();
    let mut expected = Vec::new();
    let mut line_no = 0usize;
    let mut last_eol_cr = false;
    if bom {
        out.extend_from_slice(b"\xEF\xBB\xBF");
    }
    let mut line = |out: &mut Vec<u8>, field: Option<&str>, value: &str| {
        let style = styles[line_no % styles.len()];
        line_no += 1;
        let mut text = String::new();
        if let Some(field) = field {
            text.push_str(field);
            text.push(':');
            if !style.tight || value.starts_with(' ') {
                text.push(' ');
            }
        }
        text.push_str(value);
        let mut eol = EOLS[style.eol];
        // "\r" then an empty line ended by "\n" would read as one "\r\n".
        if last_eol_cr && text.is_empty() && eol == "\n" {
            eol = "\r";
        }
        last_eol_cr = eol == "\r";
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(eol.as_bytes());
    };
    for b in blocks {
        match b {
            Block::Comment(c) => line(&mut out, None, &format!(":{c}")),
            Block::Event { name, data, id } => {
                let offset = out.len() as u64;
                if let Some(n) = name {
                    line(&mut out, Some("event"), n);
                }
                if let Some(i) = id {
                    line(&mut out, Some("id"), i);
                }
                for d in data {
                    line(&mut out, Some("data"), d);
                }
                line(&mut out, None, "");
                if !data.is_empty() {
                    expected.push(SseEvent {
                        data: data.join("\n"),
                        event: name.clone(),
                        offset,
                    });
                }
            }
        }
    }
    (out, expected)
}

/// Everything a parse produces: the items before any error, the error, and what
/// `finish` returned.
type SseOutcome = (Vec<SseItem>, Result<Option<SseEvent>, SseError>);

/// Also checks that pushing into a reused `SseBatch` lends the same items.
fn parse_sse(bytes: &[u8], cuts: &[usize]) -> SseOutcome {
    let owned = parse_sse_owned(bytes, cuts);
    assert_eq!(
        parse_sse_batch(bytes, cuts),
        owned,
        "batch and owned pushes differ"
    );
    owned
}

fn parse_sse_owned(bytes: &[u8], cuts: &[usize]) -> SseOutcome {
    let mut p = SseParser::new();
    let mut items = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(start, bytes.len());
        if let Err(e) = p.push_into(&bytes[start..cut], &mut items) {
            return (items, Err(e));
        }
        start = cut;
    }
    assert!(p.bytes_pushed() == bytes.len() as u64);
    (items, p.finish())
}

fn parse_sse_batch(bytes: &[u8], cuts: &[usize]) -> SseOutcome {
    let mut p = SseParser::new();
    let mut batch = SseBatch::default();
    let mut items = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(start, bytes.len());
        batch.clear();
        let pushed = p.push_batch(&bytes[start..cut], &mut batch);
        items.extend(batch.iter().map(|i| i.to_item()));
        if let Err(e) = pushed {
            return (items, Err(e));
        }
        start = cut;
    }
    (items, p.finish())
}

fn events_of(items: &[SseItem]) -> Vec<SseEvent> {
    items
        .iter()
        .filter_map(|i| match i {
            SseItem::Event(e) => Some(e.clone()),
            SseItem::Comment => None,
        })
        .collect()
}

fn sorted_cuts(mut cuts: Vec<usize>, len: usize) -> Vec<usize> {
    for c in &mut cuts {
        *c %= len + 1;
    }
    cuts.sort_unstable();
    cuts
}

/// The char boundaries of `bytes` (valid UTF-8 with an optional BOM, itself one char).
fn char_boundaries(bytes: &[u8]) -> Vec<usize> {
    let s = std::str::from_utf8(bytes).expect("serialised streams are UTF-8");
    s.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect()
}

const INVALID: [&[u8]; 4] = [b"\xFF", b"\x80", b"\xE2\x82", b"\xC0\xAF"];

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn sse_recovers_what_was_serialised_under_every_split(
        blocks in proptest::collection::vec(block(), 0..8),
        styles in styles(),
        bom in any::<bool>(),
        multi in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let (bytes, expected) = serialise(&blocks, &styles, bom);
        let whole = parse_sse(&bytes, &[]);
        let n_comments = blocks.iter().filter(|b| matches!(b, Block::Comment(_))).count();
        prop_assert_eq!(&whole.1, &Ok(None));
        prop_assert_eq!(events_of(&whole.0), expected);
        prop_assert_eq!(whole.0.len() - events_of(&whole.0).len(), n_comments);
        for cut in 0..=bytes.len() {
            prop_assert_eq!(&parse_sse(&bytes, &[cut]), &whole, "cut at {}", cut);
        }
        let cuts = sorted_cuts(multi, bytes.len());
        prop_assert_eq!(&parse_sse(&bytes, &cuts), &whole, "cuts {:?}", cuts);
        let every: Vec<usize> = (0..bytes.len()).collect();
        prop_assert_eq!(&parse_sse(&bytes, &every), &whole);
    }

    #[test]
    fn sse_cut_stream_leaves_the_last_event_to_finish(
        blocks in proptest::collection::vec(block(), 1..6),
        styles in styles(),
    ) {
        let (bytes, expected) = serialise(&blocks, &styles, false);
        // Drop the final blank line: the last event, if it had data, is left pending.
        let Some(Block::Event { data, .. }) = blocks.last() else { return Ok(()); };
        let mut cut = bytes.clone();
        let last = cut.pop().unwrap();
        if last == b'\n' && cut.last() == Some(&b'\r') {
            cut.pop();
        }
        let mut p = SseParser::new();
        let items = p.push(&cut).unwrap();
        let got = events_of(&items);
        let pending = p.pending_bytes();
        let tail = p.finish().unwrap();
        if data.is_empty() {
            prop_assert_eq!(got, expected);
            prop_assert_eq!(tail, None);
        } else {
            let (head, last) = expected.split_at(expected.len() - 1);
            prop_assert_eq!(got, head.to_vec());
            prop_assert_eq!(pending, cut.len() as u64 - last[0].offset);
            prop_assert_eq!(tail, Some(last[0].clone()));
        }
    }

    #[test]
    fn sse_invalid_utf8_fails_at_its_offset(
        blocks in proptest::collection::vec(block(), 0..6),
        styles in styles(),
        bom in any::<bool>(),
        at in any::<usize>(),
        which in 0..INVALID.len(),
        cut in any::<usize>(),
    ) {
        let (bytes, _) = serialise(&blocks, &styles, bom);
        let boundaries = char_boundaries(&bytes);
        let pos = boundaries[at % boundaries.len()];
        let mut bad = bytes[..pos].to_vec();
        bad.extend_from_slice(INVALID[which]);
        bad.extend_from_slice(&bytes[pos..]);
        let whole = parse_sse(&bad, &[]);
        prop_assert_eq!(whole.1.as_ref().map_err(|e| e.offset), Err(pos as u64));
        let named = format!("byte {pos}");
        prop_assert!(whole.1.as_ref().unwrap_err().to_string().contains(&named));
        let cut = cut % (bad.len() + 1);
        prop_assert_eq!(&parse_sse(&bad, &[cut]), &whole, "cut at {}", cut);
    }

    #[test]
    fn sse_arbitrary_bytes_never_panic_and_ignore_chunking(
        bytes in proptest::collection::vec(
            prop_oneof![
                4 => any::<u8>(),
                4 => prop::sample::select(b"data: event:\n\r".to_vec()),
            ],
            0..256,
        ),
        multi in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let whole = parse_sse(&bytes, &[]);
        let cuts = sorted_cuts(multi, bytes.len());
        prop_assert_eq!(parse_sse(&bytes, &cuts), whole);
    }
}

// ---------- NDJSON ----------

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Eighths print and parse back exactly, whatever the float parser's rounding.
        (-8_000_000i64..8_000_000).prop_map(|i| Value::from(i as f64 / 8.0)),
        line_text().prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(line_text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One line: a value, or a blank line (maybe with spaces), with `\n` or `\r\n`.
fn ndjson_lines() -> impl Strategy<Value = Vec<(Option<Value>, bool, bool)>> {
    proptest::collection::vec(
        (
            proptest::option::weighted(0.8, json_value()),
            any::<bool>(),
            any::<bool>(),
        ),
        0..8,
    )
}

fn serialise_ndjson(lines: &[(Option<Value>, bool, bool)]) -> (Vec<u8>, Vec<(u64, Value)>) {
    let mut out = Vec::new();
    let mut expected = Vec::new();
    for (value, crlf, pad) in lines {
        match value {
            Some(v) => {
                expected.push((out.len() as u64, v.clone()));
                out.extend_from_slice(serde_json::to_string(v).unwrap().as_bytes());
            }
            None if *pad => out.extend_from_slice(b"  \t"),
            None => {}
        }
        out.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
    }
    (out, expected)
}

type NdjsonOutcome = (Vec<(u64, Value)>, Result<Option<(u64, Value)>, NdjsonError>);

fn parse_ndjson(bytes: &[u8], cuts: &[usize]) -> NdjsonOutcome {
    let mut p = NdjsonParser::new();
    let mut values = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(start, bytes.len());
        if let Err(e) = p.push_into(&bytes[start..cut], &mut values) {
            return (values, Err(e));
        }
        start = cut;
    }
    (values, p.finish())
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn ndjson_recovers_what_was_serialised_under_every_split(
        lines in ndjson_lines(),
        multi in proptest::collection::vec(any::<usize>(), 0..8),
        drop_last_newline in any::<bool>(),
    ) {
        let (mut bytes, mut expected) = serialise_ndjson(&lines);
        let whole = parse_ndjson(&bytes, &[]);
        prop_assert_eq!(&whole.0, &expected);
        prop_assert!(matches!(whole.1, Ok(None)));
        for cut in 0..=bytes.len() {
            prop_assert_eq!(&parse_ndjson(&bytes, &[cut]), &whole, "cut at {}", cut);
        }
        let cuts = sorted_cuts(multi, bytes.len());
        prop_assert_eq!(&parse_ndjson(&bytes, &cuts), &whole);

        // Without its final newline, the last line comes back from finish().
        if drop_last_newline && bytes.last() == Some(&b'\n') {
            bytes.pop();
            let (values, tail) = parse_ndjson(&bytes, &[]);
            let last_is_value = matches!(lines.last(), Some((Some(_), _, _)));
            if last_is_value {
                let last = expected.pop().unwrap();
                prop_assert_eq!(values, expected);
                prop_assert_eq!(tail, Ok(Some(last)));
            } else {
                prop_assert_eq!(values, expected);
                prop_assert_eq!(tail, Ok(None));
            }
        }
    }

    #[test]
    fn ndjson_invalid_utf8_fails_at_its_line(
        lines in ndjson_lines(),
        at in any::<usize>(),
        which in 0..INVALID.len(),
        cut in any::<usize>(),
    ) {
        let (bytes, _) = serialise_ndjson(&lines);
        let boundaries = char_boundaries(&bytes);
        let pos = boundaries[at % boundaries.len()];
        let mut bad = bytes[..pos].to_vec();
        bad.extend_from_slice(INVALID[which]);
        bad.extend_from_slice(&bytes[pos..]);
        let line_start = bytes[..pos].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let whole = parse_ndjson(&bad, &[]);
        prop_assert_eq!(whole.1.as_ref().map_err(|e| e.offset), Err(line_start as u64));
        let cut = cut % (bad.len() + 1);
        prop_assert_eq!(&parse_ndjson(&bad, &[cut]), &whole, "cut at {}", cut);
    }

    #[test]
    fn ndjson_arbitrary_bytes_never_panic_and_ignore_chunking(
        bytes in proptest::collection::vec(
            prop_oneof![
                4 => any::<u8>(),
                4 => prop::sample::select(b"{}[]\":,1 \n".to_vec()),
            ],
            0..256,
        ),
        multi in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let whole = parse_ndjson(&bytes, &[]);
        let cuts = sorted_cuts(multi, bytes.len());
        prop_assert_eq!(parse_ndjson(&bytes, &cuts), whole);
    }
}
