//! Findings in the protocol's terms: diagnostics per file (with related information for the
//! secondary labels), the hover text of a finding (its lint's `--explain`), and a code action
//! for every suggestion.

use super::engine::{Analysis, Problem};
use super::position::{self, Encoding};
use crate::report::Finding;
use crate::source::SourceFile;
use idem_lints::model::Span;
use idem_lints::{Applicability, Level, Suggestion};
use lsp_types::{
    CodeAction, CodeActionKind, CodeDescription, Diagnostic, DiagnosticRelatedInformation,
    DiagnosticSeverity, Hover, HoverContents, Location, MarkupContent, MarkupKind, NumberOrString,
    Position, Range, TextEdit, Uri, WorkspaceEdit,
};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

/// The `source` of every diagnostic.
pub const SOURCE: &str = "idem-lint";

/// How a path is named to the client: the URI of its open buffer, else its `file://` URI.
pub trait UriOf {
    fn uri_of(&self, path: &Path) -> Option<Uri>;
}

/// `path` as a `file://` URI.
pub fn file_uri(path: &Path) -> Option<Uri> {
    Uri::from_str(&crate::uri::file_uri(path)).ok()
}

/// Every finding of `analysis` as a diagnostic, grouped by the file it points into.
pub fn diagnostics(
    analysis: &Analysis,
    enc: Encoding,
    uris: &dyn UriOf,
) -> BTreeMap<PathBuf, Vec<Diagnostic>> {
    let mut out: BTreeMap<PathBuf, Vec<Diagnostic>> = BTreeMap::new();
    for f in &analysis.report.findings {
        let src = analysis.report.source(f.package, f.diag.span.file);
        out.entry(src.path.clone())
            .or_default()
            .push(diagnostic(analysis, f, enc, uris));
    }
    out
}

fn diagnostic(analysis: &Analysis, f: &Finding, enc: Encoding, uris: &dyn UriOf) -> Diagnostic {
    let d = &f.diag;
    let span_range = |s: Span| span_range(analysis.report.source(f.package, s.file), s, enc);
    let related: Vec<DiagnosticRelatedInformation> = d
        .labels
        .iter()
        .filter_map(|l| {
            let src = analysis.report.source(f.package, l.span.file);
            Some(DiagnosticRelatedInformation {
                location: Location::new(uris.uri_of(&src.path)?, span_range(l.span)),
                message: l.message.clone(),
            })
        })
        .chain(d.notes.iter().filter_map(|n| linked_note(analysis, n, enc)))
        .collect();
    Diagnostic {
        range: span_range(d.span),
        severity: Some(severity(d.level)),
        code: Some(NumberOrString::String(d.lint.code())),
        code_description: super::docs::url(d.lint).map(|href| CodeDescription { href }),
        source: Some(SOURCE.to_string()),
        message: message_text(f),
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: None,
    }
}

/// A note naming a place in a linked member's file ([`crate::link::note_place`]) as related
/// information there, so the editor can go to it (the note stays in the message too: not
/// every client shows related information).
fn linked_note(
    analysis: &Analysis,
    note: &str,
    enc: Encoding,
) -> Option<DiagnosticRelatedInformation> {
    let place = crate::link::note_place(note)?;
    let path = analysis.ws.root.join(place.path);
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let (line, column) = (place.line.saturating_sub(1), place.column.saturating_sub(1));
    // The member's file as this analysis read it, when it is one of its packages (a client
    // counting UTF-16 units needs the text); else the column as written.
    let src = analysis
        .report
        .packages
        .iter()
        .flat_map(|p| &p.sources)
        .find(|s| s.path == path);
    let at = match src {
        Some(src) if line < src.line_count() => {
            let range = src.line_range(line);
            let byte = src.text[range.clone()]
                .char_indices()
                .nth(column)
                .map_or(range.end, |(i, _)| range.start + i);
            position::position(src, byte, enc)
        }
        _ => Position::new(line as u32, column as u32),
    };
    Some(DiagnosticRelatedInformation {
        location: Location::new(file_uri(&path)?, Range::new(at, at)),
        message: format!("in `{}`: {}", place.krate, place.message),
    })
}

