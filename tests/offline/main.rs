//! The tests that need no peer: the simulator, the scripted fakes, planning, reports and
//! the schema. One binary, so the crate links once; `bash scripts/test.sh --quick` runs it
//! with the unit tests (docs/testing.md).

#[path = "../common/mod.rs"]
mod common;
#[path = "../fakes/mod.rs"]
mod fakes;

mod accuracy_sim;
mod backend_ollama;
mod backend_tgi;
mod cache_capacity;
mod chat_only_text;
mod cli_docs;
mod cli_sweep;
mod content_sim;
mod depth_sim;
mod limits;
mod load_cost;
mod load_job_log;
mod load_shard;
mod load_sim;
mod load_telemetry;
mod load_warm;
mod needle_cache;
mod parse_props;
mod plan_cli;
mod plan_kv_math;
mod plan_live;
mod plan_presets;
mod plan_props;
mod probe;
mod reliability_faults;
mod reliability_input;
mod reliability_resume;
mod report_cli;
mod report_compare;
mod report_fit;
mod report_html;
mod report_sweep;
mod report_text;
mod restart;
mod resultfile;
mod resume_compare;
mod resume_cost;
mod schema_records;
mod sessions_sim;
mod sim_behaviour;
mod sim_engine;
mod sim_engine_http;
mod sim_faults;
mod sim_spec;
mod sim_streaming;
mod sim_timing;
mod spec_client;
mod spec_content_sim;
mod spec_crossover;
mod spec_two_sources;
mod sweep_fake;
mod sweep_sim;
mod trace_sim;
mod twin_bands;
mod twin_check;
mod twin_fit;
mod twin_mixed;
mod twin_predict;
mod twin_virtual;
mod twin_whatif_cost;
mod validity_cache;
mod validity_errors;
mod validity_instance;
mod validity_itl;
mod validity_tokenize;
mod validity_transport;
