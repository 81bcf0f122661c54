//! The calibrated twin: a profile measured from one server (`profile`), the engine driven
//! in virtual time on it, and predictions checked against what the server really did.

pub mod calibrate;
pub mod cmd;
pub mod fit;
pub mod inputs;
pub mod limits;
pub mod profile;
pub mod render;
