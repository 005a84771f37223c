//! Name resolution without types: `use` trees (renames, globs, `self`/`super`/`crate`), the
//! crate's own modules and items, and the package's library name from its other targets.
//!
//! A path resolves to a [`DefPath`]: an item of one of the package's crates
//! ([`Krate::Local`]) or a path into an external crate ([`Krate::Extern`]). External paths are
//! canonical only as far as the source says (`chrono::offset::Utc` stays as written), so
//! catalog patterns match on the crate and the last segments ([`DefPath::matches`]).

use super::{PathMap, PathSet, Threads};
use crate::model::ir::{Path, Type};
use crate::model::{FileModel, FnDef, Package, UseDecl};
pub use crate::names::{DefPath, Krate};
use rayon::prelude::*;
use std::sync::{Mutex, MutexGuard};

/// The name an item imported under another name has where it is defined: `Cfg` is
/// `ClientConfig` in a file with `use rdkafka::ClientConfig as Cfg;`; any other name is
/// itself. For checks that match items by their written names (`ClientConfig::new`), so a
/// renamed import reads as the item it names.
pub fn original_name<'a>(file: &'a FileModel, name: &'a str) -> &'a str {
    file.uses
        .iter()
        .find(|u| !u.glob && u.alias == name)
        .and_then(|u| u.path.last())
        .map_or(name, String::as_str)
}

/// Whether `path`, written in `file`, ends with `suffix` once its first segment is read
/// through the file's renamed imports ([`original_name`]).
pub fn path_ends_with_in(file: &FileModel, path: &Path, suffix: &[&str]) -> bool {
    let n = path.segments.len();
    n >= suffix.len()
        && path.segments[n - suffix.len()..]
            .iter()
            .enumerate()
            .zip(suffix)
            .all(|((i, seg), want)| {
                let seg = match i + (n - suffix.len()) {
                    0 => original_name(file, seg),
                    _ => seg,
                };
                seg == *want
            })
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
    uses: PathMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    /// What each glob names, resolved once when the resolver is built (`None` before).
    glob_bases: Option<Vec<GlobBase>>,
    /// Names of items and child modules defined in the module.
    items: PathSet<String>,
    /// Paths already resolved in this module (by [`Resolver::resolve`] and
    /// [`Resolver::resolve_strs`]): every fn of a module resolves the same few names again
    /// and again, and one resolution can follow long `use` and glob chains.
    resolved: Mutex<PathMap<Vec<String>, DefPath>>,
    /// What the `Self` of a `Self::..` path names, by the impl type's path as written: an
    /// impl's methods all start from it.
    self_bases: Mutex<PathMap<Vec<String>, DefPath>>,
}

/// The module or external path a glob import brings the names of.
#[derive(Debug, Clone)]
enum GlobBase {
    /// A module of the package: its target and module path (`["crate", "a"]`).
    Local(usize, Vec<String>),
    /// An external path (`chrono::prelude`), with the names it is known to export.
    Extern(DefPath, &'static [&'static str]),
    /// An external path whose exports are not known.
    Unknown,
}

/// Module `module` of target `target` with its scope looked up once, for a caller that
/// resolves many paths written in one module (a fn's walk): [`Resolver::resolve_at`] gives
/// what [`Resolver::resolve`] gives there without hashing the module path again.
#[derive(Debug, Clone, Copy)]
pub struct ModuleScope<'r> {
    target: usize,
    module: &'r [String],
    scope: Option<&'r Scope>,
}

