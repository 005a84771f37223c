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
//!
//! sea-query statements (`Query::insert()..`) are turned into the SQL text they stand for
//! ([`sea_query_sql`]), which the value flow keeps like any text, so they are classified
//! where sqlx or sea-orm runs them.

use super::store_ops::{Access, OpEnv, Store, StoreOp, WriteShape};
use crate::model::ir::{Expr, ExprKind, Lit};
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
    // The method name first: most calls are no runner, and the dependency checks are not free.
    let diesel_runner = DIESEL_RUNNERS.contains(&method) && args.len() == 1;
    let sea_runner = SEA_RUNNERS.contains(&method);
    if !diesel_runner && !sea_runner {
        return None;
    }
    let diesel = env.depends_on("diesel") || env.depends_on("diesel_async");
    let sea = env.depends_on("sea_orm");
    if diesel && diesel_runner {
        if let Some(op) = diesel_op(env, receiver, span) {
            return Some(op);
        }
    }
    if sea && sea_runner {
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
        // `diesel::select(exists(t.filter(..)))`: a read of `t`.
        if resolved.matches("diesel::select") && steps.is_empty() {
            let (inner, table_root) = exists_query(env, args.first()?)?;
            return diesel_read(inner, table_root, span);
        }
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
        // `update(t.filter(..))` and `update(t).filter(..)` are one statement: diesel takes
        // the filters of the target and of the statement alike.
        let filters: Vec<&Expr> = inner
            .iter()
            .chain(
                steps
                    .iter()
                    .filter(|_| verb == "update" || verb == "delete"),
            )
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
        let mut found = op(command, table, access, keys, values, span);
        found.columns = if command == "INSERT INTO" {
            found.values.iter().flat_map(|v| column_values(v)).collect()
        } else {
            filters.iter().flat_map(|f| column_values(f)).collect()
        };
        found.shape = diesel_set_shape(env, &steps);
        found.shape.updates_rows = verb == "update";
        return Some(found);
    }
    diesel_read(steps, root, span)
}

/// What the `.set(..)` steps of a diesel update or upsert write: `col.eq(col + x)` (or
/// `col - x`) adds to the column; `processed_at.eq(now)`, `status.eq("done")` mark the row
/// done.
fn diesel_set_shape(env: &dyn OpEnv<'_>, steps: &Steps<'_>) -> WriteShape {
    use super::store_ops::{holds_done_value, is_completion_name, is_status_name};
    let mut counters = Vec::new();
    let mut marks_done = false;
    for (_, args) in steps.iter().filter(|(m, _)| *m == "set") {
        for a in args.iter() {
            a.walk(&mut |x| {
                let ExprKind::MethodCall {
                    receiver,
                    method,
                    args,
                    ..
                } = &x.kind
                else {
                    return;
                };
                let (Some(col), [rhs]) = (receiver.as_path(), args.as_slice()) else {
                    return;
                };
                if method == "eq" {
                    let cleared = matches!(&rhs.peel().kind, ExprKind::Lit(Lit::Bool(false)))
                        || rhs.as_path().is_some_and(|p| p.last() == "None");
                    marks_done |= is_completion_name(col.last()) && !cleared
                        || is_status_name(col.last()) && holds_done_value(env, rhs);
                }
                let ExprKind::Binary {
                    op: crate::model::ir::BinOp::Arith(_),
                    lhs,
                    ..
                } = &rhs.peel().kind
                else {
                    return;
                };
                if method == "eq" && lhs.as_path().is_some_and(|l| l.last() == col.last()) {
                    counters.push(col.last().to_owned());
                }
            });
        }
    }
    WriteShape {
        marks_done,
        increments: !counters.is_empty(),
        counts_bookkeeping: !counters.is_empty()
            && counters
                .iter()
                .all(|c| super::store_ops::is_bookkeeping_counter(c)),
        ..WriteShape::default()
    }
}

/// The query inside `exists(q)` / `diesel::dsl::exists(q)`: its chain and root.
fn exists_query<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> Option<(Steps<'a>, &'a Expr)> {
    let ExprKind::Call { func, args } = &e.peel().kind else {
        return None;
    };
    let resolved = env.resolve(func.as_path()?);
    let is_exists = ["diesel::dsl::exists", "diesel::expression::exists::exists"]
        .iter()
        .any(|p| resolved.matches(p));
    let query = args.first().filter(|_| is_exists)?;
    Some(chain(env, query))
}

