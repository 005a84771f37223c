//! rustc-style output through codespan-reporting.

use super::{level_word, relative_path, snippet, suggestion, Input};
use crate::report::{Finding, Report};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, Severity};
use codespan_reporting::files::{Error as FilesError, Files};
use codespan_reporting::term::termcolor::{self, Color, ColorSpec, WriteColor};
use codespan_reporting::term::{self, Chars, Config};
use idem_lints::model::FileId;
use idem_lints::Level;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::ops::Range;
use std::path::Path;

/// The lines one finding shows, per file: escaped and cut around its labels (see
/// [`super::snippet`]), so the renderer never sees raw control characters or a whole
/// megabyte line. Line indices stay those of the file, so line numbers are right.
struct View {
    files: Vec<ViewFile>,
}

struct ViewFile {
    name: String,
    text: String,
    /// Original line index → byte range of its shown text in `text`.
    lines: BTreeMap<usize, Range<usize>>,
    /// View offset of each shown line's start → original line index (for `line_index`).
    starts: Vec<(usize, usize)>,
    /// Per shown line: the length of the `...` in front, and how many characters of the
    /// line were cut before it (columns are the file's, not the view's).
    cuts: BTreeMap<usize, (usize, usize)>,
}

impl<'a> Files<'a> for View {
    type FileId = usize;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: usize) -> Result<&'a str, FilesError> {
        Ok(&self.file(id)?.name)
    }

    fn source(&'a self, id: usize) -> Result<&'a str, FilesError> {
        Ok(&self.file(id)?.text)
    }

    fn line_index(&'a self, id: usize, byte_index: usize) -> Result<usize, FilesError> {
        let f = self.file(id)?;
        let at = f.starts.partition_point(|&(start, _)| start <= byte_index);
        Ok(at.checked_sub(1).map_or(0, |i| f.starts[i].1))
    }

    fn column_number(
        &'a self,
        id: usize,
        line_index: usize,
        byte_index: usize,
    ) -> Result<usize, FilesError> {
        let f = self.file(id)?;
        let range = self.line_range(id, line_index)?;
        let (prefix, chars_cut) = f.cuts.get(&line_index).copied().unwrap_or((0, 0));
        let from = (range.start + prefix).min(range.end);
        let to = byte_index.clamp(from, range.end);
        // Escaping maps each character to one character, so counts carry over.
        let shown = f.text.get(from..to).map_or(0, |t| t.chars().count());
        Ok(chars_cut + shown + 1)
    }

    fn line_range(&'a self, id: usize, line_index: usize) -> Result<Range<usize>, FilesError> {
        // A line no label touches (codespan may ask for one between two labels) shows empty.
        let f = self.file(id)?;
        Ok(f.lines
            .get(&line_index)
            .cloned()
            .unwrap_or(f.text.len()..f.text.len()))
    }
}

impl View {
    fn file(&self, id: usize) -> Result<&ViewFile, FilesError> {
        self.files.get(id).ok_or(FilesError::FileMissing)
    }

    /// The view of `spans` (with their file) and each span mapped into it.
    fn build(
        report: &Report,
        cwd: &Path,
        package: usize,
        spans: &[idem_lints::model::Span],
    ) -> (View, Vec<(usize, Range<usize>)>) {
        let mut files: Vec<ViewFile> = Vec::new();
        let mut mapped = Vec::with_capacity(spans.len());
        let mut keys: Vec<(usize, FileId)> = Vec::new();
        for s in spans {
            if !keys.contains(&(package, s.file)) {
                keys.push((package, s.file));
            }
        }
        for key in keys {
            let src = report.source(key.0, key.1);
            let ranges: Vec<Range<usize>> = spans
                .iter()
                .filter(|s| s.file == key.1)
                .map(|s| {
                    let lo = src.clamp(s.lo as usize);
                    lo..src.clamp(s.hi as usize).max(lo)
                })
                .collect();
            // Every line a label covers, and the one after each (shown between two labels).
            let mut wanted: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
            for r in &ranges {
                let (first, last) = (src.line_index(r.start), src.line_index(r.end));
                for line in first..=(last + 1).min(src.line_count() - 1) {
                    let lr = src.line_range(line);
                    let lo = r.start.clamp(lr.start, lr.end) - lr.start;
                    let hi = r.end.clamp(lr.start, lr.end) - lr.start;
                    let (lo, hi) = if line > last { (0, 0) } else { (lo, hi) };
                    let e = wanted.entry(line).or_insert((lo, hi));
                    *e = (e.0.min(lo), e.1.max(hi));
                }
            }
            let mut text = String::new();
            let mut lines = BTreeMap::new();
            let mut starts = Vec::new();
            let mut cuts = BTreeMap::new();
            let mut maps: BTreeMap<usize, (usize, Range<usize>)> = BTreeMap::new();
            for (&line, &(lo, hi)) in &wanted {
                let lr = src.line_range(line);
                let raw = &src.text[lr.clone()];
                let keep = snippet::window(raw, lo..hi);
                let (shown, _) = snippet::cut(raw, keep.clone());
                let start = text.len();
                text.push_str(&shown);
                lines.insert(line, start..text.len());
                starts.push((start, line));
                let prefix = if keep.start > 0 { "...".len() } else { 0 };
                cuts.insert(line, (prefix, raw[..keep.start].chars().count()));
                maps.insert(line, (start, keep));
                text.push('\n');
            }
            let id = files.len();
            for r in &ranges {
                let at = |b: usize| {
                    let line = src.line_index(b);
                    let lr = src.line_range(line);
                    let raw = &src.text[lr.clone()];
                    match maps.get(&line) {
                        Some((start, keep)) => {
                            let (_, map) = snippet::cut(raw, keep.clone());
                            start + map(b.min(lr.end).max(lr.start) - lr.start)
                        }
                        None => text.len(),
                    }
                };
                let lo = at(r.start);
                mapped.push((id, lo..at(r.end).max(lo)));
            }
            files.push(ViewFile {
                name: snippet::escape(&relative_path(&src.path, cwd)),
                text,
                lines,
                starts,
                cuts,
            });
        }
        (View { files }, mapped)
    }
}

