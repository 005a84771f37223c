//! Completion marks and business writes: what a function writes, whether each write records a
//! key as processed (a mark) or is the work itself, and on which connection or transaction it
//! runs, directly or through crate helpers.
//!
//! A write (not a delete) is a completion mark when it
//! - writes the row or key the same function claimed (`INSERT .. ON CONFLICT DO NOTHING`
//!   into `processed_events`, then `UPDATE processed_events .. WHERE id = $1` with the same
//!   key; `SET NX` then `SET` of the same Redis key);
//! - writes a consumer's position or checkpoint (`consumer_positions`, `checkpoint`);
//! - inserts into a table named like a dedupe table (`processed_messages`, `inbox`), or
//!   writes a marker value under a key named so in Redis or DynamoDB (`SET processed:{id} 1`);
//! - sets a status to a done-like value or a completion timestamp ([`WriteShape`]);
//! - is a call of a helper whose writes are all marks, or of a fn named in configuration
//!   (`[lints.mark_outside_transaction] marks`).
//!
//! Every other write is a business write; it is naturally idempotent unless it increments or
//! inserts a new row (an upsert, `SET x = value`, a DynamoDB `put_item` overwrite, a delete
//! can run twice with the same result). A call the analysis cannot see into that is handed a
//! connection or pool (a handler trait object, a callback parameter) counts as a business
//! write that is not idempotent: it was given the database to write to.

use super::callgraph::{CallGraph, CallKind};
use super::entry::names_fn;
use super::flow::FnId;
use super::resolve::Resolver;
use super::sql::{is_dedupe_table_name, is_progress_table_name};
use super::store_ops::{Access, Store, WriteShape};
use super::summary::{StoreAccess, Summaries};
use super::transactions::{base_name, Executor, Transactions};
use crate::model::ir::{Expr, ExprKind};
use crate::model::{FnDef, Package, SelfKind, Span};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Records the key as processed.
    Mark,
    /// Records the key before the work, as taken: an SQL insert into a dedupe table that
    /// tells whether it wrote (`INSERT INTO inbox .. ON CONFLICT DO NOTHING`). It must commit
    /// with the work it guards, or a failed work leaves the key taken and the work undone.
    Claim,
    /// The work itself; `idempotent` when running it twice leaves the same state.
    Business { idempotent: bool },
}

/// A function whose writes are being computed ([`Completion::writes`]).
struct Frame<'a> {
    id: FnId,
    tx: Rc<Transactions>,
    /// Its expressions in walk order, and the next one to look at.
    nodes: Vec<&'a Expr>,
    next: usize,
    out: Vec<Write>,
}

/// What an expression is for the writes ([`Completion::target`]).
enum Target<'a> {
    Operation(&'a StoreAccess),
    Callees(Vec<FnId>),
}

/// A write a function performs, directly or through a helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub role: Role,
    pub store: Store,
    /// `INSERT INTO processed`, `put_item`, `SET`, or the configured mark's name.
    pub command: String,
    /// Where it happens in this function: the operation, or the call of the helper.
    pub span: Span,
    /// The operation itself (in the helper, for a write through one).
    pub origin: Span,
    /// Where it runs, seen from this function.
    pub executor: Executor,
    /// The helper it goes through, when it does.
    pub via: Option<FnId>,
}

/// Writes kept per function summary: callers need the kinds and executors, not every one.
const MAX_WRITES: usize = 8;

/// Names of connections, pools and transactions, for telling an executor argument of a
/// configured mark from its other arguments.
fn is_connection_name(name: &str) -> bool {
    super::transactions::is_named_one_of(
        name,
        &[
            "pool",
            "conn",
            "db",
            "tx",
            "txn",
            "client",
            "executor",
            "connection",
            "transaction",
        ],
    )
}

/// Methods of database drivers and clients that run a statement or manage the connection:
/// what they do is judged from the statement ([`super::store_ops`]), not assumed.
const DRIVER_METHODS: &[&str] = &[
    "execute",
    "execute_many",
    "batch_execute",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "fetch_many",
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "query_async",
    "query_as",
    "exec",
    "exec_drop",
    "exec_first",
    "exec_map",
    "invoke_async",
    "get_result",
    "get_results",
    "load",
    "first",
    "send",
    "begin",
    "commit",
    "rollback",
    "acquire",
    "clone",
    "transaction",
];

