//! Weight bytes of one replica and of one GPU: given, or parameter count × bytes per parameter.

use super::dtype::WeightsDtype;
use super::error::PlanError;
use super::params::ParamCount;

pub const GIB: f64 = (1u64 << 30) as f64;

/// How the weight size was obtained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WeightsBasis {
    /// `--weights-gib`.
    Given,
    /// Parameters × bytes per parameter of `dtype`.
    Parameters {
        params: ParamCount,
        dtype: WeightsDtype,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub basis: WeightsBasis,
    /// One model replica, all TP ranks together.
    pub total_bytes: u64,
    /// One GPU's share: the total divided over TP (rounded up).
    pub per_gpu_bytes: u64,
}

impl Weights {
    pub fn given(total_gib: f64, tp: u64) -> Weights {
        let total_bytes = (total_gib * GIB).round() as u64;
        Weights {
            basis: WeightsBasis::Given,
            total_bytes,
            per_gpu_bytes: total_bytes.div_ceil(tp.max(1)),
        }
    }

    pub fn from_params(params: ParamCount, dtype: WeightsDtype, tp: u64) -> Weights {
        let (dense_qbits, expert_qbits) = dtype.quarter_bits();
        let experts = u128::from(params.experts.min(params.total));
        let dense = u128::from(params.total) - experts;
        let quarter_bits = dense * u128::from(dense_qbits) + experts * u128::from(expert_qbits);
        // Quarter-bits / 32 = bytes; a u64 parameter count keeps this below u64::MAX / 2.
        let total_bytes = u64::try_from(quarter_bits.div_ceil(32)).unwrap_or(u64::MAX);
        Weights {
            basis: WeightsBasis::Parameters { params, dtype },
            total_bytes,
            per_gpu_bytes: total_bytes.div_ceil(tp.max(1)),
        }
    }

    pub fn total_gib(&self) -> f64 {
        self.total_bytes as f64 / GIB
    }

    pub fn per_gpu_gib(&self) -> f64 {
        self.per_gpu_bytes as f64 / GIB
    }
}

/// Validate `--weights-gib` when it is given.
pub fn check_weights_gib(value: f64) -> Result<f64, PlanError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(PlanError::Flag {
            flag: "weights-gib",
            value: value.to_string(),
            problem: "must be a positive size in GiB: the checkpoint's size, all TP ranks together"
                .into(),
        })
    }
}
