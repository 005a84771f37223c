use crate::analysis::completion::{Completion, Role, Write};
use crate::analysis::dominance::{self, Events, Facts};
use crate::analysis::store_ops::Store;
use crate::analysis::transactions::{
    base_name, names_a_transaction, Executor, Transactions, TxId, TxKind,
};
use crate::analysis::FnId;
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::{Applicability, Move};
use crate::model::ir::{Expr, ExprKind, Stmt};
use crate::model::{Package, Span};
use std::collections::HashSet;

declare_lint! {
    /// ### What it does
    /// Finds a completion mark (the write that records a message, command or event as
    /// processed) that is not in the same transaction as the business write it vouches for:
    /// written after that transaction committed, on another connection, with no transaction at
    /// all, in another store, or as a second DynamoDB request where one `TransactWriteItems`
    /// would hold both. Also a claim of the key (an insert into a dedupe table that tells
    /// whether it wrote, `INSERT INTO inbox .. ON CONFLICT DO NOTHING`) written on another
    /// connection after the function began the transaction of the work it guards: the claim
    /// commits at once and the work only with the transaction, so a failed work leaves the
    /// key taken, and the redelivery is dropped as a duplicate.
    ///
    /// Marks are writes to the table the crate's guard claims, inserts into dedupe-named
    /// tables, statuses set to a done-like value or completion timestamps, a marker value under
    /// a dedupe-named Redis or DynamoDB key (`SET processed:{id} 1`), helpers that only write
    /// marks, and the functions named in `[lints.mark_outside_transaction] marks`. A mark in
    /// Redis or DynamoDB after a PostgreSQL commit is in another store: no transaction holds
    /// both. SQL is read in every form `check_then_act` lists (`cargo idem-lint --explain
    /// check_then_act`): literals, constants, `include_str!` and `query_file!` files, the
    /// constant skeleton of a `format!`, diesel, sea-orm and sea-query chains.
    ///
    /// Business writes are the other writes that a retry would repeat (increments, plain
    /// inserts, Redis counter, list and stream commands such as `INCR`, `HINCRBY`, `RPUSH`,
    /// `XADD` in any spelling, also inside a `pipe().atomic()`), directly or through helpers, through each production implementation of a
    /// crate trait, and calls the analysis cannot see into that are handed the transaction,
    /// connection or pool: a handler behind a trait object or from another crate
    /// (`handler.handle(&event, pool).await?`) or a callback parameter (`on_event(event,
    /// pool)`). Such a call is given the database to write to, so its writes commit before a
    /// mark written after it on its own.
    ///
    /// ### Why is this bad?
    /// A crash, a timeout or a lost connection between the two writes leaves the work done but
    /// not marked. The retry finds no mark and does the work again: a second refund, a second
    /// credit. The mark and the write must commit together, or the write must be naturally
    /// idempotent.
    ///
    /// ### Known problems
    /// Transactions are recognized by their usual shapes (`begin()`/`commit()`,
    /// `transaction(|tx| ..)`, `transact_write_items`, `pipe().atomic()`). A transaction a
    /// helper opens and returns (zero2prod's `try_processing`) is known only by its handle's
    /// name (`tx`, `txn`, `transaction`, `*_tx`): writes on one such handle, directly or
    /// through helpers it is handed to, commit together, and a mark on a differently named
    /// connection does not; a commit of such a handle between the two is not seen. A mark
    /// whose executor cannot be told is not reported. A business write that is idempotent by a constraint the code does not show (a
    /// unique key that makes the retry fail) is reported, and so is an opaque handler given
    /// the pool that writes nothing a retry repeats (name-based exceptions: read-named methods
    /// such as `get_*`/`load`/`find*`, and database drivers' own methods). An opaque call given
    /// no connection is not taken as business work.
    ///
    /// ### Example
    /// ```rust
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
    ///     .bind(refund.amount).bind(refund.account).execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// sqlx::query("UPDATE refunds SET status = 'done' WHERE id = $1")
    ///     .bind(refund.id).execute(&pool).await?;
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
    ///     .bind(refund.amount).bind(refund.account).execute(&mut *tx).await?;
    /// sqlx::query("UPDATE refunds SET status = 'done' WHERE id = $1")
    ///     .bind(refund.id).execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// ```
    pub MARK_OUTSIDE_TRANSACTION, "mark_outside_transaction", Warn,
    "a completion mark is not written in the same transaction as the business write"
}

