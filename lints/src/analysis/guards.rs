//! Idempotency guards and the paths they cover.
//!
//! A guard is a call that makes a duplicate delivery stop: a call of an `#[idempotent]` fn, an
//! atomic reservation whose result is checked ([`super::store_ops`]'s claims, found by the
//! flow walk), a crate fn whose summary says it is one (it makes such a reservation and
//! returns or checks the result), a fn named in configuration, or a store read that returns
//! or skips when the key is already there (`if store.is_processed(id) { return }`: not atomic,
//! but a path that checks is still guarded against the redeliveries a path without the check
//! repeats). A guard covers a call when
//! it dominates it: every path from the fn's start to the call passes the guard
//! ([`super::dominance`]).
//!
//! [`GuardedPaths`] follows the call graph from every entry point and records, for each fn,
//! how it is first reached without any guard on the way and how it is first reached after
//! one, so a lint can show both paths.

use super::callgraph::{CallGraph, CallKind};
use super::dominance::{self, Events, Facts};
use super::entry::{names_fn, EntryKind, EntryPoint};
use super::flow::FnId;
use super::guard_key;
use super::resolve::Resolver;
use super::sql::is_dedupe_table_name;
use super::store_ops::{Access, Store};
use super::summary::{StoreAccess, Summaries};
use super::FastMap;
use crate::model::ir::{Block, Expr, ExprKind, Lit, Pat, Stmt};
use crate::model::{Package, Span};
use std::collections::{HashSet, VecDeque};

/// A guard call in a fn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub span: Span,
    /// What it is called in messages: `assert_not_duplicate`, `SET NX`.
    pub name: String,
}

/// The guards of one fn and, for each of its call-graph edges, the first guard that
/// dominates it.
#[derive(Debug, Clone, Default)]
pub struct FnGuards {
    pub guards: Vec<Guard>,
    /// Indexed like [`CallGraph::calls`]: an index into `guards`.
    pub dominated_by: Vec<Option<u32>>,
    /// Indexed like [`CallGraph::calls`]: whether a path from the fn's start reaches the
    /// edge (code after a `return` does not run, guarded or not). All true when the fn has
    /// no guard to walk for.
    pub reachable: Vec<bool>,
}

/// What counts as a guard in a package.
pub struct GuardFinder<'a> {
    package: &'a Package,
    resolver: &'a Resolver,
    graph: &'a CallGraph,
    summaries: &'a Summaries,
    /// Configured guard names (`[lints.unguarded_entry_point] guards`).
    names: &'a [String],
    /// Count only the claims and checks keyed by a message's identity
    /// ([`GuardFinder::keyed_by_message`]).
    keyed_only: bool,
}

impl<'a> GuardFinder<'a> {
    pub fn new(
        package: &'a Package,
        resolver: &'a Resolver,
        graph: &'a CallGraph,
        summaries: &'a Summaries,
        names: &'a [String],
    ) -> Self {
        GuardFinder {
            package,
            resolver,
            graph,
            summaries,
            names,
            keyed_only: false,
        }
    }

