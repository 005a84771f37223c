//! Entry points: where requests, messages and jobs come into the crate from outside, each
//! one a way a duplicate delivery can arrive.
//!
//! `main` (and `#[tokio::main]`-style attributes), route handlers (`#[post("/x")]`,
//! `post(handler)`, `.to(handler)`), service fns (`service_fn(handler)`, Lambda's `run`),
//! tasks and threads (`tokio::spawn(worker(..))`), jobs (`#[job]`, `.build_fn(handler)`, the
//! methods of a framework's trait that the crate implements), the public functions of a
//! library, functions named in configuration and `#[idempotent]` handlers.

use super::callgraph::{ArgOf, CallGraph, CallKind};
use super::flow::FnId;
use super::resolve::{DefPath, Krate, Resolver};
use super::PathSet;
pub use crate::catalog::entries::EntryKind;
use crate::catalog::entries::{self, Delivery};
use crate::catalog::frameworks::{
    EntryModels, HANDLER_IMPL_ATTRS, MESSAGE_STREAM_WORDS, NON_CALLBACK_CRATES, RECEIVE_METHODS,
};
use crate::model::{FileModel, FnDef, Package, Span, Visibility};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPoint {
    pub id: FnId,
    pub kind: EntryKind,
    /// Where it becomes an entry: the registering call or attribute, else the fn's name.
    pub span: Span,
}

impl EntryPoint {
    /// Whether what comes in here can come again ([`entries::delivery`]).
    pub fn delivery(&self, package: &Package) -> Delivery {
        entries::delivery(self.kind, is_webhook(self.id.def(package).1))
    }
}

/// What each of `entries` receives ([`EntryPoint::delivery`]), with a spawned task taking
/// its spawner's: a task spawned by a route handler carries that user's command (its
/// e-mail is sent once per request, off the request's path), one spawned by a job handler
/// runs again when the job does. A task spawned elsewhere (`main`, a helper) stays
/// [`Delivery::Unknown`]: only a spawner that is itself an entry is looked at.
pub fn deliveries(package: &Package, graph: &CallGraph, entries: &[EntryPoint]) -> Vec<Delivery> {
    let own: Vec<Delivery> = entries.iter().map(|e| e.delivery(package)).collect();
    let entry_of = |id: FnId| entries.iter().position(|e| e.id == id);
    entries
        .iter()
        .zip(&own)
        .map(|(e, &d)| {
            if e.kind != EntryKind::Spawned {
                return d;
            }
            let spawner = graph
                .ids()
                .find(|&id| graph.calls_at(id, e.span).iter().any(|c| c.callee == e.id));
            spawner
                .and_then(entry_of)
                .filter(|&i| entries[i].kind != EntryKind::Spawned)
                .map_or(d, |i| match own[i] {
                    Delivery::Unknown => d,
                    inherited => inherited,
                })
        })
        .collect()
}

/// Every entry point of the package, one per fn (the first kind of [`EntryKind`]'s order
/// that applies). `configured` names fns by name, `Type::method` or path suffix.
pub fn entry_points(
    package: &Package,
    resolver: &Resolver,
    graph: &CallGraph,
    models: &EntryModels,
    configured: &[String],
) -> Vec<EntryPoint> {
    finish(
        EntryParts::new(package, resolver, graph, models, configured, None)
            .by_file
            .concat(),
    )
}

/// What each file's functions make entry points (before [`finish`]): a fn's contribution
/// reads only its own file's model and calls, the package's targets and dependencies, and the
/// resolver's tables, and it carries spans of its own file only. So an analysis that reuses
/// the resolver and the unchanged files' call edges ([`super::Analysis::reusing`]) keeps the
/// parts of the unchanged files.
#[derive(Debug)]
pub(crate) struct EntryParts {
    pub(crate) configured: Vec<String>,
    by_file: Vec<Vec<EntryPoint>>,
    /// Made of the files' items alone, which an edit that keeps the parts leaves the same.
    api: PublicApi,
}