/// Why the mark and the business write do not commit together.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Gap {
    /// The write's transaction committed before the mark: here, or inside a helper.
    AfterCommit(Option<Span>, Option<FnId>),
    /// The write is in a transaction, the mark on another connection.
    OtherConnection,
    /// Neither is in a transaction: each statement commits on its own.
    Autocommit,
    /// Different stores.
    OtherStore,
    /// Two requests to a store whose requests are the unit of atomicity (DynamoDB, Redis).
    SeparateRequests,
}

struct Finding {
    /// The function holding the mark.
    id: FnId,
    mark: Write,
    write: Write,
    gap: Gap,
    /// The business write's transaction in this fn: its kind and handle name.
    tx: Option<(TxKind, String)>,
}

pub fn check(cx: &mut LintContext<'_>) {
    let findings = find(cx);
    let package = cx.package;
    for f in findings {
        let (message, label, note) = describe(package, &f);
        let help = help(package, &f);
        cx.span_lint(&MARK_OUTSIDE_TRANSACTION, f.mark.span, message, |d| {
            d.primary_label(label);
            d.span_label(f.write.span, business_label(package, &f.write));
            if let Gap::AfterCommit(Some(commit), _) = f.gap {
                d.span_label(commit, "the transaction commits here");
            }
            if f.mark.via.is_some() {
                d.span_label(f.mark.origin, "the mark is written here");
            }
            d.note(note);
            d.help(help.clone());
            // The move is that help made concrete: the same words, so it is shown once.
            if let Some((mv, _)) = move_into_transaction(package, &f) {
                d.suggest_move(help, mv, Applicability::MaybeIncorrect);
            }
        });
    }
}

/// The mark statement moved before `tx.commit()` and run on the transaction, for the shape
/// the fix is sure of: a `begin()` handle committed in this function, the mark written
/// after it in this function's own statement (not through a helper), on a connection passed
/// as an argument (`.execute(pool)` becomes `.execute(&mut *tx)`, sqlx's spelling), both
/// statements at the top of the body. `MaybeIncorrect`: code between the commit and the
/// mark may depend on the commit having happened.
fn move_into_transaction(package: &Package, f: &Finding) -> Option<(Move, String)> {
    let Gap::AfterCommit(Some(commit), None) = f.gap else {
        return None;
    };
    let (TxKind::Begun, handle) = f.tx.as_ref()? else {
        return None;
    };
    let Executor::Other(conn) = &f.mark.executor else {
        return None;
    };
    if f.mark.via.is_some() || f.mark.store != Store::Sql || handle.is_empty() {
        return None;
    }
    let body = f.id.def(package).1.body.as_ref()?;
    let stmt_of = |inner: Span| {
        body.stmts
            .iter()
            .position(|s| stmt_span(s).is_some_and(|sp| sp.contains(inner)))
    };
    let (at_commit, at_mark) = (stmt_of(commit)?, stmt_of(f.mark.span)?);
    let Stmt::Expr {
        expr: mark,
        semi: true,
    } = &body.stmts[at_mark]
    else {
        return None;
    };
    if at_commit >= at_mark {
        return None;
    }
    let mut substitutions = Vec::new();
    mark.walk(&mut |e| {
        if let ExprKind::MethodCall { args, .. } = &e.kind {
            for a in args {
                if base_name(a).as_deref() == Some(conn.as_str()) {
                    substitutions.push((a.span, format!("&mut *{handle}")));
                }
            }
        }
    });
    if substitutions.len() != 1 {
        return None;
    }
    let to = stmt_span(&body.stmts[at_commit])?.shrink_to_lo();
    Some((
        Move {
            from: mark.span,
            to,
            substitutions,
        },
        handle.clone(),
    ))
}

fn stmt_span(s: &Stmt) -> Option<Span> {
    match s {
        Stmt::Let { span, .. } => Some(*span),
        Stmt::Expr { expr, .. } => Some(expr.span),
        Stmt::Item { .. } => None,
    }
}

