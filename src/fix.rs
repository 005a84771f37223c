//! `--fix` and `--diff`: the lints' suggestions applied to the files.
//!
//! `--fix` applies the `MachineApplicable` suggestions (always right); with
//! `--unsafe-fixes` also the `MaybeIncorrect` ones (probably right: review the diff).
//! `HasPlaceholders` suggestions are never applied: they leave `/* .. */` to fill.
//! `--diff` prints the same changes as a unified diff and writes nothing.
//!
//! A suggestion's edits are applied together or not at all. Suggestions are taken in
//! source order; one that overlaps an edit already taken is left out (the next run offers
//! it again on the changed code), and the same edit offered by two findings is made once.
//! A file whose fixed text would not parse is not written, and said so.
//!
//! Writing is careful because the checkout is not the only writer and may be hostile: a file
//! is written only when it resolves inside the workspace root (whatever
//! `--allow-outside-workspace` let the run read) and still holds the text the fixes were
//! made for (an edit made while the run went is kept, and the file is said to be skipped);
//! the new text goes to a temporary file beside it and is renamed into place
//! ([`crate::replace`]), so a full disk never leaves it cut.

use crate::cli::Args;
use crate::emit::snippet::escape;
use crate::report::Report;
use crate::source::{read_source, ReadError, ReadPolicy};
use crate::{stderr_line, Linted, Outcome};
use anyhow::{Context, Result};
use idem_lints::{Applicability, Level};
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One replacement in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub text: String,
}

/// The edits taken for one file, in order, none overlapping.
#[derive(Debug, Default)]
pub struct FilePlan {
    pub original: Arc<str>,
    pub edits: Vec<Edit>,
    /// Findings whose suggestion was taken.
    pub fixed: usize,
    /// Findings whose suggestion overlapped one taken before.
    pub deferred: usize,
}

/// Which suggestions a run may apply.
pub fn accepts(applicability: Applicability, unsafe_fixes: bool) -> bool {
    match applicability {
        Applicability::MachineApplicable => true,
        Applicability::MaybeIncorrect => unsafe_fixes,
        Applicability::HasPlaceholders | Applicability::Unspecified => false,
    }
}

/// The edits to make, per file, resolving overlaps in source order.
pub fn plan(
    report: &Report,
    accept: &dyn Fn(Applicability) -> bool,
) -> BTreeMap<PathBuf, FilePlan> {
    let mut files: BTreeMap<PathBuf, FilePlan> = BTreeMap::new();
    for f in &report.findings {
        // The first suggestion the run may apply; a finding is fixed one way.
        let Some(s) = f.diag.suggestions.iter().find(|s| accept(s.applicability)) else {
            continue;
        };
        let concrete = s.concrete_edits(&|file| &report.source(f.package, file).text);
        let Some((first, _)) = concrete.first() else {
            continue;
        };
        // Every edit of a suggestion lies in one file (the lints build them so).
        let src = report.source(f.package, first.file);
        let plan = files.entry(src.path.clone()).or_insert_with(|| FilePlan {
            original: src.text.clone(),
            ..FilePlan::default()
        });
        let edits: Vec<Edit> = concrete
            .iter()
            .filter(|(at, _)| at.file == first.file)
            .map(|(at, text)| {
                let lo = src.clamp(at.lo as usize);
                Edit {
                    range: lo..src.clamp(at.hi as usize).max(lo),
                    text: text.clone(),
                }
            })
            .collect();
        let new: Vec<&Edit> = edits.iter().filter(|e| !plan.edits.contains(e)).collect();
        if new
            .iter()
            .any(|e| plan.edits.iter().any(|taken| overlaps(e, taken)))
        {
            plan.deferred += 1;
            continue;
        }
        plan.edits.extend(new.into_iter().cloned());
        plan.fixed += 1;
    }
    for plan in files.values_mut() {
        plan.edits.sort_by_key(|e| (e.range.start, e.range.end));
    }
    files
}

/// Two edits touch the same text, or insert at the same point (their order would be a
/// guess).
fn overlaps(a: &Edit, b: &Edit) -> bool {
    let same_point = a.range.start == b.range.start && (a.range.is_empty() || b.range.is_empty());
    same_point || (a.range.start < b.range.end && b.range.start < a.range.end)
}

/// `original` with `edits` (sorted, not overlapping) made.
pub fn apply(original: &str, edits: &[Edit]) -> String {
    let mut out = String::with_capacity(original.len());
    let mut at = 0;
    for e in edits {
        out.push_str(&original[at..e.range.start]);
        out.push_str(&e.text);
        at = e.range.end;
    }
    out.push_str(&original[at..]);
    out
}

