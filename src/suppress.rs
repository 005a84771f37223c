//! Suppression comments.
//!
//! - `// idem-lint: allow(a, b)` after code: findings starting on that line.
//! - The same on its own line(s) directly above an item (`fn`, `impl`, `mod`, ...; doc
//!   comments and attributes may sit before or after it): findings inside the item. Above any other
//!   line: findings starting on that line.
//! - `// idem-lint: allow-file(a, b)` among a file's first lines (before the first line that
//!   is not blank, a comment or an inner attribute): the whole file.
//!
//! Names may be written `check_then_act` or `idem::check_then_act`, and a reason may follow
//! the list: `// idem-lint: allow(check_then_act) -- the lock above serializes workers`. An
//! unknown name or a malformed comment is a warning, never a failure: a typo must not break
//! CI, but must show. A name that suppresses nothing is an `unused_suppression` finding, and a
//! comment without a reason a `suppression_without_reason` one (at `allow` unless
//! configured); the driver makes them ([`Suppressions::unused`], [`Suppressions::written`]).

pub(crate) mod comments;

use crate::source::SourceFile;
use idem_lints::model::{FileModel, Span};
use idem_lints::Lint;
use std::collections::HashMap;
use std::ops::Range;

pub(crate) const MARKER: &str = "idem-lint:";

/// What one file's comments suppress.
#[derive(Debug, Default)]
pub struct Suppressions {
    file: Vec<Entry>,
    /// By 0-based line index.
    lines: HashMap<usize, Vec<Entry>>,
    /// Suppressed items, sorted by start (outer before inner), each with the index of the
    /// nearest one that encloses it: a finding is looked up in time proportional to the
    /// nesting depth, not to the number of suppressed items.
    items: Vec<SuppressedItem>,
    /// Every directive as written, in file order.
    written: Vec<Written>,
    /// Per directive, per name: whether it suppressed a finding ([`Suppressions::take`]).
    used: Vec<Vec<bool>>,
}

/// One name of one directive.
#[derive(Debug, Clone, Copy)]
struct Entry {
    name: &'static str,
    directive: usize,
    /// Index in the directive's names.
    index: usize,
}

/// A directive as written.
#[derive(Debug, Clone)]
pub struct Written {
    /// The comment's byte range.
    pub range: Range<usize>,
    /// The lints it names that exist.
    pub names: Vec<&'static str>,
    /// Whether a reason follows the list (`-- why`).
    pub reason: bool,
    /// Nothing but whitespace before it on its line.
    pub own_line: bool,
}

#[derive(Debug)]
struct SuppressedItem {
    lo: u32,
    hi: u32,
    names: Vec<Entry>,
    parent: Option<usize>,
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
        self.suppressor(lint, span, source).is_some()
    }

    /// [`Suppressions::allows`], and records that the directive that applies (the closest:
    /// the line's, else the innermost item's, else the file's) was used.
    pub fn take(&mut self, lint: &Lint, span: Span, source: &SourceFile) -> bool {
        let Some(e) = self.suppressor(lint, span, source) else {
            return false;
        };
        if let Some(flag) = self
            .used
            .get_mut(e.directive)
            .and_then(|d| d.get_mut(e.index))
        {
            *flag = true;
        }
        true
    }

    /// The directives as written, in file order.
    pub fn written(&self) -> &[Written] {
        &self.written
    }

    /// `(directive, lint name)` of every name that suppressed nothing through
    /// [`Suppressions::take`].
    pub fn unused(&self) -> Vec<(usize, &'static str)> {
        let mut out = Vec::new();
        for (d, flags) in self.used.iter().enumerate() {
            for (i, used) in flags.iter().enumerate() {
                if !used {
                    out.push((d, self.written[d].names[i]));
                }
            }
        }
        out
    }

    fn suppressor(&self, lint: &Lint, span: Span, source: &SourceFile) -> Option<Entry> {
        let named = |names: &[Entry]| names.iter().copied().find(|e| e.name == lint.name);
        let line = source.line_index(span.lo as usize);
        if let Some(e) = self.lines.get(&line).and_then(|n| named(n)) {
            return Some(e);
        }
        // Items nest or are disjoint, so every item holding `span.lo` encloses the last
        // item starting at or before it.
        let last = self.items.partition_point(|it| it.lo <= span.lo);
        let mut at = last.checked_sub(1);
        while let Some(i) = at {
            let it = &self.items[i];
            if it.lo <= span.lo && span.hi <= it.hi {
                if let Some(e) = named(&it.names) {
                    return Some(e);
                }
            }
            at = it.parent;
        }
        named(&self.file)
    }

    /// Sorts the items and links each to the nearest enclosing one.
    fn index_items(&mut self) {
        self.items
            .sort_by(|a, b| a.lo.cmp(&b.lo).then(b.hi.cmp(&a.hi)));
        let mut open: Vec<usize> = Vec::new();
        for i in 0..self.items.len() {
            let (lo, hi) = (self.items[i].lo, self.items[i].hi);
            while let Some(&top) = open.last() {
                if self.items[top].hi >= hi && self.items[top].lo <= lo {
                    break;
                }
                open.pop();
            }
            self.items[i].parent = open.last().copied();
            open.push(i);
        }
    }
}

