//! Value flow inside one function: where each value came from, followed through `let`
//! (with patterns), assignments, shadowing, macro arguments (`format!`, inline `{name}`
//! captures), conversions (`to_string`, `clone`, `into`, `as_str`), references, struct and
//! tuple fields, method chains, closures and async blocks, and `if`/`match` arms.
//!
//! Public API:
//! - [`walk`]`(cx, id, callees) -> FnFlow`: one pass over a function body in evaluation
//!   order. Calls into the crate use the callees' [`FnSummary`] (from
//!   [`crate::analysis::summary`], which drives the walks to a fixed point); nothing is
//!   re-analysed per call site.
//! - [`FnFlow`]: what the walk found: [`KeyUse`]s (values that reached a key sink),
//!   [`StoreEvent`]s (store operations, direct or through a helper, with their keys),
//!   [`Decision`]s (branches on a store operation's result), [`Effect`]s (calls made for
//!   their side effects), [`CallSite`]s (resolved calls into the crate) and the return value.
//! - [`Value`] is a set of [`Fact`]s: a nondeterministic [`Source`] with the [`Trail`] of
//!   steps it took, a parameter of the function, or the result of a store operation. Every
//!   fact keeps spans, so a finding can show source → steps → sink.
//! - [`KeyDesc`] describes how a key is derived (`fmt("done:{}", msg.id)`), with
//!   parameters as placeholders, so keys can be compared across a read and a write and
//!   across a helper and its caller.
//!
//! Branches are walked one after the other on the same environment; an assignment inside a
//! branch adds to the variable's value instead of replacing it, so after the `if` the
//! variable holds what either arm gave it. Loop bodies and closures are walked once.

use super::binding::{bind_pattern, part_of, takes_parts, Binding, Hop};
use super::callgraph::{CallGraph, CallKind};
use super::resolve::{DefPath, Resolver};
use super::store_ops::{self, Access, OpEnv, StoreOp};
use super::summary::{FnSummary, StoreAccess};
use super::types::{TypeEnv, Types};
use super::PathMap;
use crate::catalog::stores::mongodb::DOC_MACROS;
use crate::catalog::{Catalog, SinkKind, SourceKind};
use crate::model::ir::{BinOp, Block, Expr, ExprKind, Lit, MacroCall, Pat, Path, Stmt};
use crate::model::{FileModel, FnDef, Package, Span};
use std::sync::atomic::Ordering;
use std::sync::Arc;
mod bindings;
mod calls;
mod exprs;
mod key_desc;
mod leaves;
mod value;
use self::bindings::*;
use self::calls::*;
use self::exprs::*;
pub use self::key_desc::*;
pub use self::leaves::*;
pub use self::value::*;

/// A value that reached a key sink.
#[derive(Debug, Clone)]
pub struct KeyUse {
    pub sink: SinkKind,
    /// Where the key is used: the argument, field or binding.
    pub span: Span,
    pub value: Value,
    /// When the sink is inside a crate function the value was passed to: that function
    /// and the sink's span there.
    pub via: Option<(FnId, Span)>,
}

/// A store operation performed by the function, directly or through a crate helper.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    pub access: StoreAccess,
    /// The operation (or the call of the helper that performs it).
    pub span: Span,
    pub via: Option<FnId>,
    /// Whether the result is tested (a branch, a `?` on a conditional DynamoDB write, or
    /// returned to the caller): a claim whose result nobody looks at claims nothing.
    pub checked: bool,
    /// Whether its error leaves the function (`?` on a conditional DynamoDB write or a
    /// key-only insert): a caller's `?` on the call stops there too.
    pub tried: bool,
}

impl StoreEvent {
    /// An atomic claim whose answer is tested: only then does it tell one delivery it won
    /// (an untested `SET NX`, `HSETNX` or `SADD` is a plain write).
    pub fn won_claim(&self) -> bool {
        self.access.access == Access::Claim && self.checked
    }
}

