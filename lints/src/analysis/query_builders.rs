//! Store operations written with a query builder instead of SQL text: diesel
//! (`diesel::insert_into(t).values(..)`, `.on_conflict(..).do_nothing()`,
//! `t.filter(..).first(conn)`, `diesel::update(..).set(..)`, `diesel::delete(..)`) and
//! sea-orm (`Entity::find_by_id(id).one(db)`, `Entity::insert(am).on_conflict(..).exec(db)`,
//! `ActiveModel { .. }.insert(db)`), classified as read / write / upsert / claim / delete
//! like SQL text ([`super::store_ops::classify`] calls [`classify`]).
//!
//! Without types, the evidence is the package's dependency on the ORM together with a
//! chain only it writes: a resolved `diesel::insert_into`/`update`/`delete`, a `filter`
//! chain run by a diesel runner on a `table` path, an `Entity::find*`/`insert` root, an
//! `ActiveModel` literal.

use super::store_ops::{Access, OpEnv, Store, StoreOp, WriteShape};
use crate::model::ir::{Expr, ExprKind};
use crate::model::Span;

/// Methods that run a diesel query (`RunQueryDsl`, diesel-async).
const DIESEL_RUNNERS: &[&str] = &[
    "execute",
    "load",
    "first",
    "get_result",
    "get_results",
    "get_result_async",
];

/// Methods that run a sea-orm query.
const SEA_RUNNERS: &[&str] = &[
    "one",
    "all",
    "exec",
    "exec_with_returning",
    "exec_without_returning",
    "insert",
    "update",
];

/// One step of the chain below the runner: method name and arguments.
pub(super) type Steps<'a> = Vec<(&'a str, &'a [Expr])>;

/// Classifies the runner call `receiver.method(args)`.
pub fn classify<'a>(
    env: &dyn OpEnv<'a>,
    receiver: &'a Expr,
    method: &str,
    args: &'a [Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    let diesel = env.depends_on("diesel") || env.depends_on("diesel_async");
    let sea = env.depends_on("sea_orm");
    if diesel && DIESEL_RUNNERS.contains(&method) && args.len() == 1 {
        if let Some(op) = diesel_op(env, receiver, span) {
            return Some(op);
        }
    }
    if sea && SEA_RUNNERS.contains(&method) {
        return sea_op(env, receiver, method, span);
    }
    None
}

/// The chain below `e` (innermost step last), following up to four locals, and its root.
/// Shared with [`super::store_ops`]' Redis pipelines.
pub(super) fn chain<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> (Steps<'a>, &'a Expr) {
    let mut steps = Vec::new();
    let mut cur = e.peel();
    let mut locals = 0;
    loop {
        match &cur.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                steps.push((method.as_str(), args.as_slice()));
                cur = receiver.peel();
            }
            ExprKind::Path(p) if locals < 4 => {
                match p.as_ident().and_then(|n| env.local_init(n)) {
                    Some(init) => cur = init.peel(),
                    None => return (steps, cur),
                }
                locals += 1;
            }
            _ => return (steps, cur),
        }
    }
}

/// `processed_events::table`, `processed_events::dsl::processed_events`, `processed_events`:
/// the table a diesel query names.
fn diesel_table(e: &Expr) -> Option<String> {
    let p = e.peel().as_path()?;
    let name = match p.segments.as_slice() {
        [.., t, last] if last == "table" => t,
        [.., t] => t,
        [] => return None,
    };
    Some(name.to_ascii_lowercase())
}

fn steps_have(steps: &Steps<'_>, name: &str) -> bool {
    steps.iter().any(|(m, _)| *m == name)
}

