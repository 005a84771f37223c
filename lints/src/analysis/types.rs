//! Local type evidence without type checking: what a receiver is, from a fn parameter's type,
//! a `let` ascription, a constructor (`Client::new(..)`, `Client::from_conf(..)`), a struct
//! field's declared type (`self.client`), or a crate fn's declared return type.
//! No evidence gives `None`; nothing is guessed.

use super::binding::{
    bind_param, bind_pattern, keeps_whole, part_of, takes_parts, written_type, Hop,
};
use super::resolve::{DefPath, ModuleScope, Resolver};
use super::{FastMap, PathMap, PathSet, Threads};
use crate::model::ir::{is_marker_trait, Block, Expr, ExprKind, Pat, Stmt, Type};
use crate::model::Span;
use crate::model::{FileModel, FnDef, GenericParam, Package};
use std::cell::RefCell;

/// Associated functions that return `Self` (or `Result<Self, _>`) by convention.
const CONSTRUCTORS: &[&str] = &[
    "new",
    "from_conf",
    "from_config",
    "from_env",
    "default",
    "connect",
    "connect_lazy",
    "open",
    "with_config",
    "from_client",
    "create",
    "build",
];

/// Methods whose result has the receiver's type, a reference to it, or the same type inside
/// `Option`/`Result` (which types here see through): `self.client.as_ref().context("..")?`.
const SAME_TYPE_METHODS: &[&str] = &[
    "clone",
    "as_ref",
    "as_mut",
    "as_deref",
    "borrow",
    "borrow_mut",
    "lock",
    "read",
    "write",
    "unwrap",
    "expect",
    "unwrap_or",
    "unwrap_or_else",
    "unwrap_or_default",
    "ok_or",
    "ok_or_else",
    "context",
    "with_context",
    "to_owned",
    "get_ref",
    "get_mut",
    "deref",
];

/// Package-wide tables for type evidence: struct fields and crate fns' return types.
#[derive(Debug)]
pub struct Types {
    /// Struct path → (file index, struct index in that file).
    structs: PathMap<DefPath, (usize, usize)>,
    /// Crate fn path → (file index, fn index), for declared return types.
    fns: PathMap<DefPath, (usize, usize)>,
    /// Per file, each fn's [`Resolver::fn_path`] (resolved here once; the call graph's
    /// index reads them instead of resolving every fn again).
    fn_paths: Vec<Vec<DefPath>>,
    /// The last segments of `fns`' paths: a method no crate fn is named after needs no
    /// `Type::method` path built to look it up.
    fn_names: PathSet<String>,
    /// Type alias path → the aliased type (`type Ddb = aws_sdk_dynamodb::Client`).
    aliases: PathMap<DefPath, DefPath>,
    /// Static path → the type it holds, through the cell it is kept in (`static DDB:
    /// OnceCell<Client>` holds a `Client`).
    statics: PathMap<DefPath, DefPath>,
}

/// Cells and wrappers a static keeps its value in, and the methods that hand the value out
/// (`DDB.get()`, `POOL.get_or_init(..)`, `Lazy::force(&X)` aside).
const STATIC_CELLS: &[&str] = &[
    "OnceCell", "OnceLock", "LazyLock", "Lazy", "LazyCell", "Arc", "Box", "Mutex", "RwLock",
];
const CELL_GETTERS: &[&str] = &["get", "get_or_init", "get_or_try_init", "force", "wait"];

/// The type inside the cells of [`STATIC_CELLS`].
fn in_cells(mut ty: &Type) -> &Type {
    while let Type::Path { path, args } = ty {
        match args.first() {
            Some(inner) if STATIC_CELLS.contains(&path.last()) => ty = inner,
            _ => break,
        }
    }
    ty
}

impl Types {
    pub fn new(package: &Package, resolver: &Resolver) -> Types {
        Types::build(package, resolver, Threads::Pool)
    }

