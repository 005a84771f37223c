//! The crate's call graph: which crate fn each call (or fn passed as a value) reaches.
//!
//! Calls resolve through the [`Resolver`] (module paths, `use`, `Self::`), through local type
//! evidence for method receivers ([`TypeEnv`]: a parameter, a field, a constructor, a type
//! parameter's bound), and through a crate trait to its production implementations: one edge
//! per implementation (up to [`MAX_DISPATCH`]), so a caller does the union of what they do;
//! implementations in test code or on test doubles (`MockStore`, `FakeClock`) are left out,
//! and an inherent method wins over a trait method of the same name, as in Rust. Functions
//! passed as values (`service_fn(handler)`, `post(handler)`, `.to(handler)`, `.map(Self::f)`)
//! are edges too, since whoever receives them calls them. Anything else stays unknown: no
//! edge is better than a guessed one.
//!
//! Every edge keeps the span of its call and, when the call sits in an argument of an
//! external call (`tokio::spawn(worker(..))`, `post(handler)`), that call's name, which is
//! how [`super::entry`] finds handlers and workers.

use super::flow::FnId;
use super::resolve::{DefPath, Krate, ModuleScope, Resolver};
use super::types::{TypeEnv, Types};
use super::{FastSet, PathMap, PathSet};
use crate::model::ir::{visit_children, Expr, ExprKind, Path};
use crate::model::{FileModel, FnDef, ImplDef, Package, Span};
use rayon::prelude::*;
use std::cell::OnceCell;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `f(..)`, `a::f(..)`, `Type::f(..)`, `self.f(..)`, `x.f(..)` with `x`'s type known.
    Direct,
    /// A crate trait's method, called on a value known only by the trait, resolved to each
    /// production implementation in the crate.
    Trait,
    /// The fn passed as a value; the receiver of the value calls it later.
    Value,
}

/// The external call whose arguments an edge sits in (through closures and async blocks):
/// `tokio::spawn` for `tokio::spawn(async move { worker(rx).await })`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgOf {
    /// A path call that resolved outside the crate: `tokio::spawn`, `axum::routing::post`.
    Path(DefPath),
    /// A method call not resolved to a crate fn: `.to(handler)`, `.spawn(..)`.
    Method(String),
}

impl ArgOf {
    /// The called function's own name: `spawn`, `post`, `to` (an unresolved single-segment
    /// path is a path of "crate" `post`).
    pub fn name(&self) -> &str {
        match self {
            ArgOf::Path(p) => p
                .segments
                .last()
                .map_or_else(|| p.crate_name().unwrap_or(""), String::as_str),
            ArgOf::Method(m) => m,
        }
    }
}

/// One edge: a call (or reference) in a fn's body that reaches a crate fn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub callee: FnId,
    /// The call expression (for [`CallKind::Value`], the path naming the fn).
    pub span: Span,
    pub kind: CallKind,
    pub arg_of: Option<ArgOf>,
}

#[derive(Debug)]
pub struct CallGraph {
    /// Every crate fn, file by file.
    fns: Vec<FnId>,
    /// Index in `fns` of the first fn of each file.
    file_start: Vec<u32>,
    /// Outgoing edges of each fn, in source order.
    calls: Vec<Vec<Call>>,
    /// Incoming edges: (caller, index in the caller's `calls`).
    callers: Vec<Vec<(FnId, u32)>>,
    /// The tables the edges were resolved with, kept for [`CallGraph::reusing`].
    index: Index,
}

impl CallGraph {
    pub fn new(package: &Package, resolver: &Resolver, types: &Types) -> CallGraph {
        let (fns, file_start) = Self::fns(package);
        let index = Index::new(package, resolver, types, &fns);
        // Each fn's calls depend only on the shared read-only tables: build them on every
        // core (a package is linted on one thread, and this is a large part of its cost).
        let calls: Vec<Vec<Call>> = fns
            .par_iter()
            .map(|&id| Self::calls_of(package, resolver, types, &index, id))
            .collect();
        Self::assemble(fns, file_start, calls, index)
    }

    /// The graph of `package`, taking from `prev` (the graph of an earlier version of it) the
    /// edges of every fn outside the files marked in `changed`. Exact only when the two
    /// versions have the same files with the same fns in the same order, and the changed
    /// files differ in fn bodies (and spans) only: an edge depends on its fn's body and on
    /// the package-wide tables, which such an edit leaves as they were
    /// ([`super::incremental`] checks all of it).
    pub(crate) fn reusing(
        package: &Package,
        resolver: &Resolver,
        types: &Types,
        prev: CallGraph,
        changed: &[bool],
    ) -> CallGraph {
        let (fns, file_start) = Self::fns(package);
        let CallGraph {
            calls: mut prev_calls,
            index,
            ..
        } = prev;
        let fresh: Vec<(usize, Vec<Call>)> = fns
            .par_iter()
            .enumerate()
            .filter(|(_, id)| changed[id.file as usize])
            .map(|(i, &id)| (i, Self::calls_of(package, resolver, types, &index, id)))
            .collect();
        for (i, calls) in fresh {
            prev_calls[i] = calls;
        }
        Self::assemble(fns, file_start, prev_calls, index)
    }

