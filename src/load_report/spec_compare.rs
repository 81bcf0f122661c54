//! `compare` of a speculative and a plain load file of the same plan: per length and load,
//! output tok/s and TPOT p50 side by side with the accept length, and the load at which
//! speculation stops paying (batched verify steps cost more as batches grow, so its gain
//! shrinks with concurrency and, past a point, turns into a loss).

use crate::lengths::format_count;
use crate::load::LoadResult;
use crate::record::load::CellRecord;

/// One common cell: the speculative file's figures and the plain one's.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecRow {
    pub context_tokens: u64,
    pub load: String,
    /// Concurrency or rate, to order the loads.
    pub x: f64,
    pub tps: (Option<f64>, Option<f64>),
    pub tpot_s: (Option<f64>, Option<f64>),
    pub accept_length: Option<f64>,
    pub verify_steps_per_s: Option<f64>,
}

/// Where speculation stopped paying at one length, by one measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossover {
    pub context_tokens: u64,
    /// `output tok/s` or `TPOT p50`.
    pub by: &'static str,
    /// The highest load, below the first loss, at which speculation paid.
    pub last_paying: Option<String>,
    /// The first load at which it did not.
    pub first_losing: Option<String>,
}

impl Crossover {
    pub fn sentence(&self) -> String {
        let n = format_count(self.context_tokens);
        match (&self.last_paying, &self.first_losing) {
            (Some(p), Some(l)) => format!(
                "{n}: by {}, speculation pays up to {p} and stops paying at {l} (crossover between them)",
                self.by
            ),
            (Some(p), None) => format!(
                "{n}: by {}, speculation pays at every load tried (up to {p})",
                self.by
            ),
            (None, Some(l)) => format!("{n}: by {}, speculation does not pay even at {l}", self.by),
            (None, None) => format!("{n}: by {}, no load with figures in both files", self.by),
        }
    }
}

/// Whether a file's cells carry speculative acceptance.
fn speculative(r: &LoadResult) -> bool {
    r.cells.iter().any(|c| c.accept_length_median.is_some())
}

fn x(c: &CellRecord) -> Option<f64> {
    c.cell.concurrency.map(f64::from).or(c.cell.rate)
}

