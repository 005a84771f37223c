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

/// A function of the package: file index and index in [`FileModel::fns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FnId {
    pub file: u32,
    pub index: u32,
}

impl FnId {
    pub fn new(file: usize, index: usize) -> FnId {
        FnId {
            file: file as u32,
            index: index as u32,
        }
    }

    pub fn def<'a>(&self, package: &'a Package) -> (&'a FileModel, &'a FnDef) {
        let file = &package.files[self.file as usize];
        (file, &file.fns[self.index as usize])
    }
}

/// Where a nondeterministic value was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub span: Span,
    /// The call as written, for labels: `Uuid::new_v4()`.
    pub what: String,
    pub kind: SourceKind,
}

/// One step a value took between its source and a sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub span: Span,
    pub note: String,
}

/// The steps a value took, newest last; shared between the copies of a value.
#[derive(Debug, Clone, Default)]
pub struct Trail(Option<Arc<TrailNode>>);

#[derive(Debug)]
struct TrailNode {
    step: Step,
    prev: Trail,
    len: usize,
}

/// Steps kept per value: enough to show a path, not so many that labels drown the finding.
const MAX_STEPS: usize = 6;

impl Trail {
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |n| n.len)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    fn push(&self, step: Step) -> Trail {
        if self.len() >= MAX_STEPS {
            return self.clone();
        }
        Trail(Some(Arc::new(TrailNode {
            step,
            prev: self.clone(),
            len: self.len() + 1,
        })))
    }

    /// The steps in order, from the source towards the sink.
    pub fn steps(&self) -> Vec<&Step> {
        let mut out = Vec::new();
        let mut cur = self;
        while let Some(node) = &cur.0 {
            out.push(&node.step);
            cur = &node.prev;
        }
        out.reverse();
        out
    }
}

/// One thing a value is derived from.
#[derive(Debug, Clone)]
pub enum Fact {
    /// A nondeterministic source and the steps from it.
    Nondet { source: Arc<Source>, trail: Trail },
    /// Parameter `index` of the function (not counting `self`), or one of its fields
    /// (`msg.id` of parameter `msg`), so a caller passes only that field's facts.
    Param { index: usize, field: Option<String> },
    /// The result of [`FnFlow::store_events`]`[i]`.
    Op(usize),
}

impl Fact {
    fn same(&self, other: &Fact) -> bool {
        match (self, other) {
            (Fact::Nondet { source: a, .. }, Fact::Nondet { source: b, .. }) => a.span == b.span,
            (Fact::Param { index: a, field: f }, Fact::Param { index: b, field: g }) => {
                a == b && f == g
            }
            (Fact::Op(a), Fact::Op(b)) => a == b,
            _ => false,
        }
    }
}

/// Facts kept per value; beyond this a value is already known to be tainted.
pub(super) const MAX_FACTS: usize = 8;

/// What a value is derived from, with per-field values for struct and tuple literals.
#[derive(Debug, Clone, Default)]
pub struct Value {
    pub facts: Vec<Fact>,
    /// `Cmd { key: k, at: now }` keeps `key` and `at` apart, so `cmd.at` does not carry
    /// `k`'s facts. `facts` is always the union of the fields.
    pub fields: Vec<(String, Value)>,
}

impl Value {
    fn fact(f: Fact) -> Value {
        Value {
            facts: vec![f],
            fields: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    fn add(&mut self, f: Fact) {
        if self.facts.len() < MAX_FACTS && !self.facts.iter().any(|g| g.same(&f)) {
            self.facts.push(f);
        }
    }

    /// Adds `other`'s facts (fields are dropped: the result is a new value).
    pub fn union(&mut self, other: &Value) {
        for f in &other.facts {
            self.add(f.clone());
        }
    }

    fn joined(values: impl IntoIterator<Item = Value>) -> Value {
        let mut out = Value::default();
        for v in values {
            out.union(&v);
        }
        out
    }

    /// The value with `step` added to every nondeterministic fact's trail.
    fn stepped(mut self, step: impl Fn() -> Step) -> Value {
        if self.nondet().next().is_none() {
            return self;
        }
        let s = step();
        for f in &mut self.facts {
            if let Fact::Nondet { trail, .. } = f {
                *trail = trail.push(s.clone());
            }
        }
        self
    }

    /// The value of field `name`: the field's own value when the struct literal is known,
    /// else the whole value, with parameters narrowed to that field.
    pub fn field(&self, name: &str) -> Value {
        if let Some((_, v)) = self.fields.iter().find(|(n, _)| n == name) {
            return v.clone();
        }
        // Facts another field brought (`job.enqueued_at = now()`) are not this field's.
        let of_other_field = |f: &Fact| {
            self.fields
                .iter()
                .any(|(_, v)| v.facts.iter().any(|g| g.same(f)))
        };
        let facts = self
            .facts
            .iter()
            .filter(|f| !of_other_field(f))
            .map(|f| match f {
                Fact::Param { index, field: None } => Fact::Param {
                    index: *index,
                    field: Some(name.to_owned()),
                },
                other => other.clone(),
            })
            .collect();
        Value {
            facts,
            fields: Vec::new(),
        }
    }

    /// The nondeterministic sources with their trails.
    pub fn nondet(&self) -> impl Iterator<Item = (&Arc<Source>, &Trail)> {
        self.facts.iter().filter_map(|f| match f {
            Fact::Nondet { source, trail } => Some((source, trail)),
            _ => None,
        })
    }

    /// The parameters (and parameter fields) this value is derived from.
    pub fn params(&self) -> impl Iterator<Item = (usize, Option<&str>)> + '_ {
        self.facts.iter().filter_map(|f| match f {
            Fact::Param { index, field } => Some((*index, field.as_deref())),
            _ => None,
        })
    }

    /// The store events whose result this value is derived from.
    pub fn ops(&self) -> impl Iterator<Item = usize> + '_ {
        self.facts.iter().filter_map(|f| match f {
            Fact::Op(i) => Some(*i),
            _ => None,
        })
    }

    fn only_ops(&self) -> Value {
        Value {
            facts: self
                .facts
                .iter()
                .filter(|f| matches!(f, Fact::Op(_)))
                .cloned()
                .collect(),
            fields: Vec::new(),
        }
    }
}

/// How a key is derived, as canonical text: conversions and references stripped, locals
/// replaced by their definitions, parameters as `$0$`, format strings with `{}` holes.
/// `roots` are the variables and fields it depends on, `lits` its literal parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyDesc {
    pub text: String,
    pub roots: Vec<String>,
    pub lits: Vec<String>,
}

/// Longest description kept; longer keys are compared by roots and literals.
const MAX_DESC: usize = 160;

impl KeyDesc {
    fn root(text: String) -> KeyDesc {
        KeyDesc {
            roots: vec![text.clone()],
            text,
            lits: Vec::new(),
        }
    }

    fn lit(text: String) -> KeyDesc {
        KeyDesc {
            text: format!("{text:?}"),
            roots: Vec::new(),
            lits: vec![text],
        }
    }

    fn combine(head: &str, parts: &[KeyDesc]) -> KeyDesc {
        let mut text = format!("{head}(");
        let mut roots = Vec::new();
        let mut lits = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&p.text);
            roots.extend(p.roots.iter().cloned());
            lits.extend(p.lits.iter().cloned());
        }
        text.push(')');
        text.truncate(MAX_DESC);
        roots.sort();
        roots.dedup();
        KeyDesc { text, roots, lits }
    }

    /// Whether two keys are the same key, as far as they can be compared: the same
    /// derivation, or the same variables with the same literal parts.
    pub fn same_key(&self, other: &KeyDesc) -> bool {
        if self.text == other.text {
            return true;
        }
        let shared_root = self.roots.iter().any(|r| other.roots.contains(r));
        let lits_agree = self.lits == other.lits || self.lits.is_empty() || other.lits.is_empty();
        shared_root && lits_agree
    }

    /// The key as the caller sees it: parameter placeholders replaced by the arguments'
    /// descriptions (an argument without one leaves the key without comparable parts).
    /// All placeholders are replaced in one pass: an argument's own description holds the
    /// caller's placeholders (`$1$` of the caller's second parameter), which are not the
    /// callee's and must not be replaced again.
    pub fn instantiate(&self, args: &[Option<KeyDesc>]) -> KeyDesc {
        let mut lits = self.lits.clone();
        let text = replace_placeholders(&self.text, |i| match args.get(i)? {
            Some(a) => {
                lits.extend(a.lits.iter().cloned());
                Some(a.text.clone())
            }
            None => Some(format!("?{i}")),
        });
        let mut roots = Vec::new();
        for r in &self.roots {
            match first_placeholder(r).filter(|(i, _)| *i < args.len()) {
                Some((i, ph)) => {
                    let arg_roots = args[i].as_ref().map_or(&[][..], |a| &a.roots[..]);
                    roots.extend(arg_roots.iter().map(|x| r.replacen(ph, x, 1)));
                }
                None => roots.push(r.clone()),
            }
        }
        KeyDesc { text, roots, lits }
    }
}