    /// Every fn of the package, and the index of each file's first.
    fn fns(package: &Package) -> (Vec<FnId>, Vec<u32>) {
        let mut fns = Vec::new();
        let mut file_start = Vec::with_capacity(package.files.len());
        for (fi, file) in package.files.iter().enumerate() {
            file_start.push(fns.len() as u32);
            fns.extend((0..file.fns.len()).map(|ni| FnId::new(fi, ni)));
        }
        (fns, file_start)
    }

    /// The edges out of `id`, in source order.
    fn calls_of(
        package: &Package,
        resolver: &Resolver,
        types: &Types,
        index: &Index,
        id: FnId,
    ) -> Vec<Call> {
        let (file, f) = id.def(package);
        let mut b = Builder {
            package,
            resolver,
            types,
            index,
            file,
            f,
            at: resolver.module_scope(file.target, &f.module),
            locals: OnceCell::new(),
            env: None,
            out: Vec::new(),
        };
        // `#[idempotent(key = notice.dedupe_key())]`: the key is computed by the handler's
        // expansion, so a helper it calls is called by the handler.
        for key in f.attrs.iter().filter(|a| a.is("idempotent")) {
            if let Some(key) = key.arg("key") {
                key.walk(&mut |e| b.expr(e, None));
            }
        }
        if let Some(body) = &f.body {
            body.for_each_expr(&mut |e| b.expr(e, None));
        }
        b.out.sort_by_key(|c| (c.span.lo, c.span.hi));
        b.out
    }

    fn assemble(
        fns: Vec<FnId>,
        file_start: Vec<u32>,
        calls: Vec<Vec<Call>>,
        index: Index,
    ) -> CallGraph {
        let mut callers = vec![Vec::new(); fns.len()];
        for (caller, out) in calls.iter().enumerate() {
            for (i, c) in out.iter().enumerate() {
                let callee = (file_start[c.callee.file as usize] + c.callee.index) as usize;
                callers[callee].push((fns[caller], i as u32));
            }
        }
        CallGraph {
            fns,
            file_start,
            calls,
            callers,
            index,
        }
    }

    pub fn len(&self) -> usize {
        self.fns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fns.is_empty()
    }

    /// Every fn of the package, file by file.
    pub fn ids(&self) -> impl Iterator<Item = FnId> + '_ {
        self.fns.iter().copied()
    }

    /// A dense index of `id` in `0..self.len()`, for per-fn tables.
    pub fn index(&self, id: FnId) -> usize {
        (self.file_start[id.file as usize] + id.index) as usize
    }

    /// The edges out of `id`, in source order.
    pub fn calls(&self, id: FnId) -> &[Call] {
        &self.calls[self.index(id)]
    }

    /// The edges into `id`: (caller, the edge).
    pub fn callers(&self, id: FnId) -> impl Iterator<Item = (FnId, &Call)> + '_ {
        self.callers[self.index(id)]
            .iter()
            .map(|&(caller, i)| (caller, &self.calls[self.index(caller)][i as usize]))
    }

    /// The edge whose call expression is exactly `span`, in fn `id` (the first, for a call
    /// through a trait with several implementations: [`CallGraph::calls_at`] has them all).
    pub fn call_at(&self, id: FnId, span: Span) -> Option<&Call> {
        self.calls_at(id, span).first()
    }

    /// Every edge whose call expression is exactly `span`, in fn `id`: one per crate fn the
    /// call may run.
    pub fn calls_at(&self, id: FnId, span: Span) -> &[Call] {
        let calls = self.calls(id);
        let i = calls.partition_point(|c| (c.span.lo, c.span.hi) < (span.lo, span.hi));
        let n = calls[i..].iter().take_while(|c| c.span == span).count();
        &calls[i..i + n]
    }

    /// The index in [`CallGraph::calls`] of edge `call` of `id`.
    pub fn edge_index(&self, id: FnId, call: &Call) -> Option<usize> {
        let calls = self.calls(id);
        let i = calls.partition_point(|c| (c.span.lo, c.span.hi) < (call.span.lo, call.span.hi));
        calls[i..]
            .iter()
            .take_while(|c| c.span == call.span)
            .position(|c| c == call)
            .map(|n| i + n)
    }
}

