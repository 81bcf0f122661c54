//! The tests against vLLM's CPU build (scripts/vllm.sh, scripts/vllm-models.sh). One binary,
//! so that each server configuration starts once for all of them (`VllmServer::shared`).
//! scripts/test.sh runs it one test at a time: the twin's tests time the server.

#[path = "../common/mod.rs"]
mod common;

mod accuracy_vllm;
mod sessions_vllm;
mod spec_vllm;
mod twin_vllm;
mod vllm_peer;