    /// The same finder, counting only the guards keyed by the identity of a message
    /// ([`guard_key`]): `#[idempotent]`, configured guards, and claims and checks on a
    /// message id, an idempotency key or a dedupe record. A claim on a resource's state guards
    /// its own path and says nothing of another entry that reaches the same effect.
    pub fn keyed_by_message(&self) -> GuardFinder<'a> {
        GuardFinder {
            keyed_only: true,
            ..*self
        }
    }

    /// Whether the store operation `access` of `id` (through helper `via`) counts as a
    /// guard for this finder.
    fn counts(&self, id: FnId, via: Option<FnId>, access: &StoreAccess) -> bool {
        !self.keyed_only
            || guard_key::keyed_by_message(access, id.def(self.package).1)
            || guard_key::names_dedupe_helper(&access.command)
            || via.is_some_and(|h| self.helper_is_keyed(h))
    }

    /// Whether guard helper `h` is named for a dedupe record (`is_processed`,
    /// `already_seen`) or claims a key built from a message's identity.
    fn helper_is_keyed(&self, h: FnId) -> bool {
        let f = h.def(self.package).1;
        guard_key::names_dedupe_helper(&f.name)
            || self
                .summaries
                .summary(h)
                .accesses
                .iter()
                .any(|a| a.access == Access::Claim && guard_key::keyed_by_message(a, f))
    }

    /// Whether the call of crate fn `callee` at `span` in `caller` guards what follows: its
    /// name for messages. A helper that makes a claim guards only a caller that looks at its
    /// answer: decides on it, or propagates with `?` the error it fails with when the key is
    /// taken. An insert whose result is only passed on, or whose error is only a database
    /// error (`ON CONFLICT DO NOTHING` does not fail on a conflict), stops no duplicate.
    fn guarding_call(&self, caller: FnId, callee: FnId, span: Span) -> Option<String> {
        let (file, f) = callee.def(self.package);
        let guards = f.has_attr("idempotent")
            || names_fn(self.names, self.resolver, file, f)
            || match self.duplicate_signal(callee, 0) {
                None => false,
                Some(signal) => {
                    self.caller_stops_on(caller, callee, span, signal)
                        && (!self.keyed_only || self.helper_keyed(caller, callee, span))
                }
            };
        guards.then(|| f.display_name())
    }

    /// Whether the claim of guard helper `callee`, called at `span` in `caller`, is keyed by
    /// a message's identity, as the caller passes it or as the helper builds it.
    fn helper_keyed(&self, caller: FnId, callee: FnId, span: Span) -> bool {
        let flow = self.summaries.flow(caller);
        flow.store_events
            .iter()
            .filter(|ev| ev.via == Some(callee) && ev.span == span)
            .any(|ev| guard_key::keyed_by_message(&ev.access, caller.def(self.package).1))
            || self.helper_is_keyed(callee)
    }

    /// Whether `caller` stops on the answer of `callee`, called at `span`, that `signal`s a
    /// taken key.
    fn caller_stops_on(&self, caller: FnId, callee: FnId, span: Span, signal: Signal) -> bool {
        let flow = self.summaries.flow(caller);
        let decided = flow.store_events.iter().enumerate().any(|(i, ev)| {
            ev.via == Some(callee)
                && ev.span == span
                && flow.decisions.iter().any(|d| d.ops.contains(&i))
        });
        let Some(body) = caller.def(self.package).1.body.as_ref() else {
            return decided;
        };
        decided
            || decided_where_made(body, span)
            || match signal {
                Signal::Answer { fails_when_taken } => {
                    fails_when_taken && propagates_error(body, span)
                }
                Signal::Refusal => propagates_error(body, span),
            }
    }

    /// How `id` tells its caller that its atomic claim found the key taken: it returns the
    /// claim's result ([`Signal::Answer`]), or returns an error, `false` or `None` on the
    /// branch where the key was taken, or propagates with `?` the error of a claim that fails
    /// when the key is taken ([`Signal::Refusal`]). A helper that takes a lock and only skips
    /// its own work when the lock is held (`if acquired { .. }; Ok(())`) guards its body, not
    /// its caller: `None`.
    fn duplicate_signal(&self, id: FnId, depth: usize) -> Option<Signal> {
        let summary = self.summaries.summary(id);
        if !summary.is_guard() || depth > MAX_HELPER_DEPTH {
            return None;
        }
        if let Some(a) = summary
            .ret_access
            .as_ref()
            .filter(|a| a.access == Access::Claim)
        {
            return Some(Signal::Answer {
                fails_when_taken: fails_when_taken(a),
            });
        }
        let body = id.def(self.package).1.body.as_ref()?;
        let flow = self.summaries.flow(id);
        let refuses = flow.store_events.iter().enumerate().any(|(i, ev)| {
            let claim = ev.access.access == Access::Claim && ev.checked;
            let claim_here = match ev.via {
                None => true,
                Some(helper) => self.duplicate_signal(helper, depth + 1).is_some(),
            };
            claim
                && claim_here
                && (fails_when_taken(&ev.access) && propagates_error(body, ev.span)
                    || flow
                        .decisions
                        .iter()
                        .filter(|d| d.ops.contains(&i))
                        .flat_map(|d| &d.branches)
                        .any(|b| b.diverges && returns_refusal(body, b.span)))
        });
        refuses.then_some(Signal::Refusal)
    }

    /// The store operations of `id` that stop a duplicate, with their names for messages: an
    /// atomic claim whose result is checked, and a check that returns (or skips the item)
    /// when the key is already there (`if store.is_processed(id) { return }`). A check is not
    /// atomic (two deliveries can both pass it; `check_then_act` says so) but it still
    /// separates the path that checks from the path that does not.
    fn stops(&self, id: FnId) -> FastMap<Span, String> {
        let flow = self.summaries.flow(id);
        let mut out = FastMap::default();
        for (i, ev) in flow.store_events.iter().enumerate() {
            // The claim's answer is decided on, or its error is the taken key and leaves
            // the fn: returned or handed on, it stops nothing here.
            let claim = ev.via.is_none()
                && ev.access.access == Access::Claim
                && (flow.decisions.iter().any(|d| d.ops.contains(&i))
                    || fails_when_taken(&ev.access) && ev.tried);
            let check = ev.access.access == Access::Read
                && self.is_dedupe_read(ev.via, &ev.access)
                && flow
                    .decisions
                    .iter()
                    .filter(|d| d.ops.contains(&i))
                    .flat_map(|d| &d.branches)
                    .any(|b| b.diverges && b.when_present == Some(true));
            if (claim || check) && self.counts(id, ev.via, &ev.access) {
                let name = match ev.via {
                    Some(helper) => helper.def(self.package).1.display_name(),
                    None => ev.access.command.clone(),
                };
                out.entry(ev.span).or_insert(name);
            }
        }
        out
    }

    /// Whether a read looks up a processed-key record rather than data: an existence check
    /// (`exists`, `SISMEMBER`, a helper named `is_processed`/`already_seen`), or a read of a
    /// dedupe-named table or key (`processed_events`, `seen:{id}`). A lookup of a user or a
    /// configuration row that returns when it is missing is input validation, no guard.
    fn is_dedupe_read(&self, via: Option<FnId>, a: &StoreAccess) -> bool {
        let helper = via.map(|h| h.def(self.package).1.name.to_ascii_lowercase());
        let command = a.command.to_ascii_lowercase();
        let check_named = |n: &str| {
            ["exists", "sismember", "contains", "is_member"]
                .iter()
                .any(|w| n.contains(w))
                || is_dedupe_table_name(n)
                || ["already", "seen", "duplicate", "dedup", "is_done", "was_"]
                    .iter()
                    .any(|w| n.contains(w))
        };
        let dedupe_key = a.key.as_ref().is_some_and(|k| {
            k.lits
                .iter()
                .any(|l| is_dedupe_table_name(&l.replace(':', "_")))
        });
        check_named(&command)
            || helper.as_deref().is_some_and(check_named)
            || a.dedupe_table
            || a.table.as_deref().is_some_and(is_dedupe_table_name)
            || dedupe_key
    }

    /// The guards of `id` and the edges they dominate.
    pub fn of_fn(&self, id: FnId) -> FnGuards {
        let calls = self.graph.calls(id);
        let mut out = FnGuards {
            guards: Vec::new(),
            dominated_by: vec![None; calls.len()],
            reachable: vec![true; calls.len()],
        };
        let claims = self.stops(id);
        let has_candidate = !claims.is_empty()
            || !self.names.is_empty()
            || calls.iter().any(|c| {
                c.kind != CallKind::Value && self.guarding_call(id, c.callee, c.span).is_some()
            });
        let Some(body) = id
            .def(self.package)
            .1
            .body
            .as_ref()
            .filter(|_| has_candidate)
        else {
            return out;
        };
        out.reachable.fill(false);
        let mut walk = GuardWalk {
            finder: self,
            id,
            claims,
            out: &mut out,
        };
        dominance::walk(body, Facts::default(), &mut walk);
        out
    }

    /// For each of `spans` (expressions of `id`'s body, such as store operations), the
    /// first guard of `id` that every path to it passes; `None` where none does or the
    /// expression is not reached.
    pub fn guards_over(&self, id: FnId, spans: &[Span]) -> Vec<Option<Guard>> {
        let Some(body) = &id.def(self.package).1.body else {
            return vec![None; spans.len()];
        };
        let mut out = FnGuards {
            guards: Vec::new(),
            dominated_by: vec![None; self.graph.calls(id).len()],
            reachable: vec![false; self.graph.calls(id).len()],
        };
        let mut walk = SpanWalk {
            inner: GuardWalk {
                finder: self,
                id,
                claims: self.stops(id),
                out: &mut out,
            },
            spans,
            found: vec![None; spans.len()],
        };
        dominance::walk(body, Facts::default(), &mut walk);
        let found = walk.found;
        found
            .into_iter()
            .map(|g| g.map(|i| out.guards[i as usize].clone()))
            .collect()
    }
}

