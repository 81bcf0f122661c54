//! Any bytes, split anywhere: the NDJSON parser gives what it gives unsplit, and never panics.
#![no_main]

use ctxbench::backend::ndjson::{NdjsonError, NdjsonParser};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

type Outcome = (Vec<(u64, Value)>, Result<Option<(u64, Value)>, NdjsonError>);

fn parse(bytes: &[u8], cuts: &[usize]) -> Outcome {
    let mut p = NdjsonParser::new();
    let mut values = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        if let Err(e) = p.push_into(&bytes[start..cut], &mut values) {
            return (values, Err(e));
        }
        start = cut;
    }
    (values, p.finish())
}

fuzz_target!(|data: &[u8]| {
    let Some((&[a], stream)) = data.split_first_chunk::<1>() else {
        return;
    };
    let whole = parse(stream, &[]);
    for w in whole.0.windows(2) {
        assert!(w[0].0 < w[1].0, "offsets increase");
    }
    let cut = a as usize * (stream.len() + 1) / 256;
    assert_eq!(parse(stream, &[cut]), whole);
});
