//! The SQL migrations of a package, read for the schema they declare
//! ([`idem_lints::analysis::schema`]): which keys are unique, so that an `INSERT` of one is a
//! claim.
//!
//! Where: every folder named `migrations` below the package root (the usual
//! `migrations/`, and deeper ones such as `src/db/postgres/migrations` or
//! `postgres_migrations/migrations`), not inside `target/`, `node_modules/`, a hidden folder
//! or another package (a folder with its own `Cargo.toml`: those migrations are that
//! package's), and, for a workspace member, the workspace root's own `migrations/` (the
//! database its members share). Which files of a folder count, their order and their
//! sequences (one per dialect folder): [`idem_lints::model::migrations::plan`].
//!
//! How: under the rules of every other file the driver reads ([`crate::source::read_source`]:
//! regular files inside the workspace, an overlay first), with the cap of included files
//! (1 MiB). Symbolic links to folders are not followed, but for the migrations folder
//! itself when it resolves inside the workspace. The walk is bounded: folders at most
//! [`SEARCH_DEPTH`] levels below the package root and [`FOLDER_DEPTH`] below a migrations
//! folder, at most [`MAX_ENTRIES`] directory entries looked at, [`MAX_FILES`] files and
//! [`MAX_TOTAL_BYTES`] read. A file that cannot be read (too large, not UTF-8, outside the
//! workspace, a link to a folder) or a bound reached makes the migrations
//! [`Migrations::incomplete`]: a missing file could drop a key, so none is taken from any
//! of them, and the findings are those of a package without a schema.

use super::Inputs;
use crate::discovery::PackageSpec;
use crate::source::ReadPolicy;
use idem_lints::model::{migrations::plan, Migration, Migrations};
use std::path::{Path, PathBuf};

/// Levels below the package root searched for a `migrations` folder.
pub const SEARCH_DEPTH: usize = 6;
/// Levels below a migrations folder read (`postgres/<ts>_name/up.sql` is three).
pub const FOLDER_DEPTH: usize = 4;
/// Directory entries looked at in all, searching and reading.
pub const MAX_ENTRIES: usize = 50_000;
/// Migration files read.
pub const MAX_FILES: usize = 5_000;
/// Bytes of one migration file.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Bytes of all the migration files of a package.
pub const MAX_TOTAL_BYTES: u64 = 32 << 20;

/// Folders not searched: build output, JavaScript dependencies.
const SKIPPED: &[&str] = &["target", "node_modules"];

/// The migrations of the package `spec`, read under `policy`.
pub(crate) fn read(spec: &PackageSpec, policy: &ReadPolicy, inputs: Inputs<'_>) -> Migrations {
    let Some(root) = spec.manifest_path.parent() else {
        return Migrations::default();
    };
    let mut walk = Walk {
        policy,
        entries: 0,
        incomplete: false,
    };
    let mut folders = Vec::new();
    walk.search(root, 0, &mut folders);
    if let Some(ws) = spec.workspace_root.as_deref().filter(|ws| *ws != root) {
        let shared = ws.join("migrations");
        if shared.symlink_metadata().is_ok() {
            folders.push(shared);
        }
    }
    let mut files = Vec::new();
    let mut bytes = 0u64;
    let mut file_policy = policy.clone();
    file_policy.max_bytes = file_policy.max_bytes.min(MAX_FILE_BYTES);
    for folder in folders {
        let Some(dir) = walk.enter_folder(&folder) else {
            continue;
        };
        let mut listed = Vec::new();
        walk.list(&dir, "", 0, &mut listed);
        let name = display(&folder, root, spec.workspace_root.as_deref());
        for (sequence, rel) in plan(&name, &listed) {
            if files.len() >= MAX_FILES || bytes > MAX_TOTAL_BYTES {
                walk.incomplete = true;
                break;
            }
            match inputs.read(&dir.join(&rel), &file_policy) {
                Ok(text) => {
                    bytes += text.len() as u64;
                    files.push(Migration {
                        sequence,
                        path: format!("{name}/{rel}"),
                        text,
                    });
                }
                Err(_) => walk.incomplete = true,
            }
        }
    }
    Migrations {
        incomplete: walk.incomplete || bytes > MAX_TOTAL_BYTES,
        files,
    }
}

/// `folder` as the migrations' paths and sequences name it: relative to the workspace root
/// (two members' `migrations/` are two sequences, also once a package links the other),
/// else to the package root.
fn display(folder: &Path, root: &Path, ws: Option<&Path>) -> String {
    let rel = ws
        .and_then(|w| folder.strip_prefix(w).ok())
        .or_else(|| folder.strip_prefix(root).ok())
        .unwrap_or(folder);
    slashed(rel)
}

fn slashed(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

struct Walk<'p> {
    policy: &'p ReadPolicy,
    entries: usize,
    incomplete: bool,
}

impl Walk<'_> {
    /// The entries of `dir`, counted against [`MAX_ENTRIES`]; `None` past it.
    fn read_dir(&mut self, dir: &Path) -> Option<Vec<(String, PathBuf, std::fs::FileType)>> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Some(Vec::new());
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                self.incomplete = true;
                return None;
            }
            let Ok(kind) = e.file_type() else {
                continue;
            };
            match e.file_name().into_string() {
                Ok(name) => out.push((name, e.path(), kind)),
                // A name that is not UTF-8 could be a migration not read.
                Err(_) => self.incomplete |= kind.is_file() || kind.is_symlink(),
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Some(out)
    }

    /// Collects the folders named `migrations` below `dir` (`depth` levels below the
    /// package root), not searching inside one.
    fn search(&mut self, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Some(entries) = self.read_dir(dir) else {
            return;
        };
        for (name, path, kind) in entries {
            if name == "migrations" && (kind.is_dir() || kind.is_symlink()) {
                out.push(path);
                continue;
            }
            let searched = kind.is_dir()
                && depth < SEARCH_DEPTH
                && !name.starts_with('.')
                && !SKIPPED.contains(&name.as_str())
                && !path.join("Cargo.toml").exists();
            if searched {
                self.search(&path, depth + 1, out);
            }
        }
    }

    /// The folder to list for migrations folder `folder`: itself, or where it links to
    /// when that is inside the workspace.
    fn enter_folder(&mut self, folder: &Path) -> Option<PathBuf> {
        let meta = folder.symlink_metadata().ok()?;
        if !meta.file_type().is_symlink() {
            return meta.is_dir().then(|| folder.to_path_buf());
        }
        let target = std::fs::canonicalize(folder).ok().filter(|t| t.is_dir());
        let inside = |t: &PathBuf| self.policy.root.as_ref().is_none_or(|r| t.starts_with(r));
        match target {
            Some(t) if inside(&t) => Some(t),
            _ => {
                self.incomplete = true;
                None
            }
        }
    }

    /// Every file below `dir` (`prefix` its path inside the migrations folder), `depth`
    /// levels down; a folder deeper than [`FOLDER_DEPTH`] or a link to a folder is not
    /// read, and makes the migrations incomplete when it may hold some.
    fn list(&mut self, dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) {
        let Some(entries) = self.read_dir(dir) else {
            return;
        };
        for (name, path, kind) in entries {
            let rel = format!("{prefix}{name}");
            if kind.is_dir() {
                if depth + 1 < FOLDER_DEPTH {
                    self.list(&path, &format!("{rel}/"), depth + 1, out);
                } else {
                    self.incomplete = true;
                }
            } else if kind.is_symlink() && path.is_dir() {
                self.incomplete = true;
            } else {
                // A link to a file is read under the policy, which refuses one outside.
                out.push(rel);
            }
        }
    }
}
