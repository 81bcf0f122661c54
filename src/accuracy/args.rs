//! The accuracy flags `sweep` and `load` share, and what they parse to.

use super::generate::Style;
use super::qa::QaItem;
use super::task::{TaskKind, TaskSet};
use super::threshold::Threshold;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct AccuracyArgs {
    /// Grade answers on these tasks, comma-separated: niah (single needle), multikey,
    /// multivalue, vt (variable tracking), cwe (common words), qa (the --dataset items).
    /// Every graded item is also a timed cold sample at the exact length.
    /// Example: --tasks niah,multikey,vt --samples 8
    #[arg(long, value_name = "TASKS")]
    pub tasks: Option<String>,
    /// Graded samples per length and task (replaces --reps with --tasks).
    #[arg(long, default_value_t = 5)]
    pub samples: u32,
    /// What a length must score to lie within the effective context: a factor of the
    /// accuracy at the shortest length (default 0.85), or an absolute rate `abs:X`.
    #[arg(long, default_value = "0.85")]
    pub accuracy_threshold: String,
    /// Send task and needle prompts as raw completions (the question then RULER's answer
    /// prefix) instead of through the server's chat template.
    #[arg(long)]
    pub raw_completion: bool,
}

/// `--tasks` and its companions, parsed and checked before anything is sent.
#[derive(Debug, Clone)]
pub struct AccuracyPlan {
    pub tasks: TaskSet,
    pub threshold: Threshold,
    pub qa: Vec<QaItem>,
}

impl AccuracyArgs {
    /// `None` without `--tasks`; else the plan, or the error that refuses the run. `dataset`
    /// is `--dataset`, read for `qa` items when `qa` is asked for.
    pub fn plan(&self, dataset: Option<&std::path::Path>) -> anyhow::Result<Option<AccuracyPlan>> {
        let Some(list) = &self.tasks else {
            return Ok(None);
        };
        let tasks = TaskSet::parse(list, self.samples).map_err(|e| anyhow::anyhow!(e))?;
        let threshold =
            Threshold::parse(&self.accuracy_threshold).map_err(|e| anyhow::anyhow!(e))?;
        let qa = match (tasks.tasks.contains(&TaskKind::Qa), dataset) {
            (false, _) => Vec::new(),
            (true, Some(d)) => super::qa::load(d).map_err(|e| anyhow::anyhow!(e))?,
            (true, None) => anyhow::bail!(
                "--tasks qa needs --dataset FILE (LongBench-style items: input, context, answers)"
            ),
        };
        Ok(Some(AccuracyPlan {
            tasks,
            threshold,
            qa,
        }))
    }

    /// Whether prompts go through the chat template (where the server has a chat route).
    pub fn wants_chat(&self) -> bool {
        !self.raw_completion
    }
}

impl AccuracyPlan {
    /// Refuse a length too short for any task's structure (every depth tried).
    pub fn check_lengths(
        &self,
        lengths: &[u64],
        depths: &[f64],
        style: Style,
    ) -> anyhow::Result<()> {
        for &n in lengths {
            for &task in &self.tasks.tasks {
                for (i, &d) in depths.iter().enumerate() {
                    super::generate(task, 0, n, i as u32, d, style, &self.qa)
                        .map_err(|e| anyhow::anyhow!("--lengths: {e}"))?;
                }
            }
        }
        Ok(())
    }

    /// The item for repetition `rep` of length `n`: its task, sample and depth from the rep.
    pub fn item(
        &self,
        seed: u64,
        n: u64,
        rep: u32,
        depths: &[f64],
        style: Style,
    ) -> Result<super::Item, String> {
        let (task, sample) = self.tasks.at(rep);
        let depth = depths[sample as usize % depths.len().max(1)];
        super::generate(task, seed, n, sample, depth, style, &self.qa)
    }

    /// Names of the tasks, in order.
    pub fn names(&self) -> Vec<String> {
        self.tasks
            .tasks
            .iter()
            .map(|t| t.name().to_string())
            .collect()
    }
}