/// A [`GuardWalk`] that also records which guard dominates each of a few expressions.
struct SpanWalk<'f, 'a> {
    inner: GuardWalk<'f, 'a>,
    spans: &'f [Span],
    found: Vec<Option<u32>>,
}

impl Events for SpanWalk<'_, '_> {
    fn at(&mut self, e: &Expr, facts: &mut Facts) {
        for (i, s) in self.spans.iter().enumerate() {
            if *s == e.span && self.found[i].is_none() {
                self.found[i] = facts.iter().next();
            }
        }
        self.inner.at(e, facts);
    }
}

/// How deep guard helpers calling guard helpers are followed.
const MAX_HELPER_DEPTH: usize = 4;

/// Whether one of `id`'s parameters is named for a message's identity
/// ([`guard_key::names_message_id`]).
fn takes_message_identity(package: &Package, id: FnId) -> bool {
    id.def(package).1.params.iter().any(|p| match &p.pat {
        Pat::Ident { name, .. } => guard_key::names_message_id(name),
        _ => false,
    })
}

/// How a guard helper tells its caller the key was taken ([`GuardFinder::duplicate_signal`]).
#[derive(Debug, Clone, Copy)]
enum Signal {
    /// It returns the claim's answer (`set_nx`'s `bool`, the rows an `ON CONFLICT DO
    /// NOTHING` inserted); `fails_when_taken` when the claim also fails with an error then.
    Answer { fails_when_taken: bool },
    /// It returns an error, `false` or `None` when the key was taken.
    Refusal,
}

