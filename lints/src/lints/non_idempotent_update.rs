//! `non_idempotent_update`: a write that adds to what is stored, reached from a handler of
//! at-least-once deliveries with no idempotency guard on the way.

use crate::analysis::entry::{consumer_loops, EntryKind, EntryPoint};
use crate::analysis::guards::{GuardFinder, GuardedPaths};
use crate::analysis::key_text;
use crate::analysis::message_key::{self, MessageKey};
use crate::analysis::store_ops::Access;
use crate::analysis::{CallGraph, FnId, StoreAccess, Summaries};
use crate::catalog::entries::Delivery;
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::ir::ExprKind;
use crate::model::{FnDef, Package, Span};

declare_lint! {
    /// ### What it does
    /// Finds writes that add to what is stored, reached from a handler of at-least-once
    /// deliveries with no idempotency guard on the way:
    ///
    /// - SQL `UPDATE .. SET x = x + $1` (or `x - ..`), also in an upsert's `DO UPDATE`;
    /// - Redis `INCR`/`INCRBY`/`DECR`/`HINCRBY`/`ZINCRBY`/`LPUSH`/`RPUSH`/`XADD`/`APPEND`;
    /// - DynamoDB updates with `ADD`, `SET x = x + :v` or `SET l = list_append(l, :v)`;
    /// - a plain SQL `INSERT` (no conflict handling) of a row whose key is made fresh on every
    ///   run (`Uuid::new_v4()`, `Ulid::new()`... bound, directly or through a local), so a
    ///   repeat adds a second row instead of failing on the first; not into log or audit
    ///   tables;
    /// - calls of the helpers named in `[lints.non_idempotent_update] increments`.
    ///
    /// The handlers are those that get the same delivery again: job and queue handlers
    /// (`#[job]`, `build_fn`, a framework trait's callback), Lambda and `service_fn`
    /// handlers, route handlers named like webhooks (`webhook`, `hook`,
    /// `callback`, `ipn`, `notification` in the name, module or route) and the functions
    /// named in `entry_points`, and functions that receive messages in a loop (`recv`,
    /// `receive_message`, `xreadgroup`, `blpop`, `consumer.next()`...). The write is
    /// followed into helpers and spawned tasks through the call graph.
    ///
    /// Not reported: a write under a guard (an `#[idempotent]` handler, a checked claim such
    /// as `SET NX` or a conditional `put_item`, a helper that makes one, the functions named
    /// in `guards`, or a dedupe check that returns), a function that also inserts into a
    /// dedupe table (`processed_messages`), a conditional write (an `UPDATE` whose `WHERE`
    /// tests the state such as `version = $2`, a DynamoDB `condition_expression`), counters
    /// of attempts, retries or versions, Redis keys of rate limits and metrics, and writes
    /// that set a value (`SET balance = $1`), which a repeat leaves as they were.
    ///
    /// ### Why is this bad?
    /// Queues, Lambda retries and webhook senders deliver the same message again. Setting
    /// the e-mail address twice leaves one address; adding 100 to the balance twice adds
    /// 200. An increment is only safe once per message: under a reservation of the
    /// message's key, or in the same transaction as a unique insert of the message id, or
    /// as a write conditioned on the message not being applied yet.
    ///
    /// ### Known problems
    /// Whether a write increments is read from the SQL text, Redis command or update
    /// expression; a helper of another crate (`ledger.credit(..)`) is not seen unless named
    /// in `increments`. A guard the analysis does not recognize hides nothing: name it in
    /// `guards`. A dedupe insert anywhere in the same function counts as a guard, even when
    /// it is outside the increment's transaction (`mark_outside_transaction` reports that).
    /// A fresh-key insert into a table with another unique column (the message id) fails on
    /// a repeat and is reported all the same; a row keyed by a database serial is not seen.
    /// A counter whose double count is harmless (a statistic) is reported unless its key
    /// says so (`rate`, `limit`, `metric`, `stats`...): allow it on its line.
    ///
    /// ### Example
    /// ```rust
    /// async fn handle(msg: Deposit, pool: &PgPool) -> Result<()> {
    ///     sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
    ///         .bind(msg.amount)
    ///         .bind(msg.account_id)
    ///         .execute(pool)
    ///         .await?;
    ///     Ok(())
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// async fn handle(msg: Deposit, pool: &PgPool) -> Result<()> {
    ///     let mut tx = pool.begin().await?;
    ///     let fresh = sqlx::query("INSERT INTO processed_messages (id) VALUES ($1) ON CONFLICT DO NOTHING")
    ///         .bind(msg.id)
    ///         .execute(&mut *tx)
    ///         .await?
    ///         .rows_affected() == 1;
    ///     if fresh {
    ///         sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
    ///             .bind(msg.amount)
    ///             .bind(msg.account_id)
    ///             .execute(&mut *tx)
    ///             .await?;
    ///     }
    ///     tx.commit().await?;
    ///     Ok(())
    /// }
    /// ```
    /// or `#[idem_guard::idempotent(key = msg.id, store = ..)]` on the handler.
    pub NON_IDEMPOTENT_UPDATE, "non_idempotent_update", Allow,
    "an increment reached from an at-least-once handler with no idempotency guard"
}

