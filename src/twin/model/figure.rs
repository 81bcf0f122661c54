//! The figures a prediction is given: each one's value in a cell, its bound (the error
//! `twin check` allows it) and, for the banded five, its place in a band.

use crate::record::load::{CellBand, CellRecord, Interval};
use crate::twin::model::profile::Spread;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    TtftP50,
    TtftP90,
    TtftP99,
    TpotP50,
    OutputTps,
    Goodput,
    HitRatio,
}

impl Figure {
    pub const ALL: [Figure; 7] = [
        Figure::TtftP50,
        Figure::TtftP90,
        Figure::TtftP99,
        Figure::TpotP50,
        Figure::OutputTps,
        Figure::Goodput,
        Figure::HitRatio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Figure::TtftP50 => "TTFT p50",
            Figure::TtftP90 => "TTFT p90",
            Figure::TtftP99 => "TTFT p99",
            Figure::TpotP50 => "TPOT p50",
            Figure::OutputTps => "output tok/s",
            Figure::Goodput => "goodput req/s",
            Figure::HitRatio => "hit ratio",
        }
    }

    /// The error a prediction may have, as a fraction (points for the hit ratio).
    pub fn bound(self) -> f64 {
        match self {
            Figure::TtftP50 | Figure::TpotP50 | Figure::OutputTps | Figure::Goodput => 0.10,
            Figure::TtftP90 | Figure::TtftP99 => 0.25,
            Figure::HitRatio => 0.10,
        }
    }

    /// The figure of a cell; `hit_ratio`: the replay's observed cached / input tokens.
    pub fn of(self, c: &CellRecord, hit_ratio: Option<f64>) -> Option<f64> {
        match self {
            Figure::TtftP50 => c.ttft_s.map(|p| p.p50),
            Figure::TtftP90 => c.ttft_s.map(|p| p.p90),
            Figure::TtftP99 => c.ttft_s.map(|p| p.p99),
            Figure::TpotP50 => c.tpot_s.map(|p| p.p50),
            Figure::OutputTps => c.output_tps,
            Figure::Goodput => c.goodput_rps,
            Figure::HitRatio => hit_ratio,
        }
    }

    /// The figures a band is given for, in the order a band's arrays hold them.
    pub const BANDED: [Figure; 5] = [
        Figure::TtftP50,
        Figure::TtftP99,
        Figure::TpotP50,
        Figure::OutputTps,
        Figure::Goodput,
    ];

    /// Where a band's arrays hold this figure (`None`: it has no band).
    pub fn band_index(self) -> Option<usize> {
        Figure::BANDED.iter().position(|&f| f == self)
    }

    /// This figure's interval in a band (`None`: it has none).
    pub fn within(self, b: &CellBand) -> Option<Interval> {
        match self {
            Figure::TtftP50 => b.ttft_s.as_ref().map(|t| t.p50),
            Figure::TtftP99 => b.ttft_s.as_ref().map(|t| t.p99),
            Figure::TpotP50 => b.tpot_s.as_ref().map(|t| t.p50),
            Figure::OutputTps => b.output_tps,
            Figure::Goodput => b.goodput_rps,
            Figure::TtftP90 | Figure::HitRatio => None,
        }
    }

    /// The server's spread of this figure (`None`: it has no band).
    pub fn spread(self, s: &Spread) -> Option<f64> {
        match self {
            Figure::TtftP50 => Some(s.ttft_p50),
            Figure::TtftP99 => Some(s.ttft_p99),
            Figure::TpotP50 => Some(s.tpot_p50),
            Figure::OutputTps => Some(s.output_tps),
            Figure::Goodput => Some(s.goodput_rps),
            Figure::TtftP90 | Figure::HitRatio => None,
        }
    }

    /// The value for a reader: ms for latencies, plain otherwise.
    pub fn show(self, v: f64) -> String {
        match self {
            Figure::TtftP50 | Figure::TtftP90 | Figure::TtftP99 | Figure::TpotP50 => {
                format!("{:.1} ms", v * 1e3)
            }
            Figure::OutputTps => format!("{v:.1}"),
            Figure::Goodput => format!("{v:.3}"),
            Figure::HitRatio => format!("{:.1} %", v * 100.0),
        }
    }
}
