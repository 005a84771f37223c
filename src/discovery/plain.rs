//! A directory without `Cargo.toml`: every `.rs` file below it, honouring `.gitignore`.

use super::{absolute, PackageSpec, Sources, TargetSpec, Workspace};
use anyhow::{Context, Result};
use idem_lints::model::TargetInfo;
use std::path::{Path, PathBuf};

pub(super) fn discover(dir: &Path) -> Result<Workspace> {
    let root = absolute(dir);
    let mut files = Vec::new();
    let walker = ignore::WalkBuilder::new(&root)
        // `.gitignore` applies even outside a git checkout (a copied tree, a tarball).
        .require_git(false)
        .filter_entry(|e| e.file_name() != "target" || e.depth() == 0)
        .build();
    for entry in walker {
        let entry = entry.with_context(|| format!("could not list `{}`", root.display()))?;
        // Symlinks are kept (not followed by the walk): reading one that dangles or loops is
        // reported per file instead of aborting the run.
        let is_file_like = entry
            .file_type()
            .is_some_and(|t| t.is_file() || t.is_symlink());
        if is_file_like && entry.path().extension().is_some_and(|e| e == "rs") {
            files.push(entry.into_path());
        }
    }
    files.sort();
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sources".to_string());
    let manifest_path = root.join("Cargo.toml");
    let target = synthetic_target(&name, &root);
    Ok(Workspace {
        root: root.clone(),
        root_manifest: None,
        unselected: Vec::new(),
        packages: vec![PackageSpec {
            id: format!("path+file://{}#{}@0.0.0", root.display(), name),
            name,
            manifest_path,
            has_manifest: false,
            dependencies: Vec::new(),
            targets: vec![target],
            sources: Sources::Files(files),
        }],
    })
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
            "src_path": src_path,
            "edition": "2021",
            "doc": false,
            "doctest": false,
            "test": false,
        }),
    }
}
