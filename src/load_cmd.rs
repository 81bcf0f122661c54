//! The `load` command entry point: runs the plan with `load::execute` and hands the result
//! to the renderers in `load_report`.

use crate::load::args::LoadArgs;
use crate::load::{execute, job_io};
use crate::load_report::render;

/// `ctxbench load`: run, print, return the exit code.
pub async fn run(args: LoadArgs) -> anyhow::Result<u8> {
    let (format, html) = (args.format, args.html.clone());
    let print_out = args.out.clone().filter(|_| args.print_out);
    let log = args.log.as_deref().map(job_io::StderrToFile::open);
    let log = log.transpose()?;
    let r = execute(args).await;
    if let Some(log) = log {
        log.restore(r.is_err())?;
    }
    let r = r?;
    match &print_out {
        Some(path) => job_io::print_out(path)?,
        None => print!("{}", render::render_result(&r, format)),
    }
    if let Some(path) = html {
        render::write_html(&path, &r)?;
    }
    Ok(r.exit_code())
}
