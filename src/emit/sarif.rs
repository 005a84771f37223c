//! SARIF 2.1.0 for code scanning: every lint as a rule, every finding as a result with a
//! region and a fingerprint that survives edits elsewhere in the file.

use super::{relative_path, Input};
use crate::report::Finding;
use crate::source::SourceFile;
use crate::uri::{file_uri, lexically_normal, uri_path};
use idem_lints::model::Span;
use idem_lints::{Level, Lint};
use serde_json::{json, Value};
use std::io::{self, Write};
use std::path::Path;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub fn emit(input: &Input, out: &mut dyn Write) -> io::Result<()> {
    let lints = idem_lints::lints::ALL;
    let rules: Vec<Value> = lints.iter().map(|l| rule(l)).collect();
    let results: Vec<Value> = input
        .report
        .findings
        .iter()
        .map(|f| result(input, f, lints))
        .collect();
    let root_uri = format!("{}/", file_uri(&input.ws.root));
    let doc = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "idem-lint",
                "informationUri": "https://github.com/idem-lint/idem-lint",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri}},
            // Columns and char offsets below count Unicode code points, as rustc's do.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    out.write_all(b"\n")
}

fn sarif_level(level: Level) -> &'static str {
    match level {
        Level::Deny => "error",
        Level::Warn => "warning",
        Level::Allow => "none",
    }
}

fn rule(l: &Lint) -> Value {
    json!({
        "id": l.code(),
        "name": l.name,
        "shortDescription": {"text": l.desc},
        "fullDescription": {"text": first_paragraph(&l.doc_markdown())},
        "help": {"text": l.doc_markdown(), "markdown": l.doc_markdown()},
        "defaultConfiguration": {"level": sarif_level(l.default_level)},
        "properties": {"tags": [if l.is_meta { "input" } else { "idempotency" }]},
    })
}

/// The *What it does* text of a lint's docs.
fn first_paragraph(docs: &str) -> String {
    docs.split("\n\n")
        .map(|p| {
            p.lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .find(|p| !p.trim().is_empty())
        .unwrap_or_else(|| docs.to_string())
        .trim()
        .to_string()
}

fn result(input: &Input, f: &Finding, lints: &[&Lint]) -> Value {
    let d = &f.diag;
    let src = input.source(f, d.span.file);
    let mut value = json!({
        "ruleId": d.lint.code(),
        "level": sarif_level(d.level),
        "message": {"text": d.message},
        "locations": [location(input, src, d.span, None)],
        "partialFingerprints": {"idemLint/v1": fingerprint(input, f, src)},
    });
    if let Some(index) = lints.iter().position(|l| l.name == d.lint.name) {
        value["ruleIndex"] = json!(index);
    }
    if !d.labels.is_empty() {
        value["relatedLocations"] = d
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut loc = location(
                    input,
                    input.source(f, l.span.file),
                    l.span,
                    Some(&l.message),
                );
                loc["id"] = json!(i);
                loc
            })
            .collect();
    }
    value
}

fn location(input: &Input, src: &SourceFile, span: Span, message: Option<&str>) -> Value {
    let lo = src.clamp(span.lo as usize);
    let hi = src.clamp(span.hi as usize).max(lo);
    let start = src.position(lo);
    let end = src.position(hi);
    let char_offset = src.char_offset(lo);
    let mut loc = json!({
        "physicalLocation": {
            "artifactLocation": artifact_location(&src.path, &input.ws.root),
            "region": {
                "startLine": start.line,
                "startColumn": start.column,
                "endLine": end.line,
                "endColumn": end.column,
                "charOffset": char_offset,
                "charLength": src.char_offset(hi) - char_offset,
                "byteOffset": lo,
                "byteLength": hi - lo,
            },
        },
    });
    if let Some(m) = message {
        loc["message"] = json!({"text": m});
    }
    loc
}

/// Lint, file and the primary line's text with whitespace collapsed: stays the same when
/// lines are added above, changes when the flagged code changes.
fn fingerprint(input: &Input, f: &Finding, src: &SourceFile) -> String {
    let line = src.line_text(src.line_index(f.diag.span.lo as usize));
    let normalized: Vec<&str> = line.split_whitespace().collect();
    let mut h = Fnv::default();
    for part in [
        f.diag.lint.name,
        &relative_path(&src.path, &input.ws.root),
        &normalized.join(" "),
    ] {
        h.write(part.as_bytes());
        h.write(&[0]);
    }
    format!("{:016x}", h.0)
}

/// FNV-1a: tiny and stable across Rust releases, unlike `DefaultHasher`.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A file below the root is relative to `%SRCROOT%`; one outside it (a `#[path]` the user
/// allowed to leave the workspace) gets its own absolute URI, since a relative reference
/// climbing out of the base with `..` is not one every consumer resolves.
fn artifact_location(path: &Path, root: &Path) -> Value {
    let path = lexically_normal(path);
    match path.strip_prefix(lexically_normal(root)) {
        Ok(rel) => json!({"uri": uri_path(rel), "uriBaseId": "%SRCROOT%"}),
        Err(_) => json!({"uri": file_uri(&path)}),
    }
}