/// `text` with each `$i$` replaced by `with(i)` (kept when that is `None`), in one pass.
fn replace_placeholders(text: &str, mut with: impl FnMut(usize) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, i, ph)) = next_placeholder(rest) {
        out.push_str(&rest[..start]);
        match with(i) {
            Some(r) => out.push_str(&r),
            None => out.push_str(ph),
        }
        rest = &rest[start + ph.len()..];
    }
    out.push_str(rest);
    out
}

/// The first `$i$` in `text`: its index and its text.
fn first_placeholder(text: &str) -> Option<(usize, &str)> {
    next_placeholder(text).map(|(_, i, ph)| (i, ph))
}

/// The first `$i$` in `text`: where it starts, its index and its text.
fn next_placeholder(text: &str) -> Option<(usize, usize, &str)> {
    let mut from = 0;
    while let Some(off) = text[from..].find('$') {
        let start = from + off;
        let digits = text[start + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(text.len(), |n| start + 1 + n);
        if digits > start + 1 && text[digits..].starts_with('$') {
            if let Ok(i) = text[start + 1..digits].parse() {
                return Some((start, i, &text[start..=digits]));
            }
        }
        from = start + 1;
    }
    None
}

/// Whether a repeat of the write fails with an error (a conditional DynamoDB write, a
/// key-only insert), so that `?` on it stops a second delivery.
fn fails_out(a: &StoreAccess) -> bool {
    a.access == Access::Claim && a.shape.fails_when_taken || a.shape.key_only
}

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

/// The name a text bound to parameter pattern `pat` (or to its tuple element `part`) is
/// known by in the walk: `sql`; `queries.1` for `queries: (&str, &str)`; `insert` for
/// `(find, insert): (&str, &str)`.
fn text_name(pat: &Pat, part: Option<&str>) -> Option<String> {
    if let Some(name) = pat.simple_name() {
        return Some(match part {
            None => name.to_owned(),
            Some(part) => format!("{name}.{part}"),
        });
    }
    let i: usize = part?.parse().ok()?;
    match peel_pat(pat) {
        Pat::Tuple(ps) => ps.get(i)?.simple_name().map(str::to_owned),
        _ => None,
    }
}

fn peel_pat(pat: &Pat) -> &Pat {
    match pat {
        Pat::Ref(p) | Pat::Typed { pat: p, .. } => peel_pat(p),
        other => other,
    }
}

/// The text slots of parameter `index` (pattern `pat`) among the names asked for as text
/// and not known.
fn text_params_of(index: usize, pat: &Pat, unknown: &[String]) -> Vec<TextParam> {
    let slot = |part: Option<String>| TextParam { param: index, part };
    if let Some(name) = pat.simple_name() {
        return unknown
            .iter()
            .filter_map(|u| match u.strip_prefix(name) {
                Some("") => Some(slot(None)),
                Some(rest) => {
                    let part = rest.strip_prefix('.')?;
                    part.parse::<usize>()
                        .ok()
                        .map(|_| slot(Some(part.to_owned())))
                }
                None => None,
            })
            .collect();
    }
    match peel_pat(pat) {
        Pat::Tuple(ps) => ps
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.simple_name()
                    .is_some_and(|n| unknown.iter().any(|u| u == n))
            })
            .map(|(i, _)| slot(Some(i.to_string())))
            .collect(),
        _ => Vec::new(),
    }
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

/// A value derived from the function's parameters only.
fn is_param_value(v: &Value) -> bool {
    !v.facts.is_empty() && v.facts.iter().all(|f| matches!(f, Fact::Param { .. }))
}

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