    /// [`Types::new`] on `threads`.
    pub fn build(package: &Package, resolver: &Resolver, threads: Threads) -> Types {
        // The paths are resolved file by file (on every core, with `Threads::Pool`), then
        // entered in file order (the first fn at a path wins, as before).
        type Paths = Vec<(DefPath, (usize, usize))>;
        let per_file: Vec<(Paths, Paths)> = threads.map(&package.files, |fi, file| {
            let structs = file.structs.iter().enumerate().map(|(si, s)| {
                let p =
                    resolver.resolve_strs(file.target, &s.module, std::slice::from_ref(&s.name));
                (p, (fi, si))
            });
            let fns = file
                .fns
                .iter()
                .enumerate()
                .map(|(ni, f)| (resolver.fn_path(file, f), (fi, ni)));
            (structs.collect(), fns.collect())
        });
        let mut structs = PathMap::default();
        let mut fns = PathMap::default();
        let mut fn_paths = Vec::with_capacity(per_file.len());
        for (file_structs, file_fns) in per_file {
            structs.extend(file_structs);
            fn_paths.push(file_fns.iter().map(|(p, _)| p.clone()).collect());
            for (p, at) in file_fns {
                fns.entry(p).or_insert(at);
            }
        }
        let mut aliases = PathMap::default();
        for file in &package.files {
            for a in &file.type_aliases {
                let p =
                    resolver.resolve_strs(file.target, &a.module, std::slice::from_ref(&a.name));
                if let Some(to) = resolver.resolve_type(file.target, &a.module, &a.ty, None) {
                    aliases.insert(p, to);
                }
            }
        }
        let fn_names = fns.keys().map(|p: &DefPath| p.last().to_owned()).collect();
        let mut types = Types {
            structs,
            fns,
            fn_paths,
            fn_names,
            aliases,
            statics: PathMap::default(),
        };
        for file in &package.files {
            for st in &file.statics {
                let p =
                    resolver.resolve_strs(file.target, &st.module, std::slice::from_ref(&st.name));
                let held = in_cells(&st.ty);
                if let Some(ty) = types.resolve(resolver, file.target, &st.module, held, None) {
                    types.statics.insert(p, ty);
                }
            }
        }
        types
    }

    /// [`Resolver::fn_path`] of fn `index` of file `file` of the package these types are of.
    pub(crate) fn fn_path(&self, file: usize, index: usize) -> &DefPath {
        &self.fn_paths[file][index]
    }

    /// `ty` with type aliases replaced by what they stand for (a few hops; a cycle stops).
    fn unalias(&self, mut ty: DefPath) -> DefPath {
        for _ in 0..8 {
            match self.aliases.get(&ty) {
                Some(to) if *to != ty => ty = to.clone(),
                _ => break,
            }
        }
        ty
    }

    /// A type written in `module`, resolved and unaliased.
    fn resolve(
        &self,
        resolver: &Resolver,
        target: usize,
        module: &[String],
        ty: &Type,
        self_ty: Option<&Type>,
    ) -> Option<DefPath> {
        self.resolve_at(resolver, resolver.module_scope(target, module), ty, self_ty)
    }

    /// [`Self::resolve`] in a module looked up before.
    fn resolve_at(
        &self,
        resolver: &Resolver,
        at: ModuleScope<'_>,
        ty: &Type,
        self_ty: Option<&Type>,
    ) -> Option<DefPath> {
        resolver
            .resolve_type_at(at, ty, self_ty)
            .map(|p| self.unalias(p))
    }

    /// The declared type of field `field` of struct `ty`, resolved in the struct's module.
    pub fn field_type(
        &self,
        package: &Package,
        resolver: &Resolver,
        ty: &DefPath,
        field: &str,
    ) -> Option<DefPath> {
        let &(fi, si) = self.structs.get(ty)?;
        let file = &package.files[fi];
        let s = &file.structs[si];
        let (_, fty) = s.fields.iter().find(|(n, _)| n == field)?;
        self.resolve(resolver, file.target, &s.module, fty, None)
    }

    /// The declared type of field `field` of struct `ty`, as written, with the struct's module.
    fn field_decl<'p>(&self, package: &'p Package, ty: &DefPath, field: &str) -> Option<&'p Type> {
        let &(fi, si) = self.structs.get(ty)?;
        let s = &package.files[fi].structs[si];
        s.fields.iter().find(|(n, _)| n == field).map(|(_, t)| t)
    }

    /// The crate fn at `path` (file index, fn index).
    pub fn crate_fn(&self, path: &DefPath) -> Option<(usize, usize)> {
        self.fns.get(path).copied()
    }

    /// The crate fn `ty::method` (file index, fn index).
    fn crate_method(&self, ty: &DefPath, method: &str) -> Option<(usize, usize)> {
        if !self.fn_names.contains(method) {
            return None;
        }
        self.crate_fn(&ty.child(method))
    }
}

/// What binding a name without type evidence does to an older type of the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unknown {
    Forget,
    Keep,
}