/// The common cells, speculative file first, when exactly one of the two is speculative;
/// `spec_is_b` says which. `None` otherwise (then the ordinary comparison says it all).
pub fn rows(a: &LoadResult, b: &LoadResult) -> Option<(Vec<SpecRow>, bool)> {
    let (spec, plain, spec_is_b) = match (speculative(a), speculative(b)) {
        (true, false) => (a, b, false),
        (false, true) => (b, a, true),
        _ => return None,
    };
    let mut out: Vec<SpecRow> = spec
        .cells
        .iter()
        .filter_map(|s| {
            let p = plain.cells.iter().find(|p| p.cell.same(&s.cell))?;
            Some(SpecRow {
                context_tokens: s.cell.context_tokens,
                load: s.cell.load_label(),
                x: x(s)?,
                tps: (s.output_tps, p.output_tps),
                tpot_s: (s.tpot_s.map(|t| t.p50), p.tpot_s.map(|t| t.p50)),
                accept_length: s.accept_length_median,
                verify_steps_per_s: s.verify_steps_per_s,
            })
        })
        .collect();
    out.sort_by(|r, q| {
        (r.context_tokens, r.x)
            .partial_cmp(&(q.context_tokens, q.x))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Some((out, spec_is_b))
}

/// Per length, the crossover by output tok/s (higher pays) and by TPOT p50 (lower pays).
pub fn crossovers(rows: &[SpecRow]) -> Vec<Crossover> {
    let mut lengths: Vec<u64> = rows.iter().map(|r| r.context_tokens).collect();
    lengths.dedup();
    let mut out = Vec::new();
    for n in lengths {
        let at: Vec<&SpecRow> = rows.iter().filter(|r| r.context_tokens == n).collect();
        let tps = |r: &SpecRow| match r.tps {
            (Some(s), Some(p)) => Some(s > p),
            _ => None,
        };
        let tpot = |r: &SpecRow| match r.tpot_s {
            (Some(s), Some(p)) => Some(s < p),
            _ => None,
        };
        out.push(crossover(n, "output tok/s", &at, tps));
        out.push(crossover(n, "TPOT p50", &at, tpot));
    }
    out
}

fn crossover(
    n: u64,
    by: &'static str,
    rows: &[&SpecRow],
    pays: impl Fn(&SpecRow) -> Option<bool>,
) -> Crossover {
    let mut c = Crossover {
        context_tokens: n,
        by,
        last_paying: None,
        first_losing: None,
    };
    for r in rows {
        match pays(r) {
            Some(true) => c.last_paying = Some(r.load.clone()),
            Some(false) => {
                c.first_losing = Some(r.load.clone());
                break;
            }
            None => {}
        }
    }
    c
}

/// The side-by-side table and the crossover lines, for the text formats.
pub fn render_text(a: &LoadResult, b: &LoadResult, labels: (&str, &str)) -> Option<String> {
    let (rows, spec_is_b) = rows(a, b)?;
    if rows.is_empty() {
        return None;
    }
    let (spec, plain) = if spec_is_b {
        (labels.1, labels.0)
    } else {
        (labels.0, labels.1)
    };
    let f = |v: Option<f64>, scale: f64, d: usize| {
        v.map(|v| format!("{:.d$}", v * scale))
            .unwrap_or_else(|| "-".into())
    };
    let ratio = |p: (Option<f64>, Option<f64>)| match p {
        (Some(s), Some(q)) if q > 0.0 => format!("{:.2}", s / q),
        _ => "-".into(),
    };
    let mut s = format!(
        "\nspeculative (S) = {spec}, plain (P) = {plain}\n{:>8} {:>8} {:>10} {:>10} {:>6} {:>9} {:>9} {:>6} {:>10} {:>9}\n",
        "context",
        "load",
        "tok/s S",
        "tok/s P",
        "S/P",
        "TPOT S",
        "TPOT P",
        "S/P",
        "accept_len",
        "steps/s"
    );
    for r in &rows {
        s.push_str(&format!(
            "{:>8} {:>8} {:>10} {:>10} {:>6} {:>9} {:>9} {:>6} {:>10} {:>9}\n",
            format_count(r.context_tokens),
            r.load,
            f(r.tps.0, 1.0, 1),
            f(r.tps.1, 1.0, 1),
            ratio(r.tps),
            f(r.tpot_s.0, 1e3, 2),
            f(r.tpot_s.1, 1e3, 2),
            ratio(r.tpot_s),
            f(r.accept_length, 1.0, 2),
            f(r.verify_steps_per_s, 1.0, 1),
        ));
    }
    s.push_str("TPOT in ms; accept_len = decode tokens per verify step; steps/s = verify steps per second over the cell's requests\n");
    for c in crossovers(&rows) {
        s.push_str(&format!("crossover: {}\n", c.sentence()));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(load: &str, x: f64, tps: (f64, f64), tpot: (f64, f64)) -> SpecRow {
        SpecRow {
            context_tokens: 1024,
            load: load.into(),
            x,
            tps: (Some(tps.0), Some(tps.1)),
            tpot_s: (Some(tpot.0), Some(tpot.1)),
            accept_length: Some(2.5),
            verify_steps_per_s: None,
        }
    }

    #[test]
    fn the_crossover_is_the_first_load_where_speculation_no_longer_pays() {
        let rows = vec![
            row("c=1", 1.0, (180.0, 100.0), (0.005, 0.010)),
            row("c=4", 4.0, (300.0, 250.0), (0.012, 0.015)),
            row("c=16", 16.0, (500.0, 700.0), (0.030, 0.022)),
        ];
        let c = crossovers(&rows);
        assert_eq!(c.len(), 2);
        for x in &c {
            assert_eq!(x.last_paying.as_deref(), Some("c=4"), "{x:?}");
            assert_eq!(x.first_losing.as_deref(), Some("c=16"), "{x:?}");
        }
        assert!(c[0].sentence().contains("stops paying at c=16"));
        // Paying throughout, or never.
        let all = crossovers(&rows[..2]);
        assert!(all[0].sentence().contains("every load tried (up to c=4)"));
        let never = crossovers(&rows[2..]);
        assert!(never[0].sentence().contains("does not pay even at c=16"));
    }
}