fn find(cx: &LintContext<'_>) -> Vec<Finding> {
    let package = cx.package;
    let analysis = cx.analysis();
    let graph = analysis.call_graph(package);
    let summaries = analysis.summaries(package);
    let marks = &cx.settings.mark_outside_transaction.marks;
    let completion = Completion::new(package, &analysis.resolver, graph, summaries, marks);
    let mut out = Vec::new();
    for id in graph.ids() {
        let (file, f) = id.def(package);
        let Some(body) = f.body.as_ref() else {
            continue;
        };
        if f.in_test || file.in_test || !completion.has_mark(id) {
            continue;
        }
        let tx = completion.transactions(id);
        let mut walk = MarkWalk {
            completion: &completion,
            id,
            tx: &tx,
            facts: Vec::new(),
            seen: HashSet::new(),
            out: &mut out,
        };
        dominance::walk(body, Facts::default(), &mut walk);
    }
    out
}

/// What a fact of the walk stands for.
enum Fact {
    /// A business write that a retry would repeat.
    Business(Write),
    Commit(TxId, Span),
    /// A claim of the key (a row inserted into a dedupe table before the work).
    Claim(Write),
    /// A `begin()` of this function's transaction.
    Begun(TxId),
}

struct MarkWalk<'w, 'a> {
    completion: &'w Completion<'a>,
    id: FnId,
    tx: &'w Transactions,
    facts: Vec<Fact>,
    seen: HashSet<Span>,
    out: &'w mut Vec<Finding>,
}

impl Events for MarkWalk<'_, '_> {
    fn at(&mut self, e: &Expr, facts: &mut Facts) {
        let writes = self.completion.writes_at(self.id, self.tx, e);
        for mark in writes.iter().filter(|w| w.role == Role::Mark) {
            if let Some(f) = self.finding(mark, facts) {
                if self.seen.insert(f.mark.span) {
                    self.out.push(f);
                }
            }
        }
        for w in &writes {
            if w.role == (Role::Business { idempotent: false }) {
                if let Some(f) = self.claim_outside(w, facts) {
                    if self.seen.insert(f.mark.span) {
                        self.out.push(f);
                    }
                }
            }
        }
        for w in writes {
            let fact = match w.role {
                Role::Business { idempotent: false } => Fact::Business(w),
                Role::Claim => Fact::Claim(w),
                _ => continue,
            };
            facts.insert(self.facts.len() as u32);
            self.facts.push(fact);
        }
        if let Some(t) = self
            .tx
            .txs
            .iter()
            .position(|t| t.kind == TxKind::Begun && t.begin == e.span)
        {
            facts.insert(self.facts.len() as u32);
            self.facts.push(Fact::Begun(TxId(t as u32)));
        }
        if let Some(t) = self.tx.commit_at(e) {
            facts.insert(self.facts.len() as u32);
            self.facts.push(Fact::Commit(t, e.span));
        }
    }

    fn runs_arguments(&self, call: &Expr) -> bool {
        self.tx
            .txs
            .iter()
            .any(|t| t.kind == TxKind::Closure && t.begin == call.span)
    }

    /// A business write or a commit in a loop (`for rec in records { .. execute(&mut *tx) }`)
    /// has happened before a mark after it whenever the loop ran a round; when it ran none,
    /// there is no work to leave unmarked.
    fn kept_after_loop(&self, fact: u32) -> bool {
        self.facts.get(fact as usize).is_some()
    }
}

