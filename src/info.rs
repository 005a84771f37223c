//! `--explain` and `--list`.

use crate::levels::Levels;
use anyhow::Result;
use std::io::Write;

pub fn explain(name: &str) -> Result<()> {
    let lint = crate::cli::explain_target(name)?;
    writeln!(std::io::stdout().lock(), "{}", explain_text(lint))?;
    Ok(())
}

/// The `--explain` text of `lint` (Markdown), also the language server's hover.
pub fn explain_text(lint: &idem_lints::Lint) -> String {
    format!(
        "# {} (default: {})\n\n{}\n\n{}",
        lint.code(),
        lint.default_level.as_str(),
        lint.desc,
        lint.doc_markdown().trim_end()
    )
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
