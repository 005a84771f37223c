//! Suppression comments.
//!
//! - `// idem-lint: allow(a, b)` after code: findings starting on that line.
//! - The same on its own line(s) directly above an item (`fn`, `impl`, `mod`, ...; doc
//!   comments and attributes may sit before or after it): findings inside the item. Above any other
//!   line: findings starting on that line.
//! - `// idem-lint: allow-file(a, b)` among a file's first lines (before the first line that
//!   is not blank, a comment or an inner attribute): the whole file.
//!
//! Names may be written `check_then_act` or `idem::check_then_act`. An unknown name or a
//! malformed comment is a warning, never a failure: a typo must not break CI, but must show.

use crate::source::SourceFile;
use idem_lints::model::{FileModel, Span};
use idem_lints::Lint;
use std::collections::HashMap;

const MARKER: &str = "idem-lint:";

/// What one file's comments suppress.
#[derive(Debug, Default)]
pub struct Suppressions {
    file: Vec<&'static str>,
    /// By 0-based line index.
    lines: HashMap<usize, Vec<&'static str>>,
    /// Byte ranges of items.
    items: Vec<(u32, u32, Vec<&'static str>)>,
}

/// A problem with a suppression comment: 1-based line and column, and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentWarning {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Suppressions {
    pub fn is_empty(&self) -> bool {
        self.file.is_empty() && self.lines.is_empty() && self.items.is_empty()
    }

    /// Whether a finding of `lint` at `span` is suppressed.
    pub fn allows(&self, lint: &Lint, span: Span, source: &SourceFile) -> bool {
        let named = |names: &[&str]| names.contains(&lint.name);
        if named(&self.file) {
            return true;
        }
        let line = source.line_index(span.lo as usize);
        if self.lines.get(&line).is_some_and(|n| named(n)) {
            return true;
        }
        self.items
            .iter()
            .any(|(lo, hi, n)| *lo <= span.lo && span.hi <= *hi && named(n))
    }
}

/// Reads the suppression comments of one file.
pub fn scan(source: &SourceFile, model: &FileModel) -> (Suppressions, Vec<CommentWarning>) {
    let mut out = Suppressions::default();
    let mut warnings = Vec::new();
    let mut in_header = true;
    let count = source.line_count();
    for index in 0..count {
        let text = source.line_text(index);
        let trimmed = text.trim_start();
        let own_line = trimmed.starts_with("//");
        if in_header && !(trimmed.is_empty() || own_line || trimmed.starts_with("#![")) {
            in_header = false;
        }
        let Some((column, body)) = directive(text) else {
            continue;
        };
        let mut warn = |message: String| {
            warnings.push(CommentWarning {
                line: index + 1,
                column,
                message,
            })
        };
        let (file_wide, args) = if let Some(rest) = body.strip_prefix("allow-file") {
            (true, rest)
        } else if let Some(rest) = body.strip_prefix("allow") {
            (false, rest)
        } else {
            warn("expected `allow(...)` or `allow-file(...)` after `idem-lint:`".to_string());
            continue;
        };
        let Some(list) = args
            .trim_start()
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .map(|(l, _)| l)
        else {
            warn("expected a parenthesized list of lint names".to_string());
            continue;
        };
        let names = lint_names(list, &mut warn);
        if file_wide {
            if in_header {
                out.file.extend(names);
            } else {
                warn("`allow-file` must be among the first lines of the file, before any item; ignored".to_string());
            }
        } else if own_line {
            attach_to_next(source, model, index, names, &mut out);
        } else {
            out.lines.entry(index).or_default().extend(names);
        }
    }
    (out, warnings)
}

/// The directive after `// idem-lint:` on this line, and its 1-based column. Doc comments
/// (`///`, `//!`) only talk about directives, and a `//` inside a string literal (an odd
/// number of quotes before it on the line) is not a comment.
fn directive(line: &str) -> Option<(usize, &str)> {
    let mut from = 0;
    while let Some(at) = line[from..].find("//") {
        let start = from + at;
        from = start + 2;
        if inside_string(&line[..start]) {
            continue;
        }
        // The first `//` outside a string starts the comment: the rest of the line is its text.
        let after = &line[start + 2..];
        if after.starts_with('/') || after.starts_with('!') {
            return None;
        }
        let body = after.trim_start().strip_prefix(MARKER)?;
        return Some((line[..start].chars().count() + 1, body.trim()));
    }
    None
}

/// Whether `prefix` ends inside a string literal: it holds an odd number of `"` that are
/// neither escaped nor a `'"'` char literal.
fn inside_string(prefix: &str) -> bool {
    let bytes = prefix.as_bytes();
    let mut quotes = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escaped = i > 0 && bytes[i - 1] == b'\\';
        let char_lit = i > 0 && bytes[i - 1] == b'\'' && bytes.get(i + 1) == Some(&b'\'');
        if b == b'"' && !escaped && !char_lit {
            quotes += 1;
        }
    }
    quotes % 2 == 1
}

