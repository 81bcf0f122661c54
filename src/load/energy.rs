//! A cell's GPU energy, power and utilisation over its steady window, a pure function of
//! its telemetry records: the energy counters' change where they run forward, power
//! integrated where they do not (or are not exported), every gap named in a note.

use crate::record::load::{EnergySource, GpuCell, GpuMetricsRecord};
use std::collections::BTreeMap;

/// A covered span shorter than this share of the window is named: its mean stands for the
/// whole window.
const COVERED_NOTE: f64 = 0.9;

/// What the telemetry says over a window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Energy {
    pub cell: GpuCell,
    /// Mean power of all GPUs together over the window, watts (from the energy counters
    /// where they ran forward, else from power).
    pub energy_power_w: Option<f64>,
    /// Mean of the power gauge of all GPUs together over the window, watts.
    pub power_w: Option<f64>,
    pub util_pct: Option<f64>,
    pub notes: Vec<String>,
}

/// (time, value) points of one GPU's quantity, in time order.
type Series = Vec<(f64, f64)>;

/// The integral of the piecewise-linear `s` over `[a, b]` ∩ its span, and that span's length.
fn integral(s: &Series, a: f64, b: f64) -> Option<(f64, f64)> {
    let (first, last) = (s.first()?.0, s.last()?.0);
    let (lo, hi) = (a.max(first), b.min(last));
    if s.len() < 2 || hi <= lo {
        return None;
    }
    let mut area = 0.0;
    for w in s.windows(2) {
        let ((t0, v0), (t1, v1)) = (w[0], w[1]);
        let (x0, x1) = (t0.max(lo), t1.min(hi));
        if x1 <= x0 || t1 <= t0 {
            continue;
        }
        let at = |x: f64| v0 + (v1 - v0) * (x - t0) / (t1 - t0);
        area += (at(x0) + at(x1)) / 2.0 * (x1 - x0);
    }
    Some((area, hi - lo))
}

/// `s` linearly interpolated at `t` (inside its span).
fn at(s: &Series, t: f64) -> Option<f64> {
    let i = s.iter().position(|p| p.0 >= t)?;
    if i == 0 {
        return (s[0].0 == t).then_some(s[0].1);
    }
    let ((t0, v0), (t1, v1)) = (s[i - 1], s[i]);
    Some(v0 + (v1 - v0) * (t - t0) / (t1 - t0))
}

/// Mean of `s` over `[a, b]` ∩ its span (a lone point stands for itself).
fn mean(s: &Series, a: f64, b: f64) -> Option<f64> {
    match integral(s, a, b) {
        Some((area, span)) => Some(area / span),
        None if s.len() == 1 => Some(s[0].1),
        None => None,
    }
}

