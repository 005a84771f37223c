//! Baselines: `--write-baseline FILE` records today's findings, `--baseline FILE` reports
//! only the findings it does not hold, so a team can adopt the linter on an old codebase
//! and fail CI on new mistakes only.
//!
//! An entry is keyed by the lint, the file (relative to the workspace root) and a hash of
//! the flagged lines' code (comments left out) with whitespace collapsed, never by a line
//! number: code added or removed elsewhere in the file, or a comment edited on the flagged
//! line, leaves the entry matching. Entries are a multiset: two identical findings need two
//! entries. An entry of a linted file that matched nothing is stale (the code was fixed or
//! changed) and is counted in the summary; `--prune-baseline FILE` drops those and records
//! nothing new, and `--strict-baseline` makes them fail the run.
//!
//! The file may be the checkout's, so it is read as sources are ([`read_source`]): a regular
//! file under the size cap, inside the workspace when its path is, and an error never quotes
//! what it holds. It is written through a temporary file and a rename, so a symlink planted
//! at its path is replaced, not followed.

use crate::emit::fingerprint::{hash_parts, normalize};
use crate::emit::relative_path;
use crate::report::{Finding, Report};
use crate::source::{read_source, ReadPolicy};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::error::Category;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The format's version; a file of another version is refused rather than misread.
const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    findings: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    lint: String,
    file: String,
    hash: String,
    /// For the reader of the file only; not part of the key.
    #[serde(default)]
    message: String,
}

impl Entry {
    fn key(&self) -> (&str, &str, &str) {
        (&self.lint, &self.file, &self.hash)
    }
}

/// What applying a baseline did, for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub path: PathBuf,
    /// Findings the baseline held, not reported.
    pub hidden: usize,
    /// Entries of linted files that matched no finding.
    pub stale: usize,
}

impl Summary {
    /// `3 findings hidden by the baseline `b.json`; 1 entry no longer matches (...)`.
    pub fn describe(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut text = format!(
            "{} by the baseline `{}`",
            plural(self.hidden, "finding hidden", "findings hidden"),
            self.path.display()
        );
        if self.stale > 0 {
            text.push_str(&format!(
                "; {} no longer {} (fixed or changed): drop {} with `--prune-baseline`",
                plural(self.stale, "entry", "entries"),
                if self.stale == 1 { "matches" } else { "match" },
                if self.stale == 1 { "it" } else { "them" }
            ));
        }
        text
    }
}

/// The entry a finding is recorded as, and the hash the first baselines gave it (the
/// flagged lines with their comments), still matched so those files keep working.
fn entry(report: &Report, root: &Path, f: &Finding) -> (Entry, String) {
    let src = report.source(f.package, f.diag.span.file);
    let lo = src.clamp(f.diag.span.lo as usize);
    let hi = src.clamp(f.diag.span.hi as usize).max(lo);
    let lines = src.line_range(src.line_index(lo)).start..src.line_range(src.line_index(hi)).end;
    let file = relative_path(&src.path, root);
    let text = &src.text[lines];
    let legacy = hash_parts(&[f.diag.lint.name, &file, &normalize(text)]);
    let entry = Entry {
        lint: f.diag.lint.name.to_string(),
        hash: hash_parts(&[f.diag.lint.name, &file, &normalize(&without_comments(text))]),
        file,
        message: f.diag.message.clone(),
    };
    (entry, legacy)
}

