//! `sim --profile P`: the simulator serving as a calibrated server, its engine settings
//! (`Profile::engine_config`) and limits taken from the profile, except where a flag was
//! given on the command line: an explicit flag always wins.

use crate::sim::{Persona, SimArgs};
use crate::twin::model::profile::Profile;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args};

/// Set every engine setting the profile holds on `args`, skipping those `given(id)` says the
/// user set (`id` is the clap id: the field name, e.g. `max_running`).
pub fn apply(profile: &Profile, args: &mut SimArgs, given: &dyn Fn(&str) -> bool) {
    let e = profile.engine_config();
    let l = &profile.limits;
    let c = &mut args.cost;
    let set = |id: &str, f: &mut dyn FnMut()| {
        if !given(id) {
            f();
        }
    };
    set("t0", &mut || c.t0 = e.cost.model.t0);
    set("p0", &mut || c.p0 = e.cost.model.p0);
    set("q", &mut || c.q = e.cost.model.q);
    set("d0", &mut || c.d0 = e.cost.model.d0);
    set("d1", &mut || c.d1 = e.cost.model.d1);
    set("d2", &mut || c.d2 = e.cost.d2);
    set("interference", &mut || c.interference = e.cost.interference);
    set("step_overhead", &mut || c.step_overhead = e.cost.overhead);
    set("max_batch_tokens", &mut || {
        c.max_batch_tokens = e.max_batch_tokens
    });
    set("budget", &mut || c.budget = e.budget);
    set("max_running", &mut || c.max_running = e.max_running);
    set("page_size", &mut || c.page_size = e.page_tokens);
    set("kv_pool_tokens", &mut || {
        c.kv_pool_tokens = Some(e.pool_tokens)
    });
    set("no_cache", &mut || c.no_cache = !e.cache);
    set("spec", &mut || c.spec = e.spec);
    set("context_length", &mut || {
        c.context_length = (l.context_tokens.value.round() as u64).max(1)
    });
    if let Some(p) = persona(profile) {
        set("persona", &mut || c.persona = p);
    }
    if let Some(m) = profile.server.get("model").and_then(|m| m.as_str()) {
        let m = m.to_string();
        set("model_name", &mut || args.model_name = m.clone());
    }
}

/// The persona of the profiled server's kind, where the simulator has one.
fn persona(profile: &Profile) -> Option<Persona> {
    let kind = profile
        .server
        .pointer("/server_info/kind")
        .and_then(|k| k.as_str())?;
    match kind {
        "sglang" => Some(Persona::Sglang),
        "vllm" => Some(Persona::Vllm),
        "tgi" => Some(Persona::Tgi),
        "ollama" => Some(Persona::Ollama),
        "openai" => Some(Persona::Openai),
        _ => None,
    }
}

/// Which `sim` flags this process's command line gave (re-parsed with the same parser).
pub fn given_on_command_line() -> impl Fn(&str) -> bool {
    given_in(std::env::args_os())
}

/// Which `sim` flags the command line `argv` (program name first) gave.
pub fn given_in<I, T>(argv: I) -> impl Fn(&str) -> bool
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // `ctxbench sim FLAGS…`: the flags after the subcommand, parsed by `sim`'s own struct.
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let sim: Option<ArgMatches> = (argv.get(1).is_some_and(|a| a == "sim"))
        .then(|| SimArgs::augment_args(clap::Command::new("ctxbench")))
        .and_then(|c| c.try_get_matches_from(&argv[1..]).ok());
    move |id| {
        sim.as_ref().is_some_and(|m| {
            m.try_contains_id(id).unwrap_or(false)
                && m.value_source(id) == Some(ValueSource::CommandLine)
        })
    }
}

/// `--profile`'s effect: the profile read (refused with a message when of another
/// version) and applied under the explicit flags.
pub fn load_into(args: &mut SimArgs, given: &dyn Fn(&str) -> bool) -> anyhow::Result<()> {
    let Some(path) = args.profile.clone() else {
        return Ok(());
    };
    let profile = Profile::read(&path).map_err(|e| anyhow::anyhow!("--profile: {e}"))?;
    apply(&profile, args, given);
    Ok(())
}