/// One branch of a [`Decision`].
#[derive(Debug, Clone)]
pub struct Branch {
    pub span: Span,
    /// Leaves the enclosing block: `return`, `continue`, `break`, `bail!`, `panic!`.
    pub diverges: bool,
    /// Leaves the whole function (or closure, or async block): `return`, `?` on an
    /// `Err`, `bail!`, `panic!`; not `break` or `continue`.
    pub returns: bool,
    /// `Some(true)` when the branch runs if the store had the key (`if exists {..}`,
    /// `Some(_) =>`), `Some(false)` when it did not, `None` when that cannot be told.
    pub when_present: Option<bool>,
}

/// A branch on the result of store operations.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The condition or scrutinee.
    pub span: Span,
    /// Indices into [`FnFlow::store_events`].
    pub ops: Vec<usize>,
    pub branches: Vec<Branch>,
    /// The innermost block holding the decision: code after it there runs after it.
    pub block: Span,
    /// The body of the function, closure or async block holding the decision: after a
    /// branch that returns, the rest of it runs only when that branch was not taken.
    pub body: Span,
}

/// A call made for its effect (an awaited call, a call statement, a helper with effects).
#[derive(Debug, Clone)]
pub struct Effect {
    pub span: Span,
}

/// A resolved call into the crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSite {
    pub callee: FnId,
    pub span: Span,
}

/// A parameter a function reads as text (SQL, a table name): the whole parameter, or one
/// element of a tuple parameter (`queries.1` of `queries: (&str, &str)`: `Some("1")`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TextParam {
    pub param: usize,
    pub part: Option<String>,
}

/// The text a caller passes for a [`TextParam`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TextArg {
    pub slot: TextParam,
    pub text: String,
}

/// A call that passes SQL text to a crate function: that function is walked again with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TextCall {
    pub callee: FnId,
    pub texts: Vec<TextArg>,
}

/// What one walk of a function found.
#[derive(Debug, Clone, Default)]
pub struct FnFlow {
    pub key_uses: Vec<KeyUse>,
    pub store_events: Vec<StoreEvent>,
    pub decisions: Vec<Decision>,
    pub effects: Vec<Effect>,
    pub calls: Vec<CallSite>,
    /// The value the function returns (tail and `return`s).
    pub ret: Value,
    /// Parameters asked for as text (SQL, a table name) whose text is not known here: a
    /// caller passing a literal or constant gets the function walked again with it.
    pub text_params: Vec<TextParam>,
    /// Calls passing SQL text to such a parameter: the callee's walks with those texts are
    /// kept too ([`super::summary::Summaries::bound_flows`]).
    pub text_calls: Vec<TextCall>,
}

/// The package-wide tables a walk reads.
pub struct FlowCx<'a> {
    pub package: &'a Package,
    pub resolver: &'a Resolver,
    pub types: &'a Types,
    pub catalog: &'a Catalog,
    /// Which crate fn each call reaches.
    pub graph: &'a CallGraph,
    /// Texts kept in struct fields, read on first use or ahead ([`FlowCx::read_field_texts`]).
    pub field_texts: std::sync::OnceLock<super::field_texts::FieldTexts>,
    /// Whether a walk asked for a field text.
    pub field_texts_asked: std::sync::atomic::AtomicBool,
}

impl<'a> FlowCx<'a> {
    /// The context of walks over `package`, field texts not read yet.
    pub fn new(
        package: &'a Package,
        resolver: &'a Resolver,
        types: &'a Types,
        catalog: &'a Catalog,
        graph: &'a CallGraph,
    ) -> FlowCx<'a> {
        FlowCx {
            package,
            resolver,
            types,
            catalog,
            graph,
            field_texts: Default::default(),
            field_texts_asked: Default::default(),
        }
    }

    /// The one constant text the package puts in struct field `name`.
    pub fn field_text(&self, name: &str) -> Option<&str> {
        self.field_texts_asked.store(true, Ordering::Relaxed);
        self.field_texts
            .get_or_init(|| super::field_texts::FieldTexts::new(self))
            .text(name)
    }

    /// Reads the field texts now, the files in parallel. Read on first use instead, they
    /// cost one thread a read of every body of the package while the walks on the other
    /// threads that asked too wait for it (tokio and hir-ty ask within their first walks).
    pub fn read_field_texts(&self) {
        if self.field_texts.get().is_none() {
            let _ = self
                .field_texts
                .set(super::field_texts::FieldTexts::new_parallel(self));
        }
    }

    /// The field texts, when a walk asked for one.
    pub fn into_field_texts(self) -> Option<super::field_texts::FieldTexts> {
        let asked = self.field_texts_asked.into_inner();
        self.field_texts.into_inner().filter(|_| asked)
    }
}

