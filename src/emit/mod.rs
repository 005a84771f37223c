//! Output formats, each one file over the same findings ([`crate::report::Report`]).

mod human;
mod json;
mod sarif;
mod short;
pub mod snippet;

use crate::cli::{ColorChoice, MessageFormat};
use crate::discovery::Workspace;
use crate::report::{Finding, Report};
use crate::source::SourceFile;
use codespan_reporting::term::termcolor;
use idem_lints::Level;
use std::io::{self, IsTerminal, Write};
use std::path::Path;

pub use human::render_plain;

/// What every emitter reads.
pub struct Input<'a> {
    pub ws: &'a Workspace,
    pub report: &'a Report,
    /// Human and short output print paths relative to it.
    pub cwd: &'a Path,
}

impl Input<'_> {
    pub fn source(&self, f: &Finding, file: idem_lints::model::FileId) -> &SourceFile {
        self.report.source(f.package, file)
    }
}

/// Writes the findings to standard output in `format`.
pub fn emit_stdout(format: MessageFormat, color: ColorChoice, input: &Input) -> io::Result<()> {
    let stdout = io::stdout();
    match format {
        MessageFormat::Human => {
            let use_color = match color {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => {
                    stdout.is_terminal()
                        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                }
            };
            let choice = if use_color {
                termcolor::ColorChoice::Always
            } else {
                termcolor::ColorChoice::Never
            };
            let mut out = termcolor::BufferedStandardStream::stdout(choice);
            human::emit(input, &mut out)?;
            out.flush()
        }
        other => {
            let mut out = io::BufWriter::new(stdout.lock());
            emit(other, input, &mut out)?;
            out.flush()
        }
    }
}

/// Writes the findings to `out` in `format`, without color.
pub fn emit(format: MessageFormat, input: &Input, out: &mut dyn Write) -> io::Result<()> {
    match format {
        MessageFormat::Human => human::emit(input, &mut termcolor::NoColor::new(out)),
        MessageFormat::Short => short::emit(input, out),
        MessageFormat::Json => json::emit(input, out),
        MessageFormat::Sarif => sarif::emit(input, out),
    }
}

/// The word rustc uses for a level.
pub(crate) fn level_word(level: Level) -> &'static str {
    match level {
        Level::Deny => "error",
        Level::Warn | Level::Allow => "warning",
    }
}

/// `path` relative to `base` when it lies below it, else as it is (absolute).
pub(crate) fn relative_path(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}