impl EntryParts {
    /// The parts of every file, or, with `kept`, those of the files marked changed computed
    /// and the others taken from `kept` (made for the same package but those files).
    pub(crate) fn new(
        package: &Package,
        resolver: &Resolver,
        graph: &CallGraph,
        models: &EntryModels,
        configured: &[String],
        kept: Option<(EntryParts, &[bool])>,
    ) -> EntryParts {
        let (mut by_file, api, changed) = match kept {
            Some((parts, changed)) if parts.by_file.len() == package.files.len() => {
                (parts.by_file, parts.api, Some(changed))
            }
            _ => (
                vec![Vec::new(); package.files.len()],
                PublicApi::new(package, resolver),
                None,
            ),
        };
        let redo = |file: usize| changed.is_none_or(|c| c.get(file).copied().unwrap_or(true));
        for (file, part) in by_file.iter_mut().enumerate() {
            if redo(file) {
                part.clear();
            }
        }
        let ask = Ask {
            package,
            resolver,
            graph,
            models,
            configured,
            api: &api,
        };
        for id in graph.ids().filter(|id| redo(id.file as usize)) {
            if let Some(found) = by_file.get_mut(id.file as usize) {
                entries_of(&ask, id, found);
            }
        }
        EntryParts {
            configured: configured.to_vec(),
            by_file,
            api,
        }
    }

    pub(crate) fn entry_points(&self) -> Vec<EntryPoint> {
        finish(self.by_file.concat())
    }
}

/// What [`entries_of`] reads.
struct Ask<'x> {
    package: &'x Package,
    resolver: &'x Resolver,
    graph: &'x CallGraph,
    models: &'x EntryModels,
    configured: &'x [String],
    api: &'x PublicApi,
}

/// What fn `id` makes entry points: itself, and the fns it registers.
fn entries_of(ask: &Ask<'_>, id: FnId, found: &mut Vec<EntryPoint>) {
    let Ask {
        package,
        resolver,
        graph,
        models,
        configured,
        api,
    } = *ask;
    let (file, f) = id.def(package);
    if f.in_test || file.in_test {
        return;
    }
    let mut add = |kind, span| found.push(EntryPoint { id, kind, span });
    if let Some((kind, span)) = by_attribute(models, package, file, f) {
        add(kind, span);
    }
    if names_fn(configured, resolver, file, f) {
        add(EntryKind::Configured, f.name_span);
    }
    if is_framework_callback(package, resolver, file, f) {
        add(EntryKind::Job, f.name_span);
    }
    if api.contains(resolver, file, f) {
        add(EntryKind::PublicApi, f.name_span);
    }
    for call in graph.calls(id) {
        if let Some(kind) = registration(models, package, call.arg_of.as_ref(), call.kind) {
            let (callee_file, callee) = call.callee.def(package);
            if !callee.in_test && !callee_file.in_test {
                found.push(EntryPoint {
                    id: call.callee,
                    kind,
                    span: call.span,
                });
            }
        }
    }
}

/// The entries found, in the order of the fns that found them, sorted and one per fn.
fn finish(mut found: Vec<EntryPoint>) -> Vec<EntryPoint> {
    found.sort_by_key(|e| (e.id, e.kind));
    found.dedup_by_key(|e| e.id);
    found
}

fn by_attribute(
    models: &EntryModels,
    package: &Package,
    file: &FileModel,
    f: &FnDef,
) -> Option<(EntryKind, Span)> {
    for a in &f.attrs {
        let name = a.path.last();
        if name == "idempotent" {
            return Some((EntryKind::Idempotent, a.span));
        }
        if name == "main" && a.path.segments.len() > 1 {
            return Some((EntryKind::Main, a.span));
        }
        let has_path_literal = a.args.iter().any(|arg| {
            matches!(arg, crate::model::AttrArg::Lit(e) if e.as_str_lit().is_some_and(|s| s.starts_with('/')))
        });
        if let Some(kind) = models.by_attribute(name, has_path_literal) {
            return Some((kind, a.span));
        }
    }
    // A resolver of a GraphQL schema: each method of the marked impl answers a request.
    let resolver_impl = f.impl_attrs.iter().find(|a| {
        HANDLER_IMPL_ATTRS
            .iter()
            .any(|(krate, name)| a.path.last() == *name && package.depends_on(krate))
    });
    if let Some(a) = resolver_impl.filter(|_| f.body.is_some()) {
        return Some((EntryKind::Route, a.span));
    }
    let target = package.targets.get(file.target);
    let runnable = target.is_some_and(|t| t.kind.iter().any(|k| k == "bin" || k == "example"));
    (f.name == "main" && f.module.len() == 1 && f.self_ty.is_none() && runnable)
        .then_some((EntryKind::Main, f.name_span))
}

