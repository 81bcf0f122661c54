//! What a token costs: `--price-per-hour` over a cell's steady-window token rates (dollars
//! per million output, input and goodput tokens), and joules per output token from the GPU
//! telemetry, both set on the cell from its own records.

use super::energy;
use crate::load::args::LoadArgs;
use crate::record::load::{CellRecord, GpuMetricsRecord, LoadPlan};

/// `--price-per-hour`, checked: a positive, finite number of dollars.
pub fn price(args: &LoadArgs) -> anyhow::Result<Option<f64>> {
    match args.price_per_hour {
        Some(p) if !(p.is_finite() && p > 0.0) => anyhow::bail!(
            "--price-per-hour {p}: give the server's price in US dollars per hour, a positive \
             number, e.g. --price-per-hour 2.5"
        ),
        p => Ok(p),
    }
}

/// Dollars per million tokens produced at `tps` tokens per second by a server costing
/// `per_hour` dollars an hour; `None` when nothing was produced.
pub fn usd_per_mtok(per_hour: f64, tps: Option<f64>) -> Option<f64> {
    tps.filter(|t| *t > 0.0)
        .map(|t| per_hour / 3600.0 / t * 1e6)
}

/// Set the cell's cost fields from `plan`'s price and its energy fields from `gpu` (the
/// cell's telemetry records). A shard's cell holds part of the server's tokens and all of
/// its power: its per-token figures are left to the merged report.
pub fn apply(c: &mut CellRecord, gpu: &[&GpuMetricsRecord], plan: &LoadPlan) {
    let (a, b) = (c.window_start_s, c.window_start_s + c.window_s);
    let e = energy::summarise(gpu, a, b);
    let shard = plan.shard.is_some();
    if let Some(e) = e {
        c.gpu_power_w = e.power_w;
        c.gpu_util_pct = e.util_pct;
        if !shard {
            c.energy_j_per_output_token = e
                .energy_power_w
                .zip(c.output_tps.filter(|t| *t > 0.0))
                .map(|(w, tps)| w / tps);
        }
        c.gpu = Some(e.cell);
        c.notes.extend(e.notes);
    }
    if shard {
        if plan.price_per_hour.is_some() || !gpu.is_empty() {
            c.notes.push(
                "a shard's cell: dollars and joules per token are in the merged report \
                 (ctxbench report of every shard's file)"
                    .into(),
            );
        }
        return;
    }
    if let Some(p) = plan.price_per_hour {
        c.usd_per_mtok_output = usd_per_mtok(p, c.output_tps);
        c.usd_per_mtok_input = usd_per_mtok(p, c.input_tps);
        c.usd_per_mtok_goodput = usd_per_mtok(p, c.goodput_output_tps);
        if c.window_s > 0.0 && c.usd_per_mtok_goodput.is_none() {
            c.notes
                .push("no request met every SLO: no good token to price".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_per_hour_over_a_token_rate() {
        // $2.50/h at 1,000 tok/s: 3.6 M tokens an hour, $0.694 per million.
        let x = usd_per_mtok(2.5, Some(1000.0)).unwrap();
        assert!((x - 2.5 / 3.6).abs() < 1e-12);
        assert_eq!(usd_per_mtok(2.5, Some(0.0)), None);
        assert_eq!(usd_per_mtok(2.5, None), None);
    }
}
