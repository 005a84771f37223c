//! rustc-style output through codespan-reporting.

use super::{level_word, relative_path, Input};
use crate::report::{Finding, Report};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, Severity};
use codespan_reporting::files::{Error as FilesError, Files};
use codespan_reporting::term::{self, termcolor::WriteColor, Chars, Config};
use idem_lints::model::FileId;
use idem_lints::Level;
use std::io;
use std::ops::Range;
use std::path::Path;

/// Files of every package, named relative to the current directory.
struct Db<'a> {
    report: &'a Report,
    cwd: &'a Path,
}

type Id = (usize, FileId);

impl<'a> Files<'a> for Db<'a> {
    type FileId = Id;
    type Name = String;
    type Source = &'a str;

    fn name(&'a self, (p, f): Id) -> Result<String, FilesError> {
        Ok(relative_path(&self.report.source(p, f).path, self.cwd))
    }

    fn source(&'a self, (p, f): Id) -> Result<&'a str, FilesError> {
        Ok(&self.report.source(p, f).text)
    }

    fn line_index(&'a self, (p, f): Id, byte_index: usize) -> Result<usize, FilesError> {
        Ok(self.report.source(p, f).line_index(byte_index))
    }

    fn line_range(&'a self, (p, f): Id, line_index: usize) -> Result<Range<usize>, FilesError> {
        let src = self.report.source(p, f);
        if line_index >= src.line_count() {
            return Err(FilesError::LineTooLarge {
                given: line_index,
                max: src.line_count() - 1,
            });
        }
        let start = src.line_range(line_index).start;
        let end = if line_index + 1 < src.line_count() {
            src.line_range(line_index + 1).start
        } else {
            src.text.len()
        };
        Ok(start..end)
    }
}

pub fn emit(input: &Input, out: &mut dyn WriteColor) -> io::Result<()> {
    let db = Db {
        report: input.report,
        cwd: input.cwd,
    };
    let config = rustc_like();
    for f in &input.report.findings {
        term::emit_to_write_style(out, &config, &db, &to_codespan(input.report, f))
            .map_err(files_error)?;
    }
    summary(input, out)?;
    unselected_members(input, out)
}

/// `note: linted `app` only; 2 other members of the workspace were not read (`a`, `b`):
/// `--workspace` lints all members`, so a clean run over a root package is not taken for a
/// clean repository. Printed whether or not anything was found.
fn unselected_members(input: &Input, out: &mut dyn WriteColor) -> io::Result<()> {
    let left = &input.ws.unselected;
    if left.is_empty() {
        return Ok(());
    }
    // A few names, then a count: a large workspace must not flood the line.
    let quoted = |names: &mut dyn Iterator<Item = &String>| {
        let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
        match names.len() {
            0..=5 => names.join(", "),
            n => format!("{}, and {} more", names[..4].join(", "), n - 4),
        }
    };
    let linted = quoted(&mut input.ws.packages.iter().map(|p| &p.name));
    let members = if left.len() == 1 { "member" } else { "members" };
    let text = format!(
        "linted {linted} only; {} other workspace {members} not read ({}): `--workspace` lints \
         all members",
        left.len(),
        quoted(&mut left.iter())
    );
    let diag: CsDiagnostic<Id> = CsDiagnostic::new(Severity::Note).with_message(text);
    let db = Db {
        report: input.report,
        cwd: input.cwd,
    };
    term::emit_to_write_style(out, &rustc_like(), &db, &diag).map_err(files_error)
}

/// The rendering of one finding without color, for JSON's `rendered`.
pub fn render_plain(input: &Input, f: &Finding) -> String {
    let db = Db {
        report: input.report,
        cwd: input.cwd,
    };
    term::emit_into_string(&rustc_like(), &db, &to_codespan(input.report, f)).unwrap_or_else(|_| {
        format!(
            "{}[{}]: {}\n",
            level_word(f.diag.level),
            f.diag.lint.code(),
            f.diag.message
        )
    })
}

/// ASCII frames (`-->`, `|`) as rustc draws them, so logs and terminals without box
/// drawing glyphs show the same thing.
fn rustc_like() -> Config {
    Config {
        chars: Chars::ascii(),
        ..Config::default()
    }
}

fn to_codespan(report: &Report, f: &Finding) -> CsDiagnostic<Id> {
    let d = &f.diag;
    let clamp = |span: idem_lints::model::Span| {
        let src = report.source(f.package, span.file);
        let lo = src.clamp(span.lo as usize);
        lo..src.clamp(span.hi as usize).max(lo)
    };
    let mut primary = Label::primary((f.package, d.span.file), clamp(d.span));
    if let Some(l) = &d.label {
        primary = primary.with_message(l);
    }
    let mut labels = vec![primary];
    labels.extend(d.labels.iter().map(|l| {
        Label::secondary((f.package, l.span.file), clamp(l.span)).with_message(&l.message)
    }));
    let mut notes: Vec<String> = d.notes.iter().map(|n| format!("note: {n}")).collect();
    notes.extend(d.help.iter().map(|h| format!("help: {h}")));
    for s in &d.suggestions {
        let edits: Vec<String> = s
            .edits
            .iter()
            .map(|(_, text)| format!("`{text}`"))
            .collect();
        notes.push(format!("help: {}: {}", s.message, edits.join(", ")));
    }
    notes.push(format!(
        "for more information, run `cargo idem-lint --explain {}`",
        d.lint.name
    ));
    let severity = match d.level {
        Level::Deny => Severity::Error,
        Level::Warn | Level::Allow => Severity::Warning,
    };
    CsDiagnostic::new(severity)
        .with_code(d.lint.code())
        .with_message(&d.message)
        .with_labels(labels)
        .with_notes(notes)
}

/// `warning: 2 warnings emitted`, as rustc ends.
fn summary(input: &Input, out: &mut dyn WriteColor) -> io::Result<()> {
    let errors = input
        .report
        .findings
        .iter()
        .filter(|f| f.diag.level == Level::Deny)
        .count();
    let warnings = input.report.findings.len() - errors;
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let (severity, text) = match (errors, warnings) {
        (0, 0) => return Ok(()),
        (0, w) => (
            Severity::Warning,
            format!("{} emitted", plural(w, "warning")),
        ),
        (e, 0) => (Severity::Error, format!("{} emitted", plural(e, "error"))),
        (e, w) => (
            Severity::Error,
            format!("{}; {} emitted", plural(e, "error"), plural(w, "warning")),
        ),
    };
    let diag: CsDiagnostic<Id> = CsDiagnostic::new(severity).with_message(text);
    let db = Db {
        report: input.report,
        cwd: input.cwd,
    };
    term::emit_to_write_style(out, &rustc_like(), &db, &diag).map_err(files_error)
}

fn files_error(e: FilesError) -> io::Error {
    match e {
        FilesError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}