/// Every crate fn by its path, and the crate's traits and their implementations.
#[derive(Debug)]
struct Index {
    by_path: PathMap<DefPath, Vec<FnId>>,
    /// `Type::method` → the inherent method (in an `impl Type` block): Rust picks it before
    /// any trait method of the same name.
    inherent: PathMap<DefPath, FnId>,
    /// (trait, `Type::method`) → the method of `impl Trait for Type`.
    trait_methods: PathMap<(DefPath, DefPath), FnId>,
    /// Fns of test code: `#[cfg(test)]`, test targets, `mock`/`fake`/`stub` types.
    test_fns: FastSet<FnId>,
    /// Names of the crate's fns and of every `use` alias: a call by any other name needs no
    /// resolution.
    names: PathSet<String>,
    /// Trait path → the resolved `Self` types of its impls in the crate.
    implementors: PathMap<DefPath, Vec<DefPath>>,
    /// Type path → traits it implements in the crate.
    traits_of: PathMap<DefPath, Vec<DefPath>>,
}

/// Most production implementations a call through a trait is dispatched to (the union of what
/// they do). A trait with more is plumbing (readers, codecs), not a store or a sender, and
/// fanning out to every implementation would cost more than it tells.
const MAX_DISPATCH: usize = 4;

/// Type-name words of implementations that stand in for the real one in tests.
const TEST_DOUBLE_WORDS: &[&str] = &["mock", "fake", "stub", "dummy"];