fn lint_names(list: &str, warn: &mut dyn FnMut(String)) -> Vec<&'static str> {
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .filter_map(|n| match idem_lints::lints::find(n) {
            Some(l) => Some(l.name),
            None => {
                warn(format!("unknown lint `{n}` in `idem-lint: allow`; ignored"));
                None
            }
        })
        .collect()
}

/// An own-line comment covers the code line below it (past more comments, such as other
/// directives or doc comments): the whole item when an item starts there, else that line.
fn attach_to_next(
    source: &SourceFile,
    model: &FileModel,
    comment_line: usize,
    names: Vec<&'static str>,
    out: &mut Suppressions,
) {
    let Some(target) = (comment_line + 1..source.line_count())
        .find(|&i| !source.line_text(i).trim_start().starts_with("//"))
    else {
        return;
    };
    if source.line_text(target).trim().is_empty() {
        return;
    }
    // Items start at their first attribute, and doc comments are attributes: the annotated
    // item is one that starts between the comment and the code line, or starts above the
    // comment with only doc comments and attributes before it.
    let header_only = |from: usize| {
        (from..comment_line).all(|i| {
            let t = source.line_text(i).trim_start();
            t.starts_with("//") || t.starts_with('#')
        })
    };
    let target_start = source.line_range(target).start as u32;
    let item = model
        .items
        .iter()
        .filter(|it| {
            let start = source.line_index(it.span.lo as usize);
            start <= target
                && it.span.hi > target_start
                && (start > comment_line || header_only(start))
        })
        .max_by_key(|it| it.span.hi - it.span.lo);
    match item {
        Some(it) => out.items.push((it.span.lo, it.span.hi, names)),
        None => out.lines.entry(target).or_default().extend(names),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idem_lints::lint::PARSE_ERROR;
    use idem_lints::model::{lower_file, FileId};
    use std::sync::Arc;

    fn setup(src: &str) -> (SourceFile, Suppressions, Vec<CommentWarning>) {
        let source = SourceFile::new("a.rs".into(), Arc::from(src));
        let model = lower_file(src, FileId(0), vec!["crate".into()], false).expect("parses");
        let (s, w) = scan(&source, &model);
        (source, s, w)
    }

    fn at(src: &str, needle: &str) -> Span {
        let lo = src.find(needle).expect("needle") as u32;
        Span::new(FileId(0), lo, lo + needle.len() as u32)
    }

    #[test]
    fn line_item_and_file_comments() {
        let src = "fn a() { x(); } // idem-lint: allow(parse_error)\n\
                   fn b() { y(); }\n\
                   // idem-lint: allow(idem::parse_error)\n\
                   /// docs\n\
                   #[inline]\n\
                   fn c() {\n    z();\n}\n\
                   fn d() { w(); }\n";
        let (source, s, w) = setup(src);
        assert!(w.is_empty(), "{w:?}");
        assert!(s.allows(&PARSE_ERROR, at(src, "x()"), &source));
        assert!(!s.allows(&PARSE_ERROR, at(src, "y()"), &source));
        assert!(s.allows(&PARSE_ERROR, at(src, "z()"), &source));
        assert!(!s.allows(&PARSE_ERROR, at(src, "w()"), &source));
    }

    #[test]
    fn allow_file_only_in_the_header() {
        let src = "//! crate docs\n#![allow(dead_code)]\n// idem-lint: allow-file(parse_error)\nfn a() { x(); }\n";
        let (source, s, _) = setup(src);
        assert!(s.allows(&PARSE_ERROR, at(src, "x()"), &source));
        let late = "fn a() { x(); }\n// idem-lint: allow-file(parse_error)\n";
        let (source, s, w) = setup(late);
        assert!(!s.allows(&PARSE_ERROR, at(late, "x()"), &source));
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn doc_comments_and_strings_are_not_directives() {
        let src = "//! Write `// idem-lint: allow(a)` to silence.\n\
                   /// Same: // idem-lint: allow(b)\n\
                   fn a() { let s = \"x // idem-lint: allow(c)\"; }\n\
                   fn b() { let q = '\"'; } // idem-lint: allow(parse_error)\n";
        let (source, s, w) = setup(src);
        assert!(w.is_empty(), "{w:?}");
        assert!(s.allows(&PARSE_ERROR, at(src, "let q"), &source));
    }

    #[test]
    fn unknown_names_and_bad_syntax_warn() {
        let src =
            "fn a() {} // idem-lint: allow(nope, parse_error)\n// idem-lint: alow(x)\nfn b() {}\n";
        let (_, s, w) = setup(src);
        assert!(!s.is_empty());
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!((w[0].line, w[0].column), (1, 11));
        assert!(w[0].message.contains("`nope`"));
    }
}