/// Gives the summary of a crate function (computing it first if need be).
pub trait Callees {
    fn summary(&self, id: FnId) -> Arc<FnSummary>;
}

/// Walks function `id` once.
pub fn walk(cx: &FlowCx<'_>, id: FnId, callees: &dyn Callees) -> FnFlow {
    walk_bound(cx, id, callees, &[], 0)
}

/// Walks function `id` with parameters bound to the texts a caller passes: a helper given
/// its SQL as a `&str` parameter, or a tuple of them. `depth` counts nested re-walks.
pub fn walk_bound(
    cx: &FlowCx<'_>,
    id: FnId,
    callees: &dyn Callees,
    texts: &[TextArg],
    depth: usize,
) -> FnFlow {
    // Past the package's budget no more bodies are walked ([`super::budget`]).
    if cx.catalog.budget.spent() {
        return FnFlow::default();
    }
    let mut w = Walker::new(cx, callees, id);
    w.rewalk_depth = depth;
    let f = w.f;
    for (i, p) in f.params.iter().enumerate() {
        let v = Value::fact(Fact::Param {
            index: i,
            field: None,
        });
        w.bind_pat(
            &p.pat,
            v,
            Some(DescSrc::Desc(KeyDesc::root(format!("${i}$")))),
            None,
        );
        for t in texts.iter().filter(|t| t.slot.param == i) {
            if let Some(name) = text_name(&p.pat, t.slot.part.as_deref()) {
                w.part_texts |= t.slot.part.is_some();
                w.strs.insert(name, t.text.clone());
            }
        }
    }
    for attr in f.attrs.iter().filter(|a| a.is("idempotent")) {
        if let Some(key) = attr.arg("key") {
            let v = w.eval(key);
            w.key_use(SinkKind::IdempotentAttr, key.span, v, None);
        }
    }
    if let Some(body) = &f.body {
        w.bodies.push(body.span);
        let v = w.eval_block(body);
        w.out.ret.union(&v);
    }
    let ret_ops: Vec<usize> = w.out.ret.ops().collect();
    for i in ret_ops {
        let ev = &mut w.out.store_events[i];
        ev.checked = true;
        // Returned, a key-only insert's or a conditional write's error is the caller's.
        ev.tried |= fails_out(&ev.access);
    }
    let unknown = w.unknown_texts.take();
    w.out.text_params = f
        .params
        .iter()
        .enumerate()
        .flat_map(|(i, p)| text_params_of(i, &p.pat, &unknown))
        .collect();
    w.out
}

struct Walker<'a, 'c> {
    cx: &'c FlowCx<'a>,
    callees: &'c dyn Callees,
    id: FnId,
    file: &'a FileModel,
    f: &'a FnDef,
    types: TypeEnv<'a>,
    vals: PathMap<String, Value>,
    /// How each local is derived, described on demand (most locals are never keys).
    descs: PathMap<String, DescSrc<'a>>,
    /// Locals bound to string literals (SQL text, table and header names).
    strs: PathMap<String, String>,
    /// Per block: names bound in it and what they shadowed, restored on exit.
    scopes: Vec<Vec<Saved<'a>>>,
    branch_depth: usize,
    /// The branch depth each local was bound at: an assignment at that depth replaces its
    /// value (a local of an async block or closure assigned in that same body).
    bound_at: PathMap<String, usize>,
    /// The value closure parameters get: the receiver of the method the closure is passed to.
    closure_arg: Option<Value>,
    /// Spans of the blocks being walked, innermost last.
    blocks: Vec<Span>,
    /// Bodies a `return` leaves: the function's, then closures' and async blocks'.
    bodies: Vec<Span>,
    /// Names asked for as text whose text was not known (see [`FnFlow::text_params`]).
    unknown_texts: std::cell::RefCell<Vec<String>>,
    /// How many callers up this walk is a re-walk with bound texts.
    rewalk_depth: usize,
    /// Texts are bound to tuple parameters' elements (`strs["queries.1"]`), forgotten when
    /// the parameter's name is bound again.
    part_texts: bool,
    out: FnFlow,
}

