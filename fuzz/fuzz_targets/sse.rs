//! Any bytes, split anywhere: the SSE parser gives what it gives unsplit, and never panics.
#![no_main]

use ctxbench::backend::sse::{SseError, SseEvent, SseItem, SseParser};
use libfuzzer_sys::fuzz_target;

type Outcome = (Vec<SseItem>, Result<Option<SseEvent>, SseError>);

fn parse(bytes: &[u8], cuts: &[usize]) -> Outcome {
    let mut p = SseParser::new();
    let mut items = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        if let Err(e) = p.push_into(&bytes[start..cut], &mut items) {
            return (items, Err(e));
        }
        assert!(p.pending_bytes() <= p.bytes_pushed());
        start = cut;
    }
    (items, p.finish())
}

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose the split points; the rest is the stream.
    let Some((&[a, b], stream)) = data.split_first_chunk::<2>() else {
        return;
    };
    let whole = parse(stream, &[]);
    let mut last = None;
    for item in &whole.0 {
        if let SseItem::Event(e) = item {
            assert!(e.offset < stream.len() as u64);
            assert!(last.is_none_or(|l| l < e.offset), "offsets increase");
            last = Some(e.offset);
        }
    }
    if let Err(e) = &whole.1 {
        assert!(e.offset <= stream.len() as u64);
    }
    let n = stream.len() + 1;
    let (c1, c2) = (a as usize * n / 256, b as usize * n / 256);
    assert_eq!(parse(stream, &[c1.min(c2), c1.max(c2)]), whole);
});
