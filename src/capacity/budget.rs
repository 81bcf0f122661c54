//! One GPU's memory budget: GPU memory × mem fraction − weights − reserve = the KV pool.
//!
//! This is SGLang's accounting: `mem_fraction_static` covers weights and the KV pool, and
//! activations and CUDA graphs live in the rest. For vLLM's `gpu_memory_utilization`, which
//! covers everything, put the activation peak in the reserve.

use super::error::PlanError;
use super::weights::GIB;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryBudget {
    pub gpu_mem_bytes: u64,
    pub mem_fraction: f64,
    /// GPU memory × mem fraction.
    pub usable_bytes: u64,
    pub weights_bytes: u64,
    pub reserve_bytes: u64,
    /// What is left for the KV cache.
    pub kv_pool_bytes: u64,
}

impl MemoryBudget {
    pub fn new(
        gpu_mem_gib: f64,
        mem_fraction: f64,
        weights_per_gpu_bytes: u64,
        reserve_gib: f64,
    ) -> Result<MemoryBudget, PlanError> {
        let gpu_mem_bytes = (gpu_mem_gib * GIB).round() as u64;
        let usable_bytes = (gpu_mem_gib * mem_fraction * GIB).floor() as u64;
        let reserve_bytes = (reserve_gib * GIB).round() as u64;
        let taken = weights_per_gpu_bytes.saturating_add(reserve_bytes);
        if taken >= usable_bytes {
            let needed = taken as f64 / gpu_mem_bytes.max(1) as f64;
            let advice = if needed < 1.0 {
                format!(
                    "weights and reserve alone need --mem-fraction above {needed:.3}; raise it, or \
                     spread the weights over more GPUs (--tp), or quantise them (--weights-dtype fp8)"
                )
            } else {
                "the weights do not fit on these GPUs at all: use more GPUs (--tp), bigger ones \
                 (--gpu-mem-gib), or smaller weights (--weights-dtype fp8 or int4)"
                    .to_string()
            };
            return Err(PlanError::NoRoomForKv {
                weights_gib: weights_per_gpu_bytes as f64 / GIB,
                reserve_gib,
                usable_gib: usable_bytes as f64 / GIB,
                gpu_mem_gib,
                mem_fraction,
                advice,
            });
        }
        Ok(MemoryBudget {
            gpu_mem_bytes,
            mem_fraction,
            usable_bytes,
            weights_bytes: weights_per_gpu_bytes,
            reserve_bytes,
            kv_pool_bytes: usable_bytes - taken,
        })
    }

    pub fn gib(bytes: u64) -> f64 {
        bytes as f64 / GIB
    }
}
