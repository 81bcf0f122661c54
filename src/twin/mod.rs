//! The calibrated twin of one server, in stages:
//! - `measure`: calibrate a server (a small plan of its own), then `fit`: records to a profile;
//! - `model`: the profile and the engine it configures (`Twin`), the figures, `sim --profile`;
//! - `predict`: a load plan or trace run on that engine in virtual time, as load's records;
//! - `uncertainty`: what a prediction leans on unidentified, and each figure's 90 % band;
//! - `check`: predictions held to measured files; `whatif`: the engine with knobs changed;
//! - `render`: the text and HTML a reader sees;
//! - `args`: every subcommand's flags; `cli`: each `twin` subcommand's thin run.

mod args;
mod check;
mod cli;
mod fit;
mod measure;
mod model;
mod predict;
mod render;
mod uncertainty;
mod whatif;

pub use args::{CalibrateArgs, TwinArgs, TwinCommand};
pub use check::{CellCheck, CheckReport, check};
pub use cli::run;
pub use fit::inputs::gather;
pub use fit::laws::fit;
pub use measure::calibrate::{Calibration, calibrate, records_path};
pub use model::exact::profile_of;
pub use model::figure::Figure;
pub use model::runspread::RunSpread;
pub use model::twin::Twin;
pub use model::{profile, serve};
pub use predict::plan::execute;
pub use predict::records::write as write_prediction;
pub use render::check::render as render_check;
pub use render::check_html::render as check_html;
pub use render::profile::render as render_profile;
pub use render::whatif::render as render_whatif;
pub use uncertainty::band::bands;
pub use uncertainty::banded::predict_banded;
pub use uncertainty::schedule::{leans_on_schedule, schedule_warnings};
pub use uncertainty::unknowns::unknowns;
pub use whatif::{Outcome as WhatifOutcome, configured, run as whatif, write as write_whatif};
