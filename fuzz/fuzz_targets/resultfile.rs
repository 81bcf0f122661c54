//! Any bytes: the result-file reader never panics, and the good prefix it reports reads
//! back as the same records with nothing torn.
#![no_main]

use ctxbench::resultfile::parse_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(rf) = parse_bytes(data, "fuzz") {
        let valid = usize::try_from(rf.valid_bytes).expect("fits");
        assert!(valid <= data.len());
        let again = parse_bytes(&data[..valid], "fuzz").expect("the good prefix parses");
        assert!(!again.torn_tail);
        assert_eq!(again.run, rf.run);
        assert_eq!(again.samples, rf.samples);
        assert_eq!(again.errors, rf.errors);
        assert_eq!(again.summary, rf.summary);
    }
});