impl<'a> Walker<'a, '_> {
    // ------------------------------------------------------------ bindings and scopes

    fn save(&mut self, name: &str) {
        let scope = self.scopes.last_mut().expect("a scope is open");
        if scope.iter().any(|(n, ..)| n == name) {
            return;
        }
        scope.push((
            name.to_owned(),
            self.vals.get(name).cloned(),
            self.descs.get(name).cloned(),
            self.strs.get(name).cloned(),
            self.bound_at.get(name).copied(),
        ));
    }

    fn bind_name(&mut self, name: &str, v: Value, desc: Option<DescSrc<'a>>, s: Option<String>) {
        self.save(name);
        self.vals.insert(name.to_owned(), v);
        self.bound_at.insert(name.to_owned(), self.branch_depth);
        match desc {
            Some(d) => self.descs.insert(name.to_owned(), d),
            None => self.descs.remove(name),
        };
        match s {
            Some(s) => self.strs.insert(name.to_owned(), s),
            None => self.strs.remove(name),
        };
        if self.part_texts {
            // `queries.1` was the parameter's element; this `queries` is another value.
            self.strs.retain(|k, _| {
                k.strip_prefix(name)
                    .is_none_or(|rest| !rest.starts_with('.'))
            });
        }
    }

    /// Binds every name of `pat` ([`bind_pattern`]) to its part of `v`: its description and
    /// text follow the parts that keep them (the one field of `Some(x)`, a named field, a
    /// tuple element; only a tuple's first element keeps a text, sea-query's `(sql, values)`).
    fn bind_pat(&mut self, pat: &'a Pat, v: Value, desc: Option<DescSrc<'a>>, s: Option<String>) {
        let mut names = Vec::new();
        bind_pattern(pat, &mut |b, trail| names.push((b, trail.to_vec())));
        let whole = match &desc {
            Some(DescSrc::Expr(e)) => Some(*e),
            _ => None,
        };
        for (b, trail) in names {
            let (mut v, mut desc, mut s) = (v.clone(), desc.clone(), s.clone());
            // A pattern in the shape of its expression (`let (key, _) = (format!(..), 60)`)
            // binds each name to its own part: the same key as `let key = format!(..)`.
            let part = whole
                .filter(|_| takes_parts(&trail))
                .and_then(|e| part_of(e, &trail));
            if let Some(part) = part {
                v = self.value_of_part(v, &trail);
                // As for `let mut q = Query::insert()..;`: a builder changed later is not
                // the statement run.
                let text =
                    if b.mutable && super::query_builders::sea_query_sql(self, part).is_some() {
                        None
                    } else {
                        self.string_of(part)
                    };
                self.bind_part(b, v, Some(DescSrc::Expr(part)), text);
                continue;
            }
            for hop in trail {
                match hop {
                    Hop::Typed(_) | Hop::Deref => {}
                    Hop::Unwrap(_) | Hop::Alt => s = None,
                    Hop::Sub => (desc, s) = (None, None),
                    Hop::Elem(i) => {
                        let part = i.to_string();
                        desc = self.part_desc(desc.as_ref(), &part);
                        v = v.field(&part);
                        if i != 0 {
                            s = None;
                        }
                    }
                    Hop::Variant(_, i) => {
                        v = v.field(&i.to_string());
                        (desc, s) = (None, None);
                    }
                    Hop::Field(_, name) => {
                        desc = self.part_desc(desc.as_ref(), name);
                        v = v.field(name);
                        s = None;
                    }
                }
            }
            self.bind_part(b, v, desc, s);
        }
    }

    /// The value of the part of `v` the hops take.
    fn value_of_part(&self, mut v: Value, trail: &[Hop<'_>]) -> Value {
        for hop in trail {
            match *hop {
                Hop::Elem(i) | Hop::Variant(_, i) => v = v.field(&i.to_string()),
                Hop::Field(_, name) => v = v.field(name),
                _ => {}
            }
        }
        v
    }

    fn bind_part(
        &mut self,
        b: Binding<'a>,
        v: Value,
        desc: Option<DescSrc<'a>>,
        s: Option<String>,
    ) {
        if self.cx.catalog.sinks.is_key_name(b.name) {
            self.key_use(
                SinkKind::KeyName(b.name.to_owned()),
                b.span,
                v.clone(),
                None,
            );
        }
        self.bind_name(b.name, v, desc, s);
    }

    /// The description of field `part` of a destructured value.
    fn part_desc(&self, whole: Option<&DescSrc<'a>>, part: &str) -> Option<DescSrc<'a>> {
        let d = match whole? {
            DescSrc::Desc(d) => d.clone(),
            DescSrc::Expr(e) => self.describe(e)?,
        };
        Some(DescSrc::Desc(KeyDesc::root(format!("{}.{part}", d.text))))
    }

    /// The body a `return` here leaves.
    fn body_or(&self, fallback: Span) -> Span {
        self.bodies.last().copied().unwrap_or(fallback)
    }

    fn enter_block(&mut self, span: Span) {
        self.scopes.push(Vec::new());
        self.blocks.push(span);
    }

    fn exit_block(&mut self) {
        self.blocks.pop();
        if let Some(saved) = self.scopes.pop() {
            for (name, v, d, s, at) in saved.into_iter().rev() {
                restore(&mut self.vals, &name, v);
                restore(&mut self.bound_at, &name, at);
                restore(&mut self.descs, &name, d);
                restore(&mut self.strs, &name, s);
            }
        }
    }

    /// `x = v`: replaces `x` outside branches and in the branch that bound it, adds to it
    /// inside a branch below that.
    fn assign(&mut self, lhs: &'a Expr, v: Value) {
        match &lhs.peel().kind {
            ExprKind::Path(p) => {
                if let Some(name) = p.as_ident() {
                    if self.cx.catalog.sinks.is_key_name(name) {
                        self.key_use(
                            SinkKind::KeyName(name.to_owned()),
                            lhs.span,
                            v.clone(),
                            None,
                        );
                    }
                    let own_branch = self.bound_at.get(name) == Some(&self.branch_depth);
                    if self.branch_depth == 0 || own_branch {
                        self.vals.insert(name.to_owned(), v);
                        self.descs.remove(name);
                    } else {
                        self.vals.entry(name.to_owned()).or_default().union(&v);
                    }
                }
            }
            ExprKind::Field { base, member } => {
                if self.cx.catalog.sinks.is_key_name(member) {
                    self.key_use(SinkKind::KeyName(member.clone()), lhs.span, v.clone(), None);
                }
                if let Some(name) = base.as_path().and_then(Path::as_ident) {
                    let entry = self.vals.entry(name.to_owned()).or_default();
                    entry.union(&v);
                    match entry.fields.iter_mut().find(|(n, _)| n == member) {
                        Some((_, fv)) => fv.union(&v),
                        None => entry.fields.push((member.clone(), v)),
                    }
                }
            }
            ExprKind::Index { base, .. } => self.assign(base, v),
            _ => {}
        }
    }

    /// Adds `v` to the local a receiver expression names (`key`, `&mut key`, `self.key`).
    fn append_to(&mut self, dest: &'a Expr, v: Value) {
        if v.is_empty() {
            return;
        }
        let keep = self.branch_depth;
        self.branch_depth += 1;
        self.assign(dest, v);
        self.branch_depth = keep;
    }

    // ------------------------------------------------------------ recording

    fn key_use(&mut self, sink: SinkKind, span: Span, value: Value, via: Option<(FnId, Span)>) {
        if value.nondet().next().is_some() || value.params().next().is_some() {
            self.out.key_uses.push(KeyUse {
                sink,
                span,
                value,
                via,
            });
        }
    }

    fn event(&mut self, access: StoreAccess, span: Span, via: Option<FnId>) -> usize {
        self.out.store_events.push(StoreEvent {
            access,
            span,
            via,
            checked: false,
            tried: false,
        });
        self.out.store_events.len() - 1
    }

    fn mark_checked(&mut self, v: &Value) {
        for i in v.ops().collect::<Vec<_>>() {
            self.out.store_events[i].checked = true;
        }
    }

    fn effect(&mut self, span: Span) {
        self.out.effects.push(Effect { span });
    }

    // ------------------------------------------------------------ statements and blocks

    fn eval_block(&mut self, b: &'a Block) -> Value {
        self.enter_block(b.span);
        let mut last = Value::default();
        for (i, stmt) in b.stmts.iter().enumerate() {
            let is_tail = i + 1 == b.stmts.len();
            match stmt {
                Stmt::Let {
                    pat,
                    init,
                    diverge,
                    span,
                } => self.eval_let(pat, init.as_ref(), diverge.as_deref(), *span),
                Stmt::Expr { expr, semi } => {
                    let v = self.eval(expr);
                    if *semi {
                        self.statement_effect(expr);
                    } else if is_tail {
                        last = v;
                    }
                }
                Stmt::Item { .. } => {}
            }
        }
        self.exit_block();
        last
    }

    fn eval_let(
        &mut self,
        pat: &'a Pat,
        init: Option<&'a Expr>,
        diverge: Option<&'a Block>,
        span: Span,
    ) {
        let Some(init) = init else {
            if let Some(name) = pat.simple_name() {
                self.bind_name(name, Value::default(), None, None);
            }
            return;
        };
        let mut v = self.eval(init);
        if let Some(block) = diverge {
            self.let_else_decision(pat, &v, init, block);
        }
        let desc = Some(DescSrc::Expr(init));
        let mut s = self.string_of(init);
        // `let mut q = Query::insert()..;` may be changed later (`q.on_conflict(..);`): the
        // statement built so far is not the one run.
        if matches!(pat, Pat::Ident { mutable: true, .. })
            && super::query_builders::sea_query_sql(self, init).is_some()
        {
            s = None;
        }
        if let Some(name) = pat.simple_name() {
            let direct = v
                .nondet()
                .all(|(src, trail)| trail.is_empty() && span.contains(src.span));
            if !direct {
                let pspan = pat_span(pat).unwrap_or(span);
                v = v.stepped(|| Step {
                    span: pspan,
                    note: format!("assigned to `{name}` here"),
                });
            }
        }
        self.types.bind_let(pat, Some(init));
        self.bind_pat(pat, v, desc, s);
    }

    /// `let Some(x) = read else { return }`: diverges when the pattern fails.
    fn let_else_decision(&mut self, pat: &Pat, v: &Value, init: &Expr, block: &'a Block) {
        if v.ops().next().is_none() {
            return;
        }
        let ops: Vec<usize> = v.ops().collect();
        self.mark_checked(v);
        self.branch_depth += 1;
        self.eval_block(block);
        self.branch_depth -= 1;
        let when_present = pat_presence(pat).map(|p| !p);
        self.out.decisions.push(Decision {
            span: init.span,
            ops,
            branches: vec![Branch {
                span: block.span,
                diverges: true,
                returns: returns(block),
                when_present,
            }],
            block: self.blocks.last().copied().unwrap_or(block.span),
            body: self.body_or(block.span),
        });
    }

    /// Calls made as statements, for their effect.
    fn statement_effect(&mut self, expr: &Expr) {
        let e = expr.peel();
        match &e.kind {
            ExprKind::Call { .. } => self.effect(e.span),
            ExprKind::MethodCall { method, .. }
                if !LOCAL_MUTATIONS.contains(&method.as_str())
                    && !CONVERSIONS.contains(&method.as_str()) =>
            {
                self.effect(e.span)
            }
            _ => {}
        }
    }

    // ------------------------------------------------------------ expressions

    fn eval(&mut self, e: &'a Expr) -> Value {
        match &e.kind {
            ExprKind::Path(p) => self.eval_path(p, e.span),
            ExprKind::Lit(_) | ExprKind::Continue => Value::default(),
            ExprKind::Call { func, args } => self.eval_call(e, func, args),
            ExprKind::MethodCall {
                receiver,
                method,
                method_span,
                args,
            } => self.eval_method(e, receiver, method, *method_span, args),
            ExprKind::Macro(m) => self.eval_macro(e, m),
            ExprKind::Field { base, member } => self.eval(base).field(member),
            ExprKind::Index { base, index } => {
                self.eval(index);
                self.eval(base)
            }
            ExprKind::Unary { expr, .. }
            | ExprKind::Deref(expr)
            | ExprKind::Ref { expr, .. }
            | ExprKind::Cast { expr, .. } => self.eval(expr),
            // `async move { .. }.await` runs its block now, exactly once: its assignments
            // replace values as the function body's do.
            ExprKind::Await(inner) => self.eval_await(inner),
            ExprKind::Try(inner) => self.eval_try(inner),
            // `match x { Ok(v) => v, Err(e) => return Err(e.into()) }` is `x?` written out.
            ExprKind::Match { scrutinee, arms } if is_try_match(arms) => self.eval_try(scrutinee),
            ExprKind::Binary { op, lhs, rhs } => {
                let l = self.eval(lhs);
                let r = self.eval(rhs);
                match op {
                    BinOp::Arith(_) => Value::joined([l, r]),
                    // A comparison or a boolean carries only which reads it depends on.
                    _ => Value::joined([l.only_ops(), r.only_ops()]),
                }
            }
            ExprKind::Block(b) => self.eval_block(b),
            ExprKind::Async { block, .. } => {
                self.branch_depth += 1;
                self.bodies.push(block.span);
                let v = self.eval_block(block);
                self.bodies.pop();
                self.branch_depth -= 1;
                v
            }
            ExprKind::Closure { params, body, .. } => {
                let arg = self.closure_arg.take().unwrap_or_default();
                self.enter_block(body.span);
                for p in params {
                    self.bind_pat(p, arg.clone(), None, None);
                    self.types.bind_let(p, None);
                }
                self.branch_depth += 1;
                self.bodies.push(body.span);
                let v = self.eval(body);
                self.bodies.pop();
                self.branch_depth -= 1;
                self.exit_block();
                v
            }
            ExprKind::If { cond, then, els } => self.eval_if(cond, then, els.as_deref()),
            ExprKind::Let { pat, expr } => {
                let v = self.eval(expr);
                self.types.bind_tested(pat, expr);
                self.bind_pat(pat, v.clone(), Some(DescSrc::Expr(expr)), None);
                v.only_ops()
            }
            ExprKind::Match { scrutinee, arms } => self.eval_match(scrutinee, arms),
            ExprKind::Loop { cond, body } => {
                if let Some(c) = cond {
                    self.eval(c);
                }
                self.branch_depth += 1;
                self.eval_block(body);
                self.branch_depth -= 1;
                Value::default()
            }
            ExprKind::For { pat, iter, body } => {
                let v = self.eval(iter);
                self.enter_block(body.span);
                self.bind_pat(pat, v, None, None);
                self.branch_depth += 1;
                self.eval_block(body);
                self.branch_depth -= 1;
                self.exit_block();
                Value::default()
            }
            ExprKind::Return(v) | ExprKind::Break(v) => {
                if let Some(v) = v {
                    let val = self.eval(v);
                    if matches!(e.kind, ExprKind::Return(_)) {
                        self.out.ret.union(&val);
                    }
                }
                Value::default()
            }
            ExprKind::Assign { lhs, rhs } => {
                let v = self.eval(rhs);
                self.assign(lhs, v);
                Value::default()
            }
            ExprKind::AssignOp { lhs, rhs } => {
                let v = self.eval(rhs);
                let keep = self.branch_depth;
                self.branch_depth += 1;
                self.assign(lhs, v);
                self.branch_depth = keep;
                Value::default()
            }
            ExprKind::Struct { fields, rest, .. } => {
                let mut out = Value::default();
                for (name, fe) in fields {
                    let fv = self.eval(fe);
                    if self.cx.catalog.sinks.is_key_name(name) {
                        self.key_use(SinkKind::KeyName(name.clone()), fe.span, fv.clone(), None);
                    }
                    out.union(&fv);
                    out.fields.push((name.clone(), fv));
                }
                if let Some(r) = rest {
                    let rv = self.eval(r);
                    out.union(&rv);
                }
                out
            }
            ExprKind::Tuple(items) => {
                let mut out = Value::default();
                for (i, it) in items.iter().enumerate() {
                    let v = self.eval(it);
                    out.union(&v);
                    out.fields.push((i.to_string(), v));
                }
                out
            }
            ExprKind::Array(items) | ExprKind::Other(items) => {
                let vs: Vec<Value> = items.iter().map(|i| self.eval(i)).collect();
                Value::joined(vs)
            }
            ExprKind::Range { start, end } => {
                let mut out = Value::default();
                for x in [start, end].into_iter().flatten() {
                    let v = self.eval(x);
                    out.union(&v);
                }
                out
            }
        }
    }

    fn eval_path(&mut self, p: &Path, span: Span) -> Value {
        if let Some(name) = p.as_ident() {
            if let Some(v) = self.vals.get(name) {
                return v.clone();
            }
        }
        // A value path can itself be a source (`OsRng`).
        if p.segments.len() > 1 || p.last().starts_with(char::is_uppercase) {
            let def = self.resolve(p);
            if let Some(src) = self.cx.catalog.sources.find(&def) {
                return self.source(span, &p.segments.join("::"), src.kind);
            }
        }
        Value::default()
    }

    fn source(&self, span: Span, what: &str, kind: SourceKind) -> Value {
        Value::fact(Fact::Nondet {
            source: Arc::new(Source {
                span,
                what: what.to_owned(),
                kind,
            }),
            trail: Trail::default(),
        })
    }

    fn eval_args(&mut self, args: &'a [Expr]) -> Vec<Value> {
        args.iter().map(|a| self.eval(a)).collect()
    }

    fn eval_call(&mut self, e: &'a Expr, func: &'a Expr, args: &'a [Expr]) -> Value {
        let Some(path) = func.as_path() else {
            let mut v = self.eval(func);
            for a in self.eval_args(args) {
                v.union(&a);
            }
            return v;
        };
        let arg_vals = self.eval_args(args);
        if let Some(name) = path.as_ident() {
            if let Some(closure) = self.vals.get(name) {
                let mut v = closure.clone();
                v.fields.clear();
                return v;
            }
        }
        let def = self.resolve(path);
        if let Some(src) = self.cx.catalog.sources.find(&def) {
            return self.source(e.span, &format!("{}()", path.segments.join("::")), src.kind);
        }
        if let (Some(strategy), [key]) = (self.cx.catalog.sinks.keyed_strategy(&def), args) {
            self.key_use(
                SinkKind::TokenSetter(strategy),
                key.span,
                arg_vals[0].clone(),
                None,
            );
        }
        if let Some(op) = self.named_op(e, None, path.last(), args) {
            return self.store_op(op);
        }
        if self.callee(e).is_some() {
            return self.apply_all(e, None, args, arg_vals);
        }
        // A tuple struct or variant keeps its fields apart; `Some`/`Ok`/wrappers pass through.
        let mut out = Value::joined(arg_vals.iter().cloned());
        if path.last().starts_with(char::is_uppercase) && arg_vals.len() > 1 {
            out.fields = arg_vals
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect();
        }
        out
    }

    /// A check or mark known by name (`dedupe.is_processed(&id)`) whose body is not
    /// visible: no crate fn, or a trait method without a default body.
    fn named_op(
        &self,
        e: &'a Expr,
        receiver: Option<&'a Expr>,
        name: &str,
        args: &'a [Expr],
    ) -> Option<StoreOp<'a>> {
        let names = &self.cx.catalog.store_names;
        names.find(name)?;
        let visible = self
            .callee(e)
            .is_some_and(|id| id.def(self.cx.package).1.body.is_some());
        if visible {
            return None;
        }
        store_ops::named_op(self, names, receiver, name, args, e.span)
    }

    /// The crate fn the call `e` runs, from the call graph.
    fn callee(&self, e: &Expr) -> Option<FnId> {
        self.cx
            .graph
            .call_at(self.id, e.span)
            .filter(|c| c.kind != CallKind::Value)
            .map(|c| c.callee)
    }

    fn eval_method(
        &mut self,
        e: &'a Expr,
        receiver: &'a Expr,
        method: &'a str,
        method_span: Span,
        args: &'a [Expr],
    ) -> Value {
        let rv = self.eval(receiver);
        let saved = self.closure_arg.replace(rv.clone());
        let arg_vals = self.eval_args(args);
        self.closure_arg = saved;
        if let Some(op) = store_ops::classify(self, e) {
            return self.store_op(op);
        }
        // A source method on a typed receiver: `generator.generate()` of a `ulid::Generator`.
        if let Some(ty) = self.types.type_of(receiver).filter(|t| !t.is_local()) {
            if let Some(src) = self.cx.catalog.sources.find(&ty.child(method)) {
                return self.source(e.span, &format!("{}::{method}()", ty.last()), src.kind);
            }
        }
        self.method_sinks(receiver, method, method_span, args, &arg_vals);
        if APPENDERS.contains(&method) {
            // `key.push_str(&id)`: the receiver now holds the argument too.
            self.append_to(receiver, Value::joined(arg_vals.iter().cloned()));
        }
        if let Some(op) = self.named_op(e, Some(receiver), method, args) {
            return self.store_op(op);
        }
        if self.callee(e).is_some() {
            return self.apply_all(e, Some(rv), args, arg_vals);
        }
        let mut out = rv;
        out.fields.clear();
        if FALLBACK_METHODS.contains(&method) {
            // `given.unwrap_or_else(|| Uuid::new_v4())`: a default for a missing value is
            // deliberate; only what the receiver carries flows as the value.
            for a in &arg_vals {
                let mut a = a.clone();
                a.facts.retain(|f| !matches!(f, Fact::Nondet { .. }));
                out.union(&a);
            }
        } else if !LOOKUP_METHODS.contains(&method) && !method.starts_with("is_") {
            for a in &arg_vals {
                out.union(a);
            }
        }
        out
    }

    /// Token setters, `Idempotency-Key` headers and key-named builder setters.
    fn method_sinks(
        &mut self,
        receiver: &'a Expr,
        method: &str,
        method_span: Span,
        args: &'a [Expr],
        vals: &[Value],
    ) {
        let sinks = &self.cx.catalog.sinks;
        if args.len() == 1 {
            if let Some(token) = sinks.token_setter(method) {
                self.key_use(
                    SinkKind::TokenSetter(token.to_owned()),
                    args[0].span,
                    vals[0].clone(),
                    None,
                );
                return;
            }
            if sinks.is_step_functions_name(method, &receiver.method_chain()) {
                self.key_use(
                    SinkKind::TokenSetter("name".to_owned()),
                    args[0].span,
                    vals[0].clone(),
                    None,
                );
                return;
            }
            if sinks.is_key_name(method) {
                self.key_use(
                    SinkKind::KeyName(method.to_owned()),
                    method_span.to(args[0].span),
                    vals[0].clone(),
                    None,
                );
                return;
            }
        }
        if args.len() == 2 && matches!(method, "header" | "insert" | "append") {
            if let Some(h) = self.header_name(&args[0]) {
                if sinks.is_idempotency_header(&h) {
                    self.key_use(SinkKind::Header(h), args[1].span, vals[1].clone(), None);
                }
            }
        }
    }

    /// Element `part` of a tuple argument: `(FIND, INSERT)` written at the call, or a local
    /// bound to one.
    fn tuple_element(&self, arg: &'a Expr, part: &str) -> Option<&'a Expr> {
        let i: usize = part.parse().ok()?;
        let e = arg.peel();
        let tuple = match e.as_path().and_then(Path::as_ident) {
            Some(local) => self.local_init(local)?.peel(),
            None => e,
        };
        match &tuple.kind {
            ExprKind::Tuple(elems) => elems.get(i),
            _ => None,
        }
    }

    /// `"Idempotency-Key"`, `HeaderName::from_static("idempotency-key")`, a local bound to
    /// either.
    fn header_name(&self, e: &Expr) -> Option<String> {
        if let Some(s) = self.string_of(e) {
            return Some(s);
        }
        match &e.peel().kind {
            ExprKind::Call { func, args } if args.len() == 1 => {
                let p = func.as_path()?;
                matches!(p.last(), "from_static" | "from_str" | "from_bytes")
                    .then(|| self.string_of(&args[0]))
                    .flatten()
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } if matches!(method.as_str(), "parse" | "try_into" | "into") => {
                self.header_name(receiver)
            }
            _ => None,
        }
    }

    /// Uses a callee's summary at a call site.
    /// Applies the summary of every crate fn call `e` may run (each production implementation
    /// of a trait method): the value it returns is any of theirs.
    fn apply_all(
        &mut self,
        e: &'a Expr,
        receiver: Option<Value>,
        args: &'a [Expr],
        arg_vals: Vec<Value>,
    ) -> Value {
        let graph = self.cx.graph;
        let ids: Vec<FnId> = graph
            .calls_at(self.id, e.span)
            .iter()
            .filter(|c| c.kind != CallKind::Value)
            .map(|c| c.callee)
            .collect();
        let Some((&last, rest)) = ids.split_last() else {
            return Value::default();
        };
        let mut out = Value::default();
        for &id in rest {
            out.union(&self.apply(id, e, receiver.clone(), args, arg_vals.clone()));
        }
        let v = self.apply(last, e, receiver, args, arg_vals);
        if rest.is_empty() {
            return v;
        }
        out.union(&v);
        out
    }

    fn apply(
        &mut self,
        id: FnId,
        call: &'a Expr,
        receiver: Option<Value>,
        args: &'a [Expr],
        arg_vals: Vec<Value>,
    ) -> Value {
        self.out.calls.push(CallSite {
            callee: id,
            span: call.span,
        });
        let mut s = self.callees.summary(id);
        let (_, callee) = id.def(self.cx.package);
        let name = callee.display_name();
        // Arguments in parameter order; for `Type::method(x, ..)` called as a path with a
        // receiver argument, the first argument is `self`.
        let shift =
            usize::from(receiver.is_none() && callee.self_kind != crate::model::SelfKind::None);
        let param_arg = |i: usize| i + shift;
        // A helper given its SQL text as an argument: walked again with that text, so its
        // store operations are known at this call.
        if !s.text_params.is_empty() {
            let texts: Vec<TextArg> = s
                .text_params
                .iter()
                .filter_map(|slot| {
                    let arg = args.get(param_arg(slot.param))?;
                    let text = match &slot.part {
                        None => self.string_of(arg)?,
                        Some(part) => self.string_of(self.tuple_element(arg, part)?)?,
                    };
                    crate::analysis::sql::looks_like_sql(&text).then(|| TextArg {
                        slot: slot.clone(),
                        text,
                    })
                })
                .collect();
            if !texts.is_empty() {
                if self.rewalk_depth < 2 {
                    let flow = walk_bound(self.cx, id, self.callees, &texts, self.rewalk_depth + 1);
                    s = Arc::new(FnSummary::from_flow(&flow));
                }
                let call = TextCall { callee: id, texts };
                if !self.out.text_calls.contains(&call) {
                    self.out.text_calls.push(call);
                }
            }
        }
        let mut out = Value::default();
        for (src, trail) in &s.ret_nondet {
            out.add(Fact::Nondet {
                source: src.clone(),
                trail: trail.push(Step {
                    span: call.span,
                    note: format!("returned by `{name}`"),
                }),
            });
        }
        for (p, field) in &s.ret_params {
            if let Some(v) = arg_vals.get(param_arg(*p)) {
                out.union(&narrow(v, field.as_deref()));
            }
        }
        for ps in &s.param_sinks {
            let i = param_arg(ps.param);
            if let (Some(v), Some(a)) = (arg_vals.get(i), args.get(i)) {
                let v = narrow(v, ps.field.as_deref());
                self.key_use(ps.sink.clone(), a.span, v, Some((id, ps.span)));
            }
        }
        if !s.accesses.is_empty() || s.ret_access.is_some() {
            let descs: Vec<Option<KeyDesc>> = (0..callee.params.len())
                .map(|p| args.get(param_arg(p)).and_then(|a| self.describe(a)))
                .collect();
            for a in &s.accesses {
                let tried = s.tried.contains(a);
                let a = a.clone().instantiate(&descs);
                let i = self.event(a, call.span, Some(id));
                // The helper's error is this write's: the call's own `?` tests it.
                if tried {
                    out.add(Fact::Op(i));
                }
            }
            if let Some(a) = &s.ret_access {
                let a = a.clone().instantiate(&descs);
                let i = self.event(a, call.span, Some(id));
                out.add(Fact::Op(i));
            }
        }
        if s.has_effects {
            self.effect(call.span);
        }
        out
    }

    fn store_op(&mut self, op: StoreOp<'a>) -> Value {
        let key_vals: Vec<Value> = op.keys.iter().map(|k| self.eval_quiet(k)).collect();
        let key = match op.keys.as_slice() {
            [one] => self.describe(one),
            [] => None,
            many => {
                let parts: Option<Vec<KeyDesc>> = many.iter().map(|k| self.describe(k)).collect();
                parts.map(|p| KeyDesc::combine("key", &p))
            }
        };
        let guard_key = op.keys_certain
            && (op.access == Access::Claim || op.dedupe_table && op.access.is_write());
        if guard_key {
            for (k, v) in op.keys.iter().zip(key_vals) {
                self.key_use(SinkKind::GuardKey(op.command.clone()), k.span, v, None);
            }
        }
        // One rule for every store: a write marks when what it stores records that the
        // work happened: markers (a literal, a status, a timestamp, the message's id), with
        // who or where beside them (the account, the worker's host), in any shape (a
        // document, a list). A value the function computed or was handed as data (a
        // rendered page, a user) with no marker makes it a cache or a business write.
        let kinds: Vec<Option<bool>> = op.values.iter().map(|v| self.record(v, 0)).collect();
        let value_is_marker =
            kinds.iter().all(Option::is_some) && (kinds.is_empty() || kinds.contains(&Some(true)));
        let columns = op
            .columns
            .iter()
            .map(|(c, v)| (c.clone(), v.and_then(|v| self.describe(v))))
            .collect();
        let access = StoreAccess {
            columns,
            store: op.store,
            access: op.access,
            command: op.command,
            table: op.table,
            key,
            key_span: op.keys.first().map(|k| k.span),
            value_is_marker,
            locking: op.locking,
            dedupe_table: op.dedupe_table,
            shape: op.shape,
            span: op.span,
        };
        let i = self.event(access, op.span, None);
        Value::fact(Fact::Op(i))
    }

    /// The value of an expression already walked as part of the operation: events it
    /// records again are dropped, and so are facts about them.
    fn eval_quiet(&mut self, e: &'a Expr) -> Value {
        let saved = std::mem::take(&mut self.out);
        let mut v = self.eval(e);
        self.out = saved;
        v.facts.retain(|f| !matches!(f, Fact::Op(_)));
        v
    }

    /// A value that only marks presence: a literal, `true`, a constant, a timestamp, a
    /// status string. Writing one is a marker write; writing computed data is caching.
    fn is_marker(&self, e: &Expr) -> bool {
        match &e.peel().kind {
            ExprKind::Lit(_) | ExprKind::Tuple(_) => true,
            ExprKind::Path(p) => {
                p.segments.len() > 1 || p.last().chars().all(|c| !c.is_lowercase())
            }
            ExprKind::Call { func, args } => {
                let Some(path) = func.as_path() else {
                    return false;
                };
                let clock = self
                    .cx
                    .catalog
                    .sources
                    .find(&self.resolve(path))
                    .is_some_and(|s| s.kind == SourceKind::Clock);
                clock
                    || MARKER_WRAPPERS.contains(&path.last())
                        && args.iter().all(|a| self.is_marker(a))
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } => {
                CONVERSIONS.contains(&method.as_str()) && self.is_marker(receiver)
                    || matches!(
                        method.as_str(),
                        "timestamp" | "timestamp_millis" | "to_rfc3339"
                    )
            }
            ExprKind::Macro(m) => {
                m.path.last() == "format" && m.args.iter().all(|a| self.is_marker(a))
            }
            _ => false,
        }
    }

    /// What a value a write stores is: `Some(true)` a marker (a literal, a constant, a
    /// timestamp, a status, the message's id: `order.id`), `Some(false)` who or where (a
    /// parameter, `self`, an environment variable), `None` a computed result; a document,
    /// collection or slice (`doc! { "at": now, "by": &host }`, `&b"done"[..]`) is what its
    /// parts are.
    fn record(&self, e: &Expr, depth: usize) -> Option<bool> {
        if self.is_marker(e) || store_ops::is_key_like(e) {
            return Some(true);
        }
        let parts: Vec<&Expr> = match &e.peel().kind {
            _ if depth >= 4 => Vec::new(),
            // A document's field names are not what it stores.
            ExprKind::Macro(m) if m.parsed && DOC_MACROS.contains(&m.path.last()) => {
                m.args.iter().skip(1).step_by(2).collect()
            }
            ExprKind::Macro(m) if m.parsed => m.args.iter().collect(),
            ExprKind::Array(items) => items.iter().collect(),
            ExprKind::Index { base, .. } => vec![&**base],
            // `let update = doc! { .. }; ..replace_one(filter, update, None)`.
            ExprKind::Path(p) => p
                .as_ident()
                .and_then(|n| self.local_init(n))
                .into_iter()
                .collect(),
            ExprKind::Struct {
                fields, rest: None, ..
            } => fields.iter().map(|(_, v)| v).collect(),
            // `AttributeValue::S(order.id.clone())`, `order.id.to_string()`.
            ExprKind::Call { func, args }
                if func
                    .as_path()
                    .is_some_and(|p| MARKER_WRAPPERS.contains(&p.last())) =>
            {
                args.iter().collect()
            }
            ExprKind::MethodCall {
                receiver, method, ..
            } if CONVERSIONS.contains(&method.as_str()) => vec![&**receiver],
            _ => Vec::new(),
        };
        if !parts.is_empty() {
            let kinds: Option<Vec<bool>> =
                parts.iter().map(|p| self.record(p, depth + 1)).collect();
            if let Some(kinds) = kinds {
                return Some(kinds.contains(&true));
            }
        }
        self.is_context(e, 0).then_some(false)
    }

    /// `inner?`: a conditional DynamoDB write fails when the item exists, and so does a
    /// key-only insert into a dedupe table: `?` stops there.
    fn eval_try(&mut self, inner: &'a Expr) -> Value {
        let v = self.eval(inner);
        let dynamo_claims: Vec<usize> = v
            .ops()
            .filter(|&i| fails_out(&self.out.store_events[i].access))
            .collect();
        for i in dynamo_claims {
            self.out.store_events[i].checked = true;
            self.out.store_events[i].tried = true;
        }
        v
    }

    /// A value that says who or where rather than what was computed: a parameter, `self` or
    /// one of their fields, a local bound to one, an environment variable (not a local bound
    /// to a call's result).
    fn is_context(&self, e: &Expr, depth: usize) -> bool {
        match &e.peel().kind {
            ExprKind::Lit(_) => true,
            ExprKind::Path(p) => match p.as_ident() {
                Some(name) => match self.local_init(name) {
                    Some(init) => depth < 4 && self.is_context(init, depth + 1),
                    None => name == "self" || self.vals.get(name).is_some_and(is_param_value),
                },
                None => true,
            },
            ExprKind::Field { base, .. } => self.is_context(base, depth),
            ExprKind::MethodCall {
                receiver, method, ..
            } => CONVERSIONS.contains(&method.as_str()) && self.is_context(receiver, depth),
            ExprKind::Call { func, args } => func.as_path().is_some_and(|path| {
                let def = self.resolve(path);
                ENV_READS.iter().any(|r| def.matches(r))
                    || MARKER_WRAPPERS.contains(&path.last())
                        && args.iter().all(|a| self.is_context(a, depth))
            }),
            ExprKind::Macro(m) => {
                m.path.last() == "format" && m.args.iter().all(|a| self.is_context(a, depth))
            }
            _ => false,
        }
    }

    /// `inner.await`. `async move { .. }.await` runs its block now, exactly once: its
    /// assignments replace values as the function body's do.
    fn eval_await(&mut self, inner: &'a Expr) -> Value {
        if let ExprKind::Async { block, .. } = &inner.kind {
            self.bodies.push(block.span);
            let v = self.eval_block(block);
            self.bodies.pop();
            return v;
        }
        let before = self.out.store_events.len();
        let mut v = self.eval(inner);
        let call = inner.peel();
        if matches!(
            call.kind,
            ExprKind::Call { .. } | ExprKind::MethodCall { .. }
        ) {
            // A store operation awaited is not an effect; a call whose arguments carry what a
            // store read earlier (`wallet.credit(CreditRequest { memo: row.name, .. })`) is.
            if !v.ops().any(|i| i >= before) {
                self.effect(inner.span);
            }
            // What an awaited call of another crate returns comes from the outside
            // world (a response, rows read back), not from the arguments it was sent.
            let crate_call = self.out.calls.last().is_some_and(|c| c.span == call.span);
            if !crate_call {
                v.facts.retain(|f| matches!(f, Fact::Op(_)));
                v.fields.clear();
            }
        }
        v
    }

    fn eval_macro(&mut self, e: &'a Expr, m: &'a MacroCall) -> Value {
        let name = m.path.last();
        let def = self.resolve(&m.path);
        if let Some(src) = self.cx.catalog.sources.find(&def) {
            return self.source(
                e.span,
                &format!("{}!()", m.path.segments.join("::")),
                src.kind,
            );
        }
        if m.joins_futures() {
            // Each future is awaited here; the value is the tuple of their outputs.
            let mut out = Value::default();
            for (i, a) in m.args.iter().enumerate() {
                let v = self.eval_await(a);
                out.union(&v);
                out.fields.push((i.to_string(), v));
            }
            return out;
        }
        let vals = self.eval_args(&m.args);
        if matches!(name, "write" | "writeln") {
            // `write!(key, "{}", id)` writes into its first argument.
            if let Some(dest) = m.args.first() {
                self.append_to(dest, Value::joined(vals.iter().skip(1).cloned()));
            }
        }
        if FORMAT_MACROS.contains(&name) {
            let v = Value::joined(vals);
            return v.stepped(|| Step {
                span: e.span,
                note: format!("formatted into a string by `{name}!` here"),
            });
        }
        if name.starts_with("query") {
            return Value::joined(vals);
        }
        Value::default()
    }

    fn eval_if(&mut self, cond: &'a Expr, then: &'a Block, els: Option<&'a Expr>) -> Value {
        let cv = self.eval(cond);
        let ops: Vec<usize> = cv.ops().collect();
        self.branch_depth += 1;
        let tv = self.eval_block(then);
        let ev = els.map(|e| self.eval(e)).unwrap_or_default();
        self.branch_depth -= 1;
        if !ops.is_empty() {
            self.mark_checked(&cv);
            let polarity = self.presence(cond);
            let mut branches = vec![Branch {
                span: then.span,
                diverges: diverges(then),
                returns: returns(then),
                when_present: polarity,
            }];
            if let Some(e) = els {
                let block = match &e.kind {
                    ExprKind::Block(b) => Some(b),
                    _ => None,
                };
                branches.push(Branch {
                    span: e.span,
                    diverges: block.is_some_and(diverges),
                    returns: block.is_some_and(returns),
                    when_present: polarity.map(|p| !p),
                });
            }
            self.out.decisions.push(Decision {
                span: cond.span,
                ops,
                branches,
                block: self.blocks.last().copied().unwrap_or(cond.span),
                body: self.body_or(cond.span),
            });
        }
        // The value an `if` on a read yields tells whether the key was there (`if let
        // Some(b) = read { Some(parse(b)) } else { None }`), whatever the branches compute.
        Value::joined([tv, ev, cv.only_ops()])
    }

    fn eval_match(&mut self, scrutinee: &'a Expr, arms: &'a [crate::model::ir::Arm]) -> Value {
        let sv = self.eval(scrutinee);
        let sd = Some(DescSrc::Expr(scrutinee));
        let ops: Vec<usize> = sv.ops().collect();
        let mut out = Value::default();
        let mut branches = Vec::new();
        self.branch_depth += 1;
        for arm in arms {
            self.enter_block(arm.body.span);
            self.types.bind_tested(&arm.pat, scrutinee);
            self.bind_pat(&arm.pat, sv.clone(), sd.clone(), None);
            if let Some(g) = &arm.guard {
                self.eval(g);
            }
            let v = self.eval(&arm.body);
            self.exit_block();
            out.union(&v);
            branches.push(Branch {
                span: arm.body.span,
                diverges: expr_diverges(&arm.body),
                returns: expr_leaves(&arm.body, Leaves::Body),
                // `match !done { true => .. }`: a bool pattern takes the scrutinee's polarity.
                when_present: match &arm.pat {
                    Pat::Lit(Lit::Bool(b)) => {
                        self.presence(scrutinee).map(|p| p == *b).or(Some(*b))
                    }
                    pat => pat_presence(pat),
                },
            });
        }
        self.branch_depth -= 1;
        // As for `if`: the arm taken tells whether the key was there.
        out.union(&sv.only_ops());
        if !ops.is_empty() {
            self.mark_checked(&sv);
            self.out.decisions.push(Decision {
                span: scrutinee.span,
                ops,
                branches,
                block: self.blocks.last().copied().unwrap_or(scrutinee.span),
                body: self.body_or(scrutinee.span),
            });
        }
        out
    }

    /// Whether `cond` is true when the store had the key.
    fn presence(&self, cond: &Expr) -> Option<bool> {
        self.presence_at(cond, 0)
    }

    fn presence_at(&self, cond: &Expr, depth: usize) -> Option<bool> {
        if depth > MAX_DESC_DEPTH {
            return None;
        }
        let d = depth + 1;
        match &cond.kind {
            ExprKind::Unary { not: true, expr } => self.presence_at(expr, d).map(|p| !p),
            ExprKind::Let { pat, .. } => pat_presence(pat),
            // `if other || seen { return }`: the branch runs whenever the key was there, so
            // what follows runs only when it was not.
            ExprKind::Binary {
                op: BinOp::Or,
                lhs,
                rhs,
            } => match (self.presence_at(lhs, d), self.presence_at(rhs, d)) {
                (Some(true), other) | (other, Some(true)) if other != Some(false) => Some(true),
                _ => None,
            },
            // `count > 0` and `count == 0` are folded into one comparison operator by the IR,
            // so a comparison claims no polarity.
            ExprKind::Binary { .. } => None,
            ExprKind::MethodCall {
                receiver, method, ..
            } => match method.as_str() {
                "is_some" | "is_ok" => Some(true),
                "is_none" | "is_empty" => Some(false),
                "unwrap_or" | "unwrap_or_default" | "unwrap" | "expect" => {
                    self.presence_at(receiver, d)
                }
                m => Some(!negative_name(m)),
            },
            // `let skip = !conn.exists(&k).await?; if skip {..}`: a local holding a negated
            // or combined check has that check's polarity, not its name's.
            ExprKind::Path(p) => match p.as_ident().and_then(|n| self.local_init(n)) {
                Some(
                    init @ Expr {
                        kind:
                            ExprKind::Unary { not: true, .. } | ExprKind::Binary { op: BinOp::Or, .. },
                        ..
                    },
                ) => self.presence_at(init, d),
                _ => Some(!negative_name(p.last())),
            },
            ExprKind::Call { func, .. } => Some(!negative_name(func.as_path()?.last())),
            ExprKind::Try(e) | ExprKind::Await(e) => self.presence_at(e, d),
            ExprKind::Match { scrutinee, arms } if is_try_match(arms) => {
                self.presence_at(scrutinee, d)
            }
            _ => None,
        }
    }

    // ------------------------------------------------------------ key descriptions

    /// How `e` is derived, for comparing keys.
    fn describe(&self, e: &Expr) -> Option<KeyDesc> {
        self.describe_at(e, 0)
    }

    fn describe_at(&self, e: &Expr, depth: usize) -> Option<KeyDesc> {
        if depth > MAX_DESC_DEPTH {
            return None;
        }
        let d = depth + 1;
        let e = e.peel();
        match &e.kind {
            ExprKind::Path(p) => match p.as_ident() {
                Some(name) => match self.descs.get(name) {
                    Some(DescSrc::Desc(k)) => Some(k.clone()),
                    Some(DescSrc::Expr(init)) => self.describe_at(init, d),
                    None => Some(KeyDesc::root(name.to_owned())),
                },
                None => Some(KeyDesc::lit(p.segments.join("::"))),
            },
            ExprKind::Lit(Lit::Str(s)) => Some(KeyDesc::lit(s.clone())),
            ExprKind::Lit(_) => Some(KeyDesc::lit(String::from("lit"))),
            ExprKind::Cast { expr, .. } => self.describe_at(expr, d),
            ExprKind::Field { base, member } => {
                let b = self.describe_at(base, d)?;
                let text = format!("{}.{member}", b.text);
                if b.roots.len() == 1 && b.roots[0] == b.text {
                    Some(KeyDesc::root(text))
                } else {
                    Some(KeyDesc { text, ..b })
                }
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                if CONVERSIONS.contains(&method.as_str()) {
                    return self.describe_at(receiver, d);
                }
                let mut parts = vec![self.describe_at(receiver, d)?];
                for a in args {
                    parts.push(self.describe_at(a, d)?);
                }
                Some(KeyDesc::combine(method, &parts))
            }
            ExprKind::Call { func, args } => {
                let p = func.as_path()?;
                // `AttributeValue::S(id)`, `Some(id)`, `String::from(id)`: the same key.
                if args.len() == 1
                    && (p.last().starts_with(char::is_uppercase) || p.last() == "from")
                {
                    return self.describe_at(&args[0], d);
                }
                let parts: Option<Vec<KeyDesc>> =
                    args.iter().map(|a| self.describe_at(a, d)).collect();
                Some(KeyDesc::combine(&p.segments.join("::"), &parts?))
            }
            ExprKind::Macro(m) if FORMAT_MACROS.contains(&m.path.last()) => {
                // `format!("seen:{id}")` and `format!("seen:{}", id)` lower to the same
                // arguments (an inline capture is an extra path argument), and templates
                // compare with `{}` holes.
                let parts: Option<Vec<KeyDesc>> = m
                    .args
                    .iter()
                    .map(|a| match a.as_str_lit() {
                        Some(s) => Some(KeyDesc::lit(normalize_template(s))),
                        None => self.describe_at(a, d),
                    })
                    .collect();
                Some(KeyDesc::combine("fmt", &parts?))
            }
            ExprKind::Binary { lhs, rhs, .. } => Some(KeyDesc::combine(
                "op",
                &[self.describe_at(lhs, d)?, self.describe_at(rhs, d)?],
            )),
            _ => None,
        }
    }
}

/// An argument's value as seen by a parameter fact: the field it reads, or all of it.
/// The text of `include_str!("q.sql")` (read by the driver) or of a crate `const`/`static`
/// holding a literal, an `include_str!` or another such constant; `module` is where `e`
/// is written, in `file`.
pub(crate) fn const_text(
    cx: &FlowCx<'_>,
    file: &FileModel,
    module: &[String],
    e: &Expr,
    depth: usize,
) -> Option<String> {
    match &e.peel().kind {
        ExprKind::Lit(Lit::Str(s)) => Some(s.clone()),
        ExprKind::Macro(m) if m.path.last() == "include_str" => {
            let path = m.args.first()?.as_str_lit()?;
            file.included_text(path).map(str::to_owned)
        }
        ExprKind::Path(p) if depth < 4 => {
            let def = cx.resolver.resolve(file.target, module, p, None);
            let super::resolve::Krate::Local(target) = def.krate else {
                return None;
            };
            let (cfile, c) = cx.package.const_def(target, &def.segments)?;
            const_text(cx, cfile, &c.module, &c.value, depth + 1)
        }
        ExprKind::Macro(m) if depth < 4 => {
            format_sql(m, &mut |a| const_text(cx, file, module, a, depth + 1))
        }
        _ => None,
    }
}

/// The SQL statement a `format!` builds (`format!("INSERT INTO {} (id) VALUES ($1)",
/// self.table)`), when its template is a statement and [`super::sql::format_skeleton`]
/// finds its shape independent of the run-time values; `text_of` gives an argument's
/// constant text. Other `format!`s (keys, messages) have no text here.
pub(crate) fn format_sql(
    m: &MacroCall,
    text_of: &mut dyn FnMut(&Expr) -> Option<String>,
) -> Option<String> {
    use super::sql::{format_skeleton, looks_like_statement, Hole};
    if m.path.last() != "format" {
        return None;
    }
    let template_arg = m.args.first()?;
    let template = template_arg.as_str_lit()?;
    if !looks_like_statement(template) {
        return None;
    }
    // Lowering appends inline captures (`{table}`) after the real arguments, with the
    // template's span.
    let positional: Vec<&Expr> = m.args[1..]
        .iter()
        .filter(|a| a.span != template_arg.span)
        .collect();
    let captured = |name: &str| {
        m.args[1..].iter().find(|a| {
            a.span == template_arg.span && a.as_path().and_then(|p| p.as_ident()) == Some(name)
        })
    };
    let text = format_skeleton(template, &mut |name, index| {
        let arg = if name.is_empty() || name.parse::<usize>().is_ok() {
            positional.get(index).copied()
        } else {
            captured(name)
        };
        match arg {
            Some(a) => match text_of(a) {
                Some(t) => Hole::Text(t),
                None => Hole::Runtime(value_name(a)),
            },
            None => Hole::Runtime(name.to_owned()),
        }
    })?;
    looks_like_statement(&text).then_some(text)
}

/// The name a value is written with: `table_name` of `&self.table_name`, `private_table`
/// of `schema.private_table("jobs")`.
fn value_name(e: &Expr) -> String {
    match &e.peel().kind {
        ExprKind::Path(p) => p.last().to_owned(),
        ExprKind::Field { member, .. } => member.clone(),
        ExprKind::MethodCall {
            receiver, method, ..
        } if CONVERSIONS.contains(&method.as_str()) => value_name(receiver),
        ExprKind::MethodCall { method, .. } => method.clone(),
        _ => String::new(),
    }
}

fn narrow(v: &Value, field: Option<&str>) -> Value {
    match field {
        Some(f) => v.field(f),
        None => v.clone(),
    }
}

fn restore<V>(map: &mut PathMap<String, V>, name: &str, old: Option<V>) {
    match old {
        Some(v) => {
            map.insert(name.to_owned(), v);
        }
        None => {
            map.remove(name);
        }
    }
}

fn pat_span(p: &Pat) -> Option<Span> {
    match p {
        Pat::Ident { span, .. } => Some(*span),
        Pat::Typed { pat, .. } | Pat::Ref(pat) => pat_span(pat),
        _ => None,
    }
}

/// `{id}`, `{:?}`, `{0}` → `{}`: format templates compare by their literal parts.
fn normalize_template(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = false;
    for c in s.chars() {
        match c {
            '{' if !depth => {
                depth = true;
                out.push_str("{}");
            }
            '}' if depth => depth = false,
            _ if depth => {}
            _ => out.push(c),
        }
    }
    out
}

/// Whether a pattern matches when the store had the key: `Some(_)`, `Ok(Some(_))`, `true`.
fn pat_presence(p: &Pat) -> Option<bool> {
    match p {
        Pat::TupleStruct { path, elems } => match path.last() {
            "Some" => Some(true),
            "Ok" => elems.first().and_then(pat_presence).or(Some(true)),
            _ => None,
        },
        Pat::Path(path) if path.last() == "None" => Some(false),
        // syn reads a bare `None` in a pattern as a binding named `None`.
        Pat::Ident {
            name, sub: None, ..
        } if name == "None" => Some(false),
        Pat::Lit(Lit::Bool(b)) => Some(*b),
        Pat::Ident { .. } | Pat::Wild => None,
        Pat::Typed { pat, .. } | Pat::Ref(pat) => pat_presence(pat),
        _ => None,
    }
}

/// Helper and variable names that are true when the key is new: `is_new`, `first_time`.
fn negative_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "new",
        "first",
        "missing",
        "absent",
        "unseen",
        "not_",
        "fresh",
        "available",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// What a diverging block leaves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leaves {
    /// The enclosing block, by any means (`break` and `continue` too).
    Block,
    /// The whole body: `return`, an error, a panic.
    Body,
}

