//! The calibrated twin: a profile measured from one server (`profile`), the engine driven
//! in virtual time on it, and predictions checked against what the server really did.

pub mod argv;
pub mod band;
mod band_plan;
mod band_runs;
pub mod band_sample;
pub mod banded;
pub mod bootstrap;
pub mod calibrate;
pub mod cell;
pub mod check;
pub mod check_html;
pub mod clients;
pub mod cmd;
pub mod cmd_measure;
pub mod cmd_predict;
pub mod engine;
pub mod envelope;
pub mod figures;
pub mod fit;
mod fit_decode;
pub mod fit_mixed;
#[cfg(test)]
mod fit_props;
pub mod inputs;
pub mod insample;
pub mod known;
pub mod limits;
pub mod mixed;
pub mod mixed_plan;
pub mod output;
pub mod predict;
pub mod predict_trace;
pub mod profile;
pub mod render;
pub mod runspread;
pub mod serve;
pub mod steps;
pub mod whatif;
pub mod whatif_cost;
pub mod whatif_outcome;
