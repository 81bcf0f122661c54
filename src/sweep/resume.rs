//! What `--resume` keeps from the file it continues, so that it spends requests on the
//! missing samples only: the target checks (API prefix, transport) when the target is the
//! same, and the knowledge that the server is the very instance that served the earlier
//! samples (then already warm).

use crate::backend::instance::InstanceMarker;
use crate::cli::SweepArgs;
use crate::record::{Instance, RunRecord, TargetChecks};
use serde_json::Value;

/// What the file says about the target this run found.
#[derive(Debug, Clone, PartialEq)]
pub enum Earlier {
    /// The same target, and the same instance of it (its marker says it did not restart):
    /// the checks hold, and the server has already served the file's samples.
    SameInstance(TargetChecks),
    /// The same target, whose instance cannot be told (it exposes no marker) or is a new
    /// built-in simulator (a new process each run, identified by its settings): the checks
    /// hold, but the process may be cold.
    SameTarget(TargetChecks),
    /// The checks must be measured again, for this reason.
    Changed(String),
}

impl Earlier {
    /// The checks to keep, if any.
    pub fn checks(&self) -> Option<&TargetChecks> {
        match self {
            Earlier::SameInstance(c) | Earlier::SameTarget(c) => Some(c),
            Earlier::Changed(_) => None,
        }
    }
}

/// The run record of the file `--resume` continues; `None` when not resuming, or when the
/// file is missing or holds no complete record (a new one is started then).
pub fn earlier_run(args: &SweepArgs) -> anyhow::Result<Option<RunRecord>> {
    match &args.out {
        Some(path) if args.resume && path.exists() => {
            let file =
                crate::resultfile::read(path).map_err(|e| anyhow::anyhow!("--resume: {e}"))?;
            Ok(file.run)
        }
        _ => Ok(None),
    }
}

/// Compare the file's run record with this run's (`new`, checks not yet made) and the
/// server's marker read now.
pub fn compare(old: &RunRecord, new: &RunRecord, now: Option<&InstanceMarker>) -> Earlier {
    let (o, n) = (&old.target, &new.target);
    let both_sim = old.config.simulator.is_some() && new.config.simulator.is_some();
    if both_sim {
        if old.config.simulator != new.config.simulator {
            return Earlier::Changed("the built-in simulator's settings differ".into());
        }
    } else if o.url != n.url {
        return Earlier::Changed(format!("the URL differs ({} vs {})", o.url, n.url));
    }
    if o.api != n.api || o.model != n.model {
        return Earlier::Changed(format!(
            "the API or model differs ({} {:?} vs {} {:?})",
            o.api, o.model, n.api, n.model
        ));
    }
    if comparable(&o.server_info) != comparable(&n.server_info) {
        return Earlier::Changed(
            "the server describes itself differently (version, limits, cache or flush)".into(),
        );
    }
    if o.checks.transport.is_none() {
        return Earlier::Changed(
            "the file holds no checks (written by an older ctxbench, or the run stopped \
             before making them)"
                .into(),
        );
    }
    let kept = o.checks.clone();
    match (o.checks.instance.as_ref().map(marker), now) {
        (Some(before), Some(now)) if !now.restarted_since(&before) => Earlier::SameInstance(kept),
        (Some(_), Some(_)) if both_sim => Earlier::SameTarget(kept),
        // A restart may come with other flags (template, socket options) than the server
        // describes: what the checks measured may have changed with it.
        (Some(_), Some(_)) => {
            Earlier::Changed("the server restarted since the file was written".into())
        }
        _ => Earlier::SameTarget(kept),
    }
}

/// `server_info` without what differs between two readings of the same server: the round
/// trip (measured) and the instance marker (compared on its own).
fn comparable(info: &Value) -> Value {
    let mut v = info.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("rtt_s");
        o.remove("instance_marker");
    }
    v
}

/// The file's copy of a marker.
pub fn record(m: &InstanceMarker) -> Instance {
    match m {
        InstanceMarker::Id(s) => Instance::Id(s.clone()),
        InstanceMarker::StartTime(t) => Instance::StartTime(*t),
        InstanceMarker::Counter(n) => Instance::Counter(*n),
        InstanceMarker::TaskId(n) => Instance::TaskId(*n),
    }
}

fn marker(i: &Instance) -> InstanceMarker {
    match i {
        Instance::Id(s) => InstanceMarker::Id(s.clone()),
        Instance::StartTime(t) => InstanceMarker::StartTime(*t),
        Instance::Counter(n) => InstanceMarker::Counter(*n),
        Instance::TaskId(n) => InstanceMarker::TaskId(*n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_through_the_record() {
        for m in [
            InstanceMarker::Id("x".into()),
            InstanceMarker::StartTime(1.5),
            InstanceMarker::Counter(7),
        ] {
            assert_eq!(marker(&record(&m)), m);
        }
    }
}