/// Per exporter: scrapes, failures and the first reason.
type Sources<'a> = BTreeMap<&'a str, (u64, u64, Option<&'a str>)>;

/// Per (exporter, GPU): its energy counter, power and utilisation series.
type GpuSeries<'a> = BTreeMap<(&'a str, &'a str), [Series; 3]>;

/// The GPUs' figures summed (energy and power) or pooled (utilisation) over the window.
struct Sums {
    energy_w: Option<f64>,
    power_w: Option<f64>,
    utils: Vec<f64>,
    source: EnergySource,
    covered: f64,
}

/// Summarise `records` (one cell's, every exporter's) over the window `[a, b]`.
pub fn summarise(records: &[&GpuMetricsRecord], a: f64, b: f64) -> Option<Energy> {
    if records.is_empty() {
        return None;
    }
    let mut out = Energy::default();
    let mut notes = Vec::new();
    let (sources, mut series, fb_max) = gather(records);
    for (src, (n, failed, why)) in &sources {
        if *failed > 0 {
            notes.push(format!(
                "telemetry {src}: {failed} of {n} scrapes failed ({})",
                why.unwrap_or("?")
            ));
        }
    }
    out.cell.scrapes = sources.values().map(|s| s.0).sum();
    out.cell.failed_scrapes = sources.values().map(|s| s.1).sum();
    out.cell.gpus = series.len() as u64;
    out.cell.fb_used_max_mib = fb_max;
    let Sums {
        mut energy_w,
        mut power_w,
        utils,
        source,
        covered,
    } = sum_gpus(&mut series, a, b, &mut notes);
    if series.is_empty() {
        energy_w = None;
        power_w = None;
        if out.cell.failed_scrapes < out.cell.scrapes {
            notes.push("telemetry: no GPU readings in the cell".into());
        }
    }
    if let Some(w) = energy_w {
        out.cell.energy_j = Some(w * (b - a));
        out.cell.energy_source = Some(source);
        if source == EnergySource::PowerIntegral {
            notes.push(format!(
                "GPU energy integrated from {} (power) over the window, not read from an \
                 energy counter",
                super::gpu::POWER
            ));
        }
        if b > a && covered < COVERED_NOTE * (b - a) {
            notes.push(format!(
                "telemetry covered {covered:.2} s of the {:.2} s window: its mean power \
                 stands for the rest",
                b - a
            ));
        }
    }
    out.energy_power_w = energy_w;
    out.power_w = power_w;
    out.util_pct = (!utils.is_empty()).then(|| utils.iter().sum::<f64>() / utils.len() as f64);
    out.notes = notes;
    Some(out)
}

/// The exporters' tallies, the GPUs' series and the largest framebuffer use. Merged shards
/// each scraped the same exporters: one shard's scrapes (the lowest) stand for all.
fn gather<'a>(records: &[&'a GpuMetricsRecord]) -> (Sources<'a>, GpuSeries<'a>, Option<f64>) {
    let mut sources: Sources = BTreeMap::new();
    let mut shard_of: BTreeMap<&str, Option<u32>> = BTreeMap::new();
    for r in records {
        let s = r.shard.map(|t| t.shard);
        let e = shard_of.entry(&r.source).or_insert(s);
        *e = (*e).min(s);
    }
    let kept: Vec<&'a GpuMetricsRecord> = records
        .iter()
        .copied()
        .filter(|r| shard_of.get(r.source.as_str()) == Some(&r.shard.map(|t| t.shard)))
        .collect();
    let mut series: GpuSeries = BTreeMap::new();
    let mut fb_max: Option<f64> = None;
    for r in kept {
        let e = sources.entry(&r.source).or_default();
        e.0 += 1;
        if let Some(err) = &r.error {
            e.1 += 1;
            e.2.get_or_insert(err);
        }
        for g in &r.gpus {
            let s = series.entry((&r.source, &g.gpu)).or_default();
            for (i, v) in [g.energy_mj, g.power_w, g.util_pct].into_iter().enumerate() {
                if let Some(v) = v {
                    s[i].push((r.t_s, v));
                }
            }
            if let Some(f) = g.fb_used_mib {
                fb_max = Some(fb_max.map_or(f, |m: f64| m.max(f)));
            }
        }
    }
    (sources, series, fb_max)
}

/// Each GPU's mean energy rate (its counter's, else its power's integral), mean power and
/// utilisation over `[a, b]`, summed; the notes on counters that went backwards or left
/// no energy.
fn sum_gpus(series: &mut GpuSeries, a: f64, b: f64, notes: &mut Vec<String>) -> Sums {
    let (mut energy_w, mut power_w, mut utils) = (Some(0.0), Some(0.0), Vec::new());
    let mut source = EnergySource::Counter;
    let mut covered = f64::INFINITY;
    for ((src, gpu), [energy, power, util]) in series.iter_mut() {
        for s in [&mut *energy, &mut *power, &mut *util] {
            s.sort_by(|x, y| x.0.total_cmp(&y.0));
        }
        let back = energy.windows(2).find(|w| w[1].1 < w[0].1).map(|w| w[1].0);
        if let Some(t) = back {
            notes.push(format!(
                "telemetry {src} GPU {gpu}: the energy counter went backwards at {t:.2} s (an \
                 exporter or driver restart?): its energy is integrated from {}",
                super::gpu::POWER
            ));
        }
        let from_counter = match back {
            None => integral_of_counter(energy, a, b),
            Some(_) => None,
        };
        let gpu_w = match from_counter {
            Some((w, span)) => {
                covered = covered.min(span);
                Some(w)
            }
            None => {
                source = EnergySource::PowerIntegral;
                integral(power, a, b).map(|(area, span)| {
                    covered = covered.min(span);
                    area / span
                })
            }
        };
        if gpu_w.is_none() {
            notes.push(format!(
                "telemetry {src} GPU {gpu}: no energy over the window (neither {} running \
                 forward nor {} at two scrapes in it): no joules per token",
                super::gpu::ENERGY,
                super::gpu::POWER
            ));
        }
        energy_w = energy_w.zip(gpu_w).map(|(x, y)| x + y);
        power_w = power_w.zip(mean(power, a, b)).map(|(x, y)| x + y);
        utils.extend(mean(util, a, b));
    }
    Sums {
        energy_w,
        power_w,
        utils,
        source,
        covered,
    }
}

