//! The tests against llama.cpp's llama-server (scripts/llama-server.sh builds it, and
//! scripts/tiny-model.sh makes its model). One binary: the crate links once.

#[path = "../common/mod.rs"]
mod common;

mod depth_llamacpp;
mod llamacpp_peer;
mod load_llamacpp;
mod sessions_llamacpp;
mod spec_llamacpp;
mod trace_llamacpp;
mod twin_check_llamacpp;
mod twin_llamacpp;
mod vocab_ids_llamacpp;