/// Where [`Resolver::resolve_segments_at`] resolves: a module whose scope was looked up,
/// or one whose scope is looked up only if needed.
#[derive(Clone, Copy)]
enum Lazy<'r> {
    Known(ModuleScope<'r>),
    Unknown(usize, &'r [String]),
}

impl<'r> Lazy<'r> {
    fn place(&self) -> (usize, &'r [String]) {
        match *self {
            Lazy::Known(at) => (at.target, at.module),
            Lazy::Unknown(target, module) => (target, module),
        }
    }

    fn scope(&self, resolver: &'r Resolver) -> Option<&'r Scope> {
        match *self {
            Lazy::Known(at) => at.scope,
            Lazy::Unknown(target, module) => resolver.scope(target, module),
        }
    }
}

/// The package's scopes and definitions, built once per package.
#[derive(Debug)]
pub struct Resolver {
    /// Per target, each module's scope (looked up by `&[String]` without allocating).
    scopes: Vec<PathMap<Vec<String>, Scope>>,
    /// The library target's index and crate name, which other targets import by name.
    lib: Option<(usize, String)>,
    /// Linked libraries of other workspace members ([`TargetInfo::linked`]): target index and
    /// the crate name the package's code calls them by.
    ///
    /// [`TargetInfo::linked`]: crate::model::TargetInfo::linked
    linked: Vec<(usize, String)>,
}

/// How deep `use` chains are followed (`use a::b; use b::c as d;` ...) before giving up.
const MAX_USE_CHAIN: usize = 16;

impl Resolver {
    pub fn new(package: &Package) -> Resolver {
        Resolver::build(package, Threads::Pool)
    }

    /// Frees the scopes on every core of the pool (see [`super::Analysis::drop_on_pool`]).
    pub(crate) fn drop_on_pool(self) {
        for scopes in self.scopes {
            let scopes: Vec<(Vec<String>, Scope)> = scopes.into_iter().collect();
            scopes.into_par_iter().for_each(drop);
        }
    }

    /// [`Resolver::new`] on `threads`.
    pub fn build(package: &Package, threads: Threads) -> Resolver {
        let targets = package
            .files
            .iter()
            .map(|f| f.target + 1)
            .chain([package.targets.len()])
            .max()
            .unwrap_or(0);
        // About one module per file: sized once rather than grown while merging.
        let mut scopes: Vec<PathMap<Vec<String>, Scope>> = (0..targets)
            .map(|t| {
                let files = package.files.iter().filter(|f| f.target == t).count();
                PathMap::with_capacity_and_hasher(files, Default::default())
            })
            .collect();
        // What each file adds, copied out on every core; then merged in file order, which
        // moves each scope in and copies nothing (a later file's `use` of a name still
        // replaces an earlier one's).
        let added: Vec<Vec<(&[String], Scope)>> =
            threads.map(&package.files, |_, f| Self::file_scopes(f));
        for (file, added) in package.files.iter().zip(added) {
            for (module, part) in added {
                merge_scope(&mut scopes[file.target], module, part);
            }
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
        let linked = package
            .targets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_linked())
            .map(|(i, t)| (i, t.name.replace('-', "_")))
            .collect();
        let mut resolver = Resolver {
            scopes,
            lib,
            linked,
        };
        let bases: Vec<Vec<(Vec<String>, Vec<GlobBase>)>> = resolver
            .scopes
            .iter()
            .enumerate()
            .map(|(t, scopes)| {
                // Each module's glob bases on every core: the resolver is only read here.
                let with_globs: Vec<(&Vec<String>, &Scope)> =
                    scopes.iter().filter(|(_, s)| !s.globs.is_empty()).collect();
                threads.map(&with_globs, |_, (m, s)| {
                    let bases = s
                        .globs
                        .iter()
                        .map(|g| resolver.glob_base(t, m, g, 0))
                        .collect();
                    (Vec::clone(m), bases)
                })
            })
            .collect();
        for (t, per_target) in bases.into_iter().enumerate() {
            for (m, b) in per_target {
                if let Some(scope) = resolver.scopes[t].get_mut(&m) {
                    scope.glob_bases = Some(b);
                }
            }
        }
        resolver
    }

    fn glob_base(
        &self,
        target: usize,
        module: &[String],
        glob: &[String],
        depth: usize,
    ) -> GlobBase {
        let base = self.resolve_use_path(target, module, glob, depth + 1);
        match &base.krate {
            Krate::Local(t) => {
                let module = std::iter::once("crate".to_owned())
                    .chain(base.segments.iter().cloned())
                    .collect();
                GlobBase::Local(*t, module)
            }
            Krate::Extern(name) => {
                let glob_path = std::iter::once(&**name)
                    .chain(base.segments.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join("::");
                match KNOWN_GLOB_EXPORTS.iter().find(|(g, _)| *g == glob_path) {
                    Some((_, names)) => GlobBase::Extern(base, names),
                    None => GlobBase::Unknown,
                }
            }
        }
    }

    /// The scope of `module` in `target`.
    fn scope(&self, target: usize, module: &[String]) -> Option<&Scope> {
        self.scopes.get(target)?.get(module)
    }

    /// The scope parts `file` adds, one per module it adds to, in the order of its entries.
    fn file_scopes(file: &FileModel) -> Vec<(&[String], Scope)> {
        let mut entries: Vec<(&[String], Entry<'_>)> = Vec::new();
        entries.extend(file.uses.iter().map(|u| (&u.module[..], Entry::Use(u))));
        for m in &file.mods {
            let parent = &m.module[..m.module.len().saturating_sub(1)];
            entries.push((parent, Entry::Item(&m.name)));
            entries.push((&m.module, Entry::Module));
        }
        let fns = file.fns.iter().filter(|f| f.self_ty.is_none());
        let fns = fns.map(|f| (&f.module[..], Entry::Item(&f.name)));
        let structs = file
            .structs
            .iter()
            .map(|s| (&s.module[..], Entry::Item(&s.name)));
        let decls = file
            .decls
            .iter()
            .map(|d| (&d.module[..], Entry::Item(&d.name)));
        entries.extend(fns.chain(structs).chain(decls));
        // Each module's entries keep their order (a later `use` of a name replaces one
        // before). Most are in the file's own module, and a module's entries come together:
        // the part of the last entry is tried before the lookup (a file of many inline
        // modules stays linear).
        let own: &[String] = &file.module;
        let mut parts: Vec<(&[String], Scope)> = vec![(own, Scope::default())];
        let mut part_of: PathMap<&[String], usize> = PathMap::default();
        part_of.insert(own, 0);
        let mut last = 0;
        for (module, entry) in entries {
            if parts[last].0 != module {
                last = *part_of.entry(module).or_insert_with(|| {
                    parts.push((module, Scope::default()));
                    parts.len() - 1
                });
            }
            entry.add_to(&mut parts[last].1);
        }
        parts
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
        self.resolve_at(self.module_scope(target, module), path, self_ty)
    }

    /// `module` of `target`, for [`Self::resolve_at`] and [`Self::resolve_type_at`].
    pub fn module_scope<'r>(&'r self, target: usize, module: &'r [String]) -> ModuleScope<'r> {
        ModuleScope {
            target,
            module,
            scope: self.scope(target, module),
        }
    }

    /// [`Self::resolve`] in a module looked up before.
    pub fn resolve_at(&self, at: ModuleScope<'_>, path: &Path, self_ty: Option<&Type>) -> DefPath {
        if path.leading_colon {
            return self.resolve_segments(at.target, at.module, &path.segments, true, self_ty, 0);
        }
        self.resolve_strs_in(at, &path.segments, self_ty)
    }

    /// Resolves a path given as segments (`["Uuid", "new_v4"]`).
    pub fn resolve_strs(&self, target: usize, module: &[String], segments: &[String]) -> DefPath {
        self.resolve_strs_in(self.module_scope(target, module), segments, None)
    }

    /// A relative path, memoized per module; one starting with `Self` (whose meaning depends
    /// on the impl, not the module) by the `Self` type's path.
    fn resolve_strs_in(
        &self,
        at: ModuleScope<'_>,
        segs: &[String],
        self_ty: Option<&Type>,
    ) -> DefPath {
        let (target, module) = (at.target, at.module);
        let memo = match (segs.first(), at.scope) {
            (Some(first), Some(scope)) if first != "Self" => &scope.resolved,
            // `Self::..`: the `Self` type as `resolve_segments` resolves it, memoized by the
            // type's path (the rest of the path is appended to it there too).
            (Some(_), Some(scope)) => match self_ty.and_then(Type::core_path) {
                Some(p) if !p.leading_colon => {
                    let known = lock(&scope.self_bases).get(&p.segments[..]).cloned();
                    let base = known.unwrap_or_else(|| {
                        let base =
                            self.resolve_segments(target, module, &p.segments, false, None, 1);
                        lock(&scope.self_bases).insert(p.segments.clone(), base.clone());
                        base
                    });
                    return base.extended(&segs[1..]);
                }
                _ => return self.resolve_segments(target, module, segs, false, self_ty, 0),
            },
            _ => return self.resolve_segments(target, module, segs, false, self_ty, 0),
        };
        let lock = || lock(memo);
        if let Some(found) = lock().get(segs) {
            return found.clone();
        }
        let found = self.resolve_segments_at(Lazy::Known(at), segs, false, self_ty, 0);
        lock().insert(segs.to_vec(), found.clone());
        found
    }

    /// The type a [`Type`] names, behind references and smart pointers.
    pub fn resolve_type(
        &self,
        target: usize,
        module: &[String],
        ty: &Type,
        self_ty: Option<&Type>,
    ) -> Option<DefPath> {
        self.resolve_type_at(self.module_scope(target, module), ty, self_ty)
    }

    /// [`Self::resolve_type`] in a module looked up before.
    pub fn resolve_type_at(
        &self,
        at: ModuleScope<'_>,
        ty: &Type,
        self_ty: Option<&Type>,
    ) -> Option<DefPath> {
        ty.core_path().map(|p| self.resolve_at(at, p, self_ty))
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
        let at = Lazy::Unknown(target, module);
        self.resolve_segments_at(at, segs, absolute, self_ty, depth)
    }

    /// [`Self::resolve_segments`] with the module's scope looked up already, or looked up
    /// here only when the path needs it.
    fn resolve_segments_at(
        &self,
        at: Lazy<'_>,
        segs: &[String],
        absolute: bool,
        self_ty: Option<&Type>,
        depth: usize,
    ) -> DefPath {
        let (target, module) = at.place();
        let Some(first) = segs.first() else {
            return DefPath {
                krate: Krate::Local(target),
                segments: module[1.min(module.len())..].into(),
            };
        };
        let rest = &segs[1..];
        if absolute || depth > MAX_USE_CHAIN {
            return self.crate_path(target, first, rest, depth);
        }
        match first.as_str() {
            "crate" => return self.local_path(target, rest, depth),
            "self" => {
                let segs = [&module[1.min(module.len())..], rest].concat();
                return self.local_path(target, &segs, depth);
            }
            "super" => {
                let mut base = module.to_vec();
                let mut rest = segs;
                while rest.first().map(String::as_str) == Some("super") {
                    if base.len() > 1 {
                        base.pop();
                    }
                    rest = &rest[1..];
                }
                let segs = [&base[1.min(base.len())..], rest].concat();
                return self.local_path(target, &segs, depth);
            }
            "Self" => {
                if let Some(p) = self_ty.and_then(Type::core_path) {
                    let base = self.resolve_segments(
                        target,
                        module,
                        &p.segments,
                        p.leading_colon,
                        None,
                        depth + 1,
                    );
                    return base.extended(rest);
                }
            }
            _ => {}
        }
        if let Some(scope) = at.scope(self) {
            if let Some(full) = scope.uses.get(first) {
                // A `use` path is relative to the module it is written in (2018 paths).
                return self.resolve_use_then(target, module, scope, full, rest, depth + 1);
            }
            if scope.items.contains(first) {
                let segs = [&module[1.min(module.len())..], segs].concat();
                return self.local_path(target, &segs, depth);
            }
            if let Some(found) = self.through_globs(target, module, scope, segs, depth) {
                return found;
            }
        }
        self.crate_path(target, first, rest, depth)
    }

    /// `crate::segs` of `target`, followed through re-exports: when a module on the way
    /// names the next segment by a `use` (`pub use send::do_send;` in the crate root), the
    /// path continues from what that `use` names.
    fn local_path(&self, target: usize, segs: &[String], depth: usize) -> DefPath {
        let mut module = Vec::with_capacity(segs.len() + 1);
        module.push("crate".to_owned());
        for (i, seg) in segs.iter().enumerate() {
            let Some(scope) = self.scope(target, &module) else {
                break;
            };
            if scope.items.contains(seg) {
                module.push(seg.clone());
                continue;
            }
            if depth < MAX_USE_CHAIN {
                if let Some(full) = scope.uses.get(seg) {
                    let rest = &segs[i + 1..];
                    return self.resolve_use_then(target, &module, scope, full, rest, depth + 1);
                }
                let found = self.through_globs(target, &module, scope, &segs[i..], depth + 1);
                if let Some(found) = found {
                    return found;
                }
            }
            break;
        }
        local(target, segs)
    }

    /// [`Self::resolve_use_path`] of `head` followed by `tail` (a `use` path and the rest of
    /// the path written with it) in `module`, whose scope is `scope`: the two are joined
    /// into one path only when it leads into the package; an external one is made from
    /// them directly.
    fn resolve_use_then(
        &self,
        target: usize,
        module: &[String],
        scope: &Scope,
        head: &[String],
        tail: &[String],
        depth: usize,
    ) -> DefPath {
        match head.first().map(String::as_str) {
            Some(first)
                if !matches!(first, "crate" | "self" | "super")
                    && !scope.items.contains(first)
                    && self.package_crate(target, first).is_none() =>
            {
                let rest: Vec<String> = head[1..].iter().chain(tail).cloned().collect();
                extern_path(first, &rest)
            }
            _ => {
                let joined: Vec<String> = head.iter().chain(tail).cloned().collect();
                self.resolve_use_path(target, module, &joined, depth)
            }
        }
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
                    .scope(target, module)
                    .is_some_and(|s| s.items.contains(first));
                if local_item {
                    let segs = [&module[1.min(module.len())..], segs].concat();
                    self.local_path(target, &segs, depth)
                } else {
                    self.crate_path(target, first, &segs[1..], depth)
                }
            }
            None => local(target, &[]),
        }
    }

    /// `segs` through one glob import of a scope.
    fn through_glob(&self, base: &GlobBase, segs: &[String], depth: usize) -> Option<DefPath> {
        let first = segs.first()?;
        match base {
            GlobBase::Local(t, module) => {
                let scope = self.scope(*t, module)?;
                if scope.items.contains(first) || scope.uses.contains_key(first) {
                    let segs: Vec<String> = module[1..].iter().chain(segs).cloned().collect();
                    return Some(self.local_path(*t, &segs, depth + 1));
                }
                None
            }
            GlobBase::Extern(path, names) => {
                names.contains(&first.as_str()).then(|| path.extended(segs))
            }
            GlobBase::Unknown => None,
        }
    }

    /// `segs` through the glob imports of `scope` (resolved now while the resolver is being
    /// built, once built from the bases).
    fn through_globs(
        &self,
        target: usize,
        module: &[String],
        scope: &Scope,
        segs: &[String],
        depth: usize,
    ) -> Option<DefPath> {
        match &scope.glob_bases {
            Some(bases) => bases.iter().find_map(|b| self.through_glob(b, segs, depth)),
            None if depth < MAX_USE_CHAIN => scope.globs.iter().find_map(|g| {
                let base = self.glob_base(target, module, g, depth + 1);
                self.through_glob(&base, segs, depth + 1)
            }),
            None => None,
        }
    }

    /// The target of the package's crate that `first` names from `target`: the library or a
    /// linked member's library, when it is another target; `None` for an external crate.
    fn package_crate(&self, target: usize, first: &str) -> Option<usize> {
        match &self.lib {
            Some((lib, name)) if name == first && *lib != target => Some(*lib),
            _ => self
                .linked
                .iter()
                .find(|(_, name)| name == first)
                .map(|(linked, _)| *linked)
                .filter(|linked| *linked != target),
        }
    }

    /// `first::rest` where `first` names a crate: the package's own library, a linked
    /// member's library, or external.
    fn crate_path(&self, target: usize, first: &str, rest: &[String], depth: usize) -> DefPath {
        match self.package_crate(target, first) {
            Some(krate) => self.local_path(krate, rest, depth + 1),
            None => extern_path(first, rest),
        }
    }

    /// Whether a `use` of `module` (in target `target`) imports anything from the external
    /// crate `krate`, renamed or globbed: `use aws_sdk_s3 as s3;`, `use aws_sdk_s3::types::*;`.
    pub fn imports_from(&self, target: usize, module: &[String], krate: &str) -> bool {
        let Some(scope) = self.scope(target, module) else {
            return false;
        };
        scope
            .uses
            .values()
            .chain(&scope.globs)
            .any(|path| self.resolve_use_path(target, module, path, 0).crate_name() == Some(krate))
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

/// Adds `part` (what one file adds to `module`) to the module's scope, as if its entries
/// were added there one by one.
fn merge_scope(scopes: &mut PathMap<Vec<String>, Scope>, module: &[String], part: Scope) {
    let Some(scope) = scopes.get_mut(module) else {
        scopes.insert(module.to_vec(), part);
        return;
    };
    scope.uses.extend(part.uses);
    scope.globs.extend(part.globs);
    scope.items.extend(part.items);
}

/// What a file adds to the scope of a module.
enum Entry<'f> {
    Use(&'f UseDecl),
    /// An item or child module named so.
    Item(&'f str),
    /// Only that the module exists.
    Module,
}

impl Entry<'_> {
    fn add_to(&self, scope: &mut Scope) {
        match self {
            Entry::Use(u) if u.glob => scope.globs.push(u.path.clone()),
            Entry::Use(u) => {
                scope.uses.insert(u.alias.clone(), u.path.clone());
            }
            Entry::Item(name) => add_item(scope, name),
            Entry::Module => {}
        }
    }
}

/// Adds item `name` to `scope`, copying the name only when it is new.
fn add_item(scope: &mut Scope, name: &str) {
    if !scope.items.contains(name) {
        scope.items.insert(name.to_owned());
    }
}

/// A resolution memo, locked. A poisoned lock only means another thread panicked
/// mid-insert; the map is intact.
fn lock(
    memo: &Mutex<PathMap<Vec<String>, DefPath>>,
) -> MutexGuard<'_, PathMap<Vec<String>, DefPath>> {
    memo.lock().unwrap_or_else(|e| e.into_inner())
}

fn local(target: usize, segs: &[String]) -> DefPath {
    DefPath {
        krate: Krate::Local(target),
        segments: segs.into(),
    }
}

/// `krate::rest` in an external crate; a path through a crate that re-exports another whole
/// (`deadpool_redis::redis::cmd`) names the other crate's item (`redis::cmd`).
fn extern_path(krate: &str, rest: &[String]) -> DefPath {
    if let Some((module, inner)) = rest.split_first() {
        if let Some(is) = crate::catalog::reexports::reexported(krate, module) {
            return DefPath {
                krate: Krate::Extern(is.into()),
                segments: inner.into(),
            };
        }
    }
    DefPath {
        krate: Krate::Extern(krate.into()),
        segments: rest.into(),
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
                .map(std::sync::Arc::new)
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
            migrations: Default::default(),
        }
    }

    fn path(s: &str) -> Path {
        Path {
            segments: s.split("::").map(String::from).collect(),
            leading_colon: false,
            span: Default::default(),
            qself: None,
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
        // Resolution follows re-exports itself: the result is the definition's path.
        assert_eq!(
            r.resolve(0, &m, &path("keys::new_key"), None),
            local(0, &["keys".into(), "fresh".into(), "new_key".into()])
        );
        assert_eq!(
            r.resolve(0, &m, &path("crate::keys::build"), None),
            local(0, &["keys".into(), "named".into(), "make".into()])
        );
        assert!(r
            .resolve(0, &m, &path("uuid::Uuid::new_v4"), None)
            .matches("uuid::Uuid::new_v4"));
    }
}