/// Reads the suppression comments of one file: real `//` comments only (a marker inside a
/// string literal or a doc comment is text), found by a scanner that knows Rust's tokens.
pub fn scan(source: &SourceFile, model: &FileModel) -> (Suppressions, Vec<CommentWarning>) {
    let mut out = Suppressions::default();
    let mut warnings = Vec::new();
    let lexed = comments::scan(&source.text);
    let mut targets = ItemTargets::new(source, model);
    for c in &lexed.comments {
        if c.block || c.doc {
            continue;
        }
        let text = &source.text[c.range.clone()];
        let Some(body) = text[2..].trim_start().strip_prefix(MARKER) else {
            continue;
        };
        let body = body.trim();
        let line = source.line_index(c.range.start);
        let column = source.position(c.range.start).column;
        let mut warn = |message: String| {
            warnings.push(CommentWarning {
                line: line + 1,
                column,
                message,
            })
        };
        let Some(directive) = parse_directive(body, &mut warn) else {
            continue;
        };
        if directive.file_wide && c.range.start >= lexed.header_end {
            warn(
                "`allow-file` must be among the first lines of the file, before any item; ignored"
                    .to_string(),
            );
            continue;
        }
        let index = out.written.len();
        let names: Vec<Entry> = directive
            .names
            .iter()
            .enumerate()
            .map(|(i, &name)| Entry {
                name,
                directive: index,
                index: i,
            })
            .collect();
        out.written.push(Written {
            range: c.range.clone(),
            names: directive.names.clone(),
            reason: directive.reason,
            own_line: c.own_line,
        });
        out.used.push(vec![false; names.len()]);
        if directive.file_wide {
            out.file.extend(names);
        } else if c.own_line {
            if let Some(next) = c.next_code {
                targets.attach(line, next, names, &mut out);
            }
        } else {
            out.lines.entry(line).or_default().extend(names);
        }
    }
    out.index_items();
    (out, warnings)
}

