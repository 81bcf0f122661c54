//! The calibrated twin: a profile measured from one server (`profile`), the engine driven
//! in virtual time on it, and predictions checked against what the server really did.

pub mod profile;

pub mod cell;
pub mod check;
pub mod clients;
pub mod cmd;
pub mod envelope;
pub mod figures;
pub mod known;
pub mod output;
pub mod predict;
pub mod predict_trace;
pub mod whatif;