pub use crate::settings::non_idempotent_update::Settings;

/// Words of a Redis key that say the counter is a rate limit or a statistic, where counting
/// a redelivery again is what it is for.
const COUNTER_KEY_WORDS: &[&str] = &[
    "rate",
    "limit",
    "throttle",
    "quota",
    "metric",
    "stats",
    "attempt",
    "retr",
    "hits",
    "views",
    "heartbeat",
];

struct Finding {
    op: Span,
    what: String,
    entry: String,
    entry_kind: EntryKind,
    entry_at: Span,
    chain: Vec<String>,
    /// Where a fresh key of an inserted row is made.
    fresh: Option<Span>,
    /// Where `#[idempotent(..)]` goes on a per-message handler, and the key it offers.
    attr_at: Option<(Span, Option<MessageKey>)>,
}

pub fn check(cx: &mut LintContext<'_>) {
    if !cx.is_enabled(&NON_IDEMPOTENT_UPDATE) {
        return;
    }
    let has_guard_crate = cx.package.depends_on("idem_guard");
    for f in find(cx) {
        let message = format!(
            "{} reached from {} `{}` with no idempotency guard: a redelivery applies it again",
            f.what,
            f.entry_kind.describe(),
            f.entry
        );
        cx.span_lint(&NON_IDEMPOTENT_UPDATE, f.op, message, |d| {
            d.primary_label("adds to what is stored on every delivery");
            d.span_label(f.entry_at, f.entry_kind.at_span());
            if let Some(fresh) = f.fresh {
                d.span_label(
                    fresh,
                    "the row's key is made here, a new one on every delivery",
                );
            }
            if f.chain.len() > 1 {
                d.note(format!("path: {}", f.chain.join(" → ")));
            }
            d.help(
                "run it once per message: guard the handler with `#[idem_guard::idempotent]`, \
                 insert the message id into a processed-messages table with a unique key in \
                 the same transaction, or make the write conditional on the message not being \
                 applied yet; or set the resulting value instead of adding to it",
            );
            if let Some((at, key)) = &f.attr_at {
                let key = key
                    .as_ref()
                    .map_or("/* the message's id */".to_string(), MessageKey::expr);
                let needs = if has_guard_crate {
                    ""
                } else {
                    " (add the `idem-guard` crate to `[dependencies]`)"
                };
                d.suggest(
                    format!("guard the handler `{}`{needs}", f.entry),
                    *at,
                    format!("#[idem_guard::idempotent(key = {key}, store = /* store */)]"),
                    Applicability::HasPlaceholders,
                );
            }
        });
    }
}

fn find(cx: &LintContext<'_>) -> Vec<Finding> {
    let package = cx.package;
    let settings = &cx.settings.non_idempotent_update;
    let analysis = cx.analysis();
    let graph = analysis.call_graph(package);
    let summaries = analysis.summaries(package);
    if !has_candidates(package, graph, summaries, &settings.increments) {
        return Vec::new();
    }
    let mut entries: Vec<EntryPoint> = analysis
        .entry_points(package, &settings.entry_points)
        .into_iter()
        .filter(|e| delivers_at_least_once(package, e))
        .collect();
    entries.extend(consumer_loops(package));
    if entries.is_empty() {
        return Vec::new();
    }
    let finder = GuardFinder::new(
        package,
        &analysis.resolver,
        graph,
        summaries,
        &settings.guards,
    );
    let paths = GuardedPaths::compute(&finder, entries);
    let mut out = Vec::new();
    for id in graph.ids() {
        let (file, f) = id.def(package);
        if f.in_test || file.in_test || !paths.reached_unguarded(graph, id) {
            continue;
        }
        let flow = summaries.flow(id);
        if flow
            .store_events
            .iter()
            .any(|ev| is_dedupe_insert(&ev.access))
        {
            continue;
        }
        let mut candidates: Vec<(Span, String, Option<Span>)> = flow
            .store_events
            .iter()
            .filter(|ev| ev.via.is_none() && is_increment(&ev.access))
            .map(|ev| (ev.span, describe(&ev.access), None))
            .collect();
        candidates.extend(configured_increments(f, &settings.increments));
        candidates.extend(fresh_key_inserts(analysis, file, f, flow));
        if candidates.is_empty() {
            continue;
        }
        let spans: Vec<Span> = candidates.iter().map(|(s, ..)| *s).collect();
        let guards = finder.guards_over(id, &spans);
        for ((op, what, fresh), guard) in candidates.into_iter().zip(guards) {
            if guard.is_some() || out.iter().any(|f: &Finding| f.op == op) {
                continue;
            }
            out.extend(
                finding(package, graph, &paths, id, op, what).map(|f| Finding { fresh, ..f }),
            );
        }
    }
    out
}

