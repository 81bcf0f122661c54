//! Parsing `--lengths`: `k`/`K` suffixes (x1024) and `max`.
