//! One configuration's cells out of a file that holds several: `twin whatif --out` writes
//! every configuration's predicted cells into one file, each tagged (`"config":
//! {"max_running": 2}`), and their cell keys repeat. Reading such a file as one plan would
//! set configurations side by side as if they were one server; `--config` picks one.

use crate::load::knob::{Knob, Tag, label};
use crate::record::load::CellRecord;

/// `KNOB=VALUE` settings (`--config max-running=2 --config pool=64k`) as the tag cells
/// carry: the knobs `twin whatif` tags its configurations with, values as each takes them.
pub fn parse(settings: &[String]) -> Result<Tag, String> {
    let mut tag = Tag::new();
    for s in settings {
        let (name, value) = s
            .split_once('=')
            .filter(|(k, v)| !k.trim().is_empty() && !v.trim().is_empty())
            .ok_or_else(|| format!("--config `{s}`: give KNOB=VALUE, e.g. max-running=2"))?;
        let knob = Knob::from_name(name)
            .filter(|k| k.is_tagged())
            .ok_or_else(|| {
                format!(
                    "--config `{s}`: unknown knob `{}`; one of max-running, pool, chunk, \
                     time-scale",
                    name.trim()
                )
            })?;
        let x = knob.value(value).ok_or_else(|| {
            format!(
                "--config `{s}`: `{}` is not a positive number",
                value.trim()
            )
        })?;
        if tag.insert(knob.tag_key(), x).is_some() {
            return Err(format!("--config: `{}` is given twice", knob.name()));
        }
    }
    Ok(tag)
}

/// Keeps the cells of the one configuration `wanted` names: those whose tag has each
/// knob given at its value (knobs not given may be anything, as long as one configuration
/// is left). A file whose cells carry no tag is one configuration and is kept whole. Where
/// more than one configuration is left, or none, the error names what the file has.
pub fn select(cells: &mut Vec<CellRecord>, wanted: &Tag, file: &str) -> Result<(), String> {
    if cells.iter().all(|c| c.config.is_none()) {
        return Ok(());
    }
    let labels = |cells: &[CellRecord]| {
        let mut seen: Vec<String> = Vec::new();
        for c in cells {
            let l = label(&c.config.clone().unwrap_or_default());
            if !seen.contains(&l) {
                seen.push(l);
            }
        }
        seen
    };
    let all = labels(cells).join("; ");
    let want = key(wanted);
    cells.retain(|c| {
        let have = c.config.as_ref().map(key).unwrap_or_default();
        want.iter().all(|w| have.contains(w))
    });
    match labels(cells).len() {
        0 => Err(format!(
            "{file} has no cells of --config {} (it has: {all})",
            label(wanted)
        )),
        1 => Ok(()),
        _ => Err(format!(
            "{file} holds the cells of several configurations ({}): pick one with \
             --config KNOB=VALUE",
            labels(cells).join("; ")
        )),
    }
}

/// A tag in a form that compares exactly (values to a millionth).
fn key(tag: &Tag) -> Vec<(String, u64)> {
    tag.iter()
        .map(|(k, v)| (k.clone(), (v * 1e6).round() as u64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(tag: Option<&[(&str, f64)]>) -> CellRecord {
        let mut c: CellRecord = serde_json::from_value(serde_json::json!({
            "context_tokens": 1024, "concurrency": 4, "sent": 8, "ok": 8, "failed": 0,
            "timed_out": 0, "duration_s": 1.0, "window_start_s": 0.0, "window_s": 1.0,
            "ramp_up_s": 0.0, "drain_s": 0.0, "meets_target": true, "notes": []
        }))
        .expect("a minimal cell record");
        c.config = tag.map(|t| t.iter().map(|(k, v)| (k.to_string(), *v)).collect());
        c
    }

    #[test]
    fn settings_parse_into_the_cells_tag_and_bad_ones_are_named() {
        let t = parse(&["max-running=2".into(), "pool=64k".into()]).unwrap();
        assert_eq!(t["max_running"], 2.0);
        assert_eq!(t["pool"], 65536.0);
        for bad in [
            "max-running",
            "=2",
            "max-running=0",
            "pool=lots",
            "slots=2",
            "rate=2",
        ] {
            assert!(parse(&[bad.into()]).is_err(), "{bad}");
        }
        assert!(parse(&["chunk=1".into(), "chunk=2".into()]).is_err());
        assert!(parse(&["max_running=1".into(), "max-running=2".into()]).is_err());
    }

    #[test]
    fn one_configuration_is_picked_and_several_are_refused() {
        let at = |m: f64| Some(vec![("max_running", m), ("pool", 65536.0)]);
        let all: Vec<CellRecord> = [None, at(2.0), at(8.0)]
            .iter()
            .map(|t| cell(t.as_deref()))
            .collect();
        let err = select(&mut all.clone(), &Tag::new(), "w.jsonl").unwrap_err();
        assert!(
            err.contains("as profiled; max-running=2 pool=65536; max-running=8 pool=65536"),
            "{err}"
        );
        let mut picked = all.clone();
        select(&mut picked, &parse(&["max-running=2".into()]).unwrap(), "w").unwrap();
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].config.as_ref().unwrap()["max_running"], 2.0);
        let err = select(&mut all.clone(), &parse(&["pool=64k".into()]).unwrap(), "w");
        assert!(err.unwrap_err().contains("several configurations"));
        let err = select(
            &mut all.clone(),
            &parse(&["max-running=3".into()]).unwrap(),
            "w",
        );
        assert!(
            err.unwrap_err()
                .contains("no cells of --config max-running=3")
        );
        // A measured file (no tags) is one configuration, whatever --config says.
        let mut measured = vec![cell(None), cell(None)];
        select(
            &mut measured,
            &parse(&["max-running=2".into()]).unwrap(),
            "m",
        )
        .unwrap();
        assert_eq!(measured.len(), 2);
    }
}