/// What registering a fn with the external call `arg_of` makes of it: the first row of
/// `models` the call fits.
fn registration(
    models: &EntryModels,
    package: &Package,
    arg_of: Option<&ArgOf>,
    kind: CallKind,
) -> Option<EntryKind> {
    let arg_of = arg_of?;
    let name = arg_of.name();
    let as_value = kind == CallKind::Value;
    let depends = |crates: &[&str]| crates.iter().any(|c| package.depends_on(c));
    match arg_of {
        ArgOf::Path(p) => {
            let krate = p.crate_name()?;
            // A glob-imported `post` is a path of crate `post`: trust it when the package
            // uses the framework.
            let unresolved = p.segments.is_empty();
            models.path_calls().find_map(|row| {
                let named = if row.name.contains("::") {
                    p.matches(row.name)
                } else {
                    row.name == name
                        && (row.crates.is_empty()
                            || row.crates.contains(&krate)
                            || unresolved && (!row.framework || depends(row.crates)))
                };
                (named && (!row.framework || as_value)).then_some(row.kind)
            })
        }
        ArgOf::Method(m) => models.method_calls().find_map(|row| {
            (row.name == m.as_str() && (!row.framework || as_value && depends(row.crates)))
                .then_some(row.kind)
        }),
    }
}

/// Fns that receive messages in a loop (`while let Some(m) = consumer.recv().await`,
/// `loop { let msgs = sqs.receive_message()..send().await?; .. }`): each message they handle
/// may come again. Not entry points for the other lints: where such a loop runs is already
/// reached from `main` or a task.
pub fn consumer_loops(package: &Package) -> Vec<EntryPoint> {
    use crate::model::ir::ExprKind;
    let mut out = Vec::new();
    for (fi, file) in package.files.iter().enumerate() {
        if file.in_test {
            continue;
        }
        for (i, f) in file.fns.iter().enumerate() {
            let Some(body) = f.body.as_ref().filter(|_| !f.in_test) else {
                continue;
            };
            let mut at = None;
            body.walk(&mut |e| {
                // The first loop that receives is the one reported: no need to look further.
                if at.is_some() {
                    return;
                }
                let looped = match &e.kind {
                    ExprKind::Loop { cond, body } => {
                        cond.as_deref().and_then(receive_in).or_else(|| {
                            let mut found = None;
                            body.walk(&mut |x| found = found.or_else(|| receive_call(x)));
                            found
                        })
                    }
                    ExprKind::For { iter, .. } => receive_in(iter),
                    _ => None,
                };
                at = at.or(looped);
            });
            if let Some(span) = at {
                out.push(EntryPoint {
                    id: FnId::new(fi, i),
                    kind: EntryKind::Consumer,
                    span,
                });
            }
        }
    }
    out
}

fn receive_in(e: &crate::model::ir::Expr) -> Option<Span> {
    let mut found = None;
    e.walk(&mut |x| found = found.or_else(|| receive_call(x)));
    found
}