pub fn emit(input: &Input, out: &mut dyn WriteColor) -> io::Result<()> {
    let color = out.supports_color();
    for f in &input.report.findings {
        out.write_all(&render(input, f, color)?)?;
    }
    summary(input, out)?;
    if let Some(b) = &input.report.baseline {
        let diag: CsDiagnostic<usize> =
            CsDiagnostic::new(Severity::Note).with_message(b.describe());
        let none = View { files: Vec::new() };
        term::emit_to_write_style(out, &rustc_like(), &none, &diag).map_err(files_error)?;
    }
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
    let diag: CsDiagnostic<usize> = CsDiagnostic::new(Severity::Note).with_message(text);
    let none = View { files: Vec::new() };
    term::emit_to_write_style(out, &rustc_like(), &none, &diag).map_err(files_error)
}

/// The rendering of one finding without color, for JSON's `rendered`.
pub fn render_plain(input: &Input, f: &Finding) -> String {
    match render(input, f, false) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => format!(
            "{}[{}]: {}\n",
            level_word(f.diag.level),
            f.diag.lint.code(),
            snippet::escape(&f.diag.message)
        ),
    }
}

/// The rendering of one finding with color escape codes, for JSON's `rendered` under
/// `json-diagnostic-rendered-ansi`.
pub fn render_ansi(input: &Input, f: &Finding) -> String {
    match render(input, f, true) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => render_plain(input, f),
    }
}

/// One finding as rustc prints it: codespan's rendering of the message, labels, notes and
/// help lines (no line ending in blanks), then each suggestion as a `help:` line with the
/// lines it edits ([`suggestion::render`]), then the blank line that ends a diagnostic.
fn render(input: &Input, f: &Finding, color: bool) -> io::Result<Vec<u8>> {
    let new_buffer = || {
        if color {
            termcolor::Buffer::ansi()
        } else {
            termcolor::Buffer::no_color()
        }
    };
    let (view, diag) = to_codespan(input, f);
    let mut buf = new_buffer();
    term::emit_to_write_style(&mut buf, &rustc_like(), &view, &diag).map_err(files_error)?;
    let mut out = trim_line_ends(buf.as_slice());
    // The suggestions go before the blank line that ends the diagnostic.
    let blank_end = out.ends_with(b"\n\n");
    if blank_end {
        out.pop();
    }
    let mut tail = new_buffer();
    for (message, lines) in suggestions(input, f) {
        tail.set_color(ColorSpec::new().set_bold(true))?;
        tail.write_all(b"help")?;
        tail.reset()?;
        writeln!(tail, ": {}", snippet::escape(&message))?;
        for line in lines {
            tail.set_color(ColorSpec::new().set_fg(Some(Color::Blue)).set_bold(true))?;
            let gutter = line
                .find(['|', '-', '+'])
                .map_or(0, |i| i + 1)
                .min(line.len());
            write!(tail, "{}", &line[..gutter])?;
            tail.reset()?;
            writeln!(tail, "{}", &line[gutter..])?;
        }
    }
    out.extend_from_slice(tail.as_slice());
    if blank_end {
        out.push(b'\n');
    }
    Ok(out)
}

