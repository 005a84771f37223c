//! SARIF 2.1.0 for code scanning: every lint as a rule, every finding as a result with a
//! region and a fingerprint that survives edits elsewhere in the file.
//!
//! URIs are relative to the repository root (see [`super::repository_root`]), not the cargo
//! workspace: GitHub's upload ignores `uriBaseId` and resolves a URI against the checkout,
//! so in a monorepo (`repo/rust-svc/Cargo.toml`) a workspace-relative URI names a file that
//! does not exist.

use super::fingerprint::{hash_parts, normalize};
use super::{relative_path, repository_root, Input};
use crate::report::Finding;
use crate::source::SourceFile;
use crate::uri::{file_uri, lexically_normal, uri_path};
use idem_lints::model::Span;
use idem_lints::{Level, Lint};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub fn emit(input: &Input, out: &mut dyn Write) -> io::Result<()> {
    let lints = idem_lints::lints::ALL;
    let rules: Vec<Value> = lints.iter().map(|l| rule(l)).collect();
    let root = repository_root(input.ws);
    // Identical flagged lines in one file get one hash; the occurrence index (as GitHub
    // adds to its own fingerprints) keeps their results apart.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let results: Vec<Value> = input
        .report
        .findings
        .iter()
        .map(|f| {
            let src = input.source(f, f.diag.span.file);
            let hash = line_hash(f, src, &root);
            let n = seen.entry(hash.clone()).or_insert(0);
            *n += 1;
            result(input, f, lints, &root, format!("{hash}:{n}"))
        })
        .collect();
    let root_uri = format!("{}/", file_uri(&root));
    let mut driver = json!({
        "name": "idem-lint",
        "version": env!("CARGO_PKG_VERSION"),
        "rules": rules,
    });
    if let Some(uri) = information_uri() {
        driver["informationUri"] = json!(uri);
    }
    let doc = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri}},
            // Columns and char offsets below count Unicode code points, as rustc's do.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    let text = serde_json::to_string_pretty(&doc).map_err(io::Error::other)?;
    out.write_all(super::json::safe_text(text).as_bytes())?;
    out.write_all(b"\n")
}

/// The tool's `repository`, else its `homepage`, from its own `Cargo.toml`; none when
/// neither is set (a made-up address would send readers nowhere).
fn information_uri() -> Option<&'static str> {
    [env!("CARGO_PKG_REPOSITORY"), env!("CARGO_PKG_HOMEPAGE")]
        .into_iter()
        .find(|u| !u.is_empty())
}

fn sarif_level(level: Level) -> &'static str {
    match level {
        Level::Deny => "error",
        Level::Warn => "warning",
        Level::Allow => "none",
    }
}

fn rule(l: &Lint) -> Value {
    let mut rule = json!({
        "id": l.code(),
        "name": l.name,
        "shortDescription": {"text": l.desc},
        "fullDescription": {"text": first_paragraph(&l.doc_markdown())},
        "help": {"text": l.doc_markdown(), "markdown": l.doc_markdown()},
        "defaultConfiguration": {"level": sarif_level(l.default_level)},
        "properties": {"tags": [if l.is_meta { "input" } else { "idempotency" }]},
    });
    if let Some(url) = crate::info::docs_url(l) {
        rule["helpUri"] = json!(url);
    }
    rule
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

fn result(input: &Input, f: &Finding, lints: &[&Lint], root: &Path, fingerprint: String) -> Value {
    let d = &f.diag;
    let src = input.source(f, d.span.file);
    let mut value = json!({
        "ruleId": d.lint.code(),
        "level": sarif_level(d.level),
        "message": {"text": d.message},
        "locations": [location(src, d.span, None, root)],
        "partialFingerprints": {"idemLint/v2": fingerprint},
    });
    if let Some(index) = lints.iter().position(|l| l.name == d.lint.name) {
        value["ruleIndex"] = json!(index);
    }
    let mut related: Vec<Value> = d
        .labels
        .iter()
        .map(|l| location(input.source(f, l.span.file), l.span, Some(&l.message), root))
        .collect();
    // Notes that name a place in a linked member's file point there too.
    related.extend(
        d.notes
            .iter()
            .filter_map(|n| crate::link::note_place(n))
            .map(|p| {
                let path = input.ws.root.join(p.path);
                json!({
                    "physicalLocation": {
                        "artifactLocation": artifact_location(&path, root),
                        "region": {"startLine": p.line, "startColumn": p.column},
                    },
                    "message": {"text": format!("in `{}`: {}", p.krate, p.message)},
                })
            }),
    );
    if !related.is_empty() {
        for (i, loc) in related.iter_mut().enumerate() {
            loc["id"] = json!(i);
        }
        value["relatedLocations"] = Value::Array(related);
    }
    value
}

fn location(src: &SourceFile, span: Span, message: Option<&str>, root: &Path) -> Value {
    let lo = src.clamp(span.lo as usize);
    let hi = src.clamp(span.hi as usize).max(lo);
    let start = src.position(lo);
    let end = src.position(hi);
    let char_offset = src.char_offset(lo);
    let mut loc = json!({
        "physicalLocation": {
            "artifactLocation": artifact_location(&src.path, root),
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
fn line_hash(f: &Finding, src: &SourceFile, root: &Path) -> String {
    let line = src.line_text(src.line_index(f.diag.span.lo as usize));
    hash_parts(&[
        f.diag.lint.name,
        &relative_path(&src.path, root),
        &normalize(line),
    ])
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
