//! Name resolution without types: `use` trees (renames, globs, `self`/`super`/`crate`), the
//! crate's own modules and items, and the package's library name from its other targets.
//!
//! A path resolves to a [`DefPath`]: an item of one of the package's crates
//! ([`Krate::Local`]) or a path into an external crate ([`Krate::Extern`]). External paths are
//! canonical only as far as the source says (`chrono::offset::Utc` stays as written), so
//! catalog patterns match on the crate and the last segments ([`DefPath::matches`]).

use crate::model::ir::{Path, Type};
use crate::model::{FileModel, FnDef, Package};
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Krate {
    /// A crate of this package: the index of its target in [`Package::targets`].
    Local(usize),
    /// An external crate by name (`uuid`, `std`), or an unresolved first segment.
    Extern(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DefPath {
    pub krate: Krate,
    pub segments: Vec<String>,
}

impl DefPath {
    pub fn last(&self) -> &str {
        self.segments.last().map(String::as_str).unwrap_or("")
    }

    pub fn is_local(&self) -> bool {
        matches!(self.krate, Krate::Local(_))
    }

    /// The external crate's name.
    pub fn crate_name(&self) -> Option<&str> {
        match &self.krate {
            Krate::Extern(name) => Some(name),
            Krate::Local(_) => None,
        }
    }

    /// Whether this path is `pattern` (`"chrono::Utc::now"`): same crate, and the pattern's
    /// other segments end this path. `std`, `core` and `alloc` are one crate here.
    pub fn matches(&self, pattern: &str) -> bool {
        let mut parts = pattern.split("::");
        let Some(krate) = parts.next() else {
            return false;
        };
        let tail: Vec<&str> = parts.collect();
        let Some(own) = self.crate_name() else {
            return false;
        };
        let same_crate = own == krate || (is_std(own) && is_std(krate));
        same_crate
            && self.segments.len() >= tail.len()
            && self.segments[self.segments.len() - tail.len()..]
                .iter()
                .zip(&tail)
                .all(|(a, b)| a == b)
    }

    /// `a::b::c` for messages.
    pub fn display(&self) -> String {
        let root = match &self.krate {
            Krate::Local(_) => "crate".to_owned(),
            Krate::Extern(name) => name.clone(),
        };
        std::iter::once(root)
            .chain(self.segments.iter().cloned())
            .collect::<Vec<_>>()
            .join("::")
    }

    /// The path of item `name` inside this one (`crate::db::Repo` → `crate::db::Repo::get`).
    pub fn child(&self, name: &str) -> DefPath {
        let mut segments = self.segments.clone();
        segments.push(name.to_owned());
        DefPath {
            krate: self.krate.clone(),
            segments,
        }
    }
}

fn is_std(name: &str) -> bool {
    matches!(name, "std" | "core" | "alloc")
}

/// Names that well-known glob imports bring into scope (`use chrono::prelude::*`), so a glob
/// of an external crate can still resolve the names our catalogs care about.
const KNOWN_GLOB_EXPORTS: &[(&str, &[&str])] = &[
    (
        "chrono::prelude",
        &["Utc", "Local", "DateTime", "NaiveDateTime", "TimeZone"],
    ),
    (
        "chrono",
        &["Utc", "Local", "DateTime", "NaiveDateTime", "TimeZone"],
    ),
    (
        "rand::prelude",
        &[
            "thread_rng",
            "random",
            "rng",
            "Rng",
            "RngCore",
            "SeedableRng",
        ],
    ),
    ("rand", &["thread_rng", "random", "rng", "Rng", "RngCore"]),
    ("uuid", &["Uuid"]),
    ("ulid", &["Ulid"]),
    (
        "std::time",
        &["SystemTime", "Instant", "UNIX_EPOCH", "Duration"],
    ),
    ("time", &["OffsetDateTime", "PrimitiveDateTime"]),
    (
        "redis",
        &["Commands", "AsyncCommands", "cmd", "pipe", "Client"],
    ),
    (
        "sqlx",
        &[
            "query",
            "query_as",
            "query_scalar",
            "Postgres",
            "PgPool",
            "Pool",
            "Executor",
        ],
    ),
];

/// One module's scope: what its `use`s and items bring into scope.
#[derive(Debug, Default)]
struct Scope {
    uses: HashMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    /// Names of items and child modules defined in the module.
    items: HashSet<String>,
}

/// The package's scopes and definitions, built once per package.
#[derive(Debug)]
pub struct Resolver {
    scopes: HashMap<(usize, Vec<String>), Scope>,
    /// The library target's index and crate name, which other targets import by name.
    lib: Option<(usize, String)>,
}

/// How deep `use` chains are followed (`use a::b; use b::c as d;` ...) before giving up.
const MAX_USE_CHAIN: usize = 16;

impl Resolver {
    pub fn new(package: &Package) -> Resolver {
        let mut scopes: HashMap<(usize, Vec<String>), Scope> = HashMap::new();
        for file in &package.files {
            Self::add_file(&mut scopes, file);
        }
        let lib = package
            .targets
            .iter()
            .position(|t| {
                t.kind
                    .iter()
                    .any(|k| k.contains("lib") || k == "proc-macro")
            })
            .map(|i| (i, package.targets[i].name.replace('-', "_")));
        Resolver { scopes, lib }
    }

    fn add_file(scopes: &mut HashMap<(usize, Vec<String>), Scope>, file: &FileModel) {
        let t = file.target;
        scopes.entry((t, file.module.clone())).or_default();
        for u in &file.uses {
            let scope = scopes.entry((t, u.module.clone())).or_default();
            if u.glob {
                scope.globs.push(u.path.clone());
            } else {
                scope.uses.insert(u.alias.clone(), u.path.clone());
            }
        }
        for m in &file.mods {
            let parent = &m.module[..m.module.len().saturating_sub(1)];
            scopes
                .entry((t, parent.to_vec()))
                .or_default()
                .items
                .insert(m.name.clone());
            scopes.entry((t, m.module.clone())).or_default();
        }
        for f in file.fns.iter().filter(|f| f.self_ty.is_none()) {
            scopes
                .entry((t, f.module.clone()))
                .or_default()
                .items
                .insert(f.name.clone());
        }
        for s in &file.structs {
            scopes
                .entry((t, s.module.clone()))
                .or_default()
                .items
                .insert(s.name.clone());
        }
    }

    /// Resolves `path` as written in `module` of target `target`. `self_ty` is the `Self`
    /// of the enclosing impl, if any.
    pub fn resolve(
        &self,
        target: usize,
        module: &[String],
        path: &Path,
        self_ty: Option<&Type>,
    ) -> DefPath {
        self.resolve_segments(
            target,
            module,
            &path.segments,
            path.leading_colon,
            self_ty,
            0,
        )
    }

    /// Resolves a path given as segments (`["Uuid", "new_v4"]`).
    pub fn resolve_strs(&self, target: usize, module: &[String], segments: &[String]) -> DefPath {
        self.resolve_segments(target, module, segments, false, None, 0)
    }

    /// The type a [`Type`] names, behind references and smart pointers.
    pub fn resolve_type(
        &self,
        target: usize,
        module: &[String],
        ty: &Type,
        self_ty: Option<&Type>,
    ) -> Option<DefPath> {
        ty.core_path()
            .map(|p| self.resolve(target, module, p, self_ty))
    }

    fn resolve_segments(
        &self,
        target: usize,
        module: &[String],
        segs: &[String],
        absolute: bool,
        self_ty: Option<&Type>,
        depth: usize,
    ) -> DefPath {
        let Some(first) = segs.first() else {
            return DefPath {
                krate: Krate::Local(target),
                segments: module[1.min(module.len())..].to_vec(),
            };
        };
        let rest = &segs[1..];
        if absolute || depth > MAX_USE_CHAIN {
            return self.crate_path(target, first, rest);
        }
        match first.as_str() {
            "crate" => return local(target, rest),
            "self" => return local(target, &[&module[1.min(module.len())..], rest].concat()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = segs;
                while rest.first().map(String::as_str) == Some("super") {
                    if base.len() > 1 {
                        base.pop();
                    }
                    rest = &rest[1..];
                }
                return local(target, &[&base[1.min(base.len())..], rest].concat());
            }
            "Self" => {
                if let Some(p) = self_ty.and_then(Type::core_path) {
                    let mut base = self.resolve_segments(
                        target,
                        module,
                        &p.segments,
                        p.leading_colon,
                        None,
                        depth + 1,
                    );
                    base.segments.extend(rest.iter().cloned());
                    return base;
                }
            }
            _ => {}
        }
        if let Some(scope) = self.scopes.get(&(target, module.to_vec())) {
            if let Some(full) = scope.uses.get(first) {
                // A `use` path is relative to the module it is written in (2018 paths).
                let joined: Vec<String> = full.iter().chain(rest).cloned().collect();
                return self.resolve_use_path(target, module, &joined, depth + 1);
            }
            if scope.items.contains(first) {
                return local(target, &[&module[1.min(module.len())..], segs].concat());
            }
            for glob in &scope.globs {
                if let Some(found) = self.resolve_through_glob(target, module, glob, segs, depth) {
                    return found;
                }
            }
        }
        self.crate_path(target, first, rest)
    }

    /// A path from a `use` declaration: `crate::`, `self::`, `super::`, a local module, or an
    /// external crate.
    fn resolve_use_path(
        &self,
        target: usize,
        module: &[String],
        segs: &[String],
        depth: usize,
    ) -> DefPath {
        match segs.first().map(String::as_str) {
            Some("crate" | "self" | "super") => {
                self.resolve_segments(target, module, segs, false, None, depth)
            }
            Some(first) => {
                let local_item = self
                    .scopes
                    .get(&(target, module.to_vec()))
                    .is_some_and(|s| s.items.contains(first));
                if local_item {
                    local(target, &[&module[1.min(module.len())..], segs].concat())
                } else {
                    self.crate_path(target, first, &segs[1..])
                }
            }
            None => local(target, &[]),
        }
    }

    fn resolve_through_glob(
        &self,
        target: usize,
        module: &[String],
        glob: &[String],
        segs: &[String],
        depth: usize,
    ) -> Option<DefPath> {
        let base = self.resolve_use_path(target, module, glob, depth + 1);
        let first = &segs[0];
        match &base.krate {
            Krate::Local(t) => {
                let key: Vec<String> = std::iter::once("crate".to_owned())
                    .chain(base.segments.iter().cloned())
                    .collect();
                let scope = self.scopes.get(&(*t, key))?;
                if scope.items.contains(first) || scope.uses.contains_key(first) {
                    let mut p = base;
                    p.segments.extend(segs.iter().cloned());
                    return Some(p);
                }
                None
            }
            Krate::Extern(name) => {
                let glob_path = std::iter::once(name.clone())
                    .chain(base.segments.iter().cloned())
                    .collect::<Vec<_>>()
                    .join("::");
                let exported = KNOWN_GLOB_EXPORTS
                    .iter()
                    .any(|(g, names)| *g == glob_path && names.contains(&first.as_str()));
                exported.then(|| {
                    let mut p = base.clone();
                    p.segments.extend(segs.iter().cloned());
                    p
                })
            }
        }
    }

    /// `first::rest` where `first` names a crate: the package's own library, or external.
    fn crate_path(&self, target: usize, first: &str, rest: &[String]) -> DefPath {
        match &self.lib {
            Some((lib_target, name)) if name == first && *lib_target != target => {
                local(*lib_target, rest)
            }
            _ => DefPath {
                krate: Krate::Extern(first.to_owned()),
                segments: rest.to_vec(),
            },
        }
    }

    /// Whether a `use` of `module` (in target `target`) imports anything from the external
    /// crate `krate`, renamed or globbed: `use aws_sdk_s3 as s3;`, `use aws_sdk_s3::types::*;`.
    pub fn imports_from(&self, target: usize, module: &[String], krate: &str) -> bool {
        let Some(scope) = self.scopes.get(&(target, module.to_vec())) else {
            return false;
        };
        scope
            .uses
            .values()
            .chain(&scope.globs)
            .any(|path| self.resolve_use_path(target, module, path, 0).crate_name() == Some(krate))
    }

    /// Follows re-exports of the crate's own modules: `crate::keys::new_key` where `keys`
    /// has `pub use fresh::*` (or `pub use fresh::new_key`) is `crate::keys::fresh::new_key`.
    /// Paths that are not re-exported are returned as they are.
    pub fn canonical(&self, path: &DefPath) -> DefPath {
        let mut cur = path.clone();
        for _ in 0..MAX_USE_CHAIN {
            let Krate::Local(t) = cur.krate else {
                return cur;
            };
            let Some((name, parent)) = cur.segments.split_last() else {
                return cur;
            };
            let module: Vec<String> = std::iter::once("crate".to_owned())
                .chain(parent.iter().cloned())
                .collect();
            let Some(scope) = self.scopes.get(&(t, module.clone())) else {
                return cur;
            };
            if scope.items.contains(name) {
                return cur;
            }
            let next = if let Some(full) = scope.uses.get(name) {
                Some(self.resolve_use_path(t, &module, full, 0))
            } else {
                scope.globs.iter().find_map(|g| {
                    self.resolve_through_glob(t, &module, g, std::slice::from_ref(name), 0)
                })
            };
            match next {
                Some(n) if n != cur => cur = n,
                _ => return cur,
            }
        }
        cur
    }

    /// The path of a function's definition: `crate::a::f`, or `crate::a::S::f` for methods
    /// (the `Self` type resolved), or `crate::a::Trait::f` for trait declarations.
    pub fn fn_path(&self, file: &FileModel, f: &FnDef) -> DefPath {
        let module = &f.module;
        match f
            .self_ty
            .as_ref()
            .and_then(|t| self.resolve_type(file.target, module, t, None))
        {
            Some(ty) => ty.child(&f.name),
            None => local(
                file.target,
                &[
                    &module[1.min(module.len())..],
                    std::slice::from_ref(&f.name),
                ]
                .concat(),
            ),
        }
    }
}

fn local(target: usize, segs: &[String]) -> DefPath {
    DefPath {
        krate: Krate::Local(target),
        segments: segs.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{lower_file, FileId, TargetInfo};

    fn package(files: &[(&str, &[&str])]) -> Package {
        let files = files
            .iter()
            .enumerate()
            .map(|(i, (src, module))| {
                lower_file(
                    src,
                    FileId(i as u32),
                    module.iter().map(|s| s.to_string()).collect(),
                    false,
                )
                .unwrap()
            })
            .collect();
        Package {
            name: "app".into(),
            dependencies: vec!["uuid".into(), "chrono".into()],
            targets: vec![TargetInfo {
                name: "app".into(),
                kind: vec!["lib".into()],
                root: "src/lib.rs".into(),
            }],
            files,
        }
    }

    fn path(s: &str) -> Path {
        Path {
            segments: s.split("::").map(String::from).collect(),
            leading_colon: false,
            span: Default::default(),
        }
    }

    #[test]
    fn uses_renames_and_globs_resolve_to_the_same_function() {
        let p = package(&[(
            "use uuid::Uuid as Id; use chrono::prelude::*; mod keys { pub fn make() {} } use keys::make;",
            &["crate"],
        )]);
        let r = Resolver::new(&p);
        let m = vec!["crate".to_string()];
        assert!(r
            .resolve(0, &m, &path("Id::new_v4"), None)
            .matches("uuid::Uuid::new_v4"));
        assert!(r
            .resolve(0, &m, &path("uuid::Uuid::new_v4"), None)
            .matches("uuid::Uuid::new_v4"));
        assert!(r
            .resolve(0, &m, &path("Utc::now"), None)
            .matches("chrono::Utc::now"));
        assert_eq!(
            r.resolve(0, &m, &path("make"), None),
            local(0, &["keys".into(), "make".into()])
        );
        assert!(!r
            .resolve(0, &m, &path("Uuid::new_v4"), None)
            .matches("uuid::Uuid::new_v4"));
    }

    #[test]
    fn super_self_and_crate_paths_resolve_across_files() {
        let p = package(&[
            ("mod db; mod handlers;", &["crate"]),
            ("pub fn is_processed() {}", &["crate", "db"]),
            (
                "use super::db; fn h() { db::is_processed(); }",
                &["crate", "handlers"],
            ),
        ]);
        let r = Resolver::new(&p);
        let m: Vec<String> = vec!["crate".into(), "handlers".into()];
        let want = local(0, &["db".into(), "is_processed".into()]);
        assert_eq!(r.resolve(0, &m, &path("db::is_processed"), None), want);
        assert_eq!(
            r.resolve(0, &m, &path("super::db::is_processed"), None),
            want
        );
        assert_eq!(
            r.resolve(0, &m, &path("crate::db::is_processed"), None),
            want
        );
    }

    #[test]
    fn re_exports_lead_to_the_definition() {
        let p = package(&[
            ("mod keys;", &["crate"]),
            (
                "mod fresh; mod named; pub use fresh::*; pub use named::make as build;",
                &["crate", "keys"],
            ),
            ("pub fn new_key() {}", &["crate", "keys", "fresh"]),
            ("pub fn make() {}", &["crate", "keys", "named"]),
        ]);
        let r = Resolver::new(&p);
        let m = vec!["crate".to_string()];
        let glob = r.resolve(0, &m, &path("keys::new_key"), None);
        assert_eq!(
            r.canonical(&glob),
            local(0, &["keys".into(), "fresh".into(), "new_key".into()])
        );
        let renamed = r.resolve(0, &m, &path("crate::keys::build"), None);
        assert_eq!(
            r.canonical(&renamed),
            local(0, &["keys".into(), "named".into(), "make".into()])
        );
        let ext = r.resolve(0, &m, &path("uuid::Uuid::new_v4"), None);
        assert_eq!(r.canonical(&ext), ext);
    }
}
