//! What to lint: the packages and targets of a cargo workspace (through `cargo metadata
//! --no-deps`, so nothing is resolved, downloaded or compiled), or the `.rs` files of a plain
//! directory.

mod cargo;
mod pkgid;
mod plain;

use anyhow::{bail, Result};
use idem_lints::model::TargetInfo;
use std::path::{Path, PathBuf};

/// Which packages the user asked for (`PATH`, `--manifest-path`, `-p`, `--workspace`).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub path: Option<PathBuf>,
    pub manifest_path: Option<PathBuf>,
    pub packages: Vec<String>,
    pub workspace: bool,
}

impl Selection {
    pub fn from_args(args: &crate::cli::Args) -> Selection {
        Selection {
            path: args.path.clone(),
            manifest_path: args.manifest_path.clone(),
            packages: args.packages.clone(),
            workspace: args.workspace,
        }
    }

    /// Lint `dir` (a package, a workspace or a plain directory) with cargo's defaults.
    pub fn dir(dir: impl Into<PathBuf>) -> Selection {
        Selection {
            path: Some(dir.into()),
            ..Selection::default()
        }
    }
}

/// Everything to lint, with absolute paths.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The workspace root (for a plain directory, the directory): where `idem-lint.toml` is
    /// looked for and what SARIF URIs are relative to.
    pub root: PathBuf,
    /// The workspace's root `Cargo.toml`, when there is one.
    pub root_manifest: Option<PathBuf>,
    /// Cargo's target directory (where the re-run cache lives); `None` for a plain directory.
    pub target_dir: Option<PathBuf>,
    pub packages: Vec<PackageSpec>,
    /// Problems met while finding the files that did not stop the run (a directory that
    /// could not be listed); printed as `warning:` lines.
    pub warnings: Vec<String>,
    /// Workspace members not selected (a root package's manifest selects that package, as
    /// cargo does): the summary says they were not read.
    pub unselected: Vec<String>,
    /// `--sarif-root`: what SARIF URIs and GitHub annotations are relative to, instead of
    /// the repository root (see `emit::repository_root`).
    pub report_root: Option<PathBuf>,
    /// The place the user named (`--manifest-path`'s directory, PATH, or the current
    /// directory): where the repository is looked for, never the workspace root, which the
    /// checkout's own `package.workspace` can move.
    pub origin: PathBuf,
}

#[derive(Debug, Clone)]
pub struct PackageSpec {
    pub name: String,
    /// Cargo's package id (`path+file:///...#name@0.1.0`), as in `cargo check`'s JSON.
    pub id: String,
    /// Absolute path of its `Cargo.toml` (for a plain directory, where it would be).
    pub manifest_path: PathBuf,
    /// Whether `manifest_path` exists (and may hold `[package.metadata.idem-lint]`).
    pub has_manifest: bool,
    /// Crate names of its dependencies, `-` replaced by `_`.
    pub dependencies: Vec<String>,
    pub targets: Vec<TargetSpec>,
    pub sources: Sources,
    /// The libraries of the workspace members it depends on by path, directly or through
    /// other members: analysed with it, so what their fns do reaches its calls.
    pub links: Vec<LinkSpec>,
    /// The root of the workspace it is a member of: its `migrations/` folder holds the
    /// schema every member's code runs against ([`crate::parse::migrations`]). `None` for
    /// a plain directory.
    pub workspace_root: Option<PathBuf>,
}

/// A workspace member's library that a package depends on by path.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// The crate name the depending code calls it by (its rename, `-` as `_`).
    pub krate: String,
    /// The member with its library target only, and no links of its own: one per member,
    /// shared by every package that links it.
    pub spec: std::sync::Arc<PackageSpec>,
}

/// How a package's files are found.
#[derive(Debug, Clone)]
pub enum Sources {
    /// Follow each target's module tree from its root file.
    ModuleTrees,
    /// Every `.rs` file of a plain directory, each on its own, all in target 0.
    Files(Vec<PathBuf>),
}

#[derive(Debug, Clone)]
pub struct TargetSpec {
    pub info: TargetInfo,
    /// The complete target object of `cargo metadata`, repeated in every JSON message
    /// (rust-analyzer drops a message whose `target` it cannot read).
    pub json: serde_json::Value,
}

/// Finds the packages `sel` names.
pub fn discover(sel: &Selection) -> Result<Workspace> {
    let mut ws = discover_packages(sel)?;
    ws.origin = origin_of(sel);
    Ok(ws)
}

/// The directory the user named for `sel`.
fn origin_of(sel: &Selection) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    let named = sel.manifest_path.as_ref().or(sel.path.as_ref());
    match named {
        Some(p) if p.is_file() => absolute(p.parent().unwrap_or(Path::new("."))),
        Some(p) => absolute(p),
        None => cwd,
    }
}

fn discover_packages(sel: &Selection) -> Result<Workspace> {
    if let Some(manifest) = &sel.manifest_path {
        if manifest.is_dir() {
            bail!(
                "`--manifest-path` takes the path of a `Cargo.toml`, and `{}` is a directory (try `{}`)",
                manifest.display(),
                manifest.join("Cargo.toml").display()
            );
        }
        if !manifest.is_file() {
            bail!("manifest `{}` does not exist", manifest.display());
        }
        return cargo::discover(Some(manifest), sel);
    }
    match &sel.path {
        Some(path) => {
            if !path.exists() {
                bail!("`{}` does not exist", path.display());
            }
            if path.is_file() {
                if path.file_name().is_some_and(|n| n == "Cargo.toml") {
                    return cargo::discover(Some(path), sel);
                }
                bail!(
                    "`{}` is a file; pass a directory or `--manifest-path`",
                    path.display()
                );
            }
            let manifest = path.join("Cargo.toml");
            if manifest.exists() {
                cargo::discover(Some(&manifest), sel)
            } else {
                if !sel.packages.is_empty() || sel.workspace {
                    bail!(
                        "`-p` and `--workspace` need a Cargo.toml, and `{}` has none",
                        path.display()
                    );
                }
                plain::discover(path)
            }
        }
        None => cargo::discover(None, sel),
    }
}

/// `path` made absolute against the current directory, without resolving symlinks.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
