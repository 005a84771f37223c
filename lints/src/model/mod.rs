//! The source model: a package's files, lowered to [`ir`] on the thread that parsed them.
//!
//! The driver (the `cargo-idem-lint` binary) finds the files and calls [`lower_file`] for
//! each; everything after that reads only these types, which are `Send` and carry byte spans.

mod byte_offsets;
mod doc_text;
mod expr_span;
pub mod ir;
mod lower;
pub mod migrations;
pub mod nesting;
mod test_attrs;
mod test_bodies;

pub use lower::{
    is_query_file_macro, lower_file, lower_file_until, syn_input, LowerError, ParseError, MAX_DEPTH,
};

use ir::{Block, Expr, Pat, Path, Type};
use serde::{Deserialize, Serialize};
use std::cell::Cell;

/// A module path (`["crate", "handlers"]`), shared by every item declared in that module
/// rather than copied into each: a file's items and `use`s mostly sit in one or two modules.
pub type ModulePath = std::sync::Arc<[String]>;

/// Index of a file in [`Package::files`].
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct FileId(pub u32);

/// A byte range in one file.
///
/// Serialized as `(file, lo, hi)`; see [`with_file_id`] for reading a stored file model back
/// under another file id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub file: FileId,
    pub lo: u32,
    pub hi: u32,
}

thread_local! {
    /// The file every [`Span`] deserialized on this thread is placed in, while set.
    static SPAN_FILE: Cell<Option<FileId>> = const { Cell::new(None) };
    /// Set while [`without_spans`] runs: every [`Span`] serializes as zeros.
    static ELIDE_SPANS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `write` (a serialization) with every [`Span`] written as `(0, 0, 0)`: two models
/// that differ only in where their items sit (text typed above them) then serialize alike.
pub fn without_spans<R>(write: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            ELIDE_SPANS.with(|f| f.set(self.0));
        }
    }
    let _reset = Reset(ELIDE_SPANS.with(|f| f.replace(true)));
    write()
}

/// Runs `read` (a deserialization) with every [`Span`] it reads placed in file `id`.
///
/// A lowered file's spans all point into that file, and its id is its position in the
/// package, which changes when a module is added before it. A cache stores the model once and
/// reads it back under the id of this run: without this, every span would need rewriting by a
/// walk over the whole tree.
pub fn with_file_id<R>(id: FileId, read: impl FnOnce() -> R) -> R {
    struct Reset(Option<FileId>);
    impl Drop for Reset {
        fn drop(&mut self) {
            SPAN_FILE.with(|f| f.set(self.0));
        }
    }
    let _reset = Reset(SPAN_FILE.with(|f| f.replace(Some(id))));
    read()
}

impl Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if ELIDE_SPANS.with(Cell::get) {
            return (0u32, 0u32, 0u32).serialize(s);
        }
        (self.file.0, self.lo, self.hi).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        let (file, lo, hi) = <(u32, u32, u32)>::deserialize(d)?;
        let file = SPAN_FILE.with(Cell::get).unwrap_or(FileId(file));
        Ok(Span { file, lo, hi })
    }
}

impl Span {
    pub const fn new(file: FileId, lo: u32, hi: u32) -> Span {
        Span { file, lo, hi }
    }

    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    pub fn contains(self, other: Span) -> bool {
        self.file == other.file && self.lo <= other.lo && other.hi <= self.hi
    }

    /// An empty span at this span's end (where a suggestion inserts text).
    pub fn shrink_to_hi(self) -> Span {
        Span {
            lo: self.hi,
            ..self
        }
    }

    pub fn shrink_to_lo(self) -> Span {
        Span {
            hi: self.lo,
            ..self
        }
    }
}

/// What a target is, as cargo says (`lib`, `bin`, `test`, `bench`, `example`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetInfo {
    pub name: String,
    pub kind: Vec<String>,
    pub root: std::path::PathBuf,
}

impl TargetInfo {
    /// The kind of a [`TargetInfo::linked`] target. Not a cargo kind, and not containing
    /// "lib": the checks for the package's own library pass it by.
    pub const LINKED: &'static str = "linked-dependency";

    /// Tests and benches: code whose keys are test data, not production keys.
    pub fn is_test_like(&self) -> bool {
        self.kind.iter().any(|k| k == "test" || k == "bench")
    }

    /// The library of another workspace member this package depends on, added to the
    /// package so calls into it reach its fns (`name` is the crate name the package's code
    /// uses for it). Its files are analysed with the package, never reported in it.
    pub fn linked(name: &str, root: std::path::PathBuf) -> TargetInfo {
        TargetInfo {
            name: name.to_owned(),
            kind: vec![Self::LINKED.to_owned()],
            root,
        }
    }