/// `t.filter(col.eq(x)).first(conn)`: a read of table `t`, given the chain below the runner.
fn diesel_read<'a>(steps: Steps<'a>, root: &'a Expr, span: Span) -> Option<StoreOp<'a>> {
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
    read.columns = filters.iter().flat_map(|f| column_values(f)).collect();
    read.locking = steps_have(&steps, "for_update") || steps_have(&steps, "for_no_key_update");
    // `filter(uniq_hash.eq(h))`: a lookup of a dedupe record, not of data.
    read.dedupe_table = filters.iter().any(|f| compares_dedupe_column(f));
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

/// The columns `e` gives a value or compares with one: `col.eq(x)` (in a filter, or a
/// tuple of `values`), the fields of a struct literal (an `Insertable`'s fields are its
/// columns).
fn column_values(e: &Expr) -> Vec<(String, Option<&Expr>)> {
    let mut out = Vec::new();
    e.walk(&mut |x| match &x.kind {
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } if method == "eq" && args.len() == 1 => {
            if let Some(col) = receiver.as_path() {
                out.push((col.last().to_ascii_lowercase(), Some(&args[0])));
            }
        }
        ExprKind::Struct { fields, .. } => {
            for (name, value) in fields {
                out.push((name.to_ascii_lowercase(), Some(value)));
            }
        }
        _ => {}
    });
    out
}

/// `col.eq(x)` somewhere in `e` with a dedupe-named column (`uniq_hash`, `idempotency_key`).
fn compares_dedupe_column(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let ExprKind::MethodCall {
            receiver, method, ..
        } = &x.kind
        {
            found |= method == "eq"
                && receiver
                    .as_path()
                    .is_some_and(|p| super::sql::is_dedupe_key_column(p.last()));
        }
    });
    found
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
            // `col.nullable().lt(..)`: the column under diesel's type adapters.
            let mut column = &**receiver;
            while let ExprKind::MethodCall {
                receiver: inner,
                method: adapter,
                ..
            } = &column.kind
            {
                if !matches!(adapter.as_str(), "nullable" | "assume_not_null") {
                    break;
                }
                column = inner;
            }
            // A bound on a column (`access_count < max_access_count`) is a condition the
            // database tests when it writes, as a state column's value is.
            if matches!(method.as_str(), "lt" | "le" | "gt" | "ge") && column.as_path().is_some() {
                found = true;
            }
            let col = column.as_path().map(|p| p.last().to_ascii_lowercase());
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
        columns: Vec::new(),
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
        let mut found = op(command, table, access, keys, Vec::new(), span);
        found.shape.updates_rows = method == "update";
        return Some(found);
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
            let mut found = op("UPDATE", table, access, keys, Vec::new(), span);
            found.shape.updates_rows = true;
            // `.col_expr(C, Expr::col(C).add(n))`: the column is added to.
            found.shape.increments = steps.iter().any(|(m, a)| {
                *m == "col_expr"
                    && a.get(1)
                        .is_some_and(|v| mentions_method(v, "add") || mentions_method(v, "sub"))
            });
            Some(found)
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

// ---------------------------------------------------------------- sea-query

/// The SQL text a sea-query statement builder stands for: `Query::insert().into_table(T)
/// .columns([..]).values_panic([..]).on_conflict(OnConflict::column(C).do_nothing()
/// .to_owned())`, `Query::select().from(T).and_where(Expr::col(C).eq(v))`,
/// `Query::update().table(T).value(C, v).and_where(..)`, `Query::delete().from_table(T)`,
/// through `.to_owned()`, `stmt.build(PostgresQueryBuilder)`, `.build_sqlx(..)`,
/// `.to_string(..)` and sea-orm's `backend.build(&stmt)`. The text is then read like SQL
/// written by hand ([`super::sql::parse`]); binds are `$1`, `$2`, .. in the order the values
/// are given. Only a chain written in one expression (or through locals) is read: a
/// statement changed by separate statements (`q.and_where(..);`) has no text, nor has one
/// whose `on_conflict` or conditions are not builder calls the reader knows.
pub fn sea_query_sql<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> Option<String> {
    if !(env.depends_on("sea_query") || env.depends_on("sea_orm")) {
        return None;
    }
    let e = e.peel();
    if let ExprKind::MethodCall {
        receiver,
        method,
        args,
        ..
    } = &e.kind
    {
        if matches!(
            method.as_str(),
            "build" | "build_sqlx" | "build_any" | "build_rusqlite" | "build_postgres"
        ) {
            // `stmt.build(PostgresQueryBuilder)`, or sea-orm's `backend.build(&stmt)`.
            return env
                .string_of(receiver)
                .or_else(|| args.first().and_then(|a| env.string_of(a)));
        }
    }
    statement_sql(env, e)
}