/// The fixed text of a file, or why it is not written: a file that parsed before must
/// parse after. (One that did not parse is not made worse by edits elsewhere, and its own
/// parse error is already reported.)
pub fn fixed_text(plan: &FilePlan) -> Result<String, String> {
    let new = apply(&plan.original, &plan.edits);
    if syn::parse_file(&plan.original).is_ok() {
        if let Err(e) = syn::parse_file(&new) {
            let at = e.span().start();
            return Err(format!("{e} at {}:{}", at.line, at.column + 1));
        }
    }
    Ok(new)
}

/// Applies (or, with `--diff`, prints) the fixes; the exit code counts the findings at
/// deny that were not fixed.
pub fn run(args: &Args, linted: &Linted) -> Result<Outcome> {
    let unsafe_fixes = args.unsafe_fixes;
    let plans = plan(&linted.report, &|a| accepts(a, unsafe_fixes));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let (mut fixed, mut files, mut deferred) = (0, 0, 0);
    let mut fixed_files: Vec<&PathBuf> = Vec::new();
    for (path, plan) in &plans {
        deferred += plan.deferred;
        if plan.edits.is_empty() {
            continue;
        }
        let shown = crate::emit::relative_path(path, &linted.cwd);
        let new = match fixed_text(plan) {
            Ok(new) => new,
            Err(e) => {
                stderr_line(&format!(
                    "warning: {shown}: not fixed: the fixed text would not parse ({e}); {} suggestion{} left out",
                    plan.fixed,
                    if plan.fixed == 1 { "" } else { "s" }
                ));
                continue;
            }
        };
        if args.diff {
            let diff = unified_diff(&shown, &plan.original, &new);
            out.write_all(visible_diff(&diff).as_bytes())?;
        } else {
            match write_fix(path, &linted.ws.root, &plan.original, &new) {
                Ok(()) => {}
                Err(NotWritten::Refused(why)) => {
                    stderr_line(&format!("warning: {shown}: not fixed: {why}"));
                    continue;
                }
                Err(NotWritten::Failed(e)) => {
                    return Err(e).with_context(|| format!("could not write the fix to `{shown}`"))
                }
            }
        }
        fixed += plan.fixed;
        files += 1;
        fixed_files.push(path);
    }
    out.flush()?;
    let verb = if args.diff { "would fix" } else { "fixed" };
    let mut summary = format!(
        "{verb} {fixed} finding{} in {files} file{}",
        if fixed == 1 { "" } else { "s" },
        if files == 1 { "" } else { "s" }
    );
    if deferred > 0 {
        summary.push_str(&format!(
            "; {deferred} overlapping fix{} left for the next run",
            if deferred == 1 { "" } else { "es" }
        ));
    }
    let maybe = unsafe_only(&linted.report, unsafe_fixes);
    if maybe > 0 {
        // `--diff` only shows: applying is always `--fix`, whichever flag printed this.
        summary.push_str(&format!(
            "; {maybe} more finding{} {} a fix that may be incorrect: review with `--diff --unsafe-fixes`, apply with `--fix --unsafe-fixes`",
            if maybe == 1 { "" } else { "s" },
            if maybe == 1 { "has" } else { "have" },
        ));
    }
    stderr_line(&format!("note: {summary}"));
    let unfixed_deny = linted.report.findings.iter().any(|f| {
        f.diag.level == Level::Deny
            && !(fixed_files.contains(&&linted.report.source(f.package, f.diag.span.file).path)
                && f.diag
                    .suggestions
                    .iter()
                    .any(|s| accepts(s.applicability, unsafe_fixes)))
    });
    Ok(if unfixed_deny {
        Outcome::Denied
    } else {
        Outcome::Clean
    })
}

/// Why a fixed text was not written.
#[derive(Debug)]
pub enum NotWritten {
    /// The file is left as it is, and the run goes on (a `warning:` line).
    Refused(String),
    /// Writing failed; the file is left as it was.
    Failed(std::io::Error),
}

