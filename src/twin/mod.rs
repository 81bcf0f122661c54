//! The calibrated twin: a profile measured from one server (`profile`), the engine driven
//! in virtual time on it, and predictions checked against what the server really did.

pub mod profile;