/// The types known for the locals of one function.
pub struct TypeEnv<'a> {
    package: &'a Package,
    resolver: &'a Resolver,
    types: &'a Types,
    /// The fn's module, its scope looked up once for every path of the fn.
    at: ModuleScope<'a>,
    self_ty: Option<&'a Type>,
    generics: &'a [GenericParam],
    locals: PathMap<String, DefPath>,
    /// [`TypeEnv::type_of`] of method calls since `locals` last changed, by the call's
    /// address and span: each call of a chain `a.b().c().d()` types its receiver, which
    /// types its own receiver, so a chain of N calls cost N² steps unmemoized.
    chain_types: RefCell<FastMap<(usize, Span), Option<DefPath>>>,
}

impl<'a> TypeEnv<'a> {
    /// The environment of `f`: its parameters, then every `let` of its body in order (a later
    /// binding of the same name wins, which is right for the common re-binding of a client).
    pub fn for_fn(
        package: &'a Package,
        resolver: &'a Resolver,
        types: &'a Types,
        file: &'a FileModel,
        f: &'a FnDef,
    ) -> Self {
        let mut env = Self::for_params(package, resolver, types, file, f);
        if let Some(body) = &f.body {
            env.scan_block(body);
        }
        env
    }

    /// The environment of `f` with only its parameters bound, for a caller that walks the
    /// body in order and binds each `let` itself with [`Self::bind_let`] (flow-sensitive,
    /// and no second walk of the body).
    pub fn for_params(
        package: &'a Package,
        resolver: &'a Resolver,
        types: &'a Types,
        file: &'a FileModel,
        f: &'a FnDef,
    ) -> Self {
        let mut env = TypeEnv {
            package,
            resolver,
            types,
            at: resolver.module_scope(file.target, &f.module),
            self_ty: f.self_ty.as_ref(),
            generics: &f.generics,
            locals: PathMap::default(),
            chain_types: RefCell::default(),
        };
        for p in &f.params {
            let mut found: Vec<(&str, Option<DefPath>)> = Vec::new();
            bind_param(&p.pat, &p.ty, &mut |b, trail| {
                found.push((b.name, env.binding_type(trail, None)));
            });
            env.enter(found, Unknown::Keep);
        }
        env
    }

    /// Binds `let pat = init` (or a closure parameter `pat`): the ascribed type, else the
    /// type of `init`; a binding without evidence hides an older binding of the name.
    pub fn bind_let(&mut self, pat: &Pat, init: Option<&Expr>) {
        self.bind(pat, init);
    }

    /// Binds the pattern of an `if let`, `while let` or `match` arm tested against `value`:
    /// names with type evidence get it, the others keep what they had (the pattern may not
    /// match, and the walk does not leave the arm's scope here).
    pub fn bind_tested(&mut self, pat: &Pat, value: &Expr) {
        self.bind_pattern(pat, Some(value), Unknown::Keep);
    }

    /// A type written in this fn; a type parameter stands for its (first non-marker) bound,
    /// so `s: &S` with `S: Store` is a `Store`.
    fn resolve_type(&self, ty: &Type) -> Option<DefPath> {
        if let Some(bound) = self.generic_bound(ty) {
            return Some(bound);
        }
        self.types
            .resolve_at(self.resolver, self.at, ty, self.self_ty)
    }

    fn generic_bound(&self, ty: &Type) -> Option<DefPath> {
        let name = ty.core_path()?.as_ident()?;
        let param = self.generics.iter().find(|g| g.name == name)?;
        let bound = param.bounds.iter().find(|b| !is_marker_trait(b.last()))?;
        Some(self.resolver.resolve_at(self.at, bound, self.self_ty))
    }

    fn scan_block(&mut self, block: &Block) {
        for stmt in &block.stmts {
            if let Stmt::Let { pat, init, .. } = stmt {
                self.bind(pat, init.as_ref());
            }
            stmt.walk(&mut |e| {
                if let ExprKind::Closure { params, .. } = &e.kind {
                    for p in params {
                        self.bind_pattern(p, None, Unknown::Keep);
                    }
                }
            });
        }
        // Lets inside nested blocks (closures, async blocks, branches) bind too, and so do
        // `if let Some(c) = &state.client` and `match` arms: wrappers are already stripped
        // from the types here, so `Some(c)` of an `Option<Client>` is a `Client`.
        for stmt in &block.stmts {
            stmt.walk(&mut |e| {
                let bound: Vec<(&Pat, &Expr)> = match &e.kind {
                    ExprKind::Let { pat, expr } => vec![(pat, expr)],
                    ExprKind::Match { scrutinee, arms } => {
                        arms.iter().map(|a| (&a.pat, &**scrutinee)).collect()
                    }
                    _ => Vec::new(),
                };
                for (pat, value) in bound {
                    self.bind_pattern(pat, Some(value), Unknown::Keep);
                }
                let inner = match &e.kind {
                    ExprKind::Block(b) | ExprKind::Async { block: b, .. } => Some(b),
                    ExprKind::If { then, .. } => Some(then),
                    ExprKind::Loop { body, .. } | ExprKind::For { body, .. } => Some(body),
                    _ => None,
                };
                if let Some(b) = inner {
                    for s in &b.stmts {
                        if let Stmt::Let { pat, init, .. } = s {
                            self.bind_pattern(pat, init.as_ref(), Unknown::Keep);
                        }
                    }
                }
            });
        }
    }