/// Whether a claim fails with an error when its key is taken, so that `?` on it stops a
/// duplicate: a conditional DynamoDB write, a key-only insert into a dedupe table (its key
/// the primary key). Redis and SQL `ON CONFLICT DO NOTHING` claims report it in their result.
fn fails_when_taken(a: &StoreAccess) -> bool {
    a.store == Store::DynamoDb && a.access == Access::Claim || a.shape.key_only
}

/// Whether the operation at `span` is under `?` (possibly through `.await` and error
/// conversions): its failure, a taken key for a conditional write, leaves the function.
fn propagates_error(body: &Block, span: Span) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        let ExprKind::Try(inner) = &e.kind else {
            return;
        };
        let mut cur: &Expr = inner;
        loop {
            if cur.span == span {
                found = true;
                return;
            }
            cur = match &cur.kind {
                ExprKind::Await(x) => x,
                ExprKind::MethodCall {
                    receiver, method, ..
                } if ERROR_CONVERSIONS.contains(&method.as_str()) => receiver,
                _ => return,
            };
        }
    });
    found
}

/// Whether the value of the call at `span` is decided on where it is made: the condition
/// of an `if`, the scrutinee of a `match` or an `if let`, or the initializer of a `let ..
/// else` (through `.await`, `!`, error conversions and `is_ok`-style tests). A value bound
/// first and tested later is seen by the flow's decisions instead.
fn decided_where_made(body: &Block, span: Span) -> bool {
    let is_call = |e: &Expr| {
        let mut cur = e;
        loop {
            if cur.span == span {
                return true;
            }
            cur = match &cur.kind {
                ExprKind::Await(x) => x,
                ExprKind::Unary { not: true, expr } => expr,
                ExprKind::MethodCall {
                    receiver, method, ..
                } if ERROR_CONVERSIONS.contains(&method.as_str())
                    || RESULT_TESTS.contains(&method.as_str()) =>
                {
                    receiver
                }
                _ => return false,
            };
        }
    };
    // The initializers of `let .. else` statements, in the body and the blocks nested in it.
    let mut let_else: Vec<&Expr> = Vec::new();
    fn lets_of<'a>(b: &'a Block, out: &mut Vec<&'a Expr>) {
        for stmt in &b.stmts {
            if let Stmt::Let {
                init: Some(init),
                diverge: Some(_),
                ..
            } = stmt
            {
                out.push(init);
            }
        }
    }
    lets_of(body, &mut let_else);
    let mut found = false;
    body.walk(&mut |e| match &e.kind {
        ExprKind::If { cond, then, .. } => {
            found |= is_call(cond);
            lets_of(then, &mut let_else);
        }
        ExprKind::Let { expr, .. } => found |= is_call(expr),
        ExprKind::Match { scrutinee, .. } => found |= is_call(scrutinee),
        ExprKind::Block(b)
        | ExprKind::Async { block: b, .. }
        | ExprKind::Loop { body: b, .. }
        | ExprKind::For { body: b, .. } => lets_of(b, &mut let_else),
        _ => {}
    });
    found || let_else.into_iter().any(is_call)
}