fn statement_sql<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> Option<String> {
    // One expression only: a local holding a statement is read where it is bound (its text
    // kept unless the binding is `mut`, since `q.on_conflict(..);` may follow).
    let mut steps: Steps<'_> = Vec::new();
    let mut root = e.peel();
    while let ExprKind::MethodCall {
        receiver,
        method,
        args,
        ..
    } = &root.kind
    {
        steps.push((method.as_str(), args.as_slice()));
        root = receiver.peel();
    }
    let ExprKind::Call { func, args } = &root.kind else {
        return None;
    };
    // Resolved, so `use sea_query::Query as Q;` and a full path read the same.
    let path = env.resolve(func.as_path()?);
    let [.., query, verb] = &*path.segments else {
        return None;
    };
    if query != "Query" || !args.is_empty() {
        return None;
    }
    // Innermost step first; `to_owned()`/`clone()` and display steps change nothing.
    let steps: Vec<(&str, &[Expr])> = steps
        .into_iter()
        .rev()
        .filter(|(m, _)| !matches!(*m, "to_owned" | "clone" | "take"))
        .collect();
    let mut sql = SeaSql::default();
    match verb.as_str() {
        "insert" => sql.insert(&steps),
        "select" => sql.select(&steps),
        "update" => sql.update(&steps),
        "delete" => sql.delete(&steps),
        _ => None,
    }
}

/// Builds the text of one statement, numbering the placeholders.
#[derive(Default)]
struct SeaSql {
    params: usize,
}

impl SeaSql {
    fn param(&mut self) -> String {
        self.params += 1;
        format!("${}", self.params)
    }

    fn insert(&mut self, steps: &[(&str, &[Expr])]) -> Option<String> {
        let (mut table, mut columns, mut rows, mut conflict, mut returning) =
            (None, Vec::new(), Vec::new(), String::new(), false);
        for (m, args) in steps {
            match *m {
                "into_table" => table = Some(iden(args.first()?)?),
                "columns" => columns = idens(args.first()?)?,
                "values_panic" | "values" => rows.push(items(args.first()?).len()),
                "on_conflict" => conflict = on_conflict(args.first()?)?,
                "returning" | "returning_col" | "returning_all" => returning = true,
                "or_default_values" | "select_from" => {}
                _ => return None,
            }
        }
        let width = columns.len().max(rows.first().copied().unwrap_or(0));
        let row = |s: &mut SeaSql| {
            let v: Vec<String> = (0..width).map(|_| s.param()).collect();
            format!("({})", v.join(", "))
        };
        let values: Vec<String> = rows.iter().map(|_| row(self)).collect();
        let mut text = format!("INSERT INTO {} ({})", table?, columns.join(", "));
        if !values.is_empty() {
            text.push_str(&format!(" VALUES {}", values.join(", ")));
        }
        text.push_str(&conflict);
        if returning {
            text.push_str(" RETURNING *");
        }
        Some(text)
    }

    fn select(&mut self, steps: &[(&str, &[Expr])]) -> Option<String> {
        let (mut table, mut conds, mut locking) = (None, Vec::new(), "");
        for (m, args) in steps {
            match *m {
                "from" | "from_as" if table.is_none() => table = Some(iden(args.first()?)?),
                "and_where" | "cond_where" => conds.push(self.condition(args.first()?, false)),
                "lock" | "lock_exclusive" | "lock_with_tables" | "lock_with_behavior" => {
                    locking = " FOR UPDATE"
                }
                "lock_shared" => locking = " FOR SHARE",
                _ => {}
            }
        }
        let mut text = format!("SELECT * FROM {}", table?);
        push_where(&mut text, &conds);
        text.push_str(locking);
        Some(text)
    }