    fn bind(&mut self, pat: &Pat, init: Option<&Expr>) {
        self.bind_pattern(pat, init, Unknown::Forget);
    }

    /// Types every name of `pat` ([`bind_pattern`]) bound to `init`: from the pattern's own
    /// ascription (`State(st): State<App>` makes `st` an `App`), else from `init`'s type
    /// through the parts that keep it (`Some(c)` of an `Option<Client>`, a named field of a
    /// crate struct). A name without evidence hides an older binding of it with
    /// [`Unknown::Forget`] and leaves it with [`Unknown::Keep`] (the flow-insensitive scan).
    fn bind_pattern(&mut self, pat: &Pat, init: Option<&Expr>, unknown: Unknown) {
        let mut found: Vec<(&str, Option<DefPath>)> = Vec::new();
        bind_pattern(pat, &mut |b, trail| {
            found.push((b.name, self.binding_type(trail, init)));
        });
        self.enter(found, unknown);
    }

    /// Enters the types found for bound names.
    fn enter(&mut self, found: Vec<(&str, Option<DefPath>)>, unknown: Unknown) {
        for (name, ty) in found {
            match ty {
                Some(t) => {
                    self.forget_chains();
                    self.locals.insert(name.to_owned(), t);
                }
                None if unknown == Unknown::Forget => {
                    self.forget_chains();
                    self.locals.remove(name);
                }
                None => {}
            }
        }
    }

    /// The type of the part of a value a name receives through `trail`.
    fn binding_type(&self, trail: &[Hop<'_>], init: Option<&Expr>) -> Option<DefPath> {
        // The last ascription describes what follows it; before it, nothing matters.
        let from = trail.iter().rposition(|h| matches!(h, Hop::Typed(_)));
        let (mut written, mut resolved, rest) = match from {
            Some(i) => (written_type(&trail[..=i]), None, &trail[i + 1..]),
            None => {
                let init = init?;
                // `let (client, _) = (Client::new(), 3)`: the part's own expression.
                if takes_parts(trail) {
                    if let Some(part) = part_of(init, trail) {
                        return self.type_of(part);
                    }
                }
                (None, self.type_of(init), trail)
            }
        };
        for hop in rest {
            if let Some(t) = written {
                written = None;
                match *hop {
                    Hop::Field(_, name) => {
                        let ty = self.resolve_type(t)?;
                        resolved = self.field_of(&ty, name);
                    }
                    _ => written = written_type(&[Hop::Typed(t), *hop]),
                }
                continue;
            }
            let ty = resolved.take()?;
            resolved = match *hop {
                Hop::Field(_, name) => self.field_of(&ty, name),
                _ if keeps_whole(std::slice::from_ref(hop)) => Some(ty),
                _ => None,
            };
        }
        match written {
            Some(t) => self.resolve_type(t),
            None => resolved,
        }
    }

    /// The declared type of field `name` of crate struct `ty`.
    fn field_of(&self, ty: &DefPath, name: &str) -> Option<DefPath> {
        self.types.field_type(self.package, self.resolver, ty, name)
    }

    /// Drops the memoized method-call types: a local's type changed.
    fn forget_chains(&self) {
        let mut memo = self.chain_types.borrow_mut();
        if !memo.is_empty() {
            memo.clear();
        }
    }

    /// The fn's module (its scope looked up), to resolve other paths written in the fn.
    pub fn module_scope(&self) -> ModuleScope<'a> {
        self.at
    }

    /// The type of a local variable.
    pub fn local(&self, name: &str) -> Option<&DefPath> {
        self.locals.get(name)
    }