/// Names of calls that only read.
fn is_read_name(name: &str) -> bool {
    [
        "get", "find", "load", "fetch", "read", "select", "count", "exists", "is_", "has_", "list",
        "lookup", "check", "validate", "parse", "render",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// The completion model of a package, with per-function write summaries computed on demand.
pub struct Completion<'a> {
    package: &'a Package,
    resolver: &'a Resolver,
    graph: &'a CallGraph,
    summaries: &'a Summaries,
    /// Configured mark names.
    marks: &'a [String],
    /// Whether anything in the crate could be a mark: a store write or a configured name.
    any_marks: bool,
    /// Per fn ([`CallGraph::index`]): whether a mark can be among its writes, found by
    /// walking the call graph up from the fns that write one themselves (when no mark
    /// names are configured): [`Completion::has_mark`] then walks only those fns' bodies,
    /// not every fn of the package (on lemmy's `lemmy_apub_activities`, with the members it
    /// links, most of a keystroke's analysis).
    reaches_mark: std::cell::OnceCell<Option<Vec<bool>>>,
    /// Per fn ([`CallGraph::index`]): its writes, `None` while being computed.
    writes: RefCell<HashMap<usize, Option<Rc<Vec<Write>>>>>,
    txs: RefCell<HashMap<usize, Rc<Transactions>>>,
}

impl<'a> Completion<'a> {
    pub fn new(
        package: &'a Package,
        resolver: &'a Resolver,
        graph: &'a CallGraph,
        summaries: &'a Summaries,
        marks: &'a [String],
    ) -> Self {
        let any_marks = !marks.is_empty()
            || graph.ids().any(|id| {
                summaries.flow(id).store_events.iter().any(|ev| {
                    ev.via.is_none() && matches!(ev.access.access, Access::Write | Access::Upsert)
                })
            });
        Completion {
            package,
            resolver,
            graph,
            summaries,
            marks,
            any_marks,
            reaches_mark: std::cell::OnceCell::new(),
            writes: RefCell::new(HashMap::new()),
            txs: RefCell::new(HashMap::new()),
        }
    }

    /// The transactions of `id`.
    pub fn transactions(&self, id: FnId) -> Rc<Transactions> {
        let i = self.graph.index(id);
        if let Some(t) = self.txs.borrow().get(&i) {
            return t.clone();
        }
        let t = Rc::new(Transactions::of_fn(self.package, id.def(self.package).1));
        self.txs.borrow_mut().insert(i, t.clone());
        t
    }

    /// Whether function `id` is worth walking: it writes a mark, directly or through a call.
    pub fn has_mark(&self, id: FnId) -> bool {
        self.any_marks
            && self.may_reach_mark(id)
            && self
                .writes(id)
                .iter()
                .any(|w| matches!(w.role, Role::Mark | Role::Claim))
    }

    /// Whether `id` writes a mark itself or calls, through crate fns, one that does: a
    /// mark among [`Completion::writes`] comes from such a write ([`Completion::direct`]),
    /// or from a configured mark name, in which case every fn may reach one.
    fn may_reach_mark(&self, id: FnId) -> bool {
        let reaches = self.reaches_mark.get_or_init(|| {
            if !self.marks.is_empty() {
                return None;
            }
            let mut reaches = vec![false; self.graph.len()];
            let mut todo: Vec<FnId> = self
                .graph
                .ids()
                .filter(|&f| {
                    self.summaries.flow(f).store_events.iter().any(|ev| {
                        // A dedupe claim in SQL is a completion record too (`Role::Claim`);
                        // taking every SQL claim only widens what is walked.
                        ev.via.is_none()
                            && (matches!(ev.access.access, Access::Write | Access::Upsert)
                                && self.is_mark(f, &ev.access)
                                || ev.access.access == Access::Claim
                                    && ev.access.store == Store::Sql)
                    })
                })
                .collect();
            for &f in &todo {
                reaches[self.graph.index(f)] = true;
            }
            while let Some(f) = todo.pop() {
                for (caller, call) in self.graph.callers(f) {
                    let i = self.graph.index(caller);
                    if call.kind != CallKind::Value && !reaches[i] {
                        reaches[i] = true;
                        todo.push(caller);
                    }
                }
            }
            Some(reaches)
        });
        reaches
            .as_ref()
            .is_none_or(|r| r.get(self.graph.index(id)).copied().unwrap_or(true))
    }

    /// What `id` writes, directly or through helpers, executors seen from `id` (bounded).
    ///
    /// Depth first over the helpers `id` calls, with an explicit stack: a chain of calls is
    /// as long as the crate under review makes it, and a recursion as deep overflowed the
    /// thread's stack (1,200 async fns each calling the next). Helpers are visited in the
    /// order the recursion visited them, so a cycle is cut at the same call.
    pub fn writes(&self, id: FnId) -> Rc<Vec<Write>> {
        if let Some(done) = self.memo(id) {
            // A recursive call sees nothing of the function being computed.
            return done.unwrap_or_default();
        }
        let mut stack = vec![self.enter(id)];
        while let Some(frame) = stack.last_mut() {
            match self.advance(frame) {
                Some(callee) => {
                    let next = self.enter(callee);
                    stack.push(next);
                }
                None => {
                    if let Some(frame) = stack.pop() {
                        self.leave(frame);
                    }
                }
            }
        }
        self.memo(id).flatten().unwrap_or_default()
    }

    /// The memo of `id`: `Some(None)` while it is being computed.
    fn memo(&self, id: FnId) -> Option<Option<Rc<Vec<Write>>>> {
        self.writes.borrow().get(&self.graph.index(id)).cloned()
    }

    /// Starts computing the writes of `id`: its expressions in walk order.
    fn enter(&self, id: FnId) -> Frame<'a> {
        self.writes.borrow_mut().insert(self.graph.index(id), None);
        let mut nodes = Vec::new();
        if let Some(body) = &id.def(self.package).1.body {
            body.walk(&mut |e| nodes.push(e));
        }
        Frame {
            id,
            tx: self.transactions(id),
            nodes,
            next: 0,
            out: Vec::new(),
        }
    }

    /// Collects the writes of `frame`'s expressions up to the first call of a helper whose
    /// writes are not known yet, and returns that helper; `None` when the frame is done.
    fn advance(&self, frame: &mut Frame<'a>) -> Option<FnId> {
        while frame.next < frame.nodes.len() && frame.out.len() < MAX_WRITES {
            let e = frame.nodes[frame.next];
            if let Some(callee) = self.unvisited_callee(frame.id, e) {
                return Some(callee);
            }
            frame.out.extend(self.writes_at(frame.id, &frame.tx, e));
            frame.next += 1;
        }
        None
    }

    fn leave(&self, mut frame: Frame<'a>) {
        frame.out.truncate(MAX_WRITES);
        let i = self.graph.index(frame.id);
        self.writes.borrow_mut().insert(i, Some(Rc::new(frame.out)));
    }

    /// A helper [`Completion::writes_at`] would ask the writes of, at `e`, that has no memo.
    fn unvisited_callee(&self, id: FnId, e: &Expr) -> Option<FnId> {
        let Target::Callees(callees) = self.target(id, e) else {
            return None;
        };
        let memo = self.writes.borrow();
        callees
            .into_iter()
            .find(|&c| self.walks_into(c) && !memo.contains_key(&self.graph.index(c)))
    }

    /// What expression `e` of fn `id` is for the writes: a store operation, or the crate fns
    /// it may call.
    fn target(&self, id: FnId, e: &Expr) -> Target<'a> {
        if let Some(ev) = self.summaries.direct_op_at(id, e.span) {
            return Target::Operation(&ev.access);
        }
        // Every crate fn the call may run (each implementation of a trait method); a trait
        // method no crate type implements has no body to look into.
        Target::Callees(
            self.graph
                .calls_at(id, e.span)
                .iter()
                .filter(|c| c.kind != CallKind::Value)
                .map(|c| c.callee)
                .filter(|c| c.def(self.package).1.body.is_some())
                .collect(),
        )
    }

    /// Whether the writes through a call of `callee` are its own writes, rather than one
    /// configured mark.
    fn walks_into(&self, callee: FnId) -> bool {
        let (file, def) = callee.def(self.package);
        !names_fn(self.marks, self.resolver, file, def)
    }

    /// The writes expression `e` of fn `id` performs: a store operation, or a call of a
    /// helper (its writes seen from here), or a configured mark.
    pub fn writes_at(&self, id: FnId, tx: &Transactions, e: &Expr) -> Vec<Write> {
        let callees = match self.target(id, e) {
            Target::Operation(access) => {
                return self.direct(id, tx, e, access).into_iter().collect();
            }
            Target::Callees(callees) => callees,
        };
        if callees.is_empty() {
            return self
                .configured_external(tx, e)
                .or_else(|| self.opaque_business(id, tx, e))
                .into_iter()
                .collect();
        }
        callees
            .into_iter()
            .flat_map(|c| self.writes_through(tx, e, c))
            .collect()
    }

    /// The writes of crate fn `callee`, called by `e`, seen from the caller.
    fn writes_through(&self, tx: &Transactions, e: &Expr, callee_id: FnId) -> Vec<Write> {
        let callee = callee_id.def(self.package).1;
        if !self.walks_into(callee_id) {
            return vec![Write {
                role: Role::Mark,
                store: Store::Sql,
                command: callee.display_name(),
                span: e.span,
                origin: callee.name_span,
                executor: self.connection_arg(tx, e),
                via: Some(callee_id),
            }];
        }
        let inner = self.writes(callee_id);
        // A helper's claims travel with its marks: a helper that claims and marks is still a
        // mark helper.
        let marks_only = inner
            .iter()
            .all(|w| matches!(w.role, Role::Mark | Role::Claim));
        inner
            .iter()
            .map(|w| Write {
                // A helper that writes only marks is a mark helper; a helper that writes both
                // is judged inside itself, and its business writes count here.
                role: if marks_only && w.role != Role::Claim {
                    Role::Mark
                } else {
                    w.role
                },
                executor: self.map_executor(tx, e, callee, callee_id, &w.executor),
                span: e.span,
                via: Some(callee_id),
                ..w.clone()
            })
            .filter(|w| marks_only || w.role != Role::Mark)
            .collect()
    }

    fn direct(&self, id: FnId, tx: &Transactions, e: &Expr, a: &StoreAccess) -> Option<Write> {
        // A conditional SQL update that adds to what is stored (`on_hand = on_hand - $2 WHERE
        // on_hand >= $2`) is work a retry repeats, though the database tests its condition;
        // one that counts attempts or versions is bookkeeping. (A DynamoDB condition may test
        // the message's id, `NOT contains(applied, :id)`, and refuse the repeat.)
        let conditional_work = a.access == Access::Claim
            && a.store == Store::Sql
            && a.shape.increments
            && !a.shape.counts_bookkeeping;
        let dedupe_claim = a.access == Access::Claim
            && a.store == Store::Sql
            && !conditional_work
            && (a.dedupe_table || a.table.as_deref().is_some_and(is_dedupe_table_name));
        if !(matches!(a.access, Access::Write | Access::Upsert | Access::Delete)
            || conditional_work
            || dedupe_claim)
        {
            return None;
        }
        let role = if dedupe_claim {
            Role::Claim
        } else if self.is_mark(id, a) {
            Role::Mark
        } else {
            Role::Business {
                idempotent: !a.changes_on_repeat(),
            }
        };
        Some(Write {
            role,
            store: a.store,
            command: a.command.clone(),
            span: e.span,
            origin: e.span,
            executor: tx.executor(e),
            via: None,
        })
    }

    fn is_mark(&self, id: FnId, a: &StoreAccess) -> bool {
        if matches!(a.access, Access::Delete | Access::Claim) {
            return false;
        }
        let WriteShape { marks_done, .. } = a.shape;
        let dedupe_named = a.dedupe_table || a.table.as_deref().is_some_and(is_dedupe_table_name);
        // A consumer's position or checkpoint: everything up to it is processed.
        let progress = a.table.as_deref().is_some_and(is_progress_table_name);
        // A job queue claims, inserts and fails rows of one table: only the claimed row (same
        // table, same key, same function) is its completion record.
        let claimed_here = a.key.as_ref().is_some_and(|k| {
            self.summaries.flow(id).store_events.iter().any(|ev| {
                ev.access.access == Access::Claim
                    && ev.access.store == a.store
                    && ev.access.table == a.table
                    && ev.access.key.as_ref().is_some_and(|c| c.same_key(k))
            })
        });
        // A marker under a dedupe-named key of a key-value store: `SET processed:{id} 1`.
        let dedupe_key = a.store != Store::Sql
            && a.value_is_marker
            && a.key.as_ref().is_some_and(|k| {
                k.lits
                    .iter()
                    .any(|l| is_dedupe_table_name(&l.replace(':', "_")))
            });
        marks_done || dedupe_named || progress || claimed_here || dedupe_key
    }

    /// A configured mark outside the crate: `idem::mark_processed(&pool, key)`.
    fn configured_external(&self, tx: &Transactions, e: &Expr) -> Option<Write> {
        let name = match &e.kind {
            ExprKind::Call { func, .. } => func.as_path()?.last(),
            ExprKind::MethodCall { method, .. } => method,
            _ => return None,
        };
        self.marks.iter().any(|m| m == name).then(|| Write {
            role: Role::Mark,
            store: Store::Sql,
            command: name.to_owned(),
            span: e.span,
            origin: e.span,
            executor: self.connection_arg(tx, e),
            via: None,
        })
    }

    /// A call the analysis cannot see into that is handed a transaction, connection or pool:
    /// a handler behind a trait object or from another crate (`handler.handle(&event, pool)`)
    /// or a callback parameter (`on_event(event, pool)`). What it writes is not known, but it
    /// is given the database to write to: business work, which a retry repeats. A call given
    /// no connection, a driver's own method (`execute`, `query_async`) or a read-named method
    /// (`get_user`, `load`) is not.
    fn opaque_business(&self, id: FnId, tx: &Transactions, e: &Expr) -> Option<Write> {
        let (name, args) = match &e.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                let handler = matches!(
                    receiver.peel().kind,
                    ExprKind::Path(_) | ExprKind::Field { .. }
                ) && !base_name(receiver).is_some_and(|n| is_connection_name(&n));
                let opaque =
                    handler && !DRIVER_METHODS.contains(&method.as_str()) && !is_read_name(method);
                let name = base_name(receiver).filter(|_| opaque);
                (name.map(|r| format!("{r}.{method}(..)")), args)
            }
            ExprKind::Call { func, args } => {
                let callback = func
                    .as_path()
                    .and_then(|p| p.as_ident())
                    .filter(|n| self.is_param(id, n));
                (callback.map(|n| format!("{n}(..)")), args)
            }
            _ => return None,
        };
        let name = name?;
        let executor = args
            .iter()
            .map(|a| (tx.executor_of_arg(a), base_name(a)))
            .find(|(x, n)| {
                matches!(x, Executor::Tx(_)) || n.as_deref().is_some_and(is_connection_name)
            })?
            .0;
        Some(Write {
            role: Role::Business { idempotent: false },
            store: Store::Sql,
            command: name,
            span: e.span,
            origin: e.span,
            executor,
            via: None,
        })
    }

    fn is_param(&self, id: FnId, name: &str) -> bool {
        id.def(self.package)
            .1
            .params
            .iter()
            .any(|p| p.pat.bindings().iter().any(|(n, _)| *n == name))
    }

    /// The executor among a call's receiver and arguments: a transaction handle, else an
    /// argument named like a connection.
    fn connection_arg(&self, tx: &Transactions, e: &Expr) -> Executor {
        let (receiver, args): (Option<&Expr>, &[Expr]) = match &e.kind {
            ExprKind::Call { args, .. } => (None, args),
            ExprKind::MethodCall { receiver, args, .. } => (Some(receiver), args),
            _ => return Executor::Unknown,
        };
        let candidates: Vec<&Expr> = receiver.into_iter().chain(args).collect();
        let execs: Vec<(Executor, Option<String>)> = candidates
            .iter()
            .map(|a| (tx.executor_of_arg(a), base_name(a)))
            .collect();
        execs
            .iter()
            .find(|(x, _)| matches!(x, Executor::Tx(_)))
            .or_else(|| {
                execs
                    .iter()
                    .find(|(_, n)| n.as_deref().is_some_and(is_connection_name))
            })
            .map_or(Executor::Unknown, |(x, _)| x.clone())
    }

    /// A helper's executor seen from the caller: its parameter becomes the argument given,
    /// its own transaction a transaction committed inside it.
    fn map_executor(
        &self,
        tx: &Transactions,
        call: &Expr,
        callee: &FnDef,
        callee_id: FnId,
        exec: &Executor,
    ) -> Executor {
        match exec {
            Executor::Param(i) => {
                let arg = match &call.kind {
                    ExprKind::MethodCall { args, .. } => args.get(*i),
                    ExprKind::Call { args, .. } => {
                        let shift = usize::from(callee.self_kind != SelfKind::None);
                        args.get(i + shift)
                    }
                    _ => None,
                };
                arg.map_or(Executor::Unknown, |a| tx.executor_of_arg(a))
            }
            Executor::Tx(_) => Executor::InCallee(callee_id),
            other => other.clone(),
        }
    }
}