/// The span of a call receiving a message, if `e` is one.
fn receive_call(e: &crate::model::ir::Expr) -> Option<Span> {
    let crate::model::ir::ExprKind::MethodCall {
        receiver, method, ..
    } = &e.kind
    else {
        return None;
    };
    let stream = || {
        super::store_ops::receiver_name(receiver).is_some_and(|n| {
            let n = n.to_ascii_lowercase();
            MESSAGE_STREAM_WORDS.iter().any(|w| n.contains(w))
        })
    };
    (RECEIVE_METHODS.contains(&method.as_str()) || method == "next" && stream()).then_some(e.span)
}

/// Whether `names` (from configuration) names `f`: by its name, `Type::method`, or a suffix
/// of its path (`jobs::retry`).
pub fn names_fn(names: &[String], resolver: &Resolver, file: &FileModel, f: &FnDef) -> bool {
    if names.is_empty() {
        return false;
    }
    let path = resolver.fn_path(file, f);
    names.iter().any(|n| {
        *n == f.name || *n == f.display_name() || {
            let parts: Vec<&str> = n.split("::").collect();
            parts.len() > 1
                && path.segments.len() >= parts.len()
                && path.segments[path.segments.len() - parts.len()..]
                    .iter()
                    .zip(&parts)
                    .all(|(a, b)| a == b)
        }
    })
}

/// A method of an impl of a framework's trait (`impl AsyncRunnable for SendEmail`), which
/// the framework calls with each job or message.
fn is_framework_callback(
    package: &Package,
    resolver: &Resolver,
    file: &FileModel,
    f: &FnDef,
) -> bool {
    let Some(trait_path) = &f.trait_path else {
        return false;
    };
    let declared_here = f
        .self_ty
        .as_ref()
        .and_then(|t| t.core_path())
        .is_some_and(|p| p.segments == trait_path.segments);
    if declared_here {
        return false;
    }
    let tr = resolver.resolve(file.target, &f.module, trait_path, f.self_ty.as_ref());
    match &tr.krate {
        Krate::Extern(k) => package.depends_on(k) && !NON_CALLBACK_CRATES.contains(&&**k),
        Krate::Local(_) => false,
    }
}

/// The public API of the library target: `pub` items in modules reachable through `pub mod`
/// from the crate root, items re-exported by a `pub use` in such a module, and `pub` methods
/// (and trait impls) of public types.
#[derive(Debug)]
struct PublicApi {
    lib: Option<usize>,
    /// Modules (`["crate", "a"]`) reachable from the root through `pub mod`.
    modules: PathSet<Vec<String>>,
    /// Paths named by `pub use` in public modules.
    reexports: PathSet<DefPath>,
    /// Modules re-exported whole by `pub use m::*` in public modules.
    glob_modules: PathSet<DefPath>,
    /// Public structs, enums and traits.
    types: PathSet<DefPath>,
}

impl PublicApi {
    fn new(package: &Package, resolver: &Resolver) -> PublicApi {
        let lib = package
            .targets
            .iter()
            .position(|t| t.kind.iter().any(|k| k.contains("lib")));
        let lib_files: Vec<&FileModel> = package
            .files
            .iter()
            .filter(|f| Some(f.target) == lib)
            .map(|f| &**f)
            .collect();
        let pub_decl: PathSet<&[String]> = lib_files
            .iter()
            .flat_map(|f| &f.mods)
            .filter(|m| m.is_pub && !m.cfg_test)
            .map(|m| &m.module[..])
            .collect();
        let reachable = |m: &[String]| (2..=m.len()).all(|n| pub_decl.contains(&m[..n]));
        let modules: PathSet<Vec<String>> = lib_files
            .iter()
            .flat_map(|f| {
                std::iter::once(&f.module[..]).chain(f.mods.iter().map(|d| &d.module[..]))
            })
            .filter(|m| reachable(m))
            .map(<[String]>::to_vec)
            .collect();
        let mut api = PublicApi {
            lib,
            modules,
            reexports: PathSet::default(),
            glob_modules: PathSet::default(),
            types: PathSet::default(),
        };
        for file in &lib_files {
            for u in &file.uses {
                if !u.is_pub || !api.modules.contains(&u.module[..]) {
                    continue;
                }
                let p = resolver.resolve_strs(file.target, &u.module, &u.path);
                if u.glob {
                    api.glob_modules.insert(p);
                } else {
                    api.reexports.insert(p);
                }
            }
        }
        for file in &lib_files {
            let structs = file.structs.iter().map(|s| (&s.module, &s.name, s.vis));
            let decls = file.decls.iter().map(|d| (&d.module, &d.name, d.vis));
            for (module, name, vis) in structs.chain(decls) {
                let path = resolver.resolve_strs(file.target, module, std::slice::from_ref(name));
                if vis == Visibility::Public && api.exposes(&path, module) {
                    api.types.insert(path);
                }
            }
        }
        api
    }