impl MarkWalk<'_, '_> {
    /// A claim written on another connection after this function began the transaction
    /// that `write` runs in (`let tx = pool.begin()..; INSERT INTO inbox .. .execute(pool);
    /// .. .execute(&mut *tx)`): the claim commits at once, the work only with the
    /// transaction, so a failed work leaves the key taken and the redelivery dropped.
    fn claim_outside(&self, write: &Write, facts: &Facts) -> Option<Finding> {
        let Executor::Tx(t) = write.executor else {
            return None;
        };
        if self.tx.get(t).kind != TxKind::Begun || write.store != Store::Sql {
            return None;
        }
        let held: Vec<u32> = facts.iter().collect();
        let begun = held
            .iter()
            .find(|&&i| matches!(self.facts[i as usize], Fact::Begun(b) if b == t))?;
        held.iter().filter(|&&i| i > *begun).find_map(|&i| {
            let Fact::Claim(claim) = &self.facts[i as usize] else {
                return None;
            };
            let outside = match &claim.executor {
                Executor::Other(n) => !names_a_transaction(n),
                Executor::Param(_) | Executor::Tx(_) | Executor::InCallee(_) => false,
                Executor::Unknown => false,
            };
            (outside && claim.store == Store::Sql).then(|| Finding {
                id: self.id,
                mark: claim.clone(),
                write: write.clone(),
                gap: Gap::OtherConnection,
                tx: Some((
                    TxKind::Begun,
                    self.tx.get(t).handles.first().cloned().unwrap_or_default(),
                )),
            })
        })
    }

    /// The latest business write before `mark` on every path that does not commit with it.
    fn finding(&self, mark: &Write, facts: &Facts) -> Option<Finding> {
        let holding: Vec<&Fact> = facts.iter().map(|i| &self.facts[i as usize]).collect();
        let committed = |t: TxId| {
            holding.iter().find_map(|f| match f {
                Fact::Commit(c, span) if *c == t => Some(*span),
                _ => None,
            })
        };
        holding.iter().rev().find_map(|f| {
            let Fact::Business(write) = f else {
                return None;
            };
            let gap = gap(write, mark, committed)?;
            let tx = match write.executor {
                Executor::Tx(t) => {
                    let tx = self.tx.get(t);
                    Some((tx.kind, tx.handles.first().cloned().unwrap_or_default()))
                }
                _ => None,
            };
            Some(Finding {
                id: self.id,
                mark: mark.clone(),
                write: write.clone(),
                gap,
                tx,
            })
        })
    }
}

/// Why `write` and `mark` do not commit together, if they do not, on the evidence there is.
fn gap(write: &Write, mark: &Write, committed: impl Fn(TxId) -> Option<Span>) -> Option<Gap> {
    use Executor::*;
    if write.store != mark.store {
        return Some(Gap::OtherStore);
    }
    if write.store != Store::Sql {
        let same_request = matches!((&write.executor, &mark.executor), (Tx(a), Tx(b)) if a == b);
        return (!same_request).then_some(Gap::SeparateRequests);
    }
    match (&write.executor, &mark.executor) {
        (Tx(a), _) if committed(*a).is_some() => Some(Gap::AfterCommit(committed(*a), None)),
        (Tx(a), Tx(b)) if a == b => None,
        (InCallee(h), _) => Some(Gap::AfterCommit(None, Some(*h))),
        (_, Unknown) | (Unknown, _) => None,
        (Tx(_), _) => Some(Gap::OtherConnection),
        // One handle named as a transaction, begun out of sight (a helper returned it) and
        // handed to both: they commit together.
        (Other(a), Other(b)) if a == b && names_a_transaction(a) => None,
        (Other(a), _) if names_a_transaction(a) => Some(Gap::OtherConnection),
        (Other(_), _) => Some(Gap::Autocommit),
        // The caller's connection: whether it is a transaction is the caller's to say.
        (Param(i), Param(j)) if i == j => None,
        (Param(_), _) => Some(Gap::OtherConnection),
    }
}

fn name(package: &Package, id: FnId) -> String {
    id.def(package).1.display_name()
}

fn business_label(package: &Package, w: &Write) -> String {
    match w.via {
        Some(h) => format!(
            "the business write (`{}`, in `{}`)",
            w.command,
            name(package, h)
        ),
        None => format!("the business write (`{}`)", w.command),
    }
}

fn executor_name(e: &Executor) -> Option<&str> {
    match e {
        Executor::Other(n) => Some(n),
        _ => None,
    }
}