/// The message with its primary label, notes and help, as rustc prints them below it.
fn message_text(f: &Finding) -> String {
    let d = &f.diag;
    let mut text = d.message.clone();
    if let Some(label) = &d.label {
        text.push_str(&format!("\n{label}"));
    }
    for n in &d.notes {
        text.push_str(&format!("\nnote: {n}"));
    }
    for h in &d.help {
        text.push_str(&format!("\nhelp: {h}"));
    }
    text
}

fn severity(level: Level) -> DiagnosticSeverity {
    match level {
        Level::Deny => DiagnosticSeverity::ERROR,
        Level::Warn | Level::Allow => DiagnosticSeverity::WARNING,
    }
}

fn span_range(src: &SourceFile, span: Span, enc: Encoding) -> Range {
    position::range(src, span.lo as usize, span.hi as usize, enc)
}

/// A config or manifest problem as a diagnostic on the file it names (the position converted
/// from rustc-style line and character column).
pub fn problem_diagnostic(problem: &Problem, text: Option<&str>, enc: Encoding) -> Diagnostic {
    let range = match text {
        Some(text) => {
            let src = SourceFile::new(PathBuf::new(), Arc::from(text));
            let line = problem.line.saturating_sub(1).min(src.line_count() - 1);
            let line = src.line_range(line);
            let start = src.text[line.clone()]
                .char_indices()
                .nth(problem.column.saturating_sub(1))
                .map_or(line.end, |(i, _)| line.start + i);
            let end = start + token_len(&src.text[start..line.end]);
            Range::new(
                position::position(&src, start, enc),
                position::position(&src, end, enc),
            )
        }
        None => Range::default(),
    };
    Diagnostic {
        range,
        severity: Some(DiagnosticSeverity::ERROR),
        code: Some(NumberOrString::String(PROBLEM_CODE.to_string())),
        source: Some(SOURCE.to_string()),
        message: problem.message.clone(),
        ..Diagnostic::default()
    }
}

/// The code of a config or manifest error (not a lint: it cannot be allowed).
pub const PROBLEM_CODE: &str = "idem::config_error";

/// The length of the TOML token `rest` starts with: a quoted string, a bare key or value
/// (dotted keys included), else the rest of the line without trailing blanks, so the editor
/// underlines what the message is about.
fn token_len(rest: &str) -> usize {
    if let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
        return rest[1..]
            .find(quote)
            .map_or(rest.trim_end().len(), |i| i + 2);
    }
    let bare = rest
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .unwrap_or(rest.len());
    if bare > 0 {
        bare
    } else {
        rest.trim_end().len()
    }
}

/// The findings in `path` whose primary span overlaps the bytes `lo..=hi`.
fn findings_at<'a>(
    analysis: &'a Analysis,
    path: &'a Path,
    lo: usize,
    hi: usize,
) -> impl Iterator<Item = &'a Finding> + 'a {
    analysis.report.findings.iter().filter(move |f| {
        let span = f.diag.span;
        analysis.report.source(f.package, span.file).path == path
            && (span.lo as usize) <= hi
            && lo <= span.hi as usize
    })
}

/// The text of `path` the analysis saw.
pub fn analysed_source<'a>(analysis: &'a Analysis, path: &Path) -> Option<&'a SourceFile> {
    analysis
        .report
        .packages
        .iter()
        .flat_map(|p| &p.sources)
        .find(|s| s.path == path)
}

/// Hover on a finding: its message and its lint's `--explain` text, once per lint.
pub fn hover(analysis: &Analysis, path: &Path, pos: Position, enc: Encoding) -> Option<Hover> {
    let src = analysed_source(analysis, path)?;
    let at = position::offset(src, pos, enc);
    let mut sections: Vec<String> = Vec::new();
    let mut explained: Vec<&str> = Vec::new();
    for f in findings_at(analysis, path, at, at) {
        sections.push(format!("**{}**: {}", f.diag.lint.code(), f.diag.message));
        if !explained.contains(&f.diag.lint.name) {
            explained.push(f.diag.lint.name);
            sections.push(crate::info::explain_text(f.diag.lint));
        }
    }
    if sections.is_empty() {
        return None;
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: sections.join("\n\n"),
        }),
        range: None,
    })
}