/// The findings about the comments of one file (`file` in its package): each name that
/// suppressed nothing ([`UNUSED_SUPPRESSION`], when `complete`: an analysis cut short proves
/// nothing) and each directive without a reason ([`SUPPRESSION_WITHOUT_REASON`]), for the
/// lints `enabled` says ran. Call after every finding went through [`Suppressions::take`].
pub fn comment_findings(
    sup: &Suppressions,
    file: idem_lints::model::FileId,
    source: &SourceFile,
    enabled: &dyn Fn(&'static Lint) -> bool,
    complete: bool,
) -> Vec<idem_lints::Diagnostic> {
    use idem_lints::lint::{SUPPRESSION_WITHOUT_REASON, UNUSED_SUPPRESSION};
    use idem_lints::{Applicability, Diagnostic};
    let span = |r: &Range<usize>| Span::new(file, r.start as u32, r.end as u32);
    let mut out = Vec::new();
    if complete && enabled(&UNUSED_SUPPRESSION) {
        let unused = sup.unused();
        for (d, w) in sup.written.iter().enumerate() {
            // A lint that did not run proves nothing either way.
            let names: Vec<&str> = unused
                .iter()
                .filter(|(u, name)| *u == d && idem_lints::lints::find(name).is_some_and(enabled))
                .map(|(_, name)| *name)
                .collect();
            if names.is_empty() {
                continue;
            }
            let list = names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut diag = Diagnostic::new(
                &UNUSED_SUPPRESSION,
                span(&w.range),
                format!("suppression of {list} suppresses nothing"),
            );
            diag.primary_label(format!("no {list} finding where this comment applies"));
            if names.len() == w.names.len() {
                diag.suggest(
                    "remove the comment",
                    span(&removal(source, w)),
                    "",
                    Applicability::MachineApplicable,
                );
            } else {
                diag.help(format!("remove {list} from the list"));
            }
            out.push(diag);
        }
    }
    if enabled(&SUPPRESSION_WITHOUT_REASON) {
        for w in sup.written.iter().filter(|w| !w.reason) {
            let mut diag = Diagnostic::new(
                &SUPPRESSION_WITHOUT_REASON,
                span(&w.range),
                "suppression without a reason",
            );
            diag.help("say why after the list: `// idem-lint: allow(..) -- why`");
            out.push(diag);
        }
    }
    out
}

/// What removing a directive's comment deletes: its whole line when it stands alone, else
/// the comment and the blanks before it.
fn removal(source: &SourceFile, w: &Written) -> Range<usize> {
    let text = &source.text;
    let line = source.line_range(source.line_index(w.range.start));
    let before = &text[line.start..w.range.start];
    if w.own_line && before.trim().is_empty() {
        let end = if text[w.range.end..].starts_with("\r\n") {
            w.range.end + 2
        } else if text[w.range.end..].starts_with('\n') {
            w.range.end + 1
        } else {
            w.range.end
        };
        return line.start..end;
    }
    let start = line.start + before.trim_end().len();
    start..w.range.end
}

struct Directive {
    file_wide: bool,
    names: Vec<&'static str>,
    /// A reason follows the list: `-- why`.
    reason: bool,
}

/// `allow(a, b)` or `allow-file(a, b)`, then optionally `-- reason`. Whatever is wrong is a
/// warning; the names that are right still apply.
fn parse_directive(body: &str, warn: &mut dyn FnMut(String)) -> Option<Directive> {
    let (file_wide, args) = if let Some(rest) = body.strip_prefix("allow-file") {
        (true, rest)
    } else if let Some(rest) = body.strip_prefix("allow") {
        (false, rest)
    } else {
        warn("expected `allow(...)` or `allow-file(...)` after `idem-lint:`".to_string());
        return None;
    };
    let Some((list, rest)) = args
        .trim_start()
        .strip_prefix('(')
        .and_then(|r| r.split_once(')'))
    else {
        warn("expected a parenthesized list of lint names".to_string());
        return None;
    };
    let rest = rest.trim();
    let reason = match rest.strip_prefix("--") {
        Some(why) if !why.trim().is_empty() => true,
        Some(_) => {
            warn("empty reason after `--`".to_string());
            false
        }
        None if rest.is_empty() => false,
        None => {
            warn(format!(
                "unexpected `{rest}` after the list of lint names (a reason goes after `--`)"
            ));
            false
        }
    };
    if list.trim().is_empty() {
        warn("empty list of lint names; nothing is allowed".to_string());
        return None;
    }
    let mut names = Vec::new();
    let mut empty = false;
    for n in list.split(',').map(str::trim) {
        if n.is_empty() {
            empty = true;
            continue;
        }
        match idem_lints::lints::find(n) {
            Some(l) => names.push(l.name),
            None => warn(format!("unknown lint `{n}` in `idem-lint: allow`; ignored")),
        }
    }
    // One trailing comma is how lists are written; anything else is a slip.
    let trailing_only = list.trim_end().ends_with(',')
        && !list.split(',').rev().skip(1).any(|n| n.trim().is_empty());
    if empty && !trailing_only {
        warn("empty lint name in the list".to_string());
    }
    Some(Directive {
        file_wide,
        names,
        reason,
    })
}

/// Finds the item an own-line comment annotates, in time independent of the number of
/// items: items are sorted by start once per file.
struct ItemTargets<'a> {
    source: &'a SourceFile,
    /// `(span.lo, span.hi)` of every item, by start.
    items: Vec<(u32, u32)>,
    /// For each line, the first line of the run of comment and attribute lines ending
    /// there (itself when it is neither), computed on first use.
    header_runs: Option<Vec<usize>>,
}

