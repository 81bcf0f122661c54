//! Issue 37 §1: `twin whatif --price-per-hour` ranks configurations by what a good token
//! costs at the SLO, one line each; a configuration meeting the SLO nowhere says so.

use clap::Parser;
use ctxbench::cli::{Cli, Command};
use ctxbench::sim::CostModel;
use ctxbench::sim::scheduler::EngineConfig;
use ctxbench::sim::stepcost::StepCost;
use ctxbench::twin::Twin;
use ctxbench::twin::profile_of;

/// 25 ms + 40k tok/s prefill, 8 ms decode steps: 4k-token requests one at a time take
/// ~0.35 s each, so a fourth waits ~1 s for its first token; four at once start together.
fn engine() -> EngineConfig {
    EngineConfig {
        cost: StepCost {
            model: CostModel {
                t0: 0.025,
                p0: 40_000.0,
                q: 0.0,
                d0: 0.008,
                d1: 0.0,
            },
            overhead: 0.001,
            d2: 0.001,
            interference: 0.0,
            spec_draft: Default::default(),
        },
        max_batch_tokens: 16_384,
        budget: ctxbench::sim::TokenBudget::Prefill,
        max_running: 8,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 16,
        pool_tokens: 218_000,
        cache: true,
    }
}

#[test]
fn configurations_are_ranked_by_dollars_per_good_token() {
    let twin = Twin::new(profile_of(&engine(), 65_536), "p.json".into());
    let argv = [
        "ctxbench",
        "load",
        "--lengths",
        "4k",
        "--concurrency",
        "4",
        "--requests",
        "16",
        "--output-tokens",
        "32",
        "--slo",
        "ttft=600ms",
        "--goodput-target",
        "0.9",
        "--price-per-hour",
        "2.5",
    ];
    let Command::Load(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    let o = ctxbench::twin::whatif(&twin, &args, &["max-running=1,4".to_string()]).unwrap();
    let text = ctxbench::twin::render_whatif(&o);
    let (one, four) = (&o[0].result.cells[0], &o[1].result.cells[0]);
    assert!(!one.meets_target && four.meets_target, "{text}");
    // Every predicted cell is priced: $2.50/h over its good output tokens per second.
    let want = 2.5 / 3600.0 / four.goodput_output_tps.unwrap() * 1e6;
    let got = four.usd_per_mtok_goodput.unwrap();
    assert!((got - want).abs() < 1e-9 * want, "{got} vs {want}");
    assert!(one.usd_per_mtok_output.is_some());
    let line = text
        .lines()
        .find(|l| l.starts_with("cost at the SLO, 4k tokens"))
        .unwrap_or_else(|| panic!("no ranking line: {text}"));
    let expect = format!(
        "max-running=4: ${got:.2} per M tokens at goodput {:.0} % (c=4); max-running=1: \
         misses the SLO",
        four.goodput_fraction.unwrap() * 100.0
    );
    assert!(line.ends_with(&expect), "{line}\nwanted …{expect}");
    assert!(
        text.contains(&format!("${got:.3}")),
        "the $/Mtok column: {text}"
    );
}