/// Methods that test a result or an option for what the caller decides on.
const RESULT_TESTS: &[&str] = &["is_ok", "is_err", "is_some", "is_none", "unwrap_or"];

/// Methods that convert an error on its way out.
pub(super) const ERROR_CONVERSIONS: &[&str] =
    &["map_err", "context", "with_context", "wrap_err", "err_into"];

/// Whether the branch at `span` returns a refusal to the caller: `return Err(..)`,
/// `return Ok(false)`, `return false`, `return None`, or `bail!`.
fn returns_refusal(body: &Block, span: Span) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        if !span.contains(e.span) {
            return;
        }
        found |= match &e.kind {
            ExprKind::Return(Some(v)) => is_refusal(v),
            ExprKind::Macro(m) => matches!(m.path.last(), "bail" | "ensure"),
            _ => false,
        };
    });
    found
}

fn is_refusal(v: &Expr) -> bool {
    match &v.peel().kind {
        ExprKind::Lit(Lit::Bool(false)) => true,
        ExprKind::Path(p) => p.last() == "None",
        ExprKind::Call { func, args } => match func.as_path().map(|p| p.last()) {
            Some("Err") => true,
            Some("Ok" | "Some") => args.first().is_some_and(is_refusal),
            _ => false,
        },
        _ => false,
    }
}

struct GuardWalk<'f, 'a> {
    finder: &'f GuardFinder<'a>,
    id: FnId,
    /// Claims and checks of the fn ([`GuardFinder::stops`]).
    claims: FastMap<Span, String>,
    out: &'f mut FnGuards,
}

impl GuardWalk<'_, '_> {
    fn guard_name(&self, e: &Expr) -> Option<String> {
        if let Some(name) = self.claims.get(&e.span) {
            return Some(name.clone());
        }
        let calls = self.finder.graph.calls_at(self.id, e.span);
        if !calls.is_empty() {
            // Through a trait, any implementation that guards makes the call a guard.
            return calls
                .iter()
                .filter(|c| c.kind != CallKind::Value)
                .find_map(|c| self.finder.guarding_call(self.id, c.callee, e.span));
        }
        // A configured guard outside the crate: `idem::assert_not_duplicate(..)`.
        let name = match &e.kind {
            ExprKind::Call { func, .. } => func.as_path()?.last(),
            ExprKind::MethodCall { method, .. } => method,
            _ => return None,
        };
        self.finder
            .names
            .iter()
            .any(|n| n == name)
            .then(|| name.to_owned())
    }
}