    fn update(&mut self, steps: &[(&str, &[Expr])]) -> Option<String> {
        let (mut table, mut sets, mut conds) = (None, Vec::new(), Vec::new());
        for (m, args) in steps {
            match *m {
                "table" => table = Some(iden(args.first()?)?),
                "value" | "value_expr" => {
                    let col = iden(args.first()?)?;
                    let v = self.value(args.get(1)?);
                    sets.push(format!("{col} = {v}"));
                }
                "values" => {
                    for pair in items(args.first()?) {
                        let ExprKind::Tuple(kv) = &pair.peel().kind else {
                            return None;
                        };
                        let col = iden(kv.first()?)?;
                        let v = self.value(kv.get(1)?);
                        sets.push(format!("{col} = {v}"));
                    }
                }
                "and_where" | "cond_where" => conds.push(self.condition(args.first()?, true)),
                "returning" | "returning_col" | "returning_all" | "limit" | "order_by" => {}
                _ => return None,
            }
        }
        let mut text = format!("UPDATE {} SET {}", table?, sets.join(", "));
        push_where(&mut text, &conds);
        Some(text)
    }

    fn delete(&mut self, steps: &[(&str, &[Expr])]) -> Option<String> {
        let (mut table, mut conds) = (None, Vec::new());
        for (m, args) in steps {
            match *m {
                "from_table" => table = Some(iden(args.first()?)?),
                "and_where" | "cond_where" => conds.push(self.condition(args.first()?, true)),
                "returning" | "returning_col" | "returning_all" | "limit" | "order_by" => {}
                _ => return None,
            }
        }
        let mut text = format!("DELETE FROM {}", table?);
        push_where(&mut text, &conds);
        Some(text)
    }

    /// A value given a column: a text literal as SQL text (`'done'`), anything else a
    /// placeholder.
    fn value(&mut self, e: &Expr) -> String {
        match literal_text(e) {
            Some(t) => format!("'{}'", t.replace('\'', "''")),
            None => self.param(),
        }
    }

    /// `Expr::col(C).eq(v)`, `C.eq(v)`, `.is_null()`, `.lt(v)`, `a.and(b)`,
    /// `Cond::all().add(a).add(b)`. A condition the reader does not know is kept as a test of
    /// the row's state (`unknown IS NULL`) in an update or delete, so a write it guards counts
    /// as conditional rather than plain; in a select it only narrows the read.
    fn condition(&mut self, e: &Expr, writes: bool) -> String {
        let unknown = || if writes { "unknown IS NULL" } else { "1 = 1" }.to_owned();
        let ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } = &e.peel().kind
        else {
            return unknown();
        };
        let op = match method.as_str() {
            "eq" => "=",
            "ne" => "<>",
            "lt" => "<",
            "lte" => "<=",
            "gt" => ">",
            "gte" => ">=",
            "is_null" => return column(receiver).map_or_else(unknown, |c| format!("{c} IS NULL")),
            "is_not_null" => {
                return column(receiver).map_or_else(unknown, |c| format!("{c} IS NOT NULL"))
            }
            "and" | "add" if args.len() == 1 => {
                let root = match &receiver.peel().kind {
                    ExprKind::Call { func, .. }
                        if func.as_path().is_some_and(|p| p.last() == "all") =>
                    {
                        None
                    }
                    _ => Some(self.condition(receiver, writes)),
                };
                let rhs = self.condition(&args[0], writes);
                return match root {
                    Some(l) => format!("{l} AND {rhs}"),
                    None => rhs,
                };
            }
            _ => return unknown(),
        };
        let (Some(col), Some(arg)) = (column(receiver), args.first()) else {
            return unknown();
        };
        let v = self.value(arg);
        format!("{col} {op} {v}")
    }
}

fn push_where(text: &mut String, conds: &[String]) {
    if !conds.is_empty() {
        text.push_str(" WHERE ");
        text.push_str(&conds.join(" AND "));
    }
}