type Saved<'a> = (
    String,
    Option<Value>,
    Option<DescSrc<'a>>,
    Option<String>,
    Option<usize>,
);

/// What a local's [`KeyDesc`] is made from.
#[derive(Debug, Clone)]
enum DescSrc<'a> {
    Desc(KeyDesc),
    /// The initializer, described when a key needs it.
    Expr(&'a Expr),
}

/// How many locals deep a description follows initializers (`let a = b; let b = ..`).
const MAX_DESC_DEPTH: usize = 8;

/// Methods whose result is a lookup by the argument, not a value derived from it.
const LOOKUP_METHODS: &[&str] = &[
    "get",
    "get_mut",
    "contains",
    "contains_key",
    "remove",
    "len",
    "is_empty",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
    "eq",
    "ne",
    "cmp",
    "partial_cmp",
    "starts_with",
    "ends_with",
    "find",
    "position",
    "any",
    "all",
    "count",
    "duration_since",
    "elapsed",
    "signed_duration_since",
];

/// Methods whose argument is a default used when the receiver has no value.
const FALLBACK_METHODS: &[&str] = &[
    "unwrap_or",
    "unwrap_or_else",
    "or",
    "or_else",
    "get_or_insert_with",
    "map_or",
    "map_or_else",
];

/// Conversions that keep a key's identity (for [`KeyDesc`]).
const CONVERSIONS: &[&str] = &[
    "to_string",
    "to_owned",
    "clone",
    "into",
    "as_str",
    "as_ref",
    "as_bytes",
    "to_vec",
    "unwrap",
    "expect",
    "as_deref",
    "borrow",
    "deref",
    "hyphenated",
    "simple",
    "to_hyphenated",
    "to_simple",
    "as_hyphenated",
    "as_simple",
    "try_into",
    "unwrap_or_default",
];

/// Statement-level method calls that change a local value, not the world.
const LOCAL_MUTATIONS: &[&str] = &[
    "push",
    "push_str",
    "insert",
    "extend",
    "remove",
    "clear",
    "sort",
    "sort_by",
    "sort_by_key",
    "dedup",
    "truncate",
    "retain",
    "pop",
    "append",
    "set",
    "entry",
    "drain",
    "reserve",
];

/// Constructors that wrap a marker without making it data: `Some(1)`,
/// `AttributeValue::Bool(true)`, `AttributeValue::N(now.to_string())`.
const MARKER_WRAPPERS: &[&str] = &["Some", "Ok", "S", "N", "Bool", "from", "new"];

/// Reads of the process environment: the worker's host or region, not a computed result.
const ENV_READS: &[&str] = &["std::env::var", "std::env::var_os", "dotenvy::var"];

/// Methods that append their arguments to the receiver.
const APPENDERS: &[&str] = &[
    "push_str",
    "push",
    "extend",
    "extend_from_slice",
    "append",
    "write_str",
    "write_fmt",
];

/// Macros that diverge.
const DIVERGING_MACROS: &[&str] = &["panic", "bail", "unreachable", "todo", "unimplemented"];

/// Macros whose arguments flow into their value.
const FORMAT_MACROS: &[&str] = &[
    "format",
    "concat",
    "write",
    "writeln",
    "vec",
    "json",
    "format_args",
];

impl<'a> OpEnv<'a> for Walker<'a, '_> {
    fn stores(&self) -> &crate::catalog::stores::StoreModels {
        &self.cx.catalog.stores
    }

    fn resolve(&self, path: &Path) -> DefPath {
        // The fn's module, as its type environment looked it up.
        self.cx
            .resolver
            .resolve_at(self.types.module_scope(), path, self.f.self_ty.as_ref())
    }

    fn type_of(&self, expr: &Expr) -> Option<DefPath> {
        self.types.type_of(expr)
    }

