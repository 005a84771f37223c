//! Output formats, each one file over the same findings ([`crate::report::Report`]).

pub(crate) mod fingerprint;
mod github;
mod human;
pub(crate) mod json;
mod sarif;
mod short;
pub mod snippet;
mod suggestion;

use crate::cli::{ColorChoice, MessageFormat};
use crate::discovery::Workspace;
use crate::report::{Finding, Report};
use crate::source::SourceFile;
use codespan_reporting::term::termcolor;
use idem_lints::Level;
use std::io::{self, IsTerminal, Write};
use std::path::Path;

pub use human::{render_ansi, render_plain};

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
pub fn emit_stdout(
    format: MessageFormat,
    color: Option<ColorChoice>,
    input: &Input,
) -> io::Result<()> {
    let stdout = io::stdout();
    match format {
        MessageFormat::Human
            if use_color(color, stdout.is_terminal(), &|k| std::env::var(k).ok()) =>
        {
            // Rendered into a buffer first: the `-->` lines lose their escape codes there.
            let mut buf = termcolor::Buffer::ansi();
            human::emit(input, &mut buf)?;
            let mut out = stdout.lock();
            out.write_all(&plain_location_lines(buf.as_slice()))?;
            out.flush()
        }
        other => {
            let mut out = io::BufWriter::new(stdout.lock());
            emit(other, input, &mut out)?;
            out.flush()
        }
    }
}

/// Whether human output is colored: the `--color` flag, else `CARGO_TERM_COLOR` (as cargo
/// reads it: `always`, `never`, `auto`), else on a terminal unless `NO_COLOR` is set and
/// not empty. `env` reads a variable (a parameter so tests need not touch the process's).
pub fn use_color(
    flag: Option<ColorChoice>,
    terminal: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> bool {
    let from_env = || match env("CARGO_TERM_COLOR").as_deref().map(str::trim) {
        Some("always") => Some(ColorChoice::Always),
        Some("never") => Some(ColorChoice::Never),
        _ => None,
    };
    match flag.or_else(from_env).unwrap_or(ColorChoice::Auto) {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && env("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

/// Colored output with the escape codes removed from every ` --> path:line:col` line:
/// problem matchers (GitHub's for Rust among them) read the path from that line, and a
/// color reset in front of it becomes part of the path.
pub fn plain_location_lines(colored: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(colored.len());
    for line in colored.split_inclusive(|&b| b == b'\n') {
        let plain = strip_ansi(line);
        let is_location = plain
            .iter()
            .position(|&b| b != b' ')
            .is_some_and(|i| plain[i..].starts_with(b"--> "));
        out.extend_from_slice(if is_location { &plain } else { line });
    }
    out
}

/// `bytes` without CSI escape sequences (`ESC [ params letter`), the only kind termcolor
/// writes.
fn strip_ansi(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'[') {
            i += 2;
            while i < bytes.len() && !bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            i += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// Writes the findings to `out` in `format`, without color.
pub fn emit(format: MessageFormat, input: &Input, out: &mut dyn Write) -> io::Result<()> {
    match format {
        MessageFormat::Human => human::emit(input, &mut termcolor::NoColor::new(out)),
        MessageFormat::Short => short::emit(input, out),
        MessageFormat::Json => json::emit(input, false, out),
        MessageFormat::JsonDiagnosticRenderedAnsi => json::emit(input, true, out),
        MessageFormat::Sarif => sarif::emit(input, out),
        MessageFormat::Github => github::emit(input, out),
    }
}

/// The word rustc uses for a level.
pub(crate) fn level_word(level: Level) -> &'static str {
    match level {
        Level::Deny => "error",
        Level::Warn | Level::Allow => "warning",
    }
}

/// The directory SARIF URIs and GitHub annotation paths are relative to: `--sarif-root`
/// when given, else the repository root (the closest directory at or above the workspace
/// root holding `.git`, a directory or a worktree's file), else the workspace root.
pub fn repository_root(ws: &Workspace) -> std::path::PathBuf {
    if let Some(dir) = &ws.report_root {
        return crate::discovery::absolute(dir);
    }
    ws.root
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&ws.root)
        .to_path_buf()
}

/// `path` relative to `base` when it lies below it, else as it is (absolute).
pub(crate) fn relative_path(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}
