//! A command's flags parsed from an argument list the twin builds itself (a calibration
//! step, a measured plan replayed): the room's own clap struct, with `load`'s or `sweep`'s
//! exact meaning, without going through the whole command line above it.

use clap::{Args, FromArgMatches};

/// Parse `argv` (flags only, no program or subcommand name) as the flags of `name`.
pub fn parse<T: Args + FromArgMatches>(name: &str, argv: Vec<String>) -> anyhow::Result<T> {
    let command =
        T::augment_args(clap::Command::new("ctxbench").bin_name(format!("ctxbench {name}")));
    let matches = command.try_get_matches_from(std::iter::once(name.to_string()).chain(argv))?;
    Ok(T::from_arg_matches(&matches)?)
}