    /// The crate fn (file index, fn index) that a call expression calls, when the source says
    /// which: `f(..)` and `m::f(..)` through the `use`s in scope, `Type::f(..)`, and `x.f(..)`
    /// on a receiver of known type.
    pub fn callee(&self, call: &Expr) -> Option<(usize, usize)> {
        match &call.peel().kind {
            ExprKind::Call { func, .. } => {
                let path = func.as_path()?;
                let callee = self.resolver.resolve_at(self.at, path, self.self_ty);
                self.types.crate_fn(&callee)
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } => {
                let ty = self.type_of(receiver)?;
                self.types.crate_method(&ty, method)
            }
            _ => None,
        }
    }

    /// The type of `expr`, when the source gives evidence for it.
    /// The declared return type of crate fn `(file, index)`, `Result`/`Option` unwrapped.
    fn return_type(&self, (fi, ni): (usize, usize)) -> Option<DefPath> {
        let file = &self.package.files[fi];
        let f = &file.fns[ni];
        let ret = f.ret.as_ref()?;
        self.types.resolve(
            self.resolver,
            file.target,
            &f.module,
            unwrap_result(ret),
            f.self_ty.as_ref(),
        )
    }

    pub fn type_of(&self, expr: &Expr) -> Option<DefPath> {
        let expr = expr.peel();
        if !matches!(expr.kind, ExprKind::MethodCall { .. }) {
            return self.type_of_uncached(expr);
        }
        let key = (expr as *const Expr as usize, expr.span);
        if let Some(ty) = self.chain_types.borrow().get(&key) {
            return ty.clone();
        }
        let ty = self.type_of_uncached(expr);
        self.chain_types.borrow_mut().insert(key, ty.clone());
        ty
    }

    /// [`TypeEnv::type_of`] of a peeled expression, without the memo.
    fn type_of_uncached(&self, expr: &Expr) -> Option<DefPath> {
        match &expr.kind {
            ExprKind::Path(p) => match p.as_ident() {
                Some("self") => self.self_ty.and_then(|t| self.resolve_type(t)),
                Some(name) if self.locals.contains_key(name) => self.locals.get(name).cloned(),
                _ => self.static_type(p),
            },
            // `DDB.get()`: the value kept in a static's cell.
            ExprKind::MethodCall {
                receiver, method, ..
            } if CELL_GETTERS.contains(&method.as_str())
                && receiver
                    .peel()
                    .as_path()
                    .is_some_and(|p| self.static_type(p).is_some()) =>
            {
                self.type_of(receiver)
            }
            ExprKind::Field { base, member } => {
                let base_ty = self.type_of(base)?;
                // A field of a type parameter's type (`store: S`) is bounded in the impl.
                let decl = self.types.field_decl(self.package, &base_ty, member);
                if let Some(bound) = decl.and_then(|t| self.generic_bound(t)) {
                    return Some(bound);
                }
                self.types
                    .field_type(self.package, self.resolver, &base_ty, member)
            }
            ExprKind::Call { func, args } => {
                let path = func.as_path()?;
                let callee = self.resolver.resolve_at(self.at, path, self.self_ty);
                if let Some(crate_fn) = self.types.crate_fn(&callee) {
                    return self.return_type(crate_fn);
                }
                if ["Arc", "Rc", "Box", "Some", "Ok"].contains(&path.last())
                    && path.segments.len() <= 2
                {
                    return args.first().and_then(|a| self.type_of(a));
                }
                if CONSTRUCTORS.contains(&path.last()) && callee.segments.len() >= 2 {
                    return Some(self.types.unalias(callee.parent()));
                }
                None
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } if SAME_TYPE_METHODS.contains(&method.as_str()) => self.type_of(receiver),
            // A method of a crate type returns what it declares (`self.media()`).
            ExprKind::MethodCall { .. } => self.return_type(self.callee(expr)?),
            ExprKind::Struct { path, .. } => {
                Some(self.resolver.resolve_at(self.at, path, self.self_ty))
            }
            ExprKind::Block(b) | ExprKind::Async { block: b, .. } => {
                b.tail().and_then(|t| self.type_of(t))
            }
            // Every branch has the same type: the first that shows it decides.
            ExprKind::If { then, els, .. } => then
                .tail()
                .and_then(|t| self.type_of(t))
                .or_else(|| els.as_ref().and_then(|e| self.type_of(e))),
            ExprKind::Match { arms, .. } => arms.iter().find_map(|a| self.type_of(&a.body)),
            _ => None,
        }
    }
}

