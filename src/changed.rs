//! Reporting on some files only: `--only FILE..`, `--changed-since GIT_REF`, or a `.rs` file
//! given as PATH. The whole package is still read and analysed (a finding in one file may
//! depend on code in another), then only the findings in those files are reported, so a
//! partial report is the full report filtered.

use crate::git::Repo;
use crate::report::{Finding, Report};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The files to report on, canonical (symlinks resolved, as the parse stage reads them):
/// those `--only` names, whose findings are the ones at a place in them, and those
/// `--changed-since` lists, whose findings are also the ones that merely point into them.
#[derive(Debug, Clone, Default)]
pub struct FileSet {
    files: BTreeSet<PathBuf>,
    changed: BTreeSet<PathBuf>,
}

impl FileSet {
    pub fn contains(&self, path: &Path) -> bool {
        let canonical = canonical(path);
        self.files.contains(&canonical) || self.changed.contains(&canonical)
    }

    /// Adds `path` (relative to `base`) when it exists; a deleted file has no findings.
    fn add(&mut self, base: &Path, path: &Path) -> bool {
        Self::insert(&mut self.files, base, path)
    }

    fn add_changed(&mut self, base: &Path, path: &Path) -> bool {
        Self::insert(&mut self.changed, base, path)
    }

    fn insert(set: &mut BTreeSet<PathBuf>, base: &Path, path: &Path) -> bool {
        match std::fs::canonicalize(base.join(path)) {
            Ok(p) => {
                set.insert(p);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether `finding` is reported: its place is in a named or changed file, or one of its
    /// other spans (a label, an edit of a suggestion, the place a note names in a linked
    /// member) is in a changed file. A pull request that edits only a helper makes the
    /// finding at its unchanged caller, which names the helper in a label.
    fn keeps(&self, report: &Report, root: &Path, finding: &Finding) -> bool {
        let path = |file| report.source(finding.package, file).path.as_path();
        let d = &finding.diag;
        if self.contains(path(d.span.file)) {
            return true;
        }
        if self.changed.is_empty() {
            return false;
        }
        let changed = |p: &Path| self.changed.contains(&canonical(p));
        d.labels.iter().any(|l| changed(path(l.span.file)))
            || d.suggestions.iter().any(|s| {
                s.edits.iter().any(|(span, _)| changed(path(span.file)))
                    || s.moves
                        .iter()
                        .any(|m| changed(path(m.from.file)) || changed(path(m.to.file)))
            })
            || d.notes
                .iter()
                .filter_map(|n| crate::link::note_place(n))
                .any(|p| changed(&root.join(p.path)))
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The positional paths: at most one directory (or `Cargo.toml`) to lint, and `.rs` files
/// to report on.
#[derive(Debug, Default)]
pub struct NamedPaths {
    pub dir: Option<PathBuf>,
    pub files: Vec<PathBuf>,
}

pub fn split_paths<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Result<NamedPaths> {
    let mut named = NamedPaths::default();
    for p in paths {
        if is_source_file(p) {
            named.files.push(p.clone());
        } else if let Some(first) = &named.dir {
            bail!(
                "`{}` and `{}`: give one directory to lint (more paths must be `.rs` files)",
                first.display(),
                p.display()
            );
        } else {
            named.dir = Some(p.clone());
        }
    }
    Ok(named)
}

fn is_source_file(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "rs")
}

/// Where to look for the packages when only files say it: the directory of each file's
/// package (the closest directory above it holding a `Cargo.toml`), each once, in the order
/// the files came. Files given as PATH always say it; `--only` files only when the current
/// directory is inside no package. A file in no package is named to `warn` and left out: a
/// pre-commit hook passes every staged `.rs` file, and a script beside the crates is not one
/// of them.
pub fn package_dirs_for(
    files: &[PathBuf],
    only: &[PathBuf],
    warn: &mut dyn FnMut(String),
) -> Result<Vec<PathBuf>> {
    let cwd = std::env::current_dir().context("could not read the current directory")?;
    let from_only = !cwd.ancestors().any(|d| d.join("Cargo.toml").is_file());
    let candidates = files
        .iter()
        .chain(only.iter().filter(|_| from_only))
        .filter(|f| is_source_file(f));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for file in candidates {
        match package_dir(file) {
            Some(dir) if !dirs.contains(&dir) => dirs.push(dir),
            Some(_) => {}
            None => warn(format!(
                "`{}` belongs to no package (no `Cargo.toml` in a directory above it); not linted",
                file.display()
            )),
        }
    }
    Ok(dirs)
}

fn package_dir(file: &Path) -> Option<PathBuf> {
    let abs = std::path::absolute(file).ok()?;
    abs.parent()?
        .ancestors()
        .find(|d| d.join("Cargo.toml").is_file())
        .map(Path::to_path_buf)
}

/// The files `--only`, `--changed-since` and a file PATH name, or `None` when none was
/// given (report everything). A named file that does not exist is a warning.
pub fn selected_files(
    only: &[PathBuf],
    changed_since: Option<&str>,
    cwd: &Path,
    origin: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<Option<FileSet>> {
    if only.is_empty() && changed_since.is_none() {
        return Ok(None);
    }
    let mut set = FileSet::default();
    for f in only {
        if !set.add(cwd, f) {
            warn(format!("`{}` (from `--only`) does not exist", f.display()));
        }
    }
    if let Some(git_ref) = changed_since {
        // The repository around the place the user named, never one git would discover from
        // a directory the checkout chose (see `crate::git`).
        let repo = Repo::around(origin).with_context(|| {
            format!(
                "`--changed-since`: `{}` is in no git repository (no `.git` at or above it)",
                origin.display()
            )
        })?;
        // `--end-of-options`: the ref is never read as an option, so `--output=FILE`
        // (truncate FILE, hide the list) is only a ref that does not exist.
        let diff = repo
            .run(&[
                "diff",
                "--name-only",
                "-z",
                "--no-ext-diff",
                "--no-textconv",
                "--end-of-options",
                git_ref,
                "--",
            ])
            .with_context(|| format!("could not list the files changed since `{git_ref}`"))?;
        let untracked = repo.run(&["ls-files", "--others", "--exclude-standard", "-z"])?;
        for name in diff.split(|&b| b == 0).chain(untracked.split(|&b| b == 0)) {
            if !name.is_empty() {
                set.add_changed(&repo.work_tree, &path_of(name));
            }
        }
    }
    Ok(Some(set))
}

/// A path git printed, byte for byte: a name that is not UTF-8 is still a file with
/// findings.
#[cfg(unix)]
fn path_of(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

/// Keeps the findings of `report` that `files` selects ([`FileSet::keeps`]); `root` is the
/// workspace root, which notes name linked files relative to.
pub fn retain(report: &mut Report, files: &FileSet, root: &Path) {
    let keep: Vec<bool> = report
        .findings
        .iter()
        .map(|f| files.keeps(report, root, f))
        .collect();
    let mut keep = keep.into_iter();
    report.findings.retain(|_| keep.next().unwrap_or(true));
}
