//! What every stage shares: the profile (the step model and limits measured from one server),
//! the twin that configures an engine from it, and the figures a prediction is held to.

pub(crate) mod exact;
pub(crate) mod figure;
pub mod profile;
pub(crate) mod runspread;
pub mod serve;
pub(crate) mod twin;