/// Message, primary label and note of a finding.
fn describe(package: &Package, f: &Finding) -> (String, String, String) {
    let mark = match f.mark.via {
        Some(h) => format!("`{}`", name(package, h)),
        None => format!("`{}`", f.mark.command),
    };
    let crash =
        "a crash between the two leaves the work done but not marked, and the retry does it again";
    match &f.gap {
        Gap::AfterCommit(_, helper) => (
            "completion mark is written after the business write's transaction has committed"
                .to_owned(),
            format!("{mark} marks the work done only after the commit"),
            match helper {
                Some(h) => format!(
                    "the transaction commits inside `{}`; {crash}",
                    name(package, *h)
                ),
                None => crash.to_owned(),
            },
        ),
        Gap::OtherConnection => (
            "completion mark is written outside the business write's transaction".to_owned(),
            match executor_name(&f.mark.executor) {
                Some(n) => format!("{mark} runs on `{n}`, which commits on its own"),
                None => format!("{mark} runs on another connection, which commits on its own"),
            },
            crash.to_owned(),
        ),
        Gap::Autocommit => (
            "business write and completion mark commit separately, with no transaction".to_owned(),
            format!("{mark} commits on its own"),
            format!("each statement on a pool commits by itself; {crash}"),
        ),
        Gap::OtherStore => (
            format!(
                "completion mark goes to {} but the business write to {}",
                f.mark.store.name(),
                f.write.store.name()
            ),
            format!("{mark} writes to {}", f.mark.store.name()),
            format!("no transaction spans two stores; {crash}"),
        ),
        Gap::SeparateRequests => (
            format!(
                "business write and completion mark are two separate {} writes",
                f.write.store.name()
            ),
            format!("{mark} is a second request"),
            crash.to_owned(),
        ),
    }
}

/// The in-transaction form, for the transaction the business write uses.
fn help(package: &Package, f: &Finding) -> String {
    let idempotent = "or make the business write naturally idempotent (an upsert, `SET x = value`)";
    match (&f.gap, &f.tx) {
        (Gap::SeparateRequests, _) if f.write.store == Store::DynamoDb => "send both in one `transact_write_items()` request (an `Update` and a `Put` item, the mark with `attribute_not_exists`), with a `client_request_token` taken from the message".to_owned(),
        (Gap::SeparateRequests, _) => "send both in one `MULTI`/`EXEC`: `redis::pipe().atomic().cmd(..).cmd(..).query_async(&mut conn)`".to_owned(),
        (Gap::OtherStore, _) => format!(
            "record the mark in {} in the business write's transaction, {idempotent}",
            f.write.store.name()
        ),
        (_, Some((TxKind::Closure, c))) if !c.is_empty() => format!(
            "write the mark inside the transaction closure, on `{c}`, so both commit when it returns"
        ),
        (_, Some((_, h))) if !h.is_empty() => format!(
            "write the mark on `{h}` before `{h}.commit()`, so both commit together"
        ),
        (Gap::AfterCommit(_, Some(helper)), _) => format!(
            "open the transaction here and pass it to `{}` and to the mark, committing after both, {idempotent}",
            name(package, *helper)
        ),
        _ => format!(
            "run both on one transaction (`let mut tx = pool.begin().await?; ..; ..; tx.commit().await?;`), {idempotent}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::settings::{MarkOutsideTransactionSettings, Settings};
    use crate::testing;

    /// A mark helper from another crate with a name the analysis does not know
    /// (`mark_processed` is built in) is known only by configuration.
    #[test]
    fn configured_marks() {
        let src = r#"
            pub async fn handle(pool: &sqlx::PgPool, id: &str, n: i64) -> sqlx::Result<()> {
                let mut tx = pool.begin().await?;
                sqlx::query("UPDATE wallets SET credits = credits + $1").bind(n).execute(&mut *tx).await?;
                tx.commit().await?;
                idem_common::finish_key(pool, id).await //~ WARN mark_outside_transaction
            }
        "#;
        let package = testing::package("app", &["sqlx", "idem-common"], &[("crate", src)]);
        let configured = Settings {
            mark_outside_transaction: MarkOutsideTransactionSettings {
                marks: vec!["finish_key".into()],
            },
            ..Settings::default()
        };
        testing::assert_annotations(
            &package,
            &[src.to_owned()],
            &configured,
            &["mark_outside_transaction"],
        );
        let unmarked = src.replace("//~ WARN mark_outside_transaction", "");
        testing::assert_annotations(
            &package,
            &[unmarked],
            &Settings::default(),
            &["mark_outside_transaction"],
        );
    }
}
