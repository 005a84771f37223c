//! The fixes `check_then_act` offers: the check itself becomes the atomic claim, in place,
//! so that one step before the work tells exactly one delivery it won. Both are
//! `MaybeIncorrect`: a run that fails after the claim keeps the key claimed unless the
//! handler releases it.

use super::Finding;
use crate::analysis::Store;
use crate::model::ir::{Expr, ExprKind, Lit, Pat};
use crate::model::{FnDef, Span};

/// A suggestion's help line and its edits.
pub(super) struct Fix {
    pub message: &'static str,
    pub edits: Vec<(Span, String)>,
}

/// The claim in place of the check, for the shapes where the rewrite keeps the code's
/// meaning: a Redis `exists` check, or a SQL `SELECT` whose `INSERT` binds the same values.
pub(super) fn claim_in_place_of_check(f: &FnDef, finding: &Finding) -> Option<Fix> {
    let (read, write) = (&finding.read, &finding.write);
    if read.via.is_some() || write.via.is_some() {
        return None;
    }
    let body = f.body.as_ref()?;
    let find = |span: Span| {
        let mut found = None;
        body.walk(&mut |e| {
            if e.span == span && found.is_none() {
                found = Some(e);
            }
        });
        found
    };
    let (check, mark) = (find(read.span)?, find(write.span)?);
    match read.access.store {
        Store::Redis => Some(Fix {
            message: "claim the key with `set_nx` in place of the `exists` check (a run that \
                      fails then keeps the claim: delete the key on failure or give it a TTL)",
            edits: set_nx_in_place_of_exists(f, check, mark)?,
        }),
        Store::Sql => Some(Fix {
            message: "claim the row with `INSERT .. ON CONFLICT DO NOTHING` in place of the \
                      `SELECT` check, and skip the work when no row was inserted (the inserted \
                      columns need a unique key; a run that fails then keeps the claim: delete \
                      the row on failure)",
            edits: insert_in_place_of_select(f, check, mark)?,
        }),
        _ => None,
    }
}

// ---------------------------------------------------------------- Redis

/// For a Redis `exists` check bound by `let seen = conn.exists(&key)..;` and a later
/// `conn.set(&key, <literal>)`: the check made the claim, `conn.set_nx(&key, <literal>)`,
/// with `!` so the binding keeps its meaning (true: someone claimed it first). The later
/// `set` stays (it rewrites the same value).
fn set_nx_in_place_of_exists(f: &FnDef, check: &Expr, mark: &Expr) -> Option<Vec<(Span, String)>> {
    let (
        ExprKind::MethodCall {
            method,
            method_span,
            args,
            ..
        },
        ExprKind::MethodCall {
            method: set,
            args: set_args,
            ..
        },
    ) = (&check.kind, &mark.kind)
    else {
        return None;
    };
    if method != "exists" || args.len() != 1 || set != "set" || set_args.len() != 2 {
        return None;
    }
    let value = literal_source(&set_args[1])?;
    let (init, _) = binding_of(f, check.span)?;
    Some(vec![
        (init.span.shrink_to_lo(), "!".to_owned()),
        (*method_span, "set_nx".to_owned()),
        (args[0].span.shrink_to_hi(), format!(", {value}")),
    ])
}

/// The source text of a number, `true`/`false` or a string literal without escapes.
fn literal_source(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Lit(Lit::Int(i)) => Some(i.clone()),
        ExprKind::Lit(Lit::Bool(b)) => Some(b.to_string()),
        ExprKind::Lit(Lit::Str(s)) if !s.contains(['"', '\\']) => Some(format!("\"{s}\"")),
        _ => None,
    }
}

// ---------------------------------------------------------------- SQL

/// How a query is run: sqlx's `query(sql).bind(..).fetch_optional(db)`, or a
/// tokio-postgres client's `query_opt(sql, &[..])`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Driver {
    Sqlx,
    TokioPostgres,
}

/// A query call as the fix needs it: where its SQL literal is, which method runs it, and
/// what it binds.
struct SqlCall<'a> {
    driver: Driver,
    text: &'a str,
    literal: Span,
    method: &'a str,
    method_span: Span,
    binds: Vec<&'a Expr>,
}

