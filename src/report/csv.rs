//! CSV: one row per point, raw numbers in SI units for spreadsheets.

use crate::record::{Stat, Summary};

const COLUMNS: &str = "context_tokens,prompt_tokens,attempts,n_valid,n_failed,ttft_s_median,ttft_s_p10,ttft_s_p90,prefill_tps_median,decode_tps_median,itl_p50_s_median,itl_p99_s_median,two_point_decode_tps_median,flags";

/// Inserted before `flags` when any point has acceptance data (speculative decoding).
const SPEC_COLUMNS: &str = "accept_length_median,accept_rate_median,spec_source";

pub fn render(summary: &Summary) -> String {
    let med = |s: Option<Stat>| s.map(|s| s.median.to_string()).unwrap_or_default();
    let spec = super::spec::any(summary);
    let mut out = if spec {
        COLUMNS.replace(",flags", &format!(",{SPEC_COLUMNS},flags")) + "\n"
    } else {
        format!("{COLUMNS}\n")
    };
    for p in &summary.points {
        let flags: Vec<String> = p.flags.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        let spec_cells = if spec {
            format!(
                "{},{},{},",
                med(p.accept_length),
                med(p.accept_rate),
                p.spec_source.map(|s| s.name()).unwrap_or_default()
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{spec_cells}{}\n",
            p.context_tokens,
            p.prompt_tokens.map(|t| t.to_string()).unwrap_or_default(),
            p.attempts,
            p.n_valid,
            p.n_failed,
            med(p.ttft_s),
            p.ttft_s.map(|s| s.p10.to_string()).unwrap_or_default(),
            p.ttft_s.map(|s| s.p90.to_string()).unwrap_or_default(),
            med(p.prefill_tps),
            med(p.decode_tps),
            med(p.itl_p50_s),
            med(p.itl_p99_s),
            med(p.two_point_decode_tps),
            flags.join(";"),
        ));
    }
    out.push_str(&super::depth::csv(summary));
    out.push_str(&super::accuracy::csv(summary));
    out
}