    /// Whether the `pub` item at `path`, declared in `module`, can be named from outside.
    fn exposes(&self, path: &DefPath, module: &[String]) -> bool {
        let parent = path.parent();
        self.modules.contains(module)
            || self.reexports.contains(path)
            || self.glob_modules.contains(&parent)
    }

    fn contains(&self, resolver: &Resolver, file: &FileModel, f: &FnDef) -> bool {
        if Some(file.target) != self.lib || f.vis != Visibility::Public || f.nested {
            return false;
        }
        match &f.self_ty {
            None => self.exposes(&resolver.fn_path(file, f), &f.module),
            Some(ty) => resolver
                .resolve_type(file.target, &f.module, ty, None)
                .is_some_and(|t| self.types.contains(&t)),
        }
    }
}

/// A fn whose name, module or route path says it receives webhooks.
fn is_webhook(f: &crate::model::FnDef) -> bool {
    let route = f.attrs.iter().any(|a| {
        a.args.iter().any(|arg| {
            matches!(arg, crate::model::AttrArg::Lit(e)
                if e.as_str_lit().is_some_and(entries::names_webhook))
        })
    });
    // The module path and the name together: `oidc::callback::get` is a sign-in callback.
    let path = f
        .module
        .iter()
        .map(String::as_str)
        .chain([f.name.as_str()])
        .collect::<Vec<_>>()
        .join("::");
    entries::names_webhook(&path) || route
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Types;
    use crate::model::TargetInfo;
    use crate::testing;

    /// Entry points as (fn display name, kind), for a lib of `lib` files and, when given, a
    /// bin target of one file.
    fn entries(
        lib: &[(&str, &str)],
        bin: Option<&str>,
        config: &[&str],
    ) -> Vec<(String, EntryKind)> {
        let mut files = lib.to_vec();
        if let Some(b) = bin {
            files.push(("crate", b));
        }
        let mut package = testing::package(
            "app",
            &["tokio", "axum", "actix-web", "lambda_runtime", "fang"],
            &files,
        );
        if bin.is_some() {
            package.targets.push(TargetInfo {
                name: "app-bin".into(),
                kind: vec!["bin".into()],
                root: "src/main.rs".into(),
            });
            std::sync::Arc::make_mut(package.files.last_mut().unwrap()).target = 1;
        }
        let resolver = Resolver::new(&package);
        let types = Types::new(&package, &resolver);
        let graph = CallGraph::new(&package, &resolver, &types);
        let config: Vec<String> = config.iter().map(|s| s.to_string()).collect();
        entry_points(&package, &resolver, &graph, &Default::default(), &config)
            .into_iter()
            .map(|e| (e.id.def(&package).1.display_name(), e.kind))
            .collect()
    }

    fn kind_of(es: &[(String, EntryKind)], name: &str) -> Option<EntryKind> {
        es.iter().find(|(n, _)| n == name).map(|(_, k)| *k)
    }

    #[test]
    fn servers_register_routes_services_and_tasks() {
        let es = entries(
            &[(
                "crate",
                "mod handlers { pub async fn create() {} pub async fn retry_worker() {} pub async fn index() {}
                     pub async fn lambda(e: u8) {} pub async fn helper() {} }",
            )],
            Some(
                "use app::handlers::{create, retry_worker, index, lambda};
                 use axum::routing::post;
                 #[tokio::main]
                 async fn main() {
                     let app = axum::Router::new().route(\"/x\", post(create));
                     tokio::spawn(async move { retry_worker().await });
                     actix_web::web::resource(\"/\").route(actix_web::web::get().to(index));
                     lambda_runtime::run(lambda_runtime::service_fn(lambda)).await;
                 }",
            ),
            &[],
        );
        assert_eq!(kind_of(&es, "main"), Some(EntryKind::Main));
        assert_eq!(kind_of(&es, "create"), Some(EntryKind::Route));
        assert_eq!(kind_of(&es, "retry_worker"), Some(EntryKind::Spawned));
        assert_eq!(kind_of(&es, "index"), Some(EntryKind::Route));
        assert_eq!(kind_of(&es, "lambda"), Some(EntryKind::Service));
        // `mod handlers` is private: not public API, and nothing registers `helper`.
        assert_eq!(kind_of(&es, "helper"), None);
    }

    #[test]
    fn tasks_spawned_from_a_loop_over_incoming_items_are_entries() {
        let es = entries(
            &[(
                "crate",
                "async fn consume(m: u8) {} fn replay(m: u8) {} async fn backfill() {}
                 async fn forward(m: u8) {} async fn inline(m: u8) {}
                 pub(crate) async fn run(mut rx: tokio::sync::mpsc::Receiver<u8>) {
                     let mut set = tokio::task::JoinSet::new();
                     set.spawn(backfill());
                     while let Some(m) = rx.recv().await {
                         set.spawn(async move { consume(m).await });
                         tokio::task::spawn_blocking(move || replay(m));
                         let h = tokio::spawn(forward(m));
                         inline(m).await;
                     }
                 }",
            )],
            None,
            &[],
        );
        for name in ["consume", "replay", "backfill", "forward"] {
            assert_eq!(
                kind_of(&es, name),
                Some(EntryKind::Spawned),
                "{name}: {es:?}"
            );
        }
        assert_eq!(kind_of(&es, "inline"), None);
    }

    #[test]
    fn attributes_config_and_framework_traits_make_entries() {
        let es = entries(
            &[(
                "crate",
                "#[actix_web::post(\"/refund\")] async fn refund() {}
                 #[idempotent(key = req.id)] async fn charge(req: u8) {}
                 async fn resend() {}
                 struct SendEmail;
                 #[fang::typetag::serde]
                 impl fang::AsyncRunnable for SendEmail { async fn run(&self) {} }
                 impl std::fmt::Display for SendEmail { fn fmt(&self) {} }
                 async fn unrelated() {}",
            )],
            None,
            &["resend"],
        );
        assert_eq!(kind_of(&es, "refund"), Some(EntryKind::Route));
        assert_eq!(kind_of(&es, "charge"), Some(EntryKind::Idempotent));
        assert_eq!(kind_of(&es, "resend"), Some(EntryKind::Configured));
        assert_eq!(kind_of(&es, "SendEmail::run"), Some(EntryKind::Job));
        assert_eq!(kind_of(&es, "SendEmail::fmt"), None);
        assert_eq!(kind_of(&es, "unrelated"), None);
    }

    #[test]
    fn public_api_is_what_pub_mod_and_pub_use_reach() {
        let es = entries(
            &[
                (
                    "crate",
                    "pub mod api; mod inner; pub use inner::exported; pub fn root() {} fn private() {}
                     pub(crate) fn restricted() {}",
                ),
                ("crate::api", "pub fn open() {} pub struct Client; impl Client { pub fn send(&self) {} }"),
                ("crate::inner", "pub fn exported() {} pub fn hidden() {}"),
            ],
            None,
            &[],
        );
        for name in ["root", "open", "Client::send", "exported"] {
            assert_eq!(
                kind_of(&es, name),
                Some(EntryKind::PublicApi),
                "{name}: {es:?}"
            );
        }
        for name in ["private", "restricted", "hidden"] {
            assert_eq!(kind_of(&es, name), None, "{name}");
        }
    }
}
