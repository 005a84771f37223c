//! Findings read from `cargo idem-lint --message-format json`, and their stable identity.

use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// One finding of one crate, as the report and the verdict matching see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The lint name without the `idem::` prefix.
    pub lint: String,
    /// Path relative to the crate's root, with `/` separators.
    pub file: String,
    pub line: u64,
    pub column: u64,
    pub message: String,
    /// The flagged line's text, whitespace collapsed (see [`normalize`]).
    pub text: String,
    /// Index among this crate's findings with the same lint, file and text, in line order.
    pub occurrence: u32,
}

/// The identity a verdict is matched on: no line numbers, so edits elsewhere do not matter.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub lint: String,
    pub file: String,
    pub text: String,
    pub occurrence: u32,
}

impl Finding {
    pub fn key(&self) -> Key {
        Key {
            lint: self.lint.clone(),
            file: self.file.clone(),
            text: self.text.clone(),
            occurrence: self.occurrence,
        }
    }
}

/// Trims and collapses runs of whitespace, so reindenting a line keeps its identity.
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[derive(Deserialize)]
struct Line {
    reason: String,
    message: Option<Diagnostic>,
}

#[derive(Deserialize)]
struct Diagnostic {
    message: String,
    code: Option<Code>,
    spans: Vec<Span>,
}

#[derive(Deserialize)]
struct Code {
    code: String,
}

#[derive(Deserialize)]
struct Span {
    file_name: String,
    is_primary: bool,
    line_start: u64,
    column_start: u64,
    #[serde(default)]
    text: Vec<SpanText>,
}

#[derive(Deserialize)]
struct SpanText {
    text: String,
}

/// Reads the JSON lines the linter printed for the crate rooted at `root`. Lines that are not
/// `compiler-message`s (`build-finished`) are skipped; a line that is not JSON is an error.
pub fn parse_json(stdout: &str, root: &Path) -> Result<Vec<Finding>> {
    let mut findings = Vec::new();
    for (i, raw) in stdout.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(raw)
            .with_context(|| format!("linter output line {} is not a cargo JSON message", i + 1))?;
        if line.reason != "compiler-message" {
            continue;
        }
        let Some(diag) = line.message else { continue };
        let lint = diag
            .code
            .as_ref()
            .map(|c| c.code.trim_start_matches("idem::").to_string())
            .unwrap_or_else(|| "unknown".to_string());
        let Some(span) = diag
            .spans
            .iter()
            .find(|s| s.is_primary)
            .or(diag.spans.first())
        else {
            // A finding without a location cannot be reviewed at a place; keep it visible.
            findings.push(Finding {
                lint,
                file: String::new(),
                line: 0,
                column: 0,
                message: diag.message,
                text: String::new(),
                occurrence: 0,
            });
            continue;
        };
        findings.push(Finding {
            lint,
            file: relative(&span.file_name, root),
            line: span.line_start,
            column: span.column_start,
            message: diag.message.clone(),
            text: span
                .text
                .first()
                .map(|t| normalize(&t.text))
                .unwrap_or_default(),
            occurrence: 0,
        });
    }
    assign_occurrences(&mut findings);
    Ok(findings)
}

fn relative(file: &str, root: &Path) -> String {
    let path = Path::new(file);
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

/// Sorts by position and numbers findings that share lint, file and text in that order.
pub fn assign_occurrences(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        (&a.file, a.line, a.column, &a.lint, &a.message)
            .cmp(&(&b.file, b.line, b.column, &b.lint, &b.message))
    });
    let mut seen: HashMap<(String, String, String), u32> = HashMap::new();
    for f in findings.iter_mut() {
        let n = seen
            .entry((f.lint.clone(), f.file.clone(), f.text.clone()))
            .or_insert(0);
        f.occurrence = *n;
        *n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(file: &str, line: u64, text: &str, lint: &str) -> String {
        serde_json::json!({
            "reason": "compiler-message",
            "message": {
                "message": format!("msg {line}"),
                "code": {"code": format!("idem::{lint}"), "explanation": "x"},
                "level": "warning",
                "spans": [
                    {"file_name": "/other.rs", "is_primary": false, "line_start": 1,
                     "column_start": 1, "text": [{"text": "secondary"}]},
                    {"file_name": file, "is_primary": true, "line_start": line,
                     "column_start": 5, "text": [{"text": text}, {"text": "next line"}]}
                ]
            }
        })
        .to_string()
    }

    #[test]
    fn reads_primary_span_relative_path_and_lint() {
        let out = format!(
            "{}\n{{\"reason\":\"build-finished\",\"success\":true}}\n",
            message(
                "/reg/a-1.0.0/src/lib.rs",
                7,
                "    let k =   Uuid::new_v4();",
                "nondeterministic_key"
            )
        );
        let f = parse_json(&out, Path::new("/reg/a-1.0.0")).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].lint, "nondeterministic_key");
        assert_eq!(f[0].file, "src/lib.rs");
        assert_eq!((f[0].line, f[0].column), (7, 5));
        assert_eq!(f[0].text, "let k = Uuid::new_v4();");
    }

    #[test]
    fn same_text_twice_gets_increasing_occurrences_in_line_order() {
        let out = [
            message("/r/src/a.rs", 30, "store.set(k)", "check_then_act"),
            message("/r/src/a.rs", 10, "store.set(k)", "check_then_act"),
            message(
                "/r/src/a.rs",
                20,
                "store.set(k)",
                "mark_outside_transaction",
            ),
        ]
        .join("\n");
        let f = parse_json(&out, Path::new("/r")).unwrap();
        let got: Vec<_> = f
            .iter()
            .map(|f| (f.line, f.lint.as_str(), f.occurrence))
            .collect();
        assert_eq!(
            got,
            [
                (10, "check_then_act", 0),
                (20, "mark_outside_transaction", 0),
                (30, "check_then_act", 1)
            ]
        );
    }

    #[test]
    fn identity_ignores_line_numbers_and_indentation() {
        let a = parse_json(
            &message("/r/src/a.rs", 10, "  x.send()", "l"),
            Path::new("/r"),
        )
        .unwrap();
        let b = parse_json(
            &message("/r/src/a.rs", 99, "\tx.send()", "l"),
            Path::new("/r"),
        )
        .unwrap();
        assert_eq!(a[0].key(), b[0].key());
    }

    #[test]
    fn garbage_output_is_an_error() {
        let err = parse_json("thread main panicked", Path::new("/r")).unwrap_err();
        assert!(err.to_string().contains("not a cargo JSON message"));
    }
}
