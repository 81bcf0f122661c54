//! The `twin` subcommands: measuring a server into a profile (`cmd_measure`) and predicting
//! from one (`cmd_predict`).

pub use super::cmd_measure::{CalibrateArgs, FitArgs};
pub use super::cmd_predict::{CheckArgs, PredictArgs, WhatifArgs};
use clap::{Args, Subcommand};

/// `ctxbench twin ...`.
#[derive(Args, Debug)]
pub struct TwinArgs {
    #[command(subcommand)]
    pub command: TwinCommand,
}

#[derive(Subcommand, Debug)]
pub enum TwinCommand {
    /// Measure a server with a small plan of its own and write its profile.
    Calibrate(CalibrateArgs),
    /// Fit a profile from existing sweep and load records.
    Fit(FitArgs),
    /// Predict a load plan (closed, open, --trace, --find-knee) from a profile, in virtual time.
    Predict(Box<PredictArgs>),
    /// Hold predictions to measured load files, per cell; exit 5 when a figure is beyond its bound.
    Check(CheckArgs),
    /// Predict a plan under several engine configurations (--vary max-running=8,64 …).
    Whatif(Box<WhatifArgs>),
}

/// Run one `twin` subcommand.
pub async fn run(command: TwinCommand) -> anyhow::Result<u8> {
    match command {
        TwinCommand::Calibrate(a) => super::cmd_measure::run_calibrate(&a).await,
        TwinCommand::Fit(a) => super::cmd_measure::run_fit(&a),
        TwinCommand::Predict(a) => super::cmd_predict::predict(&a),
        TwinCommand::Check(a) => super::cmd_predict::check(&a),
        TwinCommand::Whatif(a) => super::cmd_predict::whatif(&a),
    }
}