    /// Whether this is a [`TargetInfo::linked`] target.
    pub fn is_linked(&self) -> bool {
        self.kind.iter().any(|k| k == Self::LINKED)
    }
}

/// One package (or, for a plain directory, the set of `.rs` files below it).
#[derive(Debug, Clone, Default)]
pub struct Package {
    pub name: String,
    /// Crate names of the package's dependencies, `-` replaced by `_` (`aws_sdk_mediaconvert`).
    pub dependencies: Vec<String>,
    pub targets: Vec<TargetInfo>,
    /// Shared: a long-lived caller (the language server) keeps the models of unchanged
    /// files from one analysis to the next instead of copying or decoding them again.
    pub files: Vec<std::sync::Arc<FileModel>>,
    /// The SQL migrations the driver found beside the package (its own and its workspace's),
    /// from which [`crate::analysis::schema`] reads the unique keys of its tables.
    pub migrations: Migrations,
}

/// A package's SQL migrations, as the driver read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Migrations {
    /// In the order they apply within each sequence.
    pub files: Vec<Migration>,
    /// Some file of them could not be read (too large, not UTF-8, outside the workspace, a
    /// symbolic link to a directory, past the caps on files or bytes): the schema they make
    /// is not known, and no unique key is taken from any of them.
    pub incomplete: bool,
}

/// One migration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The sequence it belongs to, one database's history: its migrations folder, or the
    /// dialect folder inside it (`migrations/postgres`, `migrations/sqlite`). Sequences are
    /// separate schemas that a table's unique keys must hold in all of.
    pub sequence: String,
    /// Where it is, relative to the package root (or the workspace's, for a workspace's).
    pub path: String,
    pub text: std::sync::Arc<str>,
}

impl Package {
    pub fn file(&self, id: FileId) -> &FileModel {
        &self.files[id.0 as usize]
    }

    pub fn depends_on(&self, krate: &str) -> bool {
        self.dependencies.iter().any(|d| d == krate)
    }

    /// Every function of every file, with its file.
    pub fn fns(&self) -> impl Iterator<Item = (&FileModel, &FnDef)> {
        self.files
            .iter()
            .flat_map(|f| f.fns.iter().map(move |d| (&**f, d)))
    }
}

/// One lowered source file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FileModel {
    pub id: FileId,
    pub path: std::path::PathBuf,
    /// Index in [`Package::targets`] of the target whose module tree reached this file first.
    pub target: usize,
    /// Module path of the file inside its crate: `["crate", "handlers", "refund"]`.
    pub module: Vec<String>,
    /// True when the file's module is only compiled for tests (`#[cfg(test)] mod x;`) or the
    /// target is a test or bench.
    pub in_test: bool,
    pub fns: Vec<FnDef>,
    pub structs: Vec<StructDef>,
    pub impls: Vec<ImplDef>,
    pub uses: Vec<UseDecl>,
    pub mods: Vec<ModDecl>,
    /// `type Ddb = aws_sdk_dynamodb::Client;`: what the alias stands for, so a receiver typed
    /// by the alias is the aliased type.
    pub type_aliases: Vec<TypeAliasDef>,
    /// Named items other than fns, structs and modules (traits, enums, consts, statics, type
    /// aliases, unions), for name resolution.
    pub decls: Vec<NamedItem>,
    /// Items with their spans (attributes included), for item-level suppression comments.
    pub items: Vec<ItemSpan>,
    /// Module-level `const`s and `static`s whose value may be text (`const INSERT: &str =
    /// "..";`, `static Q: &str = include_str!("q.sql");`), so SQL named by a constant is read.
    pub consts: Vec<ConstDef>,
    /// `static CLIENT: OnceCell<Client> = ..;`: each static's declared type, so a client
    /// kept in a static is typed where it is used.
    #[serde(default)]
    pub statics: Vec<TypeAliasDef>,
    /// The `include_str!` paths written in this file, with the text the driver read for
    /// each (the analysis never reads files itself).
    pub includes: Vec<Include>,
    /// The `include!("file.rs")` calls at item position: files of Rust the driver loads as
    /// part of the module (the analysis never reads files itself).
    #[serde(default)]
    pub item_includes: Vec<ItemInclude>,
    /// The store crates the text names where a path can start
    /// ([`crate::catalog::store_crates::store_crates_named`]).
    #[serde(default)]
    pub store_crates: Vec<String>,
    /// Whether a fn may hold an idempotency key or a store operation known by name, or a
    /// constant header text, once asked ([`crate::catalog::store_crates::file_may_find`]).
    #[serde(skip)]
    pub may_find: std::sync::OnceLock<bool>,
    /// Words the passes that start from names look for
    /// ([`crate::catalog::store_crates::mentions_in`]).
    #[serde(default)]
    pub mentions: crate::catalog::store_crates::Mentions,
    /// Inner attributes and their arguments are rarely useful; only the file span is kept.
    pub span: Span,
}