/// Whether some fn has a write this lint may report (an increment, a plain `INSERT`, a
/// configured increment), wherever it is reached from: most packages have none, and then
/// need no entry points or guarded paths.
fn has_candidates(
    package: &Package,
    graph: &CallGraph,
    summaries: &Summaries,
    increments: &[String],
) -> bool {
    !increments.is_empty()
        || graph.ids().any(|id| {
            let (file, f) = id.def(package);
            !f.in_test
                && !file.in_test
                && summaries.flow(id).store_events.iter().any(|ev| {
                    ev.via.is_none() && (is_increment(&ev.access) || is_plain_insert(&ev.access))
                })
        })
}

/// An SQL `INSERT` that adds a row on every run: not into a dedupe table, not only a key,
/// not into a log.
fn is_plain_insert(a: &StoreAccess) -> bool {
    a.store == crate::analysis::Store::Sql
        && a.access == Access::Write
        && a.command.starts_with("INSERT")
        && !a.dedupe_table
        && !a.shape.key_only
        && !a
            .table
            .as_deref()
            .is_some_and(|t| LOG_TABLES.iter().any(|w| t.contains(w)))
}

/// Entries whose deliveries come again: jobs, queue consumers, Lambda and service handlers,
/// webhooks (the catalog's [`Delivery`]). `main` and a library's API run when their caller
/// decides; a task runs once per spawn, and repeats when its spawner does (a consumer loop,
/// a job), which the call graph follows.
fn delivers_at_least_once(package: &Package, e: &EntryPoint) -> bool {
    e.delivery(package) == Delivery::Redelivered
}

/// A write that adds to what is stored, unconditionally: not one that fails when repeated
/// (a transaction that also puts the message's marker on `attribute_not_exists`).
fn is_increment(a: &StoreAccess) -> bool {
    let adds = a.shape.increments || a.shape.appends;
    let unconditional =
        matches!(a.access, Access::Write | Access::Upsert) && !a.shape.fails_when_taken;
    adds && unconditional && !a.shape.counts_bookkeeping && !is_counter_key(a)
}

/// A Redis key (or table) named for a rate limit or a statistic.
fn is_counter_key(a: &StoreAccess) -> bool {
    let words = a
        .key
        .iter()
        .flat_map(|k| k.lits.iter().map(String::as_str).chain([k.text.as_str()]))
        .chain(a.table.as_deref());
    words
        .map(str::to_ascii_lowercase)
        .any(|w| COUNTER_KEY_WORDS.iter().any(|c| w.contains(c)))
}

/// An insert into a table of processed messages: with a unique key, a repeat fails there.
fn is_dedupe_insert(a: &StoreAccess) -> bool {
    a.dedupe_table
        && matches!(a.access, Access::Write | Access::Claim)
        && a.command.starts_with("INSERT")
}

/// How a message names the write: "an increment (`UPDATE accounts`)".
fn describe(a: &StoreAccess) -> String {
    let what = if a.shape.appends {
        "an append to a list"
    } else {
        "an increment"
    };
    format!("{what} (`{}`)", a.command)
}

/// Tables whose rows record what happened (a repeat adds a line to a log, not an effect).
const LOG_TABLES: &[&str] = &["log", "audit", "trace", "metric", "history"];

/// Plain SQL inserts of a row whose key is made fresh on every run (`Uuid::new_v4()` bound,
/// or bound through a local): a repeat adds a second row instead of failing on the first.
fn fresh_key_inserts(
    analysis: &crate::analysis::Analysis,
    file: &crate::model::FileModel,
    f: &FnDef,
    flow: &crate::analysis::FnFlow,
) -> Vec<(Span, String, Option<Span>)> {
    let Some(body) = &f.body else {
        return Vec::new();
    };
    let inserts: Vec<&StoreAccess> = flow
        .store_events
        .iter()
        .filter(|ev| ev.via.is_none())
        .map(|ev| &ev.access)
        .filter(|a| is_plain_insert(a))
        .collect();
    if inserts.is_empty() {
        return Vec::new();
    }
    let locals = crate::analysis::Locals::of_body(body);
    let is_fresh = |p: &crate::model::ir::Path| {
        let path = analysis
            .resolver
            .resolve(file.target, &f.module, p, f.self_ty.as_ref());
        analysis
            .catalog
            .sources
            .find(&path)
            .is_some_and(|s| s.kind == crate::catalog::SourceKind::RandomId)
    };
    let mut out = Vec::new();
    for a in inserts {
        let mut op = None;
        body.walk(&mut |e| {
            if e.span == a.span {
                op = Some(e);
            }
        });
        let fresh = op.and_then(|e| key_text::fresh_call_in(&locals, e, &is_fresh));
        if fresh.is_some() {
            out.push((
                a.span,
                format!("an insert of a row with a fresh key (`{}`)", a.command),
                fresh,
            ));
        }
    }
    out
}