/// The suggestions of `f` to show: message and snippet lines, each once.
fn suggestions(input: &Input, f: &Finding) -> Vec<(String, Vec<String>)> {
    let source = |file| input.source(f, file);
    let name = |file| relative_path(&input.source(f, file).path, input.cwd);
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for s in &f.diag.suggestions {
        let shown = (
            s.message.clone(),
            suggestion::render(s, &source, &name, f.diag.span.file),
        );
        if !out.contains(&shown) {
            out.push(shown);
        }
    }
    out
}

/// `bytes` with the blanks at the end of every line removed (color codes kept): codespan pads
/// the gutter of a multi-line label's empty lines.
fn trim_line_ends(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let (body, end) = match line.strip_suffix(b"\n") {
            Some(body) => (body, &b"\n"[..]),
            None => (line, &b""[..]),
        };
        // Escape sequences after the last visible character stay; the blanks go.
        let mut keep = body.len();
        let mut escapes: Vec<&[u8]> = Vec::new();
        loop {
            if keep > 0 && body[keep - 1] == b' ' {
                keep -= 1;
            } else if let Some(start) = trailing_escape(&body[..keep]) {
                escapes.push(&body[start..keep]);
                keep = start;
            } else {
                break;
            }
        }
        out.extend_from_slice(&body[..keep]);
        for e in escapes.iter().rev() {
            out.extend_from_slice(e);
        }
        out.extend_from_slice(end);
    }
    out
}

/// Where a CSI escape sequence (`ESC [ params letter`) that ends `bytes` starts.
fn trailing_escape(bytes: &[u8]) -> Option<usize> {
    let last = *bytes.last()?;
    if !last.is_ascii_alphabetic() {
        return None;
    }
    let start = bytes.iter().rposition(|&b| b == 0x1b)?;
    let params = &bytes[start + 1..bytes.len() - 1];
    (params.first() == Some(&b'[') && params[1..].iter().all(|b| b.is_ascii_digit() || *b == b';'))
        .then_some(start)
}

/// ASCII frames (`-->`, `|`) as rustc draws them, so logs and terminals without box
/// drawing glyphs show the same thing.
fn rustc_like() -> Config {
    Config {
        chars: Chars::ascii(),
        ..Config::default()
    }
}

fn to_codespan(input: &Input, f: &Finding) -> (View, CsDiagnostic<usize>) {
    let d = &f.diag;
    let mut spans = vec![d.span];
    spans.extend(d.labels.iter().map(|l| l.span));
    let (view, ranges) = View::build(input.report, input.cwd, f.package, &spans);
    let esc = snippet::escape;
    let mut ranges = ranges.into_iter();
    let (file, range) = ranges.next().unwrap_or((0, 0..0));
    let mut primary = Label::primary(file, range);
    if let Some(l) = &d.label {
        primary = primary.with_message(esc(l));
    }
    let mut labels = vec![primary];
    labels.extend(
        d.labels
            .iter()
            .zip(ranges)
            .map(|(l, (file, range))| Label::secondary(file, range).with_message(esc(&l.message))),
    );
    let mut notes: Vec<String> = d
        .notes
        .iter()
        .map(|n| format!("note: {}", esc(n)))
        .collect();
    // A help line a suggestion repeats is shown once, with the suggestion's snippet.
    notes.extend(
        d.help
            .iter()
            .filter(|h| !d.suggestions.iter().any(|s| s.message == **h))
            .map(|h| format!("help: {}", esc(h))),
    );
    notes.push(format!(
        "for more information, run `cargo idem-lint --explain {}`",
        d.lint.name
    ));
    let severity = match d.level {
        Level::Deny => Severity::Error,
        Level::Warn | Level::Allow => Severity::Warning,
    };
    let diag = CsDiagnostic::new(severity)
        .with_code(d.lint.code())
        .with_message(esc(&d.message))
        .with_labels(labels)
        .with_notes(notes);
    (view, diag)
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
    let diag: CsDiagnostic<usize> = CsDiagnostic::new(severity).with_message(text);
    let none = View { files: Vec::new() };
    term::emit_to_write_style(out, &rustc_like(), &none, &diag).map_err(files_error)
}

fn files_error(e: FilesError) -> io::Error {
    match e {
        FilesError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::trim_line_ends;

    #[test]
    fn blanks_at_line_ends_go_and_color_codes_stay() {
        let colored = b"\x1b[1;34m   |    \x1b[0m\n = note\x1b[0m  \n   |";
        assert_eq!(
            trim_line_ends(colored),
            b"\x1b[1;34m   |\x1b[0m\n = note\x1b[0m\n   |".to_vec()
        );
    }
}
