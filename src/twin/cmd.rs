//! The `twin` subcommands: measuring a server into a profile (`cmd_measure`) and predicting
//! from one (`cmd_predict`).

pub use super::cmd_measure::{CalibrateArgs, FitArgs};
pub use super::cmd_predict::{CheckArgs, PredictArgs, WhatifArgs};

/// Run one `twin` subcommand.
pub async fn run(command: crate::cli::TwinCommand) -> anyhow::Result<u8> {
    use crate::cli::TwinCommand;
    match command {
        TwinCommand::Calibrate(a) => super::cmd_measure::run_calibrate(&a).await,
        TwinCommand::Fit(a) => super::cmd_measure::run_fit(&a),
        TwinCommand::Predict(a) => super::cmd_predict::predict(&a),
        TwinCommand::Check(a) => super::cmd_predict::check(&a),
        TwinCommand::Whatif(a) => super::cmd_predict::whatif(&a),
    }
}
