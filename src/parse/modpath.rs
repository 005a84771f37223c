//! Where `mod name;` lives, by rustc's rules (rustc_expand's `module.rs`).
//!
//! A file either owns its directory (a crate root, a `mod.rs`, or a file loaded through
//! `#[path]`): its children are `dir/name.rs`; or it does not (`a.rs` loaded as `mod a;`):
//! its children are `dir/a/name.rs`. Inline modules add a directory level each, and
//! `#[path]` on an inline module names that directory instead, relative to the enclosing
//! module's directory without the non-owning file's name (a rustc quirk kept for
//! compatibility).

use idem_lints::model::{FileModel, ModDecl};
use std::path::{Path, PathBuf};

/// The directory a file's child modules are looked up in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModDir {
    pub dir: PathBuf,
    /// For a non-owning file `a.rs`: `a`, the directory level its children add.
    pub relative: Option<String>,
}

impl ModDir {
    /// A file that owns its directory: a crate root, `mod.rs`, or a `#[path]` file.
    pub fn owning(file: &Path) -> ModDir {
        ModDir {
            dir: file.parent().map(Path::to_path_buf).unwrap_or_default(),
            relative: None,
        }
    }

    /// The directory children resolve in, with the non-owning level pushed.
    fn pushed(&self) -> PathBuf {
        match &self.relative {
            Some(r) => self.dir.join(r),
            None => self.dir.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The module's file, and the directory its own children resolve in.
    File { path: PathBuf, dir: ModDir },
    /// Neither candidate exists.
    Missing { candidates: Vec<PathBuf> },
}

/// Resolves the out-of-line `decl` found in `file`, whose children resolve in `dir`, asking
/// `present` whether a candidate file exists (in the order rustc tries them, stopping at the
/// first that does; a dangling symlink should count: reading it reports the problem).
pub fn resolve(
    dir: &ModDir,
    file: &FileModel,
    decl: &ModDecl,
    present: &mut dyn FnMut(&Path) -> bool,
) -> Resolved {
    let cur = enclosing_dir(dir, file, decl);
    if let Some(p) = &decl.path_attr {
        let path = cur.dir.join(p);
        return Resolved::File {
            dir: ModDir::owning(&path),
            path,
        };
    }
    let base = cur.pushed();
    let flat = base.join(format!("{}.rs", decl.name));
    let nested = base.join(&decl.name).join("mod.rs");
    if present(&flat) {
        Resolved::File {
            path: flat,
            dir: ModDir {
                dir: base,
                relative: Some(decl.name.clone()),
            },
        }
    } else if present(&nested) {
        Resolved::File {
            dir: ModDir::owning(&nested),
            path: nested,
        }
    } else if let Some(path) = decl
        .cfg_path_attrs
        .iter()
        .map(|p| cur.dir.join(p))
        .find(|p| present(p))
    {
        Resolved::File {
            dir: ModDir::owning(&path),
            path,
        }
    } else {
        Resolved::Missing {
            candidates: vec![flat, nested],
        }
    }
}

/// The `#[cfg_attr(.., path = "..")]` files of `decl` other than `resolved`: the linter does
/// not evaluate `cfg`, and rustc reads one of them whenever its predicate holds, whichever
/// default file exists, so each is read too.
pub fn cfg_alternatives(
    dir: &ModDir,
    file: &FileModel,
    decl: &ModDecl,
    resolved: Option<&Path>,
) -> Vec<PathBuf> {
    if decl.cfg_path_attrs.is_empty() {
        return Vec::new();
    }
    let cur = enclosing_dir(dir, file, decl);
    let mut out: Vec<PathBuf> = Vec::new();
    for p in &decl.cfg_path_attrs {
        let path = cur.dir.join(p);
        if Some(path.as_path()) != resolved && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// The directory of the inline modules around `decl` (`dir` when there are none).
fn enclosing_dir(dir: &ModDir, file: &FileModel, decl: &ModDecl) -> ModDir {
    let mut cur = dir.clone();
    for parent in inline_parents(file, decl) {
        cur = match &parent.path_attr {
            Some(p) => ModDir {
                dir: cur.dir.join(p),
                relative: None,
            },
            None => ModDir {
                dir: cur.pushed().join(&parent.name),
                relative: None,
            },
        };
    }
    cur
}

/// The inline modules of `file` around `decl`, outermost first.
pub fn inline_parents<'f>(file: &'f FileModel, decl: &ModDecl) -> Vec<&'f ModDecl> {
    let n = decl.inline_parents.len();
    let len = decl.module.len();
    (0..n)
        .filter_map(|i| {
            let prefix = decl.module.get(..len.checked_sub(n - i)?)?;
            file.mods.iter().find(|m| m.inline && *m.module == *prefix)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use idem_lints::model::{lower_file, FileId};

    fn decls(src: &str) -> FileModel {
        lower_file(src, FileId(0), vec!["crate".into()], false).expect("parses")
    }

    fn resolve_in(tmp: &Path, dir: ModDir, src: &str, name: &str) -> Resolved {
        let file = decls(src);
        let decl = file
            .mods
            .iter()
            .find(|m| m.name == name && !m.inline)
            .expect("declared");
        let r = resolve(&dir, &file, decl, &mut |p| p.symlink_metadata().is_ok());
        match r {
            Resolved::File { path, dir } => Resolved::File {
                path: path.strip_prefix(tmp).unwrap_or(&path).to_path_buf(),
                dir,
            },
            m => m,
        }
    }

    #[test]
    fn follows_rustc_rules() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let t = tmp.path();
        for f in [
            "src/a.rs",
            "src/b/mod.rs",
            "src/a/c.rs",
            "src/x/y/z.rs",
            "src/q/w.rs",
        ] {
            std::fs::create_dir_all(t.join(f).parent().expect("parent")).expect("mkdir");
            std::fs::write(t.join(f), "").expect("write");
        }
        let root = ModDir::owning(&t.join("src/lib.rs"));
        let path_of = |r: Resolved| match r {
            Resolved::File { path, .. } => path,
            Resolved::Missing { .. } => PathBuf::from("<missing>"),
        };
        assert_eq!(
            path_of(resolve_in(t, root.clone(), "mod a;", "a")),
            Path::new("src/a.rs")
        );
        assert_eq!(
            path_of(resolve_in(t, root.clone(), "mod b;", "b")),
            Path::new("src/b/mod.rs")
        );
        // A child of the non-owning `a.rs` lives in `a/`.
        let a = ModDir {
            dir: t.join("src"),
            relative: Some("a".into()),
        };
        assert_eq!(
            path_of(resolve_in(t, a.clone(), "mod c;", "c")),
            Path::new("src/a/c.rs")
        );
        // Inline modules add directories; `#[path]` inside them is relative to that directory.
        assert_eq!(
            path_of(resolve_in(
                t,
                root.clone(),
                "mod x { mod y { mod z; } }",
                "z"
            )),
            Path::new("src/x/y/z.rs")
        );
        assert_eq!(
            path_of(resolve_in(
                t,
                root.clone(),
                "mod x { #[path = \"y/z.rs\"] mod k; }",
                "k"
            )),
            Path::new("src/x/y/z.rs")
        );
        // `#[path]` on an inline module names its directory, skipping the file's own level.
        assert_eq!(
            path_of(resolve_in(t, a, "#[path = \"q\"] mod m { mod w; }", "w")),
            Path::new("src/q/w.rs")
        );
        assert!(matches!(
            resolve_in(t, root, "mod nope;", "nope"),
            Resolved::Missing { .. }
        ));
    }
}