impl<'a> ItemTargets<'a> {
    fn new(source: &'a SourceFile, model: &FileModel) -> ItemTargets<'a> {
        let mut items: Vec<(u32, u32)> = model
            .items
            .iter()
            .map(|it| (it.span.lo, it.span.hi))
            .collect();
        items.sort_unstable();
        ItemTargets {
            source,
            items,
            header_runs: None,
        }
    }

    /// An own-line comment on `comment_line` covers the code at `next` (past more
    /// comments, such as other directives or doc comments): the whole item when an item
    /// starts on that code line, else that line.
    fn attach(
        &mut self,
        comment_line: usize,
        next: usize,
        names: Vec<Entry>,
        out: &mut Suppressions,
    ) {
        let source = self.source;
        let target = source.line_index(next);
        // Items start at their first attribute, and doc comments are attributes: the
        // annotated item is one that starts between the comment and the code line, or starts
        // above the comment with only doc comments and attributes before it.
        let from_line = match comment_line.checked_sub(1) {
            Some(above) => self.header_run_start(above).min(comment_line),
            None => 0,
        };
        let from = source.line_range(from_line).start as u32;
        let target_start = source.line_range(target).start as u32;
        let target_end = source.line_range(target).end as u32;
        let first = self.items.partition_point(|&(lo, _)| lo < from);
        let item = self.items[first..]
            .iter()
            .take_while(|&&(lo, _)| lo <= target_end)
            .filter(|&&(lo, hi)| source.line_index(lo as usize) <= target && hi > target_start)
            .max_by_key(|&&(lo, hi)| hi - lo);
        match item {
            Some(&(lo, hi)) => out.items.push(SuppressedItem {
                lo,
                hi,
                names,
                parent: None,
            }),
            None => out.lines.entry(target).or_default().extend(names),
        }
    }

    /// First line of the run of `//` and `#` lines that ends at `line` (`line + 1` when
    /// `line` is not such a line).
    fn header_run_start(&mut self, line: usize) -> usize {
        let source = self.source;
        let runs = self.header_runs.get_or_insert_with(|| {
            let mut runs = Vec::with_capacity(source.line_count());
            for i in 0..source.line_count() {
                let t = source.line_text(i).trim_start();
                let header_like = t.starts_with("//") || t.starts_with('#');
                runs.push(match (header_like, i) {
                    (false, _) => i + 1,
                    (true, 0) => 0,
                    (true, _) => runs[i - 1],
                });
            }
            runs
        });
        runs[line]
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
    fn directives_are_read_from_real_comments_only() {
        let src = "fn a() { let s = \"\\\\\"; x(); } // idem-lint: allow(parse_error)\n\
                   fn b() { let s = r#\"\"\"#; y(); } // idem-lint: allow(parse_error)\n\
                   fn c() { let s = \"\n// idem-lint: allow(parse_error)\n\"; }\n\
                   fn d() { z(); }\n\
                   fn e<'a>(s: &'a str) { w(); } // idem-lint: allow(parse_error)\n";
        let (source, s, w) = setup(src);
        assert!(w.is_empty(), "{w:?}");
        assert!(
            s.allows(&PARSE_ERROR, at(src, "x()"), &source),
            "after \"\\\\\""
        );
        assert!(
            s.allows(&PARSE_ERROR, at(src, "y()"), &source),
            "after a raw string"
        );
        assert!(
            !s.allows(&PARSE_ERROR, at(src, "z()"), &source),
            "inside a string"
        );
        assert!(
            s.allows(&PARSE_ERROR, at(src, "w()"), &source),
            "after lifetimes"
        );
    }

    #[test]
    fn malformed_lists_warn() {
        for (directive, applies) in [
            ("allow()", false),
            ("allow(,,,)", false),
            ("allow(parse_error) junk", true),
            ("allow(parse_error,,)", true),
        ] {
            let src = format!("fn a() {{ x(); }} // idem-lint: {directive}\n");
            let (source, s, w) = setup(&src);
            assert_eq!(w.len(), 1, "{directive}: {w:?}");
            assert_eq!(
                s.allows(&PARSE_ERROR, at(&src, "x()"), &source),
                applies,
                "{directive}"
            );
        }
        let src = "fn a() { x(); } // idem-lint: allow(parse_error,)\n";
        let (_, _, w) = setup(src);
        assert!(w.is_empty(), "a trailing comma is fine: {w:?}");
    }

    #[test]
    fn nested_items_and_blank_lines() {
        let src = "// idem-lint: allow(parse_error)\nmod m {\n    fn f() { x(); }\n}\n\
                   mod n {\n    // idem-lint: allow(parse_error)\n    fn g() { y(); }\n    fn h() { z(); }\n}\n\
                   // idem-lint: allow(parse_error)\n\nfn i() { v(); }\n";
        let (source, s, _) = setup(src);
        assert!(s.allows(&PARSE_ERROR, at(src, "x()"), &source));
        assert!(s.allows(&PARSE_ERROR, at(src, "y()"), &source));
        assert!(!s.allows(&PARSE_ERROR, at(src, "z()"), &source));
        assert!(
            !s.allows(&PARSE_ERROR, at(src, "v()"), &source),
            "a blank line detaches"
        );
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