    fn string_of(&self, expr: &Expr) -> Option<String> {
        if let Some(s) = expr.as_str_lit() {
            return Some(s.to_owned());
        }
        let e = expr.peel();
        if let ExprKind::MethodCall {
            receiver, method, ..
        } = &e.kind
        {
            if CONVERSIONS.contains(&method.as_str()) {
                return self.string_of(receiver);
            }
        }
        let ident = e.as_path().and_then(|p| p.as_ident());
        if let Some(s) = ident.and_then(|n| self.strs.get(n)) {
            return Some(s.clone());
        }
        // `queries.1`: an element of a tuple parameter, named like that when asked for.
        let element = match &e.kind {
            ExprKind::Field { base, member } if member.parse::<usize>().is_ok() => base
                .as_path()
                .and_then(Path::as_ident)
                .map(|b| format!("{b}.{member}")),
            _ => None,
        };
        if let Some(name) = &element {
            if let Some(s) = self.strs.get(name) {
                return Some(s.clone());
            }
        }
        let text = match &e.kind {
            // `format!("SELECT .. FROM {}", self.table)`, its arguments read here (locals too).
            ExprKind::Macro(m) if m.path.last() == "format" => {
                format_sql(m, &mut |a| self.string_of(a))
            }
            // `self.queries.mark`: the text the package's struct literals put in `mark`.
            ExprKind::Field { member, .. } => self.cx.field_text(member).map(str::to_owned),
            // A sea-query statement (`Query::insert()..`, `stmt.build(PostgresQueryBuilder)`):
            // the SQL it stands for.
            _ => const_text(self.cx, self.file, &self.f.module, e, 0)
                .or_else(|| super::query_builders::sea_query_sql(self, e)),
        };
        if let (None, Some(name)) = (&text, ident.or(element.as_deref())) {
            let mut unknown = self.unknown_texts.borrow_mut();
            if !unknown.iter().any(|n| n == name) {
                unknown.push(name.to_owned());
            }
        }
        text
    }

    fn depends_on(&self, krate: &str) -> bool {
        self.cx.package.depends_on(krate)
    }

    fn query_file_text(&self, path: &str) -> Option<String> {
        self.file.query_file_text(path).map(str::to_owned)
    }

    fn local_init(&self, name: &str) -> Option<&'a Expr> {
        match self.descs.get(name)? {
            DescSrc::Expr(e) => Some(*e),
            DescSrc::Desc(_) => None,
        }
    }

    fn const_value(&self, path: &Path) -> Option<&'a Expr> {
        let def = self.resolve(path);
        let super::resolve::Krate::Local(target) = def.krate else {
            return None;
        };
        let (_, c) = self.cx.package.const_def(target, &def.segments)?;
        Some(&c.value)
    }

    fn builder_of(&self, call: &'a Expr) -> Option<&'a Expr> {
        let [one] = self.cx.graph.calls_at(self.id, call.span) else {
            return None;
        };
        let tail = one.callee.def(self.cx.package).1.body.as_ref()?.tail()?;
        store_ops::self_contained_builder(tail).then_some(tail)
    }
}

