//! Exact-length, nonce-prefixed, needle-bearing prompts.
