//! A load plan (closed, open, knee) or a trace run on the twin's engine in virtual time,
//! each cell on a fresh engine, recorded in load's own format.

mod cell;
mod clients;
pub(crate) mod plan;
pub(crate) mod records;
pub(crate) mod trace;
