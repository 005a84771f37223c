//! `--explain` and `--list`.

use crate::levels::Levels;
use anyhow::Result;
use std::io::Write;

pub fn explain(name: &str) -> Result<()> {
    let lint = crate::cli::explain_target(name)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "# {} (default: {})\n\n{}",
        lint.code(),
        lint.default_level.as_str(),
        lint.desc
    )?;
    writeln!(out, "\n{}", lint.doc_markdown().trim_end())?;
    Ok(())
}

pub fn list(levels: &Levels) -> Result<()> {
    let lints = idem_lints::lints::ALL;
    let width = lints.iter().map(|l| l.name.len()).max().unwrap_or(4).max(4);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{:width$}  default  effective  description", "lint")?;
    for l in lints {
        writeln!(
            out,
            "{:width$}  {:7}  {:9}  {}",
            l.name,
            l.default_level.as_str(),
            levels.get(l).as_str(),
            l.desc
        )?;
    }
    Ok(())
}
