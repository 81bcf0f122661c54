//! Server-sent events: pure bytes -> events, robust to any chunking.