fn diesel_op<'a>(env: &dyn OpEnv<'a>, receiver: &'a Expr, span: Span) -> Option<StoreOp<'a>> {
    let (steps, root) = chain(env, receiver);
    // `diesel::insert_into(t)`, `diesel::update(t.filter(..))`, `diesel::delete(..)`.
    if let ExprKind::Call { func, args } = &root.kind {
        let resolved = env.resolve(func.as_path()?);
        let verb = [
            "insert_into",
            "replace_into",
            "update",
            "delete",
            "insert_or_ignore_into",
        ]
        .into_iter()
        .find(|v| resolved.matches(&format!("diesel::{v}")))?;
        let target = args.first()?;
        let (inner, table_root) = chain(env, target);
        let table = diesel_table(table_root);
        let filters: Vec<&Expr> = inner
            .iter()
            .filter(|(m, _)| *m == "filter")
            .filter_map(|(_, a)| a.first())
            .collect();
        let (access, keys, values) = match verb {
            "insert_into" | "replace_into" | "insert_or_ignore_into" => {
                let values: Vec<&Expr> = steps
                    .iter()
                    .filter(|(m, _)| *m == "values")
                    .filter_map(|(_, a)| a.first())
                    .collect();
                let access = if verb == "insert_or_ignore_into"
                    || steps_have(&steps, "do_nothing")
                    || steps_have(&steps, "on_conflict_do_nothing")
                {
                    Access::Claim
                } else if verb == "replace_into" || steps_have(&steps, "do_update") {
                    Access::Upsert
                } else {
                    Access::Write
                };
                let keys = values.iter().flat_map(|v| key_exprs(v)).collect();
                (access, keys, values)
            }
            "update" => {
                let keys = filters.iter().flat_map(|f| key_exprs(f)).collect();
                let access = if filters.iter().any(|f| tests_state(f)) {
                    Access::Claim
                } else {
                    Access::Write
                };
                (access, keys, Vec::new())
            }
            _ => (
                Access::Delete,
                filters.iter().flat_map(|f| key_exprs(f)).collect(),
                Vec::new(),
            ),
        };
        let command = match verb {
            "update" => "UPDATE",
            "delete" => "DELETE FROM",
            _ => "INSERT INTO",
        };
        return Some(op(command, table, access, keys, values, span));
    }
    // `t.filter(col.eq(x)).first(conn)`: a read of table `t`.
    let filters: Vec<&Expr> = steps
        .iter()
        .filter(|(m, _)| *m == "filter")
        .filter_map(|(_, a)| a.first())
        .collect();
    if filters.is_empty() || !steps.iter().all(|(m, _)| is_diesel_query_step(m)) {
        return None;
    }
    let table = diesel_table(root)?;
    let keys = filters.iter().flat_map(|f| key_exprs(f)).collect();
    let mut read = op("SELECT", Some(table), Access::Read, keys, Vec::new(), span);
    read.locking = steps_have(&steps, "for_update") || steps_have(&steps, "for_no_key_update");
    Some(read)
}

/// Query-building methods of diesel's `QueryDsl`.
fn is_diesel_query_step(m: &str) -> bool {
    matches!(
        m,
        "filter"
            | "or_filter"
            | "select"
            | "order"
            | "order_by"
            | "then_order_by"
            | "limit"
            | "offset"
            | "for_update"
            | "for_no_key_update"
            | "skip_locked"
            | "count"
            | "into_boxed"
            | "inner_join"
            | "left_join"
            | "find"
    )
}

/// The compared values of `col.eq(x)` / `a.eq(x).and(b.eq(y))` whose column is key-like, or
/// the key-like fields of a struct literal (`&NewSeen { event_id: e.id }`).
fn key_exprs(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    e.walk(&mut |x| match &x.kind {
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } if method == "eq" && args.len() == 1 => {
            let col = receiver
                .as_path()
                .map(|p| p.last().to_owned())
                .unwrap_or_default();
            if is_key_column(&col) {
                out.push(&args[0]);
            }
        }
        ExprKind::Struct { fields, .. } => {
            for (name, value) in fields {
                if is_key_column(name) {
                    out.push(value);
                }
            }
        }
        _ => {}
    });
    out
}

fn is_key_column(c: &str) -> bool {
    let c = c.to_ascii_lowercase();
    !c.ends_with("_at") && (c == "id" || c == "key" || c.ends_with("_id") || c.ends_with("_key"))
}

/// A filter that tests a row's state (`status.eq("pending")`, `processed_at.is_null()`).
fn tests_state(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let ExprKind::MethodCall {
            receiver, method, ..
        } = &x.kind
        {
            let col = receiver.as_path().map(|p| p.last().to_ascii_lowercase());
            let state = col.is_some_and(|c| {
                [
                    "status",
                    "state",
                    "processed",
                    "done",
                    "locked",
                    "claimed",
                    "version",
                ]
                .iter()
                .any(|w| c.contains(w))
                    || c.ends_with("_at")
            });
            found |= state && matches!(method.as_str(), "eq" | "is_null" | "ne" | "lt" | "gt");
        }
    });
    found
}

