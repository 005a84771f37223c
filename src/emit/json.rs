//! The JSON lines `cargo check --message-format=json` prints: a `compiler-message` per finding
//! (a rustc diagnostic inside), then `build-finished`. rust-analyzer reads these with
//! `cargo_metadata::Message`, so every field it needs is always present.

use super::{level_word, render_ansi, render_plain, snippet, Input};
use crate::report::Finding;
use crate::source::SourceFile;
use idem_lints::model::Span;
use serde_json::{json, Value};
use std::io::{self, Write};

/// `ansi`: `rendered` carries the color escape codes of human output, as cargo's
/// `--message-format json-diagnostic-rendered-ansi` does.
pub fn emit(input: &Input, ansi: bool, out: &mut dyn Write) -> io::Result<()> {
    emit_messages(input, ansi, out)?;
    build_finished(!input.report.has_errors(), out)
}

/// The `compiler-message` lines, without `build-finished` (`--with-check` writes one for
/// cargo's output and ours together).
pub fn emit_messages(input: &Input, ansi: bool, out: &mut dyn Write) -> io::Result<()> {
    for f in &input.report.findings {
        write_line(&message(input, f, ansi), out)?;
    }
    Ok(())
}

/// The last line, as cargo ends.
pub fn build_finished(success: bool, out: &mut dyn Write) -> io::Result<()> {
    write_line(
        &json!({"reason": "build-finished", "success": success}),
        out,
    )
}

pub fn write_line(value: &Value, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(safe_text(value.to_string()).as_bytes())?;
    out.write_all(b"\n")
}