/// Whether a block leaves its enclosing block on every path through its own statements.
pub fn diverges(b: &Block) -> bool {
    block_leaves(b, Leaves::Block)
}

/// Whether a block leaves the function (closure, async block) on every path.
pub fn returns(b: &Block) -> bool {
    block_leaves(b, Leaves::Body)
}

fn block_leaves(b: &Block, how: Leaves) -> bool {
    b.stmts.iter().any(|s| match s {
        Stmt::Expr { expr, .. } => expr_leaves(expr, how),
        Stmt::Let { .. } | Stmt::Item { .. } => false,
    })
}

/// The arms of `?` written out: `Ok(v) => v` and an `Err(..)` arm that leaves.
fn is_try_match(arms: &[crate::model::ir::Arm]) -> bool {
    let [ok, err] = arms else {
        return false;
    };
    let ok_arm = match &ok.pat {
        Pat::TupleStruct { path, elems } if path.last() == "Ok" => match elems.as_slice() {
            [Pat::Ident { name, .. }] => ok.body.as_path().and_then(Path::as_ident) == Some(name),
            _ => false,
        },
        _ => false,
    };
    let err_arm = matches!(&err.pat, Pat::TupleStruct { path, .. } if path.last() == "Err")
        && expr_diverges(&err.body);
    ok_arm && err_arm && ok.guard.is_none() && err.guard.is_none()
}

fn expr_diverges(e: &Expr) -> bool {
    expr_leaves(e, Leaves::Block)
}

fn expr_leaves(e: &Expr, how: Leaves) -> bool {
    match &e.kind {
        ExprKind::Return(_) => true,
        ExprKind::Break(_) | ExprKind::Continue => how == Leaves::Block,
        ExprKind::Macro(m) => DIVERGING_MACROS.contains(&m.path.last()),
        ExprKind::Block(b) => block_leaves(b, how),
        ExprKind::Call { func, .. } => func.as_path().is_some_and(|p| {
            p.segments
                .ends_with(&["process".to_owned(), "exit".to_owned()])
        }),
        ExprKind::Try(inner) => matches!(&inner.peel().kind, ExprKind::Call { func, .. }
            if func.as_path().is_some_and(|p| p.last() == "Err")),
        ExprKind::If {
            then,
            els: Some(els),
            ..
        } => block_leaves(then, how) && expr_leaves(els, how),
        _ => false,
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