/// For a `SELECT` check whose answer is only tested for presence (`row.is_some()`) and a
/// later plain `INSERT` binding the same values as the check (a key-only dedupe row): the
/// check becomes `INSERT .. ON CONFLICT DO NOTHING` run with `execute`, its answer "no row
/// was inserted" (true: someone claimed it first, as `is_some()` meant), and the later
/// `INSERT` gets `ON CONFLICT DO NOTHING` so it does not fail on the row just claimed.
/// PostgreSQL and SQLite only: the SQL must use `$n` placeholders.
fn insert_in_place_of_select(f: &FnDef, check: &Expr, mark: &Expr) -> Option<Vec<(Span, String)>> {
    let (read, write) = (sql_call(check)?, sql_call(mark)?);
    let runners = match read.driver {
        Driver::Sqlx => ("fetch_optional", "execute"),
        Driver::TokioPostgres => ("query_opt", "execute"),
    };
    if read.driver != write.driver
        || (read.method, write.method) != runners
        || !same_exprs(&read.binds, &write.binds)
    {
        return None;
    }
    let claim = claim_sql(write.text)?;
    let inserted = match read.driver {
        Driver::Sqlx => ".rows_affected() == 0",
        Driver::TokioPostgres => " == 0",
    };
    let mut edits = vec![
        (read.literal, sql_literal(&claim)),
        (read.method_span, "execute".to_owned()),
    ];
    edits.extend(presence_tests(f, check, inserted)?);
    if claim != write.text.trim() {
        edits.push((write.literal, sql_literal(&claim)));
    }
    Some(edits)
}

fn sql_call(op: &Expr) -> Option<SqlCall<'_>> {
    let ExprKind::MethodCall {
        receiver,
        method,
        method_span,
        args,
    } = &op.kind
    else {
        return None;
    };
    let call = |driver, (text, literal), binds| SqlCall {
        driver,
        text,
        literal,
        method,
        method_span: *method_span,
        binds,
    };
    // tokio-postgres: the text and the parameter slice are the arguments.
    if let [sql, params] = args.as_slice() {
        return Some(call(Driver::TokioPostgres, str_literal(sql)?, vec![params]));
    }
    // sqlx: `.bind(x)` calls back to `query(sql)`.
    let mut binds = Vec::new();
    let mut cur: &Expr = receiver;
    loop {
        match &cur.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } if method == "bind" && args.len() == 1 => {
                binds.push(&args[0]);
                cur = receiver;
            }
            ExprKind::Call { func, args } => {
                let ExprKind::Path(p) = &func.kind else {
                    return None;
                };
                if !matches!(p.last(), "query" | "query_as" | "query_scalar") || args.len() != 1 {
                    return None;
                }
                binds.reverse();
                return Some(call(Driver::Sqlx, str_literal(&args[0])?, binds));
            }
            _ => return None,
        }
    }
}

fn str_literal(e: &Expr) -> Option<(&str, Span)> {
    match &e.kind {
        ExprKind::Lit(Lit::Str(s)) => Some((s, e.span)),
        _ => None,
    }
}

/// The claiming form of a plain `INSERT`: `ON CONFLICT DO NOTHING` appended (kept when it
/// is there already). `None` for text the append could break (`RETURNING`, a trailing
/// clause, `?` placeholders, which MySQL would need `INSERT IGNORE` for).
fn claim_sql(insert: &str) -> Option<String> {
    let text = insert.trim().trim_end_matches(';').trim_end();
    let upper = text.to_ascii_uppercase();
    if !upper.starts_with("INSERT") || text.contains('?') || !text.contains('$') {
        return None;
    }
    if upper.contains("ON CONFLICT") {
        return upper
            .ends_with("ON CONFLICT DO NOTHING")
            .then(|| text.to_owned());
    }
    if ["RETURNING", "SELECT", "ON DUPLICATE"]
        .iter()
        .any(|w| upper.contains(w))
    {
        return None;
    }
    Some(format!("{text} ON CONFLICT DO NOTHING"))
}

/// A Rust string literal holding `text` (plain when nothing needs escaping).
fn sql_literal(text: &str) -> String {
    if text.contains(['"', '\\']) {
        format!("{text:?}")
    } else {
        format!("\"{text}\"")
    }
}

/// Edits that turn every use of the check's answer into "the claim found the row taken":
/// the answer bound by `let row = <check>?;` and used only as `row.is_some()` /
/// `row.is_none()`, or tested as an `if` condition (`if <check>?.is_some()`). `inserted`
/// (`== 0`: no row was inserted) is appended after the run to make the answer a `bool`. `None` for any other use, which the rewrite
/// would break.
fn presence_tests(f: &FnDef, check: &Expr, inserted: &str) -> Option<Vec<(Span, String)>> {
    let body = f.body.as_ref()?;
    if let Some((init, name)) = binding_of(f, check.span) {
        if !matches!(init.kind, ExprKind::Try(_)) || bindings_named(f, name) != 1 {
            return None;
        }
        let (mut uses, mut tests) = (0, Vec::new());
        body.walk(&mut |e| match &e.kind {
            ExprKind::Path(p) if p.as_ident() == Some(name) => uses += 1,
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } if args.is_empty() && is_path_to(receiver, name) => match method.as_str() {
                "is_some" => tests.push((e.span, name.to_owned())),
                "is_none" => tests.push((e.span, format!("!{name}"))),
                _ => {}
            },
            _ => {}
        });
        if tests.is_empty() || tests.len() != uses {
            return None;
        }
        tests.push((init.span.shrink_to_hi(), inserted.to_owned()));
        return Some(tests);
    }
    // `if <check>?.is_some() { .. }`: the condition itself is rewritten.
    let mut test = None;
    body.walk(&mut |e| {
        let ExprKind::If { cond, .. } = &e.kind else {
            return;
        };
        let ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } = &cond.kind
        else {
            return;
        };
        let claimed = match method.as_str() {
            "is_some" => inserted.to_owned(),
            "is_none" => inserted.replace("==", "!="),
            _ => return,
        };
        if args.is_empty()
            && matches!(receiver.kind, ExprKind::Try(_))
            && chain_root_is(receiver, check.span)
        {
            test = Some(vec![(
                Span::new(cond.span.file, receiver.span.hi, cond.span.hi),
                claimed,
            )]);
        }
    });
    test
}