impl Events for GuardWalk<'_, '_> {
    fn at(&mut self, e: &Expr, facts: &mut Facts) {
        let graph = self.finder.graph;
        let calls = graph.calls(self.id);
        let first = calls.partition_point(|c| (c.span.lo, c.span.hi) < (e.span.lo, e.span.hi));
        // Every edge of the call: one per implementation of a trait method.
        for i in first..first + graph.calls_at(self.id, e.span).len() {
            self.out.dominated_by[i] = facts.iter().next();
            self.out.reachable[i] = true;
        }
        if let Some(name) = self.guard_name(e) {
            facts.insert(self.out.guards.len() as u32);
            self.out.guards.push(Guard { span: e.span, name });
        }
    }
}

/// How a fn is first reached on one kind of path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// It is the `i`-th entry point.
    Entry(u32),
    /// Through edge `call` of `caller`, itself reached guarded or not.
    Call {
        caller: FnId,
        call: u32,
        from_guarded: bool,
    },
}

/// One edge of a path: the caller, the index of the edge, and whether the caller was
/// reached under a guard.
pub type PathEdge = (FnId, u32, bool);

/// Every fn's first unguarded and first guarded path from the entry points.
#[derive(Debug)]
pub struct GuardedPaths {
    entries: Vec<EntryPoint>,
    /// Indexed by [`CallGraph::index`]; computed for the fns reached.
    guards: Vec<Option<FnGuards>>,
    unguarded: Vec<Option<Step>>,
    guarded: Vec<Option<Step>>,
}

/// Where a guarded path passes its guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardSite {
    /// The fn holding the guard (or the `#[idempotent]` fn entered).
    pub holder: FnId,
    pub guard: Guard,
    /// The guarded call in `holder` on the path, if the guard is a call before it.
    pub call: Option<u32>,
}

impl GuardedPaths {
    pub fn compute(finder: &GuardFinder<'_>, entries: Vec<EntryPoint>) -> GuardedPaths {
        GuardedPaths::compute_from(finder, entries, |_| true)
    }