/// A quick fix for every suggestion of every finding in `range` of `path`.
// `WorkspaceEdit::changes` is keyed by `Uri`, whose lazily parsed parts clippy sees as
// interior mutability; it hashes and compares by its text only.
#[allow(clippy::mutable_key_type)]
pub fn code_actions(
    analysis: &Analysis,
    path: &Path,
    range: Range,
    enc: Encoding,
    uris: &dyn UriOf,
) -> Vec<CodeAction> {
    let Some(src) = analysed_source(analysis, path) else {
        return Vec::new();
    };
    let lo = position::offset(src, range.start, enc);
    let hi = position::offset(src, range.end, enc);
    let mut actions = Vec::new();
    for f in findings_at(analysis, path, lo, hi) {
        for s in &f.diag.suggestions {
            let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
            // The edits `--fix` makes and the JSON suggests: a move is a deletion and an
            // insertion, an inserted call or attribute comes with its line break.
            let edits = s.concrete_edits(&|file| &*analysis.report.source(f.package, file).text);
            for (span, text) in &edits {
                let src = analysis.report.source(f.package, span.file);
                let Some(uri) = uris.uri_of(&src.path) else {
                    continue;
                };
                let lo = src.clamp(span.lo as usize);
                let range = position::range(src, lo, src.clamp(span.hi as usize).max(lo), enc);
                changes
                    .entry(uri)
                    .or_default()
                    .push(TextEdit::new(range, text.clone()));
            }
            actions.push(CodeAction {
                title: action_title(s),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![diagnostic(analysis, f, enc, uris)]),
                edit: Some(WorkspaceEdit {
                    changes: Some(changes),
                    ..WorkspaceEdit::default()
                }),
                is_preferred: Some(s.applicability == Applicability::MachineApplicable),
                ..CodeAction::default()
            });
        }
    }
    actions
}

/// A code action's title: the suggestion's message, and the placeholders it inserts, since
/// the editor applies it as it is and leaves them for the user to fill.
fn action_title(s: &Suggestion) -> String {
    let mut placeholders: Vec<&str> = Vec::new();
    for (_, text) in &s.edits {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("/*") {
            let Some(len) = rest[start..].find("*/") else {
                break;
            };
            let found = &rest[start..start + len + 2];
            if !placeholders.contains(&found) {
                placeholders.push(found);
            }
            rest = &rest[start + len + 2..];
        }
    }
    if placeholders.is_empty() {
        return s.message.clone();
    }
    let quoted: Vec<String> = placeholders.iter().map(|p| format!("`{p}`")).collect();
    format!(
        "{} (inserts {} to fill in)",
        s.message,
        quoted.join(" and ")
    )
}

#[cfg(test)]
mod tests {
    use super::action_title;
    use idem_lints::model::{FileId, Span};
    use idem_lints::{Applicability, Suggestion};

    #[test]
    fn a_title_says_which_placeholders_the_action_inserts() {
        let suggestion = |text: &str| Suggestion {
            message: "guard the entry point `resend` itself".into(),
            edits: vec![(Span::new(FileId(0), 0, 0), text.into())],
            moves: Vec::new(),
            applicability: Applicability::HasPlaceholders,
        };
        assert_eq!(
            action_title(&suggestion(
                "#[idempotent(key = /* the message's id */, store = /* store */)]"
            )),
            "guard the entry point `resend` itself (inserts `/* the message's id */` and \
             `/* store */` to fill in)"
        );
        assert_eq!(
            action_title(&suggestion("#[idempotent(key = m.id, store = s)]")),
            "guard the entry point `resend` itself"
        );
    }
}