/// `text` without its comments (a trailing `// why` edited on a flagged line must not
/// bring the finding back); `//` inside a string stays.
fn without_comments(text: &str) -> String {
    let comments = crate::suppress::comments::scan(text).comments;
    if comments.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for c in comments {
        out.push_str(&text[at..c.range.start]);
        out.push(' ');
        at = c.range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Writes every finding of `report` to `path`, sorted, so the file diffs well in review.
pub fn write(report: &Report, root: &Path, path: &Path) -> Result<()> {
    let findings: Vec<Entry> = report
        .findings
        .iter()
        .map(|f| entry(report, root, f).0)
        .collect();
    write_entries(findings, root, path)
}

fn write_entries(mut findings: Vec<Entry>, root: &Path, path: &Path) -> Result<()> {
    findings.sort();
    let text = serde_json::to_string_pretty(&File {
        version: VERSION,
        findings,
    })
    .context("could not serialize the baseline")?;
    no_symlinked_dir(root, path)?;
    crate::replace::replace(path, (text + "\n").as_bytes())
        .with_context(|| format!("could not write the baseline `{}`", path.display()))
}

/// Refuses to write `path` when it lies inside `root` and its directory is reached through a
/// symlink (or `..`): the checkout may commit `baselines -> /somewhere/else`, and the rename
/// that replaces a planted file would land there. A path the user names outside the
/// workspace is theirs to choose.
fn no_symlinked_dir(root: &Path, path: &Path) -> Result<()> {
    let written = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let Some(dir) = written.parent() else {
        return Ok(());
    };
    let canonical_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let Some(rel) = dir
        .strip_prefix(root)
        .or_else(|_| dir.strip_prefix(&canonical_root))
        .ok()
    else {
        return Ok(());
    };
    // A directory that does not exist fails the write itself, with its own message.
    let Ok(resolved) = std::fs::canonicalize(dir) else {
        return Ok(());
    };
    if resolved != canonical_root.join(rel) {
        bail!(
            "not writing the baseline `{}`: its directory is reached through a symlink (it resolves to `{}`)",
            path.display(),
            resolved.display()
        );
    }
    Ok(())
}

/// What a baseline may be read under: inside `root` when its path lies there, as written or
/// with its directory resolved (the checkout wrote it, and its symlinks must not lead out),
/// anywhere when the user named a file elsewhere; a regular file, under the cap.
fn read_policy(root: &Path, path: &Path) -> ReadPolicy {
    let inside = ReadPolicy::inside(root);
    let written = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let resolved_dir = written
        .parent()
        .and_then(|dir| std::fs::canonicalize(dir).ok())
        .zip(written.file_name())
        .map(|(dir, name)| dir.join(name));
    let roots = [Some(root), inside.root.as_deref()];
    let in_root = |p: &Path| roots.iter().flatten().any(|r| p.starts_with(r));
    if in_root(&written) || resolved_dir.as_deref().is_some_and(in_root) {
        inside
    } else {
        ReadPolicy::anywhere()
    }
}

/// Drops from `report` the findings `path` records, and says how many, and how many of its
/// entries are stale. Only files `in_scope` (all files, or those `--only` names) can prove
/// an entry stale.
pub fn apply(
    report: &mut Report,
    root: &Path,
    path: &Path,
    in_scope: &dyn Fn(&Path) -> bool,
) -> Result<Summary> {
    apply_entries(report, root, path, in_scope).map(|(summary, _)| summary)
}

/// [`apply`], then rewrites `path` without its stale entries: nothing is added (a finding
/// the baseline does not hold is reported, not recorded), and an entry matched through the
/// hash of the first format is written with today's.
pub fn prune(
    report: &mut Report,
    root: &Path,
    path: &Path,
    in_scope: &dyn Fn(&Path) -> bool,
) -> Result<Summary> {
    let (summary, kept) = apply_entries(report, root, path, in_scope)?;
    write_entries(kept, root, path)?;
    Ok(summary)
}

/// [`apply`], and the entries of the file that are not stale.
fn apply_entries(
    report: &mut Report,
    root: &Path,
    path: &Path,
    in_scope: &dyn Fn(&Path) -> bool,
) -> Result<(Summary, Vec<Entry>)> {
    let text = read_source(path, &read_policy(root, path))
        .map_err(|e| anyhow!("could not read the baseline `{}`: {e}", path.display()))?;
    // serde's message quotes the file (`invalid type: string "..."`): say where, not what.
    let file: File = serde_json::from_str(&text).map_err(|e| {
        let what = match e.classify() {
            Category::Data => "not the baseline format",
            Category::Io | Category::Syntax | Category::Eof => "invalid JSON",
        };
        anyhow!(
            "`{}` is not a baseline ({what} at line {}, column {})",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    if file.version != VERSION {
        bail!(
            "`{}` is a baseline of version {}, and this idem-lint reads version {VERSION}",
            path.display(),
            file.version
        );
    }
    let mut entries = file.findings;
    // The entries not matched yet, by key.
    let mut left: BTreeMap<(String, String, String), Vec<usize>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate().rev() {
        let (l, f, h) = e.key();
        left.entry((l.into(), f.into(), h.into()))
            .or_default()
            .push(i);
    }
    let found: Vec<(Entry, String)> = report
        .findings
        .iter()
        .map(|f| entry(report, root, f))
        .collect();
    let mut matched = vec![false; entries.len()];
    let known: Vec<bool> = found
        .iter()
        .map(|(e, legacy)| {
            let mut take = |hash: &str| {
                left.get_mut(&(e.lint.clone(), e.file.clone(), hash.to_string()))
                    .and_then(Vec::pop)
            };
            let Some(i) = take(&e.hash).or_else(|| take(legacy)) else {
                return false;
            };
            matched[i] = true;
            entries[i].hash = e.hash.clone();
            true
        })
        .collect();
    let hidden = known.iter().filter(|k| **k).count();
    let mut known = known.into_iter();
    report.findings.retain(|_| !known.next().unwrap_or(false));
    // Only files this run read can prove an entry stale: `-p other` or `--only` leaves
    // the rest of the baseline alone.
    let linted: BTreeSet<String> = report
        .packages
        .iter()
        .flat_map(|p| &p.sources)
        .filter(|s| in_scope(&s.path))
        .map(|s| relative_path(&s.path, root))
        .collect();
    let is_stale = |i: usize| !matched[i] && linted.contains(&entries[i].file);
    let stale = (0..entries.len()).filter(|&i| is_stale(i)).count();
    let kept: Vec<Entry> = (0..entries.len())
        .filter(|&i| !is_stale(i))
        .map(|i| entries[i].clone())
        .collect();
    let summary = Summary {
        path: path.to_path_buf(),
        hidden,
        stale,
    };
    Ok((summary, kept))
}