/// The column of `Expr::col(C)`, `Expr::col((T, C))`, `Expr::tbl(T, C)` or a sea-orm
/// `Column::C`.
fn column(e: &Expr) -> Option<String> {
    match &e.peel().kind {
        ExprKind::Call { func, args } => {
            let f = func.as_path()?;
            match (f.last(), args.as_slice()) {
                ("col" | "column", [c]) => iden(c),
                ("tbl", [_, c]) => iden(c),
                _ => None,
            }
        }
        ExprKind::Path(_) => iden(e),
        _ => None,
    }
}

/// `OnConflict::column(C).do_nothing().to_owned()`: ` ON CONFLICT (c) DO NOTHING`, or `DO
/// UPDATE` for `update_column(s)`/`value(s)`. Anything else has no text.
fn on_conflict(e: &Expr) -> Option<String> {
    let mut cur = e.peel();
    let mut action = None;
    let mut target = Vec::new();
    loop {
        match &cur.kind {
            ExprKind::MethodCall {
                receiver, method, ..
            } => {
                match method.as_str() {
                    "do_nothing" | "do_nothing_on" => action = action.or(Some("DO NOTHING")),
                    "update_column" | "update_columns" | "value" | "values" | "update_expr"
                    | "update_exprs" => action = action.or(Some("DO UPDATE SET x = excluded.x")),
                    "to_owned" | "clone" | "target_and_where" | "action_and_where" => {}
                    _ => return None,
                }
                cur = receiver.peel();
            }
            ExprKind::Call { func, args } => {
                let f = func.as_path()?;
                if f.segments.len() < 2 || f.segments[f.segments.len() - 2] != "OnConflict" {
                    return None;
                }
                match (f.last(), args.first()) {
                    ("column", Some(c)) => target.push(iden(c)?),
                    ("columns", Some(cs)) => target = idens(cs)?,
                    ("new", None) => {}
                    _ => return None,
                }
                break;
            }
            _ => return None,
        }
    }
    let target = if target.is_empty() {
        String::new()
    } else {
        format!(" ({})", target.join(", "))
    };
    Some(format!(" ON CONFLICT{target} {}", action?))
}

/// `[a, b]`, `vec![a, b]`, `(a, b)`: the items.
fn items(e: &Expr) -> Vec<&Expr> {
    match &e.peel().kind {
        ExprKind::Array(xs) | ExprKind::Tuple(xs) => xs.iter().collect(),
        ExprKind::Macro(m) if m.path.last() == "vec" => m.args.iter().collect(),
        _ => vec![e],
    }
}

fn idens(e: &Expr) -> Option<Vec<String>> {
    items(e).into_iter().map(iden).collect()
}

/// The SQL name of an identifier: `Seen::Table` -> `seen`, `Seen::EventId` -> `event_id`,
/// `processed::Entity` / `processed::Column::EventId`, `Alias::new("x")`, `(Schema, T)`.
fn iden(e: &Expr) -> Option<String> {
    match &e.peel().kind {
        ExprKind::Path(p) => {
            let segs = &p.segments;
            let last = segs.last()?;
            let named = match segs.as_slice() {
                [.., owner, t] if t == "Table" || t == "Entity" => owner,
                _ => last,
            };
            Some(snake_case(named))
        }
        ExprKind::Lit(Lit::Str(s)) => Some(s.clone()),
        ExprKind::Call { func, args } => match (func.as_path()?.last(), args.as_slice()) {
            ("new" | "from", [a]) => iden(a),
            _ => None,
        },
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(method.as_str(), "into_iden" | "into" | "to_owned" | "clone") => {
            iden(receiver)
        }
        ExprKind::Tuple(xs) => iden(xs.last()?),
        _ => None,
    }
}

/// `EventId` -> `event_id`, `processed_events` unchanged.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A text literal given as a value: `"done"`, `"done".into()`, `Expr::value("done")`.
fn literal_text(e: &Expr) -> Option<String> {
    match &e.peel().kind {
        ExprKind::Lit(Lit::Str(s)) => Some(s.clone()),
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(method.as_str(), "into" | "to_owned" | "to_string") => literal_text(receiver),
        ExprKind::Call { func, args } if args.len() == 1 => {
            let f = func.as_path()?;
            matches!(f.last(), "value" | "val").then(|| literal_text(&args[0]))?
        }
        _ => None,
    }
}
