//! What a reader sees: a profile, a prediction's bands, a check report (text and HTML) and
//! the what-if comparison. Pure: returns text (the HTML page aside, which it writes).

pub(crate) mod bands;
pub(crate) mod check;
pub(crate) mod check_html;
pub(crate) mod profile;
pub(crate) mod whatif;