/// Writes `new` over the file at `path` if it lies inside `root` once symlinks are resolved
/// and still holds `original`, through a temporary file and a rename.
pub fn write_fix(path: &Path, root: &Path, original: &str, new: &str) -> Result<(), NotWritten> {
    const CHANGED: &str = "it changed since it was read; run again to fix the new text";
    let resolved = std::fs::canonicalize(path)
        .map_err(|e| NotWritten::Refused(format!("could not read it again: {e}")))?;
    let mut policy = ReadPolicy::inside(root);
    policy.max_bytes = policy.max_bytes.max(original.len() as u64);
    match read_source(&resolved, &policy) {
        Ok(now) if now == original => {}
        // Past the cap it has grown since it was read, so it changed too.
        Ok(_) | Err(ReadError::TooLarge { .. }) => {
            return Err(NotWritten::Refused(CHANGED.to_string()))
        }
        Err(ReadError::OutsideRoot { resolved }) => {
            return Err(NotWritten::Refused(format!(
                "it resolves to `{}`, outside the workspace, and `--fix` writes only inside it",
                resolved.display()
            )))
        }
        Err(e) => return Err(NotWritten::Refused(format!("could not read it again: {e}"))),
    }
    crate::replace::replace(&resolved, new.as_bytes()).map_err(NotWritten::Failed)
}

/// `diff` with every control character of the checkout made visible, line by line. A line's
/// own `\n` or `\r\n` stays, so the patch of an ordinary file is unchanged and still applies;
/// a lone CR, which the diff also ends a line at, is shown as `␍` and ends the line with `\n`.
pub fn visible_diff(diff: &str) -> String {
    let mut out = String::with_capacity(diff.len());
    let mut rest = diff;
    while !rest.is_empty() {
        let end = rest.find(['\r', '\n']).unwrap_or(rest.len());
        out.push_str(&escape(&rest[..end]));
        rest = &rest[end..];
        let (terminator, len) = if rest.starts_with("\r\n") {
            ("\r\n", 2)
        } else if rest.starts_with('\n') {
            ("\n", 1)
        } else if rest.starts_with('\r') {
            ("␍\n", 1)
        } else {
            ("", 0)
        };
        out.push_str(terminator);
        rest = &rest[len..];
    }
    out
}

/// How many findings have a fix only `--unsafe-fixes` applies (none without the flag, when
/// the flag is given).
fn unsafe_only(report: &Report, unsafe_fixes: bool) -> usize {
    if unsafe_fixes {
        return 0;
    }
    let by = |f: &crate::report::Finding, unsafe_fixes| {
        f.diag
            .suggestions
            .iter()
            .any(|s| accepts(s.applicability, unsafe_fixes))
    };
    report
        .findings
        .iter()
        .filter(|f| !by(f, false) && by(f, true))
        .count()
}

/// A unified diff (`--- a/path`, `+++ b/path`) of `old` and `new`, 3 lines of context: what
/// `patch -p1` and `git apply` take.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(range: Range<usize>, text: &str) -> Edit {
        Edit {
            range,
            text: text.to_string(),
        }
    }

    #[test]
    fn edits_apply_in_order() {
        let text = "let a = 1;\nlet b = 2;\n";
        let edits = [edit(4..5, "x"), edit(15..16, "y"), edit(21..21, " // ok")];
        assert_eq!(apply(text, &edits), "let x = 1;\nlet y = 2; // ok\n");
    }

    #[test]
    fn overlap_includes_two_insertions_at_one_point() {
        assert!(overlaps(&edit(3..3, "a"), &edit(3..3, "b")));
        assert!(overlaps(&edit(2..6, "a"), &edit(5..8, "b")));
        assert!(!overlaps(&edit(2..5, "a"), &edit(5..8, "b")));
        assert!(overlaps(&edit(2..5, "a"), &edit(2..2, "b")));
    }

    #[test]
    fn a_diff_shows_control_characters_and_keeps_line_ends() {
        let old = "a\r\nb \x1b[2J\rc\n";
        let new = "a\r\nB \x1b[2J\rc\n";
        let d = visible_diff(&unified_diff("x.rs", old, new));
        assert!(!d.contains(['\x1b']), "{d:?}");
        assert!(d.contains("\n-b ␛[2J␍\n+B ␛[2J␍\n c\n"), "{d:?}");
        assert!(d.contains(" a\r\n"), "{d:?}");
    }

    #[test]
    fn diff_has_context_and_counts() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        let d = unified_diff("src/a.rs", old, new);
        assert_eq!(
            d,
            "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
        assert_eq!(unified_diff("x", old, old), "");
    }

    #[test]
    fn changes_far_apart_get_their_own_hunks() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("2\n", "two\n").replace("19\n", "nineteen\n");
        let d = unified_diff("a.rs", &old, &new);
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(!d.contains("-10\n"), "{d}");
    }
}