/// `MockStore`, `FakeMailer`, `StubClock`, `TestStore` (not `Testimonial`).
fn is_test_double(ty: &DefPath) -> bool {
    let name = ty.last();
    let lower = name.to_ascii_lowercase();
    TEST_DOUBLE_WORDS.iter().any(|w| lower.contains(w))
        || name
            .strip_prefix("Test")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// One fn as [`Index`] files it: its path, what it belongs to, whether it is test code.
struct PlacedFn {
    path: DefPath,
    owner: Owner,
    test: bool,
}

enum Owner {
    /// A free fn, or a trait's own declaration (which has the trait as its `Self`).
    Free,
    /// A method of an `impl Type` block.
    Inherent,
    /// A method of `impl Trait for Type`: the trait.
    Trait(DefPath),
}

impl PlacedFn {
    fn new(package: &Package, resolver: &Resolver, types: &Types, id: FnId) -> PlacedFn {
        let (file, f) = id.def(package);
        let path = types.fn_path(id.file as usize, id.index as usize).clone();
        let in_test = f.in_test || file.in_test;
        let Some(ty) = &f.self_ty else {
            return PlacedFn {
                path,
                owner: Owner::Free,
                test: in_test,
            };
        };
        let self_ty = resolver.resolve_type(file.target, &f.module, ty, None);
        let test = in_test || self_ty.as_ref().is_some_and(is_test_double);
        let owner = match &f.trait_path {
            None => Owner::Inherent,
            Some(tp) => {
                let tr = resolver.resolve(file.target, &f.module, tp, None);
                if self_ty.as_ref() == Some(&tr) {
                    Owner::Free
                } else {
                    Owner::Trait(tr)
                }
            }
        };
        PlacedFn { path, owner, test }
    }
}

/// The (trait, `Self` type) of an `impl Trait for Type` block whose type resolves.
fn trait_impl(resolver: &Resolver, file: &FileModel, imp: &ImplDef) -> Option<(DefPath, DefPath)> {
    let trait_path = imp.trait_path.as_ref()?;
    let tr = resolver.resolve(file.target, &imp.module, trait_path, None);
    let ty = resolver.resolve_type(file.target, &imp.module, &imp.self_ty, None)?;
    Some((tr, ty))
}

impl Index {
    fn new(package: &Package, resolver: &Resolver, types: &Types, fns: &[FnId]) -> Index {
        // Resolving is most of the cost and reads only shared tables: resolve on every core,
        // then fill the maps in fn order, so they are the same as one thread would make.
        let placed: Vec<PlacedFn> = fns
            .par_iter()
            .map(|&id| PlacedFn::new(package, resolver, types, id))
            .collect();
        // Sized once: growing them a doubling at a time was a serial tail of the graph's
        // building (nothing iterates them, so their layout changes no answer).
        let count = |owner: fn(&Owner) -> bool| placed.iter().filter(|p| owner(&p.owner)).count();
        let uses: usize = package.files.iter().map(|f| f.uses.len()).sum();
        let mut by_path: PathMap<DefPath, Vec<FnId>> =
            PathMap::with_capacity_and_hasher(fns.len(), Default::default());
        let mut inherent = PathMap::with_capacity_and_hasher(
            count(|o| matches!(o, Owner::Inherent)),
            Default::default(),
        );
        let mut trait_methods = PathMap::with_capacity_and_hasher(
            count(|o| matches!(o, Owner::Trait(_))),
            Default::default(),
        );
        let mut test_fns = FastSet::default();
        let mut names = PathSet::with_capacity_and_hasher(fns.len() + uses, Default::default());
        for (&id, placed) in fns.iter().zip(placed) {
            if placed.test {
                test_fns.insert(id);
            }
            match placed.owner {
                Owner::Free => {}
                Owner::Inherent => {
                    inherent.insert(placed.path.clone(), id);
                }
                Owner::Trait(tr) => {
                    trait_methods.insert((tr, placed.path.clone()), id);
                }
            }
            by_path.entry(placed.path).or_default().push(id);
            names.insert(id.def(package).1.name.clone());
        }
        // `use send::do_send as deliver;` calls the fn by another name.
        names.extend(
            package
                .files
                .iter()
                .flat_map(|f| &f.uses)
                .map(|u| u.alias.clone()),
        );
        let trait_impls: Vec<(DefPath, DefPath)> = package
            .files
            .par_iter()
            .flat_map_iter(|file| {
                let file: &FileModel = file;
                file.impls
                    .iter()
                    .filter_map(move |imp| trait_impl(resolver, file, imp))
            })
            .collect();
        let mut implementors: PathMap<DefPath, Vec<DefPath>> = PathMap::default();
        let mut traits_of: PathMap<DefPath, Vec<DefPath>> = PathMap::default();
        for (tr, ty) in trait_impls {
            implementors.entry(tr.clone()).or_default().push(ty.clone());
            traits_of.entry(ty).or_default().push(tr);
        }
        Index {
            by_path,
            inherent,
            trait_methods,
            test_fns,
            names,
            implementors,
            traits_of,
        }
    }

    /// The one fn at `path`; none when absent or ambiguous (two impls of different traits
    /// both defining `S::run`).
    fn unique(&self, path: &DefPath) -> Option<FnId> {
        match self.by_path.get(path)?.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Whether the crate implements one of its own traits for `ty` (an extension trait on
    /// another crate's client: `impl StoreExt for redis::aio::ConnectionManager`).
    fn extends(&self, ty: &DefPath) -> bool {
        self.traits_of
            .get(ty)
            .is_some_and(|trs| trs.iter().any(DefPath::is_local))
    }

    /// Method `name` called on a value of crate type or trait `ty`: one fn, or for a trait,
    /// each production implementation's method.
    fn method(&self, ty: &DefPath, name: &str) -> Vec<(FnId, CallKind)> {
        let path = ty.child(name);
        if let Some(impls) = self.implementors.get(ty) {
            return self.dispatch(ty, impls, name);
        }
        // Rust resolves an inherent method before a trait method of the same name: the
        // trait method `seen` that calls `self.seen()` calls the inherent one, not itself.
        if let Some(&id) = self.inherent.get(&path) {
            return vec![(id, CallKind::Direct)];
        }
        if let Some(id) = self.unique(&path) {
            return vec![(id, CallKind::Direct)];
        }
        // A default method of a crate trait the type implements.
        let defaults: Vec<FnId> = self
            .traits_of
            .get(ty)
            .into_iter()
            .flatten()
            .filter_map(|tr| self.unique(&tr.child(name)))
            .collect();
        match defaults.as_slice() {
            [one] => vec![(*one, CallKind::Direct)],
            _ => Vec::new(),
        }
    }

    /// Trait `tr`'s method `name` called on a value known only by the trait: the method of
    /// every production implementation (test code and test doubles do not run in
    /// production), or the trait's default body for an implementation that keeps it.
    fn dispatch(&self, tr: &DefPath, impls: &[DefPath], name: &str) -> Vec<(FnId, CallKind)> {
        let mut out: Vec<(FnId, CallKind)> = Vec::new();
        for ty in impls {
            let Some(id) = self.impl_method(tr, ty, name) else {
                continue;
            };
            let test = self.test_fns.contains(&id) || is_test_double(ty);
            if !test && !out.iter().any(|(o, _)| *o == id) {
                out.push((id, CallKind::Trait));
            }
        }
        if out.len() > MAX_DISPATCH {
            out.clear();
        }
        out
    }

    /// The method `name` of `impl Trait for Type` (`tr`, `ty`), or the trait's default body
    /// when the implementation keeps it; never an inherent method of the same name.
    fn impl_method(&self, tr: &DefPath, ty: &DefPath, name: &str) -> Option<FnId> {
        let path = ty.child(name);
        self.trait_methods
            .get(&(tr.clone(), path.clone()))
            .copied()
            .or_else(|| {
                self.unique(&path)
                    .filter(|id| self.inherent.get(&path) != Some(id))
            })
            .or_else(|| self.unique(&tr.child(name)))
    }

    /// A path call or reference resolved to `path`.
    fn path(&self, path: &DefPath) -> Vec<(FnId, CallKind)> {
        if let Some(id) = self.unique(path) {
            // A trait's declaration called as `Trait::m(x)` still dispatches.
            if let Some((parent, name)) = split_last(path) {
                if self.implementors.contains_key(&parent) {
                    return self.method(&parent, name);
                }
            }
            return vec![(id, CallKind::Direct)];
        }
        match split_last(path) {
            Some((parent, name)) => self.method(&parent, name),
            None => Vec::new(),
        }
    }
}

/// The implementation method `id` belongs to, as written (`impl Store for RedisStore`), when
/// it is a method of `impl Trait for Type`: a finding that reached it through a call on the
/// trait (a trait object, a generic bound, `impl Trait`) names the implementation it went
/// through.
pub fn implementation_of(package: &Package, id: FnId) -> Option<String> {
    let (_, f) = id.def(package);
    let tr = f.trait_path.as_ref()?.last();
    let ty = f.self_ty.as_ref()?.core_path()?.last();
    // A trait's own default body has the trait as its `Self`.
    (tr != ty).then(|| format!("impl {tr} for {ty}"))
}

fn split_last(p: &DefPath) -> Option<(DefPath, &str)> {
    let (last, rest) = p.segments.split_last()?;
    Some((
        DefPath {
            krate: p.krate.clone(),
            segments: rest.into(),
        },
        last,
    ))
}

/// Names bound inside a fn (parameters, `let`s, closure parameters, arms): a call through
/// one of them is a call of a local value, not of a crate fn of the same name.
fn local_names(f: &FnDef) -> PathSet<&str> {
    let mut names = PathSet::default();
    for p in &f.params {
        names.extend(p.pat.bindings().into_iter().map(|(n, _)| n));
    }
    if let Some(body) = &f.body {
        body.walk_pats(&mut |p| names.extend(p.bindings().into_iter().map(|(n, _)| n)));
    }
    names
}

struct Builder<'a> {
    package: &'a Package,
    resolver: &'a Resolver,
    types: &'a Types,
    index: &'a Index,
    file: &'a FileModel,
    f: &'a FnDef,
    /// The fn's module, its scope looked up once for every path of the fn.
    at: ModuleScope<'a>,
    /// Names bound in the fn, collected on the first path that could name a crate fn.
    locals: OnceCell<PathSet<&'a str>>,
    /// Built on the first method call whose receiver is not `self`.
    env: Option<TypeEnv<'a>>,
    out: Vec<Call>,
}

/// The external call an expression sits in as an argument, resolved only when an edge needs
/// it (most calls have no crate fn among their arguments).
struct Context<'a> {
    call: Pending<'a>,
    resolved: OnceCell<Option<ArgOf>>,
}

enum Pending<'a> {
    Path(&'a Path),
    Method(&'a str),
    Resolved(ArgOf),
}

impl<'a> Context<'a> {
    fn new(call: Pending<'a>) -> Self {
        Context {
            call,
            resolved: OnceCell::new(),
        }
    }
}

impl<'a> Builder<'a> {
    fn expr(&mut self, e: &'a Expr, cx: Option<&Context<'a>>) {
        match &e.kind {
            ExprKind::Call { func, args } => {
                let context = match func.as_path() {
                    Some(p) => match self.resolve_path(p) {
                        Ok(targets) => {
                            for (id, kind) in targets {
                                self.push(id, e.span, kind, cx);
                            }
                            None
                        }
                        Err(Some(ext)) => Some(Context::new(Pending::Resolved(ArgOf::Path(ext)))),
                        // A crate item that is not a fn: no context.
                        Err(None) if self.index.names.contains(p.last()) => None,
                        Err(None) => Some(Context::new(Pending::Path(p))),
                    },
                    None => {
                        self.expr(func, cx);
                        None
                    }
                };
                for a in args {
                    self.expr(a, context.as_ref());
                }
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                self.expr(receiver, cx);
                let targets = self.resolve_method(receiver, method);
                let context = if targets.is_empty() {
                    Some(Context::new(Pending::Method(method)))
                } else {
                    for (id, kind) in targets {
                        self.push(id, e.span, kind, cx);
                    }
                    None
                };
                for a in args {
                    self.expr(a, context.as_ref());
                }
            }
            ExprKind::Path(p) => {
                for (id, _) in self.resolve_path(p).unwrap_or_default() {
                    self.push(id, e.span, CallKind::Value, cx);
                }
            }
            _ => visit_children(e, &mut |c| self.expr(c, cx)),
        }
    }

    fn is_local(&self, name: &str) -> bool {
        self.locals
            .get_or_init(|| local_names(self.f))
            .contains(name)
    }

    fn push(&mut self, callee: FnId, span: Span, kind: CallKind, cx: Option<&Context<'a>>) {
        let arg_of = cx.and_then(|c| {
            c.resolved
                .get_or_init(|| match &c.call {
                    Pending::Resolved(a) => Some(a.clone()),
                    Pending::Method(m) => Some(ArgOf::Method((*m).to_owned())),
                    // A local closure gives no context.
                    Pending::Path(p) if p.as_ident().is_some_and(|n| self.is_local(n)) => None,
                    Pending::Path(p) => {
                        let def = self
                            .resolver
                            .resolve_at(self.at, p, self.f.self_ty.as_ref());
                        matches!(def.krate, Krate::Extern(_)).then_some(ArgOf::Path(def))
                    }
                })
                .clone()
        });
        self.out.push(Call {
            callee,
            span,
            kind,
            arg_of,
        });
    }

    /// A path to crate fns (one, or a trait method's implementations), or `Err` with the
    /// external path it names (`Err(None)` for a local value, a crate item that is not a fn,
    /// or a name no crate fn has, which is not resolved at all).
    fn resolve_path(&self, p: &Path) -> Result<Vec<(FnId, CallKind)>, Option<DefPath>> {
        if !self.index.names.contains(p.last()) || p.as_ident().is_some_and(|n| self.is_local(n)) {
            return Err(None);
        }
        let def = self
            .resolver
            .resolve_at(self.at, p, self.f.self_ty.as_ref());
        // Before the extern check: `<Job as serde::Serialize>::serialize` is the crate's impl.
        if let Some(id) = self.qualified(p, &def) {
            return Ok(vec![(id, CallKind::Direct)]);
        }
        if let Krate::Extern(_) = def.krate {
            return Err(Some(def));
        }
        let targets = self.index.path(&def);
        if targets.is_empty() {
            Err(None)
        } else {
            Ok(targets)
        }
    }

    /// `<Type as Trait>::f` with `Type` a crate type: that type's implementation (or the
    /// trait's default body it keeps), not every implementation of the trait. A generic or
    /// foreign `Type` leaves the call to trait dispatch.
    fn qualified(&self, p: &Path, def: &DefPath) -> Option<FnId> {
        let qself = p.qself.as_deref()?;
        let ty = self
            .resolver
            .resolve_at(self.at, qself, self.f.self_ty.as_ref());
        // `<Self as Trait>::f` in a trait's default body is any implementation: dispatch.
        if !ty.is_local() || self.index.implementors.contains_key(&ty) {
            return None;
        }
        let (tr, name) = split_last(def)?;
        self.index.impl_method(&tr, &ty, name)
    }

    fn resolve_method(&mut self, receiver: &'a Expr, method: &str) -> Vec<(FnId, CallKind)> {
        self.try_resolve_method(receiver, method)
            .unwrap_or_default()
    }

    fn try_resolve_method(
        &mut self,
        receiver: &'a Expr,
        method: &str,
    ) -> Option<Vec<(FnId, CallKind)>> {
        if !self.index.names.contains(method) {
            return None;
        }
        let ty = match receiver.peel().as_path().and_then(Path::as_ident) {
            Some("self") => {
                self.resolver
                    .resolve_type_at(self.at, self.f.self_ty.as_ref()?, None)?
            }
            _ => {
                let (package, resolver, types, file, f) =
                    (self.package, self.resolver, self.types, self.file, self.f);
                self.env
                    .get_or_insert_with(|| TypeEnv::for_fn(package, resolver, types, file, f))
                    .type_of(receiver)?
            }
        };
        if !ty.is_local() && !self.index.extends(&ty) {
            return None;
        }
        Some(self.index.method(&ty, method))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn graph(files: &[(&str, &str)]) -> (Package, CallGraph) {
        let package = testing::package("app", &["tokio", "axum"], files);
        let resolver = Resolver::new(&package);
        let types = Types::new(&package, &resolver);
        let g = CallGraph::new(&package, &resolver, &types);
        (package, g)
    }

    /// `caller -> callee` names of every edge, with the edge's kind.
    fn edges(package: &Package, g: &CallGraph) -> Vec<(String, String, CallKind)> {
        let mut out = Vec::new();
        for id in g.ids() {
            for c in g.calls(id) {
                out.push((
                    id.def(package).1.display_name(),
                    c.callee.def(package).1.display_name(),
                    c.kind,
                ));
            }
        }
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    fn has(edges: &[(String, String, CallKind)], from: &str, to: &str, kind: CallKind) -> bool {
        edges
            .iter()
            .any(|(a, b, k)| a == from && b == to && *k == kind)
    }

    #[test]
    fn free_fns_resolve_across_modules_and_uses() {
        let (p, g) = graph(&[
            ("crate", "mod api; mod send; pub use send::do_send;"),
            (
                "crate::api",
                "use crate::send::{self, do_send as deliver};
                 pub async fn send_message() { deliver().await; send::do_send().await; super::do_send().await; }",
            ),
            ("crate::send", "pub async fn do_send() {}"),
        ]);
        let e = edges(&p, &g);
        let to_send = e
            .iter()
            .filter(|(a, b, _)| a == "send_message" && b == "do_send")
            .count();
        assert_eq!(to_send, 3, "{e:?}");
    }

    #[test]
    fn methods_resolve_through_self_params_fields_and_constructors() {
        let (p, g) = graph(&[(
            "crate",
            "pub struct Mailer; impl Mailer { pub fn new() -> Self { Mailer } pub async fn send(&self) {} }
             pub struct Svc { mailer: Mailer }
             impl Svc {
                 async fn go(&self, m: &Mailer) {
                     self.mailer.send().await;
                     m.send().await;
                     let fresh = Mailer::new();
                     fresh.send().await;
                     self.mailer().send().await;
                     Self::helper();
                     self.helper2();
                 }
                 fn helper() {}
                 fn helper2(&self) {}
                 fn mailer(&self) -> &Mailer { &self.mailer }
             }",
        )]);
        let e = edges(&p, &g);
        let sends = e
            .iter()
            .filter(|(a, b, _)| a == "Svc::go" && b == "Mailer::send")
            .count();
        assert_eq!(sends, 4, "{e:?}");
        assert!(has(&e, "Svc::go", "Mailer::new", CallKind::Direct));
        assert!(has(&e, "Svc::go", "Svc::helper", CallKind::Direct));
        assert!(has(&e, "Svc::go", "Svc::helper2", CallKind::Direct));
    }

    #[test]
    fn trait_methods_dispatch_to_every_production_implementation() {
        let (p, g) = graph(&[
            (
                "crate",
                "mod doubles;
                 pub trait Sender { fn deliver(&self); }
                 pub struct Ses; impl Sender for Ses { fn deliver(&self) {} }
                 pub trait Twice { fn run(&self); }
                 pub struct A; impl Twice for A { fn run(&self) {} }
                 pub struct B; impl Twice for B { fn run(&self) {} }
                 pub trait Wide { fn go(&self); }
                 pub struct W1; impl Wide for W1 { fn go(&self) {} }
                 pub struct W2; impl Wide for W2 { fn go(&self) {} }
                 pub struct W3; impl Wide for W3 { fn go(&self) {} }
                 pub struct W4; impl Wide for W4 { fn go(&self) {} }
                 pub struct W5; impl Wide for W5 { fn go(&self) {} }
                 fn by_dyn(s: &dyn Sender) { s.deliver(); }
                 fn by_generic<S: Sender>(s: S) { s.deliver(); }
                 fn by_where<S>(s: &S) where S: Sender + Send { s.deliver(); }
                 fn by_impl(s: impl Sender) { s.deliver(); }
                 fn both(t: &dyn Twice) { t.run(); }
                 fn too_many(w: &dyn Wide) { w.go(); }
                 #[cfg(test)]
                 struct Mem;
                 #[cfg(test)]
                 impl Sender for Mem { fn deliver(&self) {} }",
            ),
            (
                "crate::doubles",
                "pub struct MockSender; impl super::Sender for MockSender { fn deliver(&self) {} }",
            ),
        ]);
        let e = edges(&p, &g);
        for caller in ["by_dyn", "by_generic", "by_where", "by_impl"] {
            let to: Vec<&str> = e
                .iter()
                .filter(|(a, _, _)| a == caller)
                .map(|(_, b, _)| b.as_str())
                .collect();
            // The `#[cfg(test)]` impl and the mock do not hide the production one.
            assert_eq!(to, ["Ses::deliver"], "{caller}: {e:?}");
        }
        assert!(has(&e, "both", "A::run", CallKind::Trait), "{e:?}");
        assert!(has(&e, "both", "B::run", CallKind::Trait), "{e:?}");
        assert!(!e.iter().any(|(a, _, _)| a == "too_many"), "{e:?}");
        let both = g.ids().find(|&id| id.def(&p).1.name == "both").unwrap();
        let call = &g.calls(both)[0];
        assert_eq!(g.calls_at(both, call.span).len(), 2);
    }

    /// `<Type as Trait<X>>::f(..)` calls that type's implementation (or the default body it
    /// keeps); `Self::f(..)` in a trait's default body, and `<Self as Trait>::f`, may be any
    /// implementation's.
    #[test]
    fn qualified_calls_pick_the_named_implementation() {
        let (p, g) = graph(&[(
            "crate",
            "pub trait Q<DB> {
                 fn find(q: &str) -> bool { true }
                 fn insert(q: &str) {}
                 fn decide(q: &str) { if !Self::find(q) { Self::insert(q) } }
                 fn decide_qualified(q: &str) { <Self as Q<DB>>::insert(q) }
             }
             pub struct Pg; impl Q<u8> for Pg {}
             pub struct My;
             impl My { fn insert(q: &str) {} }
             impl Q<u16> for My { fn insert(q: &str) {} fn decide(q: &str) {} }
             fn pg() { <Pg as Q<u8>>::decide(\"x\"); <Pg>::decide(\"y\"); }
             fn my() { <My as Q<u16>>::decide(\"x\"); <My as Q<u16>>::insert(\"x\"); }
             fn generic<T: Q<u8>>() { <T as Q<u8>>::find(\"x\"); }",
        )]);
        let e = edges(&p, &g);
        let to = |caller: &str| -> Vec<(String, CallKind)> {
            e.iter()
                .filter(|(a, _, _)| a == caller)
                .map(|(_, b, k)| (b.clone(), *k))
                .collect()
        };
        let direct = |s: &str| (s.to_owned(), CallKind::Direct);
        assert_eq!(
            to("pg"),
            [direct("Q::decide"), direct("Q::decide")],
            "{e:?}"
        );
        // The trait impl's `insert`, not the inherent one of the same name.
        assert_eq!(
            to("my"),
            [direct("My::decide"), direct("My::insert")],
            "{e:?}"
        );
        let my_insert = to("my")[1].0.clone();
        let impl_insert = g
            .ids()
            .find(|&id| {
                let d = id.def(&p).1;
                d.name == "insert" && d.trait_path.is_some() && d.display_name() == my_insert
            })
            .expect("the impl's insert");
        assert!(g
            .calls(g.ids().find(|&id| id.def(&p).1.name == "my").unwrap())
            .iter()
            .any(|c| c.callee == impl_insert));
        // In the default body, `Self` is any implementation: both `insert`s.
        assert!(has(&e, "Q::decide", "Q::insert", CallKind::Trait), "{e:?}");
        assert!(has(&e, "Q::decide", "My::insert", CallKind::Trait), "{e:?}");
        assert!(
            has(&e, "Q::decide_qualified", "My::insert", CallKind::Trait),
            "{e:?}"
        );
        assert!(has(&e, "generic", "Q::find", CallKind::Trait), "{e:?}");
    }

    #[test]
    fn a_trait_method_delegating_to_the_inherent_method_calls_the_inherent_one() {
        let (p, g) = graph(&[(
            "crate",
            "pub trait Store { fn seen(&self, k: &str) -> bool; }
             pub struct Redis;
             impl Redis { pub fn seen(&self, k: &str) -> bool { lookup(k) } }
             impl Store for Redis { fn seen(&self, k: &str) -> bool { self.seen(k) } }
             fn lookup(k: &str) -> bool { true }
             fn check(s: &dyn Store) -> bool { s.seen(\"k\") }
             fn direct(r: &Redis) -> bool { r.seen(\"k\") }",
        )]);
        let e = edges(&p, &g);
        let inherent = |id: FnId| id.def(&p).1.trait_path.is_none();
        let from = |name: &str| -> Vec<bool> {
            let id = g
                .ids()
                .find(|&id| id.def(&p).1.display_name() == name && !inherent(id))
                .or_else(|| g.ids().find(|&id| id.def(&p).1.display_name() == name))
                .unwrap();
            g.calls(id).iter().map(|c| inherent(c.callee)).collect()
        };
        // Through the trait: the trait impl; inside it and on the type: the inherent method.
        assert_eq!(from("check"), [false], "{e:?}");
        assert_eq!(from("direct"), [true], "{e:?}");
        let trait_impl = g
            .ids()
            .find(|&id| id.def(&p).1.name == "seen" && !inherent(id) && id.def(&p).1.body.is_some())
            .filter(|&id| {
                id.def(&p)
                    .1
                    .self_ty
                    .as_ref()
                    .and_then(|t| t.core_path())
                    .is_some_and(|t| t.last() == "Redis")
            })
            .unwrap();
        let callees: Vec<bool> = g
            .calls(trait_impl)
            .iter()
            .map(|c| inherent(c.callee))
            .collect();
        assert_eq!(callees, [true], "{e:?}");
    }

    #[test]
    fn unknown_receivers_and_local_values_stay_unknown() {
        let (p, g) = graph(&[(
            "crate",
            "fn send() {}
             fn go(client: reqwest::Client, map: std::collections::HashMap<u8, u8>) {
                 client.send();
                 map.send();
                 let send = || {};
                 send();
             }",
        )]);
        assert!(edges(&p, &g).is_empty(), "{:?}", edges(&p, &g));
    }

    #[test]
    fn fns_passed_as_values_are_edges_with_their_registering_call() {
        let (p, g) = graph(&[(
            "crate",
            "use axum::routing::post;
             async fn create() {} async fn worker(n: u8) {} async fn index() {}
             #[tokio::main] async fn main() {
                 let app = axum::Router::new().route(\"/x\", post(create));
                 tokio::spawn(worker(1));
                 tokio::spawn(async move { worker(2).await });
                 let r = actix_web::web::resource(\"/\").route(actix_web::web::get().to(index));
             }",
        )]);
        let main = g.ids().find(|&id| id.def(&p).1.name == "main").unwrap();
        let by_callee = |name: &str| -> Vec<(&str, CallKind)> {
            g.calls(main)
                .iter()
                .filter(|c| c.callee.def(&p).1.name == name)
                .map(|c| (c.arg_of.as_ref().map_or("", ArgOf::name), c.kind))
                .collect()
        };
        assert_eq!(by_callee("create"), vec![("post", CallKind::Value)]);
        assert_eq!(
            by_callee("worker"),
            vec![("spawn", CallKind::Direct), ("spawn", CallKind::Direct)]
        );
        assert_eq!(by_callee("index"), vec![("to", CallKind::Value)]);
        let spawn = &g.calls(main)[1];
        assert!(matches!(&spawn.arg_of, Some(ArgOf::Path(p)) if p.matches("tokio::spawn")));
        assert_eq!(g.call_at(main, spawn.span), Some(spawn));
        assert_eq!(
            g.callers(g.calls(main)[0].callee).next().map(|(c, _)| c),
            Some(main)
        );
    }
}