/// A counter's mean rate over `[a, b]` ∩ its span in watts (mJ/s ÷ 1000), and the span.
fn integral_of_counter(s: &Series, a: f64, b: f64) -> Option<(f64, f64)> {
    let (lo, hi) = (a.max(s.first()?.0), b.min(s.last()?.0));
    if hi <= lo {
        return None;
    }
    let joules = (at(s, hi)? - at(s, lo)?) / 1000.0;
    Some((joules / (hi - lo), hi - lo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::load::GpuReading;

    fn scrape(t: f64, gpus: &[(f64, Option<f64>)]) -> GpuMetricsRecord {
        GpuMetricsRecord {
            t_s: t,
            source: "http://x/metrics".into(),
            gpus: gpus
                .iter()
                .enumerate()
                .map(|(i, (p, e))| GpuReading {
                    gpu: i.to_string(),
                    power_w: Some(*p),
                    energy_mj: *e,
                    util_pct: Some(50.0),
                    fb_used_mib: Some(1000.0 * (i + 1) as f64),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn counters_give_the_energy_over_the_window() {
        // Two GPUs at 300 and 100 W: counters grow 300 and 100 J per second.
        let v: Vec<_> = (0..=8)
            .map(|i| {
                let t = i as f64 * 0.5;
                scrape(t, &[(300.0, Some(3e5 * t)), (100.0, Some(5e6 + 1e5 * t))])
            })
            .collect();
        let refs: Vec<_> = v.iter().collect();
        let e = summarise(&refs, 1.2, 3.2).unwrap();
        assert_eq!(e.cell.energy_source, Some(EnergySource::Counter));
        assert!((e.cell.energy_j.unwrap() - 800.0).abs() < 1e-6, "{e:?}");
        assert!((e.power_w.unwrap() - 400.0).abs() < 1e-9);
        assert!((e.util_pct.unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(e.cell.fb_used_max_mib, Some(2000.0));
        assert!(e.notes.is_empty(), "{:?}", e.notes);
    }

    #[test]
    fn a_counter_going_backwards_falls_back_to_power_and_says_so() {
        let mut v: Vec<_> = (0..=8)
            .map(|i| scrape(i as f64 * 0.5, &[(200.0, Some(2e5 * i as f64 * 0.5))]))
            .collect();
        // The exporter restarts at 2 s: its counter starts again near zero.
        for (i, r) in v.iter_mut().enumerate().skip(4) {
            r.gpus[0].energy_mj = Some(1e3 * i as f64);
        }
        let refs: Vec<_> = v.iter().collect();
        let e = summarise(&refs, 0.0, 4.0).unwrap();
        assert_eq!(e.cell.energy_source, Some(EnergySource::PowerIntegral));
        assert!((e.cell.energy_j.unwrap() - 800.0).abs() < 1e-6);
        assert!(
            e.notes
                .iter()
                .any(|n| n.contains("went backwards at 2.00 s"))
        );
        assert!(e.notes.iter().any(|n| n.contains("integrated from")));
    }

    #[test]
    fn failed_scrapes_are_named_and_power_alone_is_integrated() {
        let mut v: Vec<_> = (0..=4)
            .map(|i| scrape(i as f64, &[(100.0 + 50.0 * i as f64, None)]))
            .collect();
        v.push(GpuMetricsRecord {
            t_s: 4.5,
            source: "http://x/metrics".into(),
            error: Some("unreachable: connection refused".into()),
            ..Default::default()
        });
        let refs: Vec<_> = v.iter().collect();
        let e = summarise(&refs, 0.0, 4.0).unwrap();
        // Power rises linearly 100 → 300 W: 800 J over 4 s.
        assert!((e.cell.energy_j.unwrap() - 800.0).abs() < 1e-6);
        assert_eq!((e.cell.scrapes, e.cell.failed_scrapes), (6, 1));
        assert!(
            e.notes
                .iter()
                .any(|n| n.contains("1 of 6 scrapes failed (unreachable: connection refused)")),
            "{:?}",
            e.notes
        );
    }

    #[test]
    fn an_unreachable_exporter_gives_no_energy() {
        let v = [GpuMetricsRecord {
            t_s: 0.5,
            source: "http://x/metrics".into(),
            error: Some("unreachable: connection refused".into()),
            ..Default::default()
        }];
        let refs: Vec<_> = v.iter().collect();
        let e = summarise(&refs, 0.0, 4.0).unwrap();
        assert_eq!(e.cell.energy_j, None);
        assert_eq!(e.notes.len(), 1, "{:?}", e.notes);
    }
}