/// Calls of the configured increment helpers in `f`'s body.
fn configured_increments(f: &FnDef, names: &[String]) -> Vec<(Span, String, Option<Span>)> {
    let mut out = Vec::new();
    let Some(body) = f.body.as_ref().filter(|_| !names.is_empty()) else {
        return out;
    };
    body.walk(&mut |e| {
        let name = match &e.kind {
            ExprKind::Call { func, .. } => func.as_path().map(|p| p.last()),
            ExprKind::MethodCall { method, .. } => Some(method.as_str()),
            _ => None,
        };
        if let Some(n) = name.filter(|n| names.iter().any(|c| c == n)) {
            out.push((e.span, format!("an increment (`{n}`, configured)"), None));
        }
    });
    out
}

fn finding(
    package: &Package,
    graph: &CallGraph,
    paths: &GuardedPaths,
    id: FnId,
    op: Span,
    what: String,
) -> Option<Finding> {
    let (entry, edges) = paths.path(graph, id, false)?;
    let name = |id: FnId| id.def(package).1.display_name();
    let mut chain = vec![format!("`{}`", name(entry.id))];
    for (caller, call, _) in edges {
        chain.push(format!(
            "`{}`",
            name(graph.calls(caller)[call as usize].callee)
        ));
    }
    let entry_fn = entry.id.def(package).1;
    // Only a fn called once per message takes the attribute; a consumer loop handles many.
    let per_message = matches!(
        entry.kind,
        EntryKind::Job | EntryKind::Service | EntryKind::Route
    );
    let attr_at = per_message.then(|| {
        let at = entry_fn
            .attrs
            .iter()
            .map(|a| a.span.shrink_to_hi())
            .max_by_key(|s| s.hi)
            .unwrap_or(entry_fn.span.shrink_to_lo());
        (at, message_key::in_params(package, entry_fn))
    });
    Some(Finding {
        op,
        what,
        entry: name(entry.id),
        entry_kind: entry.kind,
        entry_at: entry.span,
        chain,
        fresh: None,
        attr_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn lint(deps: &[&str], src: &str) -> Vec<usize> {
        let package = testing::package("app", deps, &[("crate", src)]);
        crate::check_package(&package, &Default::default(), &|l| {
            l == &NON_IDEMPOTENT_UPDATE
        })
        .into_iter()
        .map(|d| testing::line_of(src, d.span.lo))
        .collect()
    }

    const JOB: &str = "async fn main() { let w = Worker::new().build_fn(deposit); }\n";

    #[test]
    fn an_increment_in_a_job_is_reported_unless_guarded_or_conditional() {
        let bad = format!(
            "{JOB}async fn deposit(msg: Msg, pool: PgPool) {{\n    \
             sqlx::query(\"UPDATE accounts SET balance = balance + $1 WHERE id = $2\").bind(msg.amount).bind(msg.account).execute(&pool).await;\n}}\n"
        );
        assert_eq!(lint(&["sqlx"], &bad), vec![3]);
        let set = bad.replace("balance + $1", "$1");
        assert!(lint(&["sqlx"], &set).is_empty());
        let attempts = bad.replace("balance = balance + $1", "attempts = attempts + $1");
        assert!(lint(&["sqlx"], &attempts).is_empty());
        let conditional = bad.replace("WHERE id = $2", "WHERE id = $2 AND version = $3");
        assert!(lint(&["sqlx"], &conditional).is_empty(), "{conditional}");
    }

    #[test]
    fn redis_rate_limit_counters_are_not_reported() {
        let src = format!(
            "{JOB}async fn deposit(msg: Msg, mut conn: redis::aio::MultiplexedConnection) {{\n    \
             conn.incr(format!(\"points:{{}}\", msg.user), msg.points).await;\n    \
             conn.incr(format!(\"ratelimit:{{}}\", msg.user), 1).await;\n}}\n"
        );
        assert_eq!(lint(&["redis"], &src), vec![3]);
    }
}