impl TypeEnv<'_> {
    /// The type a static at `path` holds, if it is one of the package's statics.
    fn static_type(&self, path: &crate::model::ir::Path) -> Option<DefPath> {
        if self.types.statics.is_empty() {
            return None;
        }
        let def = self.resolver.resolve_at(self.at, path, self.self_ty);
        self.types.statics.get(&def).cloned()
    }
}

/// `Result<T, E>` and `Option<T>` → `T`: constructors are usually fallible.
fn unwrap_result(ty: &Type) -> &Type {
    match ty {
        Type::Path { path, args }
            if matches!(path.last(), "Result" | "Option") && !args.is_empty() =>
        {
            &args[0]
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{lower_file, FileId, TargetInfo};

    #[test]
    fn type_aliases_stand_for_the_aliased_type() {
        let src = "pub type Ddb = aws_sdk_dynamodb::Client;\n\
                   type Shared = Ddb;\n\
                   struct S { db: Shared }\n\
                   impl S { fn go(&self, p: &Ddb, c: &Config) { let n = Shared::new(c); } }";
        let package = crate::testing::package("app", &[], &[("crate", src)]);
        let resolver = Resolver::new(&package);
        let types = Types::new(&package, &resolver);
        let file = &package.files[0];
        let go = file.fns.iter().find(|f| f.name == "go").unwrap();
        let env = TypeEnv::for_fn(&package, &resolver, &types, file, go);
        let client = "aws_sdk_dynamodb::Client";
        assert!(env.local("p").is_some_and(|t| t.matches(client)));
        assert!(env.local("n").is_some_and(|t| t.matches(client)));
        let s = resolver.resolve_strs(0, &["crate".to_owned()], &["S".to_owned()]);
        let db = types.field_type(&package, &resolver, &s, "db");
        assert!(db.is_some_and(|t| t.matches(client)));
    }

    #[test]
    fn receivers_are_typed_from_params_fields_constructors_and_returns() {
        let src = r#"
            use aws_sdk_mediaconvert::Client;
            use aws_sdk_ec2 as ec2;
            struct Svc { mc: Client, other: std::sync::Arc<ec2::Client>, maybe: Option<ec2::Client> }
            fn make() -> Result<ec2::Client, ()> { todo!() }
            impl Svc {
                fn go(&self, p: &Client) {
                    let a = Client::from_conf(conf);
                    let b: ec2::Client = x;
                    let c = make()?;
                    let d = self.other.clone();
                    let e = if cold { None } else { Some(aws_sdk_s3::Client::new(conf)) };
                    if let Some(f) = &self.maybe { f.go(); }
                    match self.maybe.as_ref() { Some(g) => g.go(), None => {} }
                }
            }
        "#;
        let file = lower_file(src, FileId(0), vec!["crate".into()], false).unwrap();
        let package = Package {
            name: "app".into(),
            dependencies: vec![],
            targets: vec![TargetInfo {
                name: "app".into(),
                kind: vec!["lib".into()],
                root: "src/lib.rs".into(),
            }],
            files: vec![std::sync::Arc::new(file)],
            migrations: Default::default(),
        };
        let resolver = Resolver::new(&package);
        let types = Types::new(&package, &resolver);
        let file = &package.files[0];
        let go = file.fns.iter().find(|f| f.name == "go").unwrap();
        let env = TypeEnv::for_fn(&package, &resolver, &types, file, go);
        let is = |name: &str, pat: &str| env.local(name).is_some_and(|t| t.matches(pat));
        assert!(is("p", "aws_sdk_mediaconvert::Client"));
        assert!(is("a", "aws_sdk_mediaconvert::Client"));
        assert!(is("b", "aws_sdk_ec2::Client"));
        assert!(is("c", "aws_sdk_ec2::Client"));
        assert!(is("d", "aws_sdk_ec2::Client"));
        assert!(is("e", "aws_sdk_s3::Client"));
        assert!(is("f", "aws_sdk_ec2::Client"));
        assert!(is("g", "aws_sdk_ec2::Client"));
        let field = ExprKind::Field {
            base: Box::new(Expr {
                kind: ExprKind::Path(crate::model::ir::Path {
                    segments: vec!["self".into()],
                    leading_colon: false,
                    span: Default::default(),
                    qself: None,
                }),
                span: Default::default(),
            }),
            member: "mc".into(),
        };
        let t = env.type_of(&Expr {
            kind: field,
            span: Default::default(),
        });
        assert!(t.is_some_and(|t| t.matches("aws_sdk_mediaconvert::Client")));
    }
}