impl<'a, 'c> Walker<'a, 'c> {
    /// A walker of fn `id` with only its parameters' types known and nothing bound yet.
    fn new(cx: &'c FlowCx<'a>, callees: &'c dyn Callees, id: FnId) -> Self {
        let (file, f) = id.def(cx.package);
        Walker {
            cx,
            callees,
            id,
            file,
            f,
            types: TypeEnv::for_params(cx.package, cx.resolver, cx.types, file, f),
            vals: PathMap::default(),
            descs: PathMap::default(),
            strs: PathMap::default(),
            scopes: vec![Vec::new()],
            branch_depth: 0,
            bound_at: PathMap::default(),
            closure_arg: None,
            blocks: Vec::new(),
            bodies: Vec::new(),
            unknown_texts: Default::default(),
            rewalk_depth: 0,
            part_texts: false,
            out: FnFlow::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::testing;

    /// The flow of the package's only function called `name`.
    fn flow_of(src: &str, name: &str) -> (Package, FnFlow) {
        let package = testing::package("app", &["uuid", "redis"], &[("crate", src)]);
        let analysis = Analysis::new(&package);
        let s = analysis.summaries(&package);
        let id = s
            .ids()
            .find(|id| id.def(&package).1.name == name)
            .expect("fn exists");
        let flow = s.flow(id).clone();
        (package, flow)
    }

    fn text(src: &str, span: Span) -> &str {
        &src[span.lo as usize..span.hi as usize]
    }

    #[test]
    fn trails_name_each_step_from_source_to_sink() {
        let src = r#"
            fn f(c: &aws_sdk_sqs::Client) {
                let id = uuid::Uuid::new_v4();
                let token = format!("job-{id}");
                let copy = token.clone();
                c.send_message().message_deduplication_id(copy);
            }"#;
        let (_, flow) = flow_of(src, "f");
        assert_eq!(flow.key_uses.len(), 1);
        let ku = &flow.key_uses[0];
        assert_eq!(text(src, ku.span), "copy");
        let (source, trail) = ku.value.nondet().next().unwrap();
        assert_eq!(text(src, source.span), "uuid::Uuid::new_v4()");
        let steps: Vec<&str> = trail.steps().iter().map(|s| text(src, s.span)).collect();
        assert_eq!(steps, vec!["format!(\"job-{id}\")", "token", "copy"]);
    }

    #[test]
    fn reads_decisions_and_writes_are_recorded_with_comparable_keys() {
        let src = r#"
            async fn f(conn: &mut redis::aio::ConnectionManager, msg: &Msg) {
                let key = format!("done:{}", msg.id);
                if conn.exists(&key).await.unwrap() {
                    return;
                }
                conn.set(format!("done:{}", msg.id), 1).await.unwrap();
            }"#;
        let (_, flow) = flow_of(src, "f");
        let kinds: Vec<Access> = flow.store_events.iter().map(|e| e.access.access).collect();
        assert_eq!(kinds, vec![Access::Read, Access::Write]);
        let (r, w) = (&flow.store_events[0].access, &flow.store_events[1].access);
        assert!(r.key.as_ref().unwrap().same_key(w.key.as_ref().unwrap()));
        assert_eq!(flow.decisions.len(), 1);
        let d = &flow.decisions[0];
        assert_eq!(d.ops, vec![0]);
        assert!(d.branches[0].diverges);
        assert_eq!(d.branches[0].when_present, Some(true));
        assert!(flow.store_events[0].checked);
    }

    #[test]
    fn key_descriptions_compare_derivations_not_spellings() {
        let src = r#"
            fn f(id: &str, other: &str) {
                let a = format!("seen:{id}");
                let b = format!("seen:{}", id.to_string());
                let c = format!("lock:{}", id);
                let d = format!("seen:{}", other);
                let _ = (a, b, c, d);
            }"#;
        let package = testing::package("app", &[], &[("crate", src)]);
        let analysis = Analysis::new(&package);
        let file = &package.files[0];
        let f = &file.fns[0];
        let body = f.body.as_ref().unwrap();
        let inits: Vec<&Expr> = body
            .stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Let { init: Some(i), .. } => Some(i),
                _ => None,
            })
            .collect();
        let cx = FlowCx {
            package: &package,
            resolver: &analysis.resolver,
            types: &analysis.types,
            catalog: &analysis.catalog,
            graph: analysis.call_graph(&package),
            field_texts: Default::default(),
            field_texts_asked: Default::default(),
        };
        struct NoCallees;
        impl Callees for NoCallees {
            fn summary(&self, _: FnId) -> Arc<FnSummary> {
                Arc::new(FnSummary::default())
            }
        }
        let w = Walker::new(&cx, &NoCallees, FnId::new(0, 0));
        let d: Vec<KeyDesc> = inits[..4].iter().map(|e| w.describe(e).unwrap()).collect();
        assert!(d[0].same_key(&d[1]));
        assert!(!d[0].same_key(&d[2]));
        assert!(!d[0].same_key(&d[3]));
        let inst = KeyDesc::root("$0$".into()).instantiate(&[Some(d[0].clone())]);
        assert_eq!(inst.text, d[0].text);
        // The caller's own placeholders in an argument are not the callee's.
        let callee = KeyDesc::combine(
            "f",
            &[KeyDesc::root("$0$".into()), KeyDesc::root("$1$".into())],
        );
        let args = [
            Some(KeyDesc::root("$1$".into())),
            Some(KeyDesc::root("$0$".into())),
        ];
        let inst = callee.instantiate(&args);
        assert_eq!(inst.text, "f($1$,$0$)");
        assert_eq!(inst.roots, vec!["$1$".to_owned(), "$0$".to_owned()]);
    }
}
