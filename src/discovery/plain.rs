//! A directory without `Cargo.toml`: every `.rs` file below it, honouring `.gitignore`.

use super::{absolute, PackageSpec, Sources, TargetSpec, Workspace};
use anyhow::{Context, Result};
use idem_lints::model::TargetInfo;
use std::path::{Path, PathBuf};

pub(super) fn discover(dir: &Path) -> Result<Workspace> {
    let root = absolute(dir);
    let real_root = std::fs::canonicalize(&root)
        .with_context(|| format!("could not read `{}`", root.display()))?;
    let mut files = Vec::new();
    let mut warnings = Vec::new();
    let walker = ignore::WalkBuilder::new(&root)
        // `.gitignore` applies even outside a git checkout (a copied tree, a tarball).
        .require_git(false)
        .filter_entry(|e| !is_cargo_target_dir(e))
        .build();
    for entry in walker {
        // One directory that cannot be listed (permissions, a name past PATH_MAX) must not
        // cost the rest of the tree: say so and go on.
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                warnings.push(walk_error(&e));
                continue;
            }
        };
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let is_rs = entry.path().extension().is_some_and(|e| e == "rs");
        // Symlinks are kept (not followed by the walk): reading one that dangles or loops is
        // reported per file instead of aborting the run.
        if (kind.is_file() || kind.is_symlink()) && is_rs {
            files.push(entry.into_path());
        } else if kind.is_symlink() && entry.path().is_dir() {
            // A directory link inside the tree leads to files the walk lints at their own
            // path; one leading outside is not read, and the user should know.
            let inside =
                std::fs::canonicalize(entry.path()).is_ok_and(|t| t.starts_with(&real_root));
            if !inside {
                warnings.push(format!(
                    "`{}` is a symlink to a directory outside `{}`; not followed",
                    entry.path().display(),
                    root.display()
                ));
            }
        }
    }
    files.sort();
    if files.is_empty() {
        // A checkout can empty this mode with a `.ignore` of `*`: an empty run must say so.
        let left_out = rs_files_left_out(&root);
        let why = if left_out > 0 {
            format!(" ({left_out} left out by ignore files or as hidden)")
        } else {
            String::new()
        };
        warnings.push(format!(
            "0 `.rs` files linted below `{}`{why}",
            root.display()
        ));
    }
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sources".to_string());
    let manifest_path = root.join("Cargo.toml");
    let target = synthetic_target(&name, &root);
    Ok(Workspace {
        root: root.clone(),
        root_manifest: None,
        target_dir: None,
        unselected: Vec::new(),
        report_root: None,
        origin: root.clone(),
        packages: vec![PackageSpec {
            id: format!(
                "path+file://{}#{}@0.0.0",
                crate::uri::uri_path(&root),
                crate::uri::encode_text(&name)
            ),
            name,
            manifest_path,
            has_manifest: false,
            dependencies: Vec::new(),
            targets: vec![target],
            sources: Sources::Files(files),
            links: Vec::new(),
            workspace_root: None,
        }],
        warnings,
    })
}

/// The `.rs` files below `root` that the walk leaves out by ignore files or as hidden, cargo's
/// build directories not counted.
fn rs_files_left_out(root: &Path) -> usize {
    ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .filter_entry(|e| !is_cargo_target_dir(e))
        .build()
        .flatten()
        .filter(|e| {
            e.file_type().is_some_and(|t| t.is_file())
                && e.path().extension().is_some_and(|x| x == "rs")
        })
        .count()
}

/// The first line of a cache directory tag (<https://bford.info/cachedir/>), which cargo
/// writes into every target directory it creates.
const CACHEDIR_SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

/// Whether `dir` holds a real `CACHEDIR.TAG`: a regular file (not a symlink) that starts
/// with the signature. A file of that name with any other content marks nothing, so a
/// checkout cannot hide a directory of code by committing one.
fn has_cachedir_tag(dir: &Path) -> bool {
    use std::io::Read;
    let tag = dir.join("CACHEDIR.TAG");
    if !tag.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(CACHEDIR_SIGNATURE.len());
    std::fs::File::open(&tag)
        .and_then(|f| {
            f.take(CACHEDIR_SIGNATURE.len() as u64)
                .read_to_end(&mut head)
        })
        .is_ok_and(|_| head == CACHEDIR_SIGNATURE)
}

/// Cargo's build directory: it holds generated and packaged copies of sources, not code
/// the user wrote. Cargo marks every target directory it creates with a `CACHEDIR.TAG`
/// (only one with the tag's signature counts); an unmarked `target` beside a `Cargo.toml`
/// is one not built yet. Any other directory named `target` (`src/target/mod.rs`) is code.
fn is_cargo_target_dir(e: &ignore::DirEntry) -> bool {
    if e.depth() == 0 || !e.file_type().is_some_and(|t| t.is_dir()) {
        return false;
    }
    let dir = e.path();
    has_cachedir_tag(dir)
        || (e.file_name() == "target"
            && dir.parent().is_some_and(|p| p.join("Cargo.toml").is_file()))
}

/// `could not list `dir`: cause`, on one line (`ignore` repeats the path inside the cause).
fn walk_error(e: &ignore::Error) -> String {
    fn path_of(e: &ignore::Error) -> Option<&Path> {
        match e {
            ignore::Error::WithPath { path, .. } => Some(path),
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
                path_of(err)
            }
            _ => None,
        }
    }
    let cause = match e.io_error() {
        Some(io) => io.to_string(),
        None => e.to_string().replace('\n', " "),
    };
    match path_of(e) {
        Some(path) => format!("could not list `{}`: {cause}; skipped", path.display()),
        None => format!("could not list a directory: {cause}; skipped"),
    }
}

/// A `lib` target standing for the whole directory, complete in the shape cargo prints.
fn synthetic_target(name: &str, root: &Path) -> TargetSpec {
    let src_path: PathBuf = root.to_path_buf();
    TargetSpec {
        info: TargetInfo {
            name: name.to_string(),
            kind: vec!["lib".to_string()],
            root: src_path.clone(),
        },
        json: serde_json::json!({
            "kind": ["lib"],
            "crate_types": ["lib"],
            "name": name,
            // Lossy: a path that is not UTF-8 must not stop JSON output (serde rejects it).
            "src_path": src_path.to_string_lossy(),
            "edition": "2021",
            "doc": false,
            "doctest": false,
            "test": false,
        }),
    }
}