/// JSON text with DEL, the C1 controls, the bidi controls and the Unicode line separators
/// written as `\uXXXX` escapes: the same value to every parser (JSON allows both), but a
/// log or terminal that shows the raw text neither obeys them (a C1 CSI is an escape
/// sequence to some terminals) nor reorders what a reviewer reads (a file named
/// `a\u{202e}sr.rs`). serde_json escapes only the C0 controls, and these characters can
/// only be inside strings (everything outside is ASCII), so they are replaced in the text.
/// Used for `json`, `sarif` and the language server's messages.
pub fn safe_text(json: String) -> String {
    if !json.chars().any(raw_in_json) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if raw_in_json(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters serde_json leaves raw that [`snippet::escape`] makes visible (it escapes
/// those below DEL itself).
fn raw_in_json(c: char) -> bool {
    c >= '\u{7f}' && snippet::needs_escape(c)
}

/// A config error (`file:line:col: message`) as a `compiler-message` on the config file,
/// attributed to `package`'s first target, so an editor shows it where it is instead of
/// in a status bar.
pub fn config_error(
    package: &crate::discovery::PackageSpec,
    file: &SourceFile,
    line: usize,
    column: usize,
    message: &str,
) -> Value {
    let line_index = line
        .saturating_sub(1)
        .min(file.line_count().saturating_sub(1));
    let range = file.line_range(line_index);
    let at = file.text[range.clone()]
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(range.end, |(i, _)| range.start + i);
    let lo = idem_lints::model::FileId(0);
    let span = Span::new(lo, at as u32, (at + 1).min(range.end).max(at) as u32);
    let rendered = format!(
        "error[idem::config]: {message}\n --> {}:{line}:{column}\n",
        file.path.display()
    );
    json!({
        "reason": "compiler-message",
        "package_id": package.id,
        "manifest_path": package.manifest_path.to_string_lossy(),
        "target": package.targets.first().map_or(Value::Null, target_json),
        "message": {
            "$message_type": "diagnostic",
            "message": message,
            "code": {"code": "idem::config", "explanation": null},
            "level": "error",
            "spans": [span_json(file, span, true, Some("in this configuration"), None)],
            "children": [],
            "rendered": rendered,
        },
    })
}

fn message(input: &Input, f: &Finding, ansi: bool) -> Value {
    let spec = &input.ws.packages[f.package];
    let pkg = &input.report.packages[f.package];
    let d = &f.diag;
    // The target whose module tree reached the file holding the finding.
    let target_index = pkg
        .package
        .files
        .get(d.span.file.0 as usize)
        .map_or(0, |m| m.target);
    let target = spec
        .targets
        .get(target_index)
        .or(spec.targets.first())
        .map_or(Value::Null, target_json);
    let span = |s: Span, primary: bool, label: Option<&str>| {
        span_json(input.source(f, s.file), s, primary, label, None)
    };
    let mut spans = vec![span(d.span, true, d.label.as_deref())];
    spans.extend(
        d.labels
            .iter()
            .map(|l| span(l.span, false, Some(&l.message))),
    );
    // rustc marks only the top-level diagnostic with `$message_type`.
    let child = |level: &str, message: &str, spans: Vec<Value>| {
        json!({
            "message": message,
            "code": null,
            "level": level,
            "spans": spans,
            "children": [],
            "rendered": null,
        })
    };
    let mut children: Vec<Value> = d.notes.iter().map(|n| child("note", n, vec![])).collect();
    children.extend(d.help.iter().map(|h| child("help", h, vec![])));
    // Like rustc, a suggestion is a `help` child whose spans carry the replacement text.
    children.extend(d.suggestions.iter().map(|s| {
        let spans = s
            .concrete_edits(&|file| &input.source(f, file).text)
            .iter()
            .map(|(at, text)| {
                span_json(
                    input.source(f, at.file),
                    *at,
                    true,
                    None,
                    Some((text.as_str(), s.applicability.as_str())),
                )
            })
            .collect();
        child("help", &s.message, spans)
    }));
    json!({
        "reason": "compiler-message",
        "package_id": spec.id,
        "manifest_path": spec.manifest_path.to_string_lossy(),
        "target": target,
        "message": {
            "$message_type": "diagnostic",
            "message": d.message,
            // rustc gives an explanation for error codes (`E0308`) only, never for a lint:
            // the documentation is one `--explain` away, not repeated on every line.
            "code": {"code": d.lint.code(), "explanation": null},
            "level": level_word(d.level),
            "spans": spans,
            "children": children,
            "rendered": if ansi { render_ansi(input, f) } else { render_plain(input, f) },
        },
    })
}

/// The target as cargo prints it in a `compiler-message`: `cargo_metadata` writes
/// `required-features` always, cargo only when the target has some.
fn target_json(t: &crate::discovery::TargetSpec) -> Value {
    let mut json = t.json.clone();
    if let Some(map) = json.as_object_mut() {
        if map
            .get("required-features")
            .is_some_and(|f| f.as_array().is_some_and(Vec::is_empty))
        {
            map.remove("required-features");
        }
    }
    json
}

/// A rustc span: absolute file name, byte range, 1-based lines and character columns, and
/// the text of every line it covers with the highlighted columns.
fn span_json(
    src: &SourceFile,
    span: Span,
    primary: bool,
    label: Option<&str>,
    replacement: Option<(&str, &str)>,
) -> Value {
    let lo = src.clamp(span.lo as usize);
    let hi = src.clamp(span.hi as usize).max(lo);
    let start = src.position(lo);
    let end = src.position(hi);
    let text: Vec<Value> = (start.line..=end.line)
        .map(|line| {
            // A long line is cut around the highlight, with columns counted in the cut
            // text, so a finding costs output in proportion to what it points at.
            let range = src.line_range(line - 1);
            let line_text = &src.text[range.clone()];
            let from = if line == start.line {
                lo - range.start
            } else {
                0
            };
            let to = if line == end.line {
                hi - range.start
            } else {
                line_text.len()
            };
            let keep = snippet::window(line_text, from..to);
            let text = if keep == (0..line_text.len()) {
                line_text.to_string()
            } else {
                format!(
                    "{}{}{}",
                    if keep.start > 0 { "..." } else { "" },
                    &line_text[keep.clone()],
                    if keep.end < line_text.len() {
                        "..."
                    } else {
                        ""
                    }
                )
            };
            let prefix = if keep.start > 0 { 3 } else { 0 };
            let column = |b: usize| {
                let b = b.clamp(keep.start, keep.end);
                prefix + line_text[keep.start..b].chars().count() + 1
            };
            json!({"text": text, "highlight_start": column(from), "highlight_end": column(to)})
        })
        .collect();
    json!({
        "file_name": src.path.to_string_lossy(),
        "byte_start": lo,
        "byte_end": hi,
        "line_start": start.line,
        "line_end": end.line,
        "column_start": start.column,
        "column_end": end.column,
        "is_primary": primary,
        "text": text,
        "label": label,
        "suggested_replacement": replacement.map(|(r, _)| r),
        "suggestion_applicability": replacement.map(|(_, a)| a),
        "expansion": null,
    })
}
