//! KV-cache capacity planning: how much context and concurrency fit on given GPUs.
//!
//! `run` wires the pieces: read the model (config.json or preset), read a live server's
//! report when `--url` is given, resolve the inputs, compute the plan (pure), render it.

pub mod args;
pub mod budget;
pub mod config;
pub mod dtype;
pub mod error;
pub mod inputs;
pub mod json;
pub mod kv;
pub mod live;
pub mod model;
pub mod params;
pub mod plan;
pub mod presets;
pub mod report;
pub mod table;
pub mod weights;
pub mod window;

pub use args::PlanArgs;

use crate::choices::Format;
use anyhow::Context;
use config::ConfigDoc;
use model::ModelSpec;
use report::{ModelSource, PlanReport};

/// `ctxbench plan`: print the plan; 0 on success.
pub async fn run(args: PlanArgs) -> anyhow::Result<u8> {
    check_format(args.format)?;
    if args.list_presets {
        write_stdout(&list_presets(args.format)?)?;
        return Ok(crate::exit::OK);
    }
    let report = build_report(&args).await?;
    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&json::to_json(&report))? + "\n",
        _ => table::to_table(&report),
    };
    write_stdout(&text)?;
    Ok(crate::exit::OK)
}

/// Print without panicking when stdout is closed (`ctxbench plan … | head`).
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write the plan to stdout")
}

fn check_format(format: Format) -> anyhow::Result<()> {
    match format {
        Format::Table | Format::Json => Ok(()),
        Format::Csv | Format::Markdown => anyhow::bail!(
            "--format {}: plan prints one table or one JSON object; use --format table or --format json",
            if format == Format::Csv {
                "csv"
            } else {
                "markdown"
            }
        ),
    }
}

/// Everything `run` prints, computed: the model, inputs, plan and live comparison.
pub async fn build_report(args: &PlanArgs) -> anyhow::Result<PlanReport> {
    let (source, doc) = load_model(args)?;
    let fallback_name = match &source {
        ModelSource::Preset(name) => name.clone(),
        ModelSource::Config(path) => file_label(path),
    };
    let mut model = ModelSpec::from_doc(&doc, &fallback_name)?;
    if args.ignore_sliding_window {
        model = model.without_windows();
    }
    let flags = inputs::PlanFlags::from(args);
    // Check the flags before touching the network.
    inputs::resolve(&flags, &model, None)?;
    let server = match &args.url {
        Some(url) => Some(live::fetch(url).await?),
        None => None,
    };
    let resolved = inputs::resolve(&flags, &model, server.as_ref())?;
    let plan = plan::compute(&model, &resolved.inputs)?;
    let live = server.map(|s| live::compare(&model, &resolved.inputs, &plan, &s));
    Ok(PlanReport {
        source,
        model,
        resolved,
        plan,
        live,
        ignore_sliding_window: args.ignore_sliding_window,
    })
}

fn load_model(args: &PlanArgs) -> anyhow::Result<(ModelSource, ConfigDoc)> {
    if let Some(name) = &args.preset {
        let doc = presets::load(name).with_context(|| {
            format!(
                "--preset {name}: no such preset; built in: {} (see --list-presets), or pass \
                 --config with a config.json",
                presets::names().join(", ")
            )
        })??;
        return Ok((ModelSource::Preset(name.trim().to_string()), doc));
    }
    let Some(path) = &args.config else {
        anyhow::bail!("one of --config FILE or --preset NAME is required");
    };
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "--config {}: cannot read the file; pass the path of a Hugging Face config.json",
            path.display()
        )
    })?;
    let doc = ConfigDoc::parse(&format!("config.json at {}", path.display()), &text)?;
    Ok((ModelSource::Config(path.clone()), doc))
}

/// A name for a config file: its folder for `…/Model/config.json`, else the file stem.
fn file_label(path: &std::path::Path) -> String {
    let folder = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().to_string());
    match (path.file_name().and_then(|n| n.to_str()), folder) {
        (Some("config.json"), Some(folder)) if !folder.is_empty() => folder,
        _ => path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "model".to_string()),
    }
}

fn list_presets(format: Format) -> anyhow::Result<String> {
    let all = presets::describe_all();
    if format == Format::Json {
        let items: Vec<_> = all
            .iter()
            .map(
                |(name, description)| serde_json::json!({"name": name, "description": description}),
            )
            .collect();
        return Ok(serde_json::to_string_pretty(&items)? + "\n");
    }
    let width = all.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    Ok(all
        .iter()
        .map(|(name, description)| format!("{name:<width$}  {description}\n"))
        .collect())
}