    /// [`GuardedPaths::compute`] with paths from the entries `starts` keeps only; the others
    /// still mark where a route table registers a handler.
    pub fn compute_from(
        finder: &GuardFinder<'_>,
        entries: Vec<EntryPoint>,
        starts: impl Fn(&EntryPoint) -> bool,
    ) -> GuardedPaths {
        let graph = finder.graph;
        let n = graph.len();
        let mut paths = GuardedPaths {
            entries,
            guards: vec![None; n],
            unguarded: vec![None; n],
            guarded: vec![None; n],
        };
        // A route table registers its handlers without calling them: the server calls each,
        // per request, as the route it is. Its edge to a handler starts no path.
        let registered_routes: HashSet<(FnId, Span)> = paths
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::Route)
            .map(|e| (e.id, e.span))
            .collect();
        let mut queue = VecDeque::new();
        for i in 0..paths.entries.len() {
            if !starts(&paths.entries[i]) {
                continue;
            }
            let (id, guarded) = (
                paths.entries[i].id,
                paths.entries[i].kind == EntryKind::Idempotent,
            );
            let slot = paths.slot(graph, id, guarded);
            if slot.is_none() {
                *slot = Some(Step::Entry(i as u32));
                queue.push_back((id, guarded));
            }
        }
        while let Some((id, guarded)) = queue.pop_front() {
            let gi = graph.index(id);
            if paths.guards[gi].is_none() {
                paths.guards[gi] = Some(finder.of_fn(id));
            }
            for (ci, call) in graph.calls(id).iter().enumerate() {
                if paths.guards[gi].as_ref().is_some_and(|g| !g.reachable[ci])
                    || registered_routes.contains(&(call.callee, call.span))
                {
                    continue;
                }
                let covered = guarded
                    || paths.guards[gi]
                        .as_ref()
                        .is_some_and(|g| g.dominated_by[ci].is_some())
                    || call.callee.def(finder.package).1.has_attr("idempotent");
                let slot = paths.slot(graph, call.callee, covered);
                if slot.is_none() {
                    *slot = Some(Step::Call {
                        caller: id,
                        call: ci as u32,
                        from_guarded: guarded,
                    });
                    queue.push_back((call.callee, covered));
                }
            }
        }
        paths
    }

    fn slot(&mut self, graph: &CallGraph, id: FnId, guarded: bool) -> &mut Option<Step> {
        let i = graph.index(id);
        if guarded {
            &mut self.guarded[i]
        } else {
            &mut self.unguarded[i]
        }
    }

    pub fn reached_unguarded(&self, graph: &CallGraph, id: FnId) -> bool {
        self.unguarded[graph.index(id)].is_some()
    }

    pub fn reached_guarded(&self, graph: &CallGraph, id: FnId) -> bool {
        self.guarded[graph.index(id)].is_some()
    }

    /// The guards of a reached fn.
    pub fn guards(&self, graph: &CallGraph, id: FnId) -> Option<&FnGuards> {
        self.guards[graph.index(id)].as_ref()
    }

    /// The path of the given kind to `id`: its entry point and the edges from it, in order.
    pub fn path(
        &self,
        graph: &CallGraph,
        id: FnId,
        guarded: bool,
    ) -> Option<(&EntryPoint, Vec<PathEdge>)> {
        let mut edges = Vec::new();
        let (mut cur, mut g) = (id, guarded);
        loop {
            let slots = if g { &self.guarded } else { &self.unguarded };
            match slots[graph.index(cur)]? {
                Step::Entry(e) => {
                    edges.reverse();
                    return Some((&self.entries[e as usize], edges));
                }
                Step::Call {
                    caller,
                    call,
                    from_guarded,
                } => {
                    edges.push((caller, call, from_guarded));
                    if edges.len() > graph.len() {
                        return None;
                    }
                    (cur, g) = (caller, from_guarded);
                }
            }
        }
    }

    /// Whether the guarded path to `id` makes `id` the operation its guard guards: the
    /// guard's holder calls `id` under the guard (or `id` is the `#[idempotent]` fn, or a fn
    /// it calls), or `id` takes the identity of a message (a parameter named `message_id`,
    /// `event_id`, `idempotency_key`, ..: an operation on that message however deep).
    ///
    /// A fn the guarded path reaches further down, through the guarded operation's own fn,
    /// that takes no message identity is a helper that operation shares with others: the mail
    /// transport a reminder goes through after `claim_step(user, step)`, which a password
    /// reset also calls. Another path that calls such a helper does work of its own and skips
    /// nothing: the guard is on the reminder, not on every e-mail.
    pub fn guards_as_operation(&self, package: &Package, graph: &CallGraph, id: FnId) -> bool {
        let Some(site) = self.guard_site(package, graph, id) else {
            return false;
        };
        let direct = match site.call {
            Some(call) => graph.calls(site.holder)[call as usize].callee == id,
            // `#[idempotent]`: the fn itself or a fn it calls on the path.
            None => {
                site.holder == id
                    || self.path(graph, id, true).is_some_and(|(_, edges)| {
                        edges
                            .last()
                            .is_some_and(|&(caller, _, _)| caller == site.holder)
                    })
            }
        };
        direct || takes_message_identity(package, id)
    }

    /// Where the guarded path to `id` passes its guard.
    pub fn guard_site(&self, package: &Package, graph: &CallGraph, id: FnId) -> Option<GuardSite> {
        let (entry, edges) = self.path(graph, id, true)?;
        let attr_site = |holder: FnId| {
            let attr = holder
                .def(package)
                .1
                .attrs
                .iter()
                .find(|a| a.is("idempotent"))?;
            Some(GuardSite {
                holder,
                guard: Guard {
                    span: attr.span,
                    name: "#[idempotent]".to_owned(),
                },
                call: None,
            })
        };
        // The edge where the path turns guarded: a dominated call or an `#[idempotent]` callee.
        let Some(&(caller, call, _)) = edges.iter().rev().find(|(_, _, from)| !from) else {
            return attr_site(entry.id);
        };
        match self
            .guards(graph, caller)
            .and_then(|g| g.dominated_by[call as usize].map(|i| &g.guards[i as usize]))
        {
            Some(guard) => Some(GuardSite {
                holder: caller,
                guard: guard.clone(),
                call: Some(call),
            }),
            None => attr_site(graph.calls(caller)[call as usize].callee),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::entry::entry_points;
    use crate::analysis::Analysis;
    use crate::testing;

    const SRC: &str = r#"
        pub async fn api(conn: &mut redis::aio::MultiplexedConnection, id: &str) {
            if !claim(conn, id).await { return; }
            process(id).await;
        }
        pub async fn retry(id: &str) {
            process(id).await;
        }
        pub async fn stopped(conn: &mut redis::aio::MultiplexedConnection, id: &str) {
            if !claim(conn, id).await { return; }
            return;
            audit(id).await;
        }
        async fn claim(conn: &mut redis::aio::MultiplexedConnection, id: &str) -> bool {
            conn.set_nx(id, 1).await.unwrap_or(false)
        }
        async fn process(id: &str) { deliver(id).await; }
        /// Takes a lock for its own work: calling it guards nothing after it.
        async fn locked_sweep(conn: &mut redis::aio::MultiplexedConnection) -> Result<(), E> {
            let got: bool = conn.set_nx("sweep-lock", 1).await?;
            if got {
                sweep().await;
            }
            Ok(())
        }
        async fn sweep() {}
        pub async fn cron(conn: &mut redis::aio::MultiplexedConnection, id: &str) {
            locked_sweep(conn).await;
            process(id).await;
        }
        async fn deliver(id: &str) {}
        async fn audit(id: &str) {}
    "#;

    #[test]
    fn paths_record_where_the_guard_is_passed() {
        let package = testing::package("app", &["redis"], &[("crate", SRC)]);
        let a = Analysis::new(&package);
        let graph = a.call_graph(&package);
        let summaries = a.summaries(&package);
        let finder = GuardFinder::new(&package, &a.resolver, graph, summaries, &[]);
        let entries = entry_points(&package, &a.resolver, graph, &a.catalog.frameworks, &[]);
        let paths = GuardedPaths::compute(&finder, entries);
        let id = |name: &str| {
            graph
                .ids()
                .find(|id| id.def(&package).1.name == name)
                .unwrap()
        };
        let name = |id: FnId| id.def(&package).1.name.clone();
        // `deliver` is reached both ways; `retry` only without a guard.
        assert!(paths.reached_guarded(graph, id("deliver")));
        assert!(paths.reached_unguarded(graph, id("deliver")));
        assert!(!paths.reached_guarded(graph, id("retry")));
        let (entry, edges) = paths.path(graph, id("deliver"), true).unwrap();
        let chain: Vec<String> = std::iter::once(name(entry.id))
            .chain(
                edges
                    .iter()
                    .map(|&(c, i, _)| name(graph.calls(c)[i as usize].callee)),
            )
            .collect();
        assert_eq!(chain, ["api", "process", "deliver"]);
        let site = paths.guard_site(&package, graph, id("deliver")).unwrap();
        assert_eq!(
            (name(site.holder), site.guard.name.as_str()),
            ("api".into(), "claim")
        );
        // A lock helper guards its own body, not what its caller does after it.
        let cron = id("cron");
        let cron_guards = paths.guards(graph, cron).unwrap();
        assert!(cron_guards.guards.is_empty(), "{:?}", cron_guards.guards);
        // A call after `return` is never reached, guarded or not.
        assert!(!paths.reached_guarded(graph, id("audit")));
        assert!(!paths.reached_unguarded(graph, id("audit")));
    }
}