/// The `let name = <init>;` whose initializer is `op` followed by calls, `.await` and `?`.
fn binding_of(f: &FnDef, op: Span) -> Option<(&Expr, &str)> {
    let mut found = None;
    f.body.as_ref()?.walk_lets(&mut |pat, init| {
        if let Some(init) = init.filter(|e| chain_root_is(e, op)) {
            let name = match pat {
                Pat::Ident {
                    name, sub: None, ..
                } => Some(name.as_str()),
                Pat::Typed { pat, .. } => match &**pat {
                    Pat::Ident {
                        name, sub: None, ..
                    } => Some(name.as_str()),
                    _ => None,
                },
                _ => None,
            };
            found = name.map(|n| (init, n));
        }
    });
    found
}

/// How many patterns of the function bind `name` (shadowing makes a use ambiguous).
fn bindings_named(f: &FnDef, name: &str) -> usize {
    let mut n = 0;
    if let Some(body) = &f.body {
        body.walk_pats(&mut |p| {
            n += p.bindings().iter().filter(|(b, _)| *b == name).count();
        });
    }
    n
}

fn is_path_to(e: &Expr, name: &str) -> bool {
    matches!(&e.kind, ExprKind::Path(p) if p.as_ident() == Some(name))
}

/// `e` is `op` followed by calls, `.await` and `?` only (`conn.exists(&k).await.map_err(..)?`).
fn chain_root_is(e: &Expr, op: Span) -> bool {
    let mut cur = e;
    loop {
        if cur.span == op {
            return true;
        }
        cur = match &cur.kind {
            ExprKind::MethodCall { receiver, .. } => receiver,
            ExprKind::Try(inner) | ExprKind::Await(inner) => inner,
            _ => return false,
        };
    }
}

/// The check binds what the insert binds, so the claim inserts the same row.
fn same_exprs(a: &[&Expr], b: &[&Expr]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_expr(x, y))
}

/// The same expression as written, spans aside, for the side-effect-free shapes a bound
/// value takes (`e.id`, `&key`, `&[&id]`, `id.to_string()`).
fn same_expr(a: &Expr, b: &Expr) -> bool {
    use ExprKind as K;
    match (&a.kind, &b.kind) {
        (K::Path(p), K::Path(q)) => p.segments == q.segments,
        (K::Lit(x), K::Lit(y)) => x == y,
        (K::Field { base: x, member: m }, K::Field { base: y, member: n }) => {
            m == n && same_expr(x, y)
        }
        (
            K::Ref {
                mutable: m,
                expr: x,
            },
            K::Ref {
                mutable: n,
                expr: y,
            },
        ) => m == n && same_expr(x, y),
        (K::Deref(x), K::Deref(y)) => same_expr(x, y),
        (K::Array(xs), K::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_expr(x, y))
        }
        (
            K::MethodCall {
                receiver: x,
                method: m,
                args: xa,
                ..
            },
            K::MethodCall {
                receiver: y,
                method: n,
                args: ya,
                ..
            },
        ) => m == n && xa.is_empty() && ya.is_empty() && same_expr(x, y),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::claim_sql;

    #[test]
    fn claim_sql_appends_on_conflict_only_where_it_is_safe() {
        assert_eq!(
            claim_sql("INSERT INTO seen (id) VALUES ($1);").as_deref(),
            Some("INSERT INTO seen (id) VALUES ($1) ON CONFLICT DO NOTHING")
        );
        assert_eq!(
            claim_sql("insert into seen (id) values ($1) on conflict do nothing").as_deref(),
            Some("insert into seen (id) values ($1) on conflict do nothing")
        );
        for refused in [
            "INSERT INTO seen (id) VALUES (?)",
            "INSERT INTO seen (id) VALUES ($1) RETURNING id",
            "INSERT INTO seen (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET n = n + 1",
            "INSERT INTO seen (id) SELECT $1",
            "UPDATE seen SET done = true WHERE id = $1",
        ] {
            assert_eq!(claim_sql(refused), None, "{refused}");
        }
    }
}