fn op<'a>(
    command: &str,
    table: Option<String>,
    access: Access,
    keys: Vec<&'a Expr>,
    values: Vec<&'a Expr>,
    span: Span,
) -> StoreOp<'a> {
    let dedupe_table = table
        .as_deref()
        .is_some_and(super::sql::is_dedupe_table_name);
    let keys_certain = !keys.is_empty();
    StoreOp {
        store: Store::Sql,
        access,
        command: match &table {
            Some(t) => format!("{command} {t}"),
            None => command.to_owned(),
        },
        table,
        keys,
        values,
        span,
        locking: false,
        dedupe_table: dedupe_table && access.is_write(),
        keys_certain,
        shape: WriteShape::default(),
    }
}

/// sea-orm: `processed::Entity::find_by_id(id).one(db)`, `Entity::find().filter(..).one(db)`,
/// `Entity::insert(am).on_conflict(..).exec(db)`, `ActiveModel { .. }.insert(db)`.
fn sea_op<'a>(
    env: &dyn OpEnv<'a>,
    receiver: &'a Expr,
    method: &str,
    span: Span,
) -> Option<StoreOp<'a>> {
    let (steps, root) = chain(env, receiver);
    // `ActiveModel { .. }.insert(db)` / `.update(db)`, possibly through a local.
    if matches!(method, "insert" | "update") {
        let ExprKind::Struct { path, fields, .. } = &root.kind else {
            return None;
        };
        if path.last() != "ActiveModel" || !steps.is_empty() {
            return None;
        }
        let table = entity_table(&path.segments);
        let keys = fields
            .iter()
            .filter(|(n, _)| is_key_column(n))
            .map(|(_, v)| v)
            .collect();
        let (command, access) = if method == "insert" {
            ("INSERT INTO", Access::Write)
        } else {
            ("UPDATE", Access::Write)
        };
        return Some(op(command, table, access, keys, Vec::new(), span));
    }
    let ExprKind::Call { func, args } = &root.kind else {
        return None;
    };
    let path = func.as_path()?;
    let (verb, entity) = path.segments.split_last()?;
    if !entity
        .last()
        .is_some_and(|e| e == "Entity" || e.ends_with("Entity"))
    {
        return None;
    }
    let table = entity_table(entity);
    let filters: Vec<&Expr> = steps
        .iter()
        .filter(|(m, _)| *m == "filter")
        .filter_map(|(_, a)| a.first())
        .collect();
    match (verb.as_str(), method) {
        ("find_by_id", "one" | "all") => {
            let keys = args.first().into_iter().collect();
            Some(op("SELECT", table, Access::Read, keys, Vec::new(), span))
        }
        ("find", "one" | "all") if !filters.is_empty() => {
            let keys = filters.iter().flat_map(|f| key_exprs(f)).collect();
            Some(op("SELECT", table, Access::Read, keys, Vec::new(), span))
        }
        ("insert" | "insert_many", "exec" | "exec_with_returning" | "exec_without_returning") => {
            let conflict = steps
                .iter()
                .filter(|(m, _)| *m == "on_conflict")
                .filter_map(|(_, a)| a.first())
                .next();
            let access = match conflict {
                Some(c) if mentions_method(c, "do_nothing") => Access::Claim,
                Some(_) => Access::Upsert,
                None if steps_have(&steps, "on_conflict_do_nothing") => Access::Claim,
                None => Access::Write,
            };
            let keys = args.iter().flat_map(key_exprs).collect();
            Some(op("INSERT INTO", table, access, keys, Vec::new(), span))
        }
        ("update_many", "exec") => {
            let keys = filters.iter().flat_map(|f| key_exprs(f)).collect();
            let access = if filters.iter().any(|f| tests_state(f)) {
                Access::Claim
            } else {
                Access::Write
            };
            Some(op("UPDATE", table, access, keys, Vec::new(), span))
        }
        _ => None,
    }
}

fn mentions_method(e: &Expr, name: &str) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let ExprKind::MethodCall { method, .. } = &x.kind {
            found |= method == name;
        }
    });
    found
}

/// `processed_event::Entity` / `processed_event::ActiveModel`: the entity module names
/// the table.
fn entity_table(segments: &[String]) -> Option<String> {
    let n = segments.len();
    (n >= 2).then(|| segments[n - 2].to_ascii_lowercase())
}