impl Default for Span {
    fn default() -> Self {
        Span::new(FileId(0), 0, 0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemKind {
    Fn,
    Impl,
    Mod,
    Struct,
    Enum,
    Trait,
    Const,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedItem {
    /// The module it is declared in.
    pub module: ModulePath,
    pub name: String,
    pub kind: ItemKind,
    pub vis: Visibility,
}

/// A `const` or `static` item with its initializer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConstDef {
    /// The module it is declared in.
    pub module: ModulePath,
    pub name: String,
    pub value: Expr,
}

/// One `include_str!("path")` of a file, or the SQL file of a sqlx `query_file!("path")`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Include {
    /// The path as written: relative to the including file's directory (`include_str!`), or
    /// to the package root when [`Include::from_package_root`] (sqlx's `query_file!` family
    /// reads its file relative to `CARGO_MANIFEST_DIR`).
    pub path: String,
    #[serde(default)]
    pub from_package_root: bool,
    /// The file's text, attached by the driver when the file could be read safely (a
    /// regular file inside the workspace, under the size cap); `None` otherwise. Not part of
    /// a stored model: the driver reads it again on every run, so an edit to it is seen.
    #[serde(skip)]
    pub text: Option<std::sync::Arc<str>>,
}

impl FileModel {
    /// The text of `include_str!(path)` in this file, when the driver read it.
    pub fn included_text(&self, path: &str) -> Option<&str> {
        self.include_text(path, false)
    }

    /// The text of the SQL file a sqlx `query_file!(path)` of this file names, when the
    /// driver read it.
    pub fn query_file_text(&self, path: &str) -> Option<&str> {
        self.include_text(path, true)
    }

    fn include_text(&self, path: &str, from_package_root: bool) -> Option<&str> {
        self.includes
            .iter()
            .find(|i| i.path == path && i.from_package_root == from_package_root)
            .and_then(|i| i.text.as_deref())
    }
}

impl Package {
    /// The `const`/`static` named `segments` (module path without `crate`, then the name)
    /// in target `target`, with the file that declares it.
    pub fn const_def(&self, target: usize, segments: &[String]) -> Option<(&FileModel, &ConstDef)> {
        let (name, module) = segments.split_last()?;
        self.files
            .iter()
            .filter(|f| f.target == target)
            .find_map(|f| {
                f.consts
                    .iter()
                    .find(|c| c.name == *name && c.module.get(1..) == Some(module))
                    .map(|c| (&**f, c))
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemSpan {
    pub kind: ItemKind,
    /// From the first attribute (or the item keyword) to the end of the item.
    pub span: Span,
}

/// An attribute: `#[tokio::main]`, `#[idempotent(key = msg.id, store = s)]`, `#[path = "x.rs"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub path: Path,
    /// `name = value` and bare arguments of a list attribute, when they parse as such.
    pub args: Vec<AttrArg>,
    /// `#[path = "x"]`-style value.
    pub value: Option<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttrArg {
    /// `key = expr`
    NameValue { name: String, value: Expr },
    /// `name` or `a::b`
    Path(Path),
    /// `name(...)` (nested list; the inner arguments when they parse).
    List { path: Path, args: Vec<AttrArg> },
    /// A literal argument: `#[get("/refund")]`.
    Lit(Expr),
}

impl Attr {
    pub fn is(&self, name: &str) -> bool {
        self.path.last() == name
    }

    /// The value of `name = value` among the arguments.
    pub fn arg(&self, name: &str) -> Option<&Expr> {
        self.args.iter().find_map(|a| match a {
            AttrArg::NameValue { name: n, value } if n == name => Some(value),
            _ => None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub pat: Pat,
    pub ty: Type,
    pub span: Span,
}

/// How far an item is visible: `pub` alone makes it part of a library's public API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Visibility {
    Private,
    /// `pub(crate)`, `pub(super)`, `pub(in path)`.
    Restricted,
    Public,
}

/// A type parameter and the traits bounding it: `S: Store + Send` → `S`, `[Store, Send]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenericParam {
    pub name: String,
    pub bounds: Vec<Path>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelfKind {
    /// An associated function (no `self`).
    None,
    Value,
    Ref,
    RefMut,
}

/// A function or method with a body (trait methods without a default body are kept too, with
/// `body: None`, so a call can still be matched to its declaration).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FnDef {
    pub name: String,
    pub name_span: Span,
    /// Module path of the enclosing module.
    pub module: ModulePath,
    /// The `Self` type of an `impl` or trait the fn belongs to.
    pub self_ty: Option<Type>,
    /// The trait of `impl Trait for T`, or the trait declaring it.
    pub trait_path: Option<Path>,
    pub self_kind: SelfKind,
    pub params: Vec<Param>,
    pub ret: Option<Type>,
    pub is_async: bool,
    pub vis: Visibility,
    /// Type parameters in scope with their trait bounds (the impl's or trait's, then the fn's,
    /// `where` clauses included), so a receiver of type `S: Store` is known to be a `Store`.
    pub generics: Vec<GenericParam>,
    pub attrs: Vec<Attr>,
    /// The attributes of the `impl` block a method is in: a framework that makes every method
    /// of an impl a handler marks the impl (`#[Object] impl Mutation` of async-graphql).
    pub impl_attrs: Vec<Attr>,
    /// `None` for a declaration without a body; an empty block (its span still the braces)
    /// for test code ([`FnDef::in_test`]), which no lint reads.
    pub body: Option<Block>,
    /// The whole item, attributes included.
    pub span: Span,
    /// `#[test]`-like attribute, or inside a `#[cfg(test)]` module.
    pub in_test: bool,
    /// Nested inside another fn's body.
    pub nested: bool,
}

impl FnDef {
    /// `pub`, `pub(crate)` or any other `pub(...)`.
    pub fn is_pub(&self) -> bool {
        self.vis != Visibility::Private
    }

    pub fn has_attr(&self, name: &str) -> bool {
        self.attrs.iter().any(|a| a.is(name))
    }

    /// `Type::method` for methods, `name` for free fns: for messages.
    pub fn display_name(&self) -> String {
        match self.self_ty.as_ref().and_then(Type::core_path) {
            Some(p) => format!("{}::{}", p.last(), self.name),
            None => self.name.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeAliasDef {
    pub name: String,
    pub module: ModulePath,
    pub ty: Type,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructDef {
    pub name: String,
    pub module: ModulePath,
    pub vis: Visibility,
    /// Named fields (tuple fields are named `0`, `1`, ...).
    pub fields: Vec<(String, Type)>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImplDef {
    pub module: ModulePath,
    pub self_ty: Type,
    pub trait_path: Option<Path>,
    pub methods: Vec<String>,
    pub span: Span,
}

/// One name brought into scope by a `use` (a `use` tree is flattened into these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UseDecl {
    /// The module whose scope it is in.
    pub module: ModulePath,
    /// The full path as written: `["aws_sdk_mediaconvert", "Client"]`, `["crate", "db"]`;
    /// for a glob, the path of the module globbed.
    pub path: Vec<String>,
    /// The name it is known by in scope (the last segment or the `as` rename); empty for globs.
    pub alias: String,
    pub glob: bool,
    /// `pub use`: a re-export (only plain `pub` counts).
    pub is_pub: bool,
    pub span: Span,
}

/// `mod name;` or `mod name { ... }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModDecl {
    pub name: String,
    /// The module path of the declared module.
    pub module: ModulePath,
    /// Whether its body is inline in this file.
    pub inline: bool,
    /// `#[path = "..."]` value.
    pub path_attr: Option<String>,
    /// `#[cfg_attr(predicate, path = "...")]` values, in order: without evaluating `cfg`, the
    /// first that exists is the module's file when neither default file does.
    pub cfg_path_attrs: Vec<String>,
    /// Names of the inline modules enclosing this declaration in this file (`mod a { mod b; }`
    /// looks for `a/b.rs`).
    pub inline_parents: Vec<String>,
    /// `#[cfg(test)]` on the declaration.
    pub cfg_test: bool,
    /// `pub mod` (only plain `pub` counts).
    pub is_pub: bool,
    pub span: Span,
}

/// `include!("path")` where an item may stand: rustc reads the file, relative to the
/// including file's directory, as items of the module it is called in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemInclude {
    pub path: String,
    /// The module it is called in.
    pub module: ModulePath,
    /// Test code (a `#[cfg(test)]` module around it, or a test file).
    pub in_test: bool,
    pub span: Span,
}

/// The module path of a file from its path relative to the crate's source root, for files
/// found without following `mod` declarations: `lib.rs`/`main.rs` → `crate`; `a/b.rs` and `a/b/mod.rs` → `crate::a::b`.
pub fn module_of(rel: &std::path::Path) -> Vec<String> {
    let mut module = vec!["crate".to_owned()];
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let stem = part.trim_end_matches(".rs");
        if last && (stem == "lib" || stem == "main" || stem == "mod") {
            break;
        }
        module.push(stem.to_owned());
    }
    module
}
