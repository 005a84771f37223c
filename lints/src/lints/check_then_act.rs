use crate::analysis::callgraph::implementation_of;
use crate::analysis::flow::{Branch, Decision, FnFlow, FnId, StoreEvent};
use crate::analysis::locks::{claimed_before, held_before, held_by_every_caller};
use crate::analysis::read_index::ReadIndex;
use crate::analysis::sql::is_dedupe_table_name;
use crate::analysis::{Access, Store, StoreAccess, Summaries};
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::ir::ExprKind;
use crate::model::{FnDef, Package, Span};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

mod fixes;
mod schema_claim;

declare_lint! {
    /// ### What it does
    /// Finds a guard made of a check and a separate write: a store is read to decide
    /// whether a message was already handled (Redis `exists`/`get`, DynamoDB
    /// `get_item`/`query`, SQL `SELECT`, or the crate's own helper such as
    /// `is_processed(id)`), and on the path that goes on, the marker is written with a
    /// plain write (Redis `set`/`set_ex`/`hset` without `NX`, `put_item`/`update_item`
    /// without `condition_expression`, `INSERT`/`UPDATE` without `ON CONFLICT`, `ON
    /// DUPLICATE KEY` or a checked conditional `WHERE`, or a helper such as
    /// `mark_processed(id)`). An atomic claim that comes only after the work is reported
    /// too. One check is one finding, at the first write it lets through, with a label on
    /// each later write after it; the help follows the write (a claim for an insert, a
    /// conditional `UPDATE` for a counter or a status).
    ///
    /// The store operations it reads:
    /// - SQL text given as a literal, a local, a `const`/`static`, a file read with
    ///   `include_str!` (relative to the source file) or named by sqlx's `query_file!`,
    ///   `query_file_as!`, `query_file_scalar!` (relative to the package root, as sqlx
    ///   reads it; for both, a file outside the workspace, missing or over 1 MiB is not
    ///   read), a struct field that the package's struct literals fill with one such text
    ///   (`const QUERIES: Queries = Queries { mark: "INSERT .." }` read as
    ///   `self.queries.mark`; fields are matched by name, and a name given two different texts
    ///   has none), or passed to a crate helper as a `&str` parameter or a tuple of them
    ///   (`repo.run(MARK_PROCESSED, id)`, `insert_if_missing((FIND_BY_HASH, INSERT), ..)`
    ///   read as `queries.0` and `queries.1`: the helper is read with that text, and so are
    ///   the helpers it hands the text on to), in sqlx (functions and `query!` macros, also
    ///   run as `executor.execute(query)`), tokio-postgres, rusqlite, mysql, diesel's
    ///   `sql_query`, sea-orm's `Statement` and scylla (CQL `IF NOT EXISTS` is a claim). A
    ///   function that decides with SQL only its callers give (`match Self::find(queries.0,
    ///   ..) { None => Self::insert(queries.1, ..) }` in a trait's default method that each
    ///   backend calls as `<Pg as Queries<Postgres>>::insert_if_missing((FIND, INSERT), ..)`)
    ///   is reported there, once, when some caller's statements make it a check-then-act;
    /// - SQL built at run time with `format!` into a local or a field (a constructor's
    ///   `let insert_sql = format!("INSERT INTO {table} ..")` kept as `Self { insert_sql }`,
    ///   also from a helper of the same file that ends in such a `format!`):
    ///   the template is the SQL, with constant arguments spliced in and a run-time value
    ///   taken as a name where it can only be one (after `FROM`/`INTO`/`UPDATE`/`JOIN`, glued
    ///   to a name as in `{schema}.jobs`, or inside a quoted literal). A run-time value
    ///   anywhere else (`VALUES ({list})`, `WHERE {cond}`, a spliced `{on_conflict}`) could
    ///   change the statement, and the text is not read;
    /// - diesel chains (`insert_into(t).values(..)`, `.on_conflict(..).do_nothing()`,
    ///   `t.filter(..).first(conn)`/`.load(conn)`, `select(exists(t.filter(..)))`,
    ///   `update(..).set(..)`) and sea-orm
    ///   (`Entity::find_by_id(..).one(db)`, `Entity::insert(..).on_conflict(..).exec(db)`,
    ///   `ActiveModel { .. }.insert(db)`);
    /// - sea-query statements written as one chain (`Query::insert().into_table(T)
    ///   .columns(..).values_panic(..).on_conflict(OnConflict::column(C).do_nothing()
    ///   .to_owned())`, `Query::select().from(T).and_where(Expr::col(C).eq(v))`,
    ///   `Query::update()`, `Query::delete()`), run through `.build_sqlx(..)` and sqlx's
    ///   `query_with`, `.to_string(..)`, or sea-orm's `backend.build(&stmt)`;
    /// - Redis commands as methods, `redis::cmd("SET").arg(..)` and `redis::pipe()`, with
    ///   `NX` read from the arguments, on any connection (a pooled one from bb8 or
    ///   deadpool-redis: `pool.get().await?`); `SETNX`, `HSETNX` and `SADD` claim only when
    ///   their answer is tested (`let _: bool = conn.hset_nx(..)` right after a check is a
    ///   plain write), and `SISMEMBER`/`HEXISTS` are checks;
    /// - DynamoDB `get_item`/`query` and `put_item`/`update_item`; attributes written beside
    ///   the marker that say who or where (a parameter such as the account or owner, an
    ///   environment variable such as the worker's host) keep it a marker, and of several
    ///   key-like attribute names the first written is the key;
    /// - web framework session stores used as key-value stores (`tower_sessions`,
    ///   `actix_session`, `ruts`, ... : `session.get(k)`, `session.insert(k, v)`,
    ///   `session.set(k, ..)`), where idempotency middleware caches responses; they have
    ///   no atomic claim;
    /// - checks and marks known only by name, whose body is not visible (a trait object,
    ///   another crate's client): `is_processed`, `already_processed`, `has_seen`,
    ///   `is_duplicate`, ... and `mark_processed`, `mark_done`, `set_processed`, ...; the
    ///   common words `exists`, `seen` and `record` only on a store-like receiver (`store`,
    ///   `dedupe`, `repo`, `inbox`, ...) with a key-like argument (`id`, `key`, `*_id`).
    ///   Name more in `idem-lint.toml`: `[lints.check_then_act] checks = ["is_dup"], marks
    ///   = ["remember"]`.
    ///
    /// Not reported, because the check and the write cannot race: a write that runs after a
    /// won claim made after the check (the delivery recorded with `INSERT .. ON CONFLICT DO
    /// NOTHING` and its `rows_affected` tested, then the row the check read updated; a lock
    /// taken there does not count, the second delivery waits and goes on); a read that runs
    /// after a
    /// won claim (the "Zero To Production" shape: `INSERT .. ON CONFLICT DO NOTHING`, a
    /// `rows_affected` test, the saved response read only on the losing branch and the
    /// claimed row completed by an `UPDATE`), or under a lock taken before it in the same
    /// function (`pg_try_advisory_lock`, `pg_advisory_xact_lock`, `SELECT .. FOR UPDATE`, a
    /// Redis `SET NX` lock), or in a helper every caller of which holds such a lock (or
    /// calls it only from helpers whose callers do, up to five calls up); a
    /// write that is itself conditional (`ON CONFLICT DO NOTHING`, `IF NOT EXISTS`); a
    /// key-only `INSERT` into a dedupe table (`INSERT INTO processed (event_id) VALUES
    /// ($1)`) whose error stops the handler (`?`) before any work, since the second
    /// delivery's insert fails on the key; a plain `INSERT` that the schema makes a claim:
    /// the package's SQL migrations (`migrations/**/*.sql` beside the package or at its
    /// workspace's root: sqlx, diesel's `up.sql`, refinery's `V1__x.sql`, never a down
    /// migration) declare a `UNIQUE` or `PRIMARY KEY` whose every column the insert gives
    /// the value the check looked the row up by (`WHERE idempotency_key = $1`, then `INSERT
    /// .. (.., idempotency_key, ..)`), so a racing duplicate's insert fails on the key, and
    /// everything the duplicate does after the check and before the insert (and after it,
    /// when the insert's error does not stop the function) runs in the insert's transaction
    /// (it rolls back with it) or changes nothing when repeated (`SET updated_at = $1`). An
    /// e-mail, an HTTP call or a balance update on another connection before the insert
    /// keeps the finding: the duplicate has done it again by the time its insert fails. A
    /// plain `CREATE INDEX`, a partial unique index (`.. WHERE ..`) or one on an expression
    /// (`lower(key)`) is no claim, and where the migrations keep one folder per database
    /// (`migrations/postgres`, `migrations/sqlite`) the key must be declared in each that
    /// creates the table. Not reported either, because a repeat does nothing
    /// twice: an `UPDATE` of the row read that sets its columns to values (what an activity
    /// or a form carries: `diesel::update(post.find(id)).set(&form)`), unless it marks the
    /// row done (`processed = true`, `status = 'done'`: the marker the check looks for), its
    /// table or key is a dedupe record, or it increments or appends (`score = score + 1`, a
    /// lost update; the help then proposes a conditional `UPDATE`). Nor, where only what the
    /// write stores would make it a marker (ids, a timestamp), a record read as data rather
    /// than as a "handled" check: a set replaced (the record read is deleted after the check
    /// and written again: read a user's languages, compare, delete, insert), or a get-or-create
    /// (the function returns what the read found, and on a miss writes a value with no effect
    /// in between: a default session). A repeat writes the same rows again.
    ///
    /// ### Why is this bad?
    /// Two deliveries of the same message that run at the same time both read "not
    /// processed", both do the work and both write the marker: a double refund, a second
    /// e-mail, a second paid job. The claim must be one atomic step that tells exactly one
    /// worker it won, and it must come before the effects.
    ///
    /// ### Known problems
    /// Keys are compared where both are derived in ways the linter can see; when one is
    /// opaque, the same store and table are taken as the same key. A unique constraint is
    /// read from the migrations only: one made otherwise (an ORM's schema sync, a migration
    /// in Rust code, a migrations folder elsewhere than below the package or at the
    /// workspace's root) is not seen, nor is one when some migration could not be read
    /// (over 1 MiB, not UTF-8, outside the workspace, past 5,000 files): a key-only insert
    /// into a table named like a dedupe table (`processed`, `inbox`, `idempotency`, ...) is
    /// then assumed to be keyed by that column, any other plain `INSERT` is reported. An
    /// insert whose columns are not written out (`VALUES` without a column list, a diesel
    /// `Insertable` passed as a value) covers no key. A write through a callback the
    /// analysis cannot see into (a `retry(|| ..)` helper) counts as work a repeat does again.
    /// A check that skips the item when the record is there (`if bought { continue }`,
    /// not handing back what it read, not failing with an error), outside work (an HTTP
    /// call, a client's or a trait's call) and then a plain write of what the work returned
    /// is a marker whatever it stores (a label bought, its URL recorded). Cache-aside (read a
    /// cached value and hand it back on a hit,
    /// compute it, write it back) is not a guard and is not reported, unless the key or
    /// table names an idempotency or dedupe record, or the read looks the row up by a
    /// dedupe-named column (`WHERE uniq_hash = $1`, diesel's `filter(uniq_hash.eq(h))`: a job
    /// queue's "unique jobs" inserted when the lookup misses; that column is then the key the
    /// lookup and the insert compare by), or the function says it is the
    /// idempotency guard (its name, its `impl` type or its module contains `idempot` or
    /// `dedup`: `IdempotencyService::call`), where a response cached under a request hash
    /// is the guard. A lock or claim counts as held until
    /// the function returns (an unlock in between is not seen), whatever key it locks, but
    /// not in another arm of a `match` or the other branch of an `if` than the lock. Of the
    /// texts callers pass down, the first 8 distinct sets per function are read. A
    /// run-time table name in a `format!` template is compared by the name of the value that
    /// holds it (`self.table` and `self.table` are one table), and its name counts for a
    /// dedupe table (`{inbox_table}`). A sea-query statement changed by separate statements
    /// (`let mut q = Query::insert()..; q.on_conflict(..);`), or whose `on_conflict` is not
    /// written as an `OnConflict` chain, is not read; its binds are not matched to keys, so
    /// it is compared by table. A pipeline (`redis::pipe()`) counts as its
    /// strongest command. SQL text a helper builds with `format!` and returns is read where
    /// a constructor keeps it in a field only when the helper is in the same file. A store
    /// trait called in path form under another name is read through the `use .. as ..` of
    /// the call's own file, not through a glob import of another file's alias (`use
    /// super::*;` bringing `Cmds` into `Cmds::set(..)`). A method of the crate's extension
    /// trait on a client is followed when the receiver is typed as the client the trait is
    /// implemented for, not on a generic, `impl Trait` or pooled connection.
    ///
    /// ### Example
    /// ```rust
    /// async fn handle(conn: &mut redis::aio::ConnectionManager, msg: &Msg) -> redis::RedisResult<()> {
    ///     let key = format!("processed:{}", msg.id);
    ///     if conn.exists(&key).await? {
    ///         return Ok(());
    ///     }
    ///     refund(msg).await;
    ///     conn.set(&key, 1).await
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// async fn handle(conn: &mut redis::aio::ConnectionManager, msg: &Msg) -> redis::RedisResult<()> {
    ///     let key = format!("processed:{}", msg.id);
    ///     let claimed: bool = redis::cmd("SET").arg(&key).arg(1).arg("NX").arg("EX").arg(86_400)
    ///         .query_async(conn).await?;
    ///     if !claimed {
    ///         return Ok(());
    ///     }
    ///     refund(msg).await;
    ///     Ok(())
    /// }
    /// ```
    pub CHECK_THEN_ACT, "check_then_act", Warn,
    "a store is read to decide, then written without an atomic condition"
}

/// One finding: the write, the read and the branch that decided.
struct Finding {
    write: StoreEvent,
    read: StoreEvent,
    branch: Span,
    /// For a claim that comes after the work: the first effect before it.
    late_after: Option<Span>,
    /// The later plain writes on the path the same check lets through: one check is one
    /// mistake, however many writes follow it (lemmy's `post.rs` had four findings for
    /// one `SELECT`).
    also: Vec<StoreEvent>,
}

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let summaries = cx.analysis().summaries(package);
    let marks = &cx.settings.mark_outside_transaction.marks;
    let claims = schema_claim::SchemaClaims::new(package, cx.analysis(), marks);
    let mut findings = Vec::new();
    for id in summaries.ids() {
        if id.def(package).1.in_test || !writes_in_any_walk(summaries, id) {
            continue;
        }
        let guard_fn = names_a_guard_fn(package, id);
        // The function's own walk, then its walks with the SQL its callers pass down
        // (`insert_if_missing((FIND, INSERT), ..)`): one finding per write, whichever
        // caller's statements make it one.
        let mut reported = HashSet::new();
        let own = std::iter::once((summaries.flow(id), false));
        let bound = summaries.bound_flows(id).iter().map(|f| (f, true));
        for (flow, texts_from_caller) in own.chain(bound) {
            for f in fn_findings(summaries, (id, &claims), flow, guard_fn) {
                if reported.insert(f.write.span) {
                    findings.push((id, f, texts_from_caller));
                }
            }
        }
    }
    drop(claims);
    // A helper whose every caller holds a lock (or a won claim) around the call.
    findings.retain(|(id, ..)| !held_by_every_caller(package, summaries, *id));
    for (id, f, texts_from_caller) in one_per_check(findings) {
        // The statements are the caller's, not in this function: nothing to rewrite here.
        let fix = (!texts_from_caller)
            .then(|| fixes::claim_in_place_of_check(id.def(package).1, &f))
            .flatten();
        report(cx, f, fix);
    }
}

/// The findings with the plain writes that one check lets through gathered into the first
/// of them (in source order); claims made after the work stay findings of their own.
fn one_per_check(findings: Vec<(FnId, Finding, bool)>) -> Vec<(FnId, Finding, bool)> {
    let mut out: Vec<(FnId, Finding, bool)> = Vec::with_capacity(findings.len());
    let mut first_of: HashMap<(FnId, Span, Span), usize> = HashMap::new();
    let mut sorted = findings;
    sorted.sort_by_key(|(_, f, _)| f.write.span);
    for (id, f, from_caller) in sorted {
        if f.late_after.is_some() {
            out.push((id, f, from_caller));
            continue;
        }
        match first_of.entry((id, f.read.span, f.branch)) {
            Entry::Occupied(at) => out[*at.get()].1.also.push(f.write),
            Entry::Vacant(slot) => {
                slot.insert(out.len());
                out.push((id, f, from_caller));
            }
        }
    }
    out
}

/// Whether any walk of `id` (its own, or one with its callers' SQL) writes to a store: a
/// finding is about a write, and most functions make none.
fn writes_in_any_walk(summaries: &Summaries, id: FnId) -> bool {
    std::iter::once(summaries.flow(id))
        .chain(summaries.bound_flows(id))
        .any(|flow| flow.store_events.iter().any(|e| e.access.access.is_write()))
}

fn fn_findings(
    summaries: &Summaries,
    (id, claims): (FnId, &schema_claim::SchemaClaims<'_>),
    flow: &FnFlow,
    guard_fn: bool,
) -> Vec<Finding> {
    let f = id.def(claims.package).1;
    let mut out: Vec<Finding> = Vec::new();
    // Indexes, so a function with thousands of check/write pairs costs what its matches
    // cost, not writes × reads.
    let reads = ReadIndex::new(flow, |r| {
        let read = &flow.store_events[r];
        is_racy_check(read) && !serialized(summaries, f, flow, read)
    });
    let mut reported = HashSet::new();
    let mut effects = None;
    for write in flow
        .store_events
        .iter()
        .filter(|w| w.access.access.is_write())
    {
        // The first decision (then op) in flow order whose read guards this write.
        let found = reads
            .candidates(write.access.key.as_ref())
            .into_iter()
            .map(|(d, pos)| {
                let decision = &flow.decisions[d];
                (decision, &flow.store_events[decision.ops[pos]])
            })
            .find(|(d, r)| {
                same_record(r, write)
                    && on_proceed_path(d, write.span)
                    && (guard_fn
                        || is_guard_marker(claims.package, summaries, f, flow, d, r, write))
            });
        let Some((decision, read)) = found else {
            continue;
        };
        // The schema makes the insert the claim: a racing duplicate fails on the key and
        // leaves nothing done. Or:
        // A won claim between the check and the write (the delivery recorded with `ON
        // CONFLICT DO NOTHING` and tested, then the balance updated): a second delivery stops
        // there. A lock taken there does not count: the second delivery waits for it and
        // then writes on what its check read before.
        if claims.fails_safely(id, flow, decision, read, write)
            || claimed_before(summaries, f, flow, write.span).is_some()
        {
            continue;
        }
        let late_after = match write.access.access {
            // A key-only insert into a dedupe table fails on the key for the second
            // delivery; before the work, with its error stopping the handler, it is the
            // claim and the check only a shortcut.
            Access::Write if fails_on_repeat(write) => {
                let effects = effects.get_or_insert_with(|| EffectsByPosition::new(flow));
                match effects.between(flow, decision, write.span) {
                    Some(_) => None,
                    None => continue,
                }
            }
            Access::Write => None,
            _ => {
                let effects = effects.get_or_insert_with(|| EffectsByPosition::new(flow));
                match effects.between(flow, decision, write.span) {
                    Some(e) => Some(e),
                    // A claim made here whose answer nobody tests decides nothing: the
                    // check did.
                    None if untested_claim(write) => None,
                    // An atomic write right after the check is the claim: the check is
                    // only a shortcut.
                    None => continue,
                }
            }
        };
        if reported.insert(write.span) {
            out.push(Finding {
                write: write.clone(),
                read: read.clone(),
                branch: decision.span,
                late_after,
                also: Vec::new(),
            });
        }
    }
    out
}

/// An atomic claim made in this function whose answer is dropped (`let _: bool =
/// conn.hset_nx(..)`): a plain write. Through a helper, the answer may be tested inside it.
fn untested_claim(write: &StoreEvent) -> bool {
    write.via.is_none() && write.access.access == Access::Claim && !write.won_claim()
}

/// A read whose answer can be stale by the time of the write: not a locking read.
fn is_racy_check(r: &StoreEvent) -> bool {
    r.access.access == Access::Read && !r.access.locking
}

/// The read runs under a lock or after a won claim (zero2prod's saved-response read on the
/// losing branch of its `INSERT .. ON CONFLICT DO NOTHING`): a second delivery never gets
/// between it and the write.
fn serialized(summaries: &Summaries, f: &FnDef, flow: &FnFlow, read: &StoreEvent) -> bool {
    let helper_claims_first = read.via.is_some_and(|h| summaries.summary(h).is_guard());
    helper_claims_first || held_before(summaries, f, flow, read.span).is_some()
}

/// A plain write whose repeat fails: a key-only insert into a dedupe table (its key is
/// the primary key) whose error is looked at (`?`, a `match`).
fn fails_on_repeat(write: &StoreEvent) -> bool {
    write.access.shape.key_only && write.checked
}

/// Same store, same table where both name one, same key where both can be compared.
fn same_record(read: &StoreEvent, write: &StoreEvent) -> bool {
    let (r, w) = (&read.access, &write.access);
    if r.store != w.store {
        return false;
    }
    if let (Some(a), Some(b)) = (&r.table, &w.table) {
        if !a.eq_ignore_ascii_case(b) {
            return false;
        }
    }
    match (&r.key, &w.key) {
        (Some(a), Some(b)) => a.same_key(b),
        _ => true,
    }
}

/// The write records that the work was done (a marker, an idempotency or dedupe record),
/// rather than caching computed data under the key (cache-aside).
fn is_guard_marker(
    package: &Package,
    summaries: &Summaries,
    f: &FnDef,
    flow: &FnFlow,
    d: &Decision,
    read: &StoreEvent,
    write: &StoreEvent,
) -> bool {
    // A dedupe table's name, or a key that says what it marks (`done:{id}`, `lock:{id}`).
    let names_a_guard = |text: &str| {
        let t = text.to_ascii_lowercase();
        is_dedupe_table_name(&t)
            || ["seen", "done", "lock", "claim"]
                .iter()
                .any(|w| t.contains(w))
    };
    let key_named = [&read.access, &write.access].iter().any(|a| {
        a.key.as_ref().is_some_and(|k| names_a_guard(&k.text))
            || a.table.as_deref().is_some_and(names_a_guard)
            || a.dedupe_table
    });
    key_named
        || write.access.value_is_marker
            && !sets_row_again(write)
            && !replaces_record(flow, d, write)
            && !gets_or_creates(flow, d, read, write)
        || records_skipped_work(package, summaries, f, flow, d, read, write)
}

/// The check skips the item when the record is there (`if seen { continue }`) without
/// handing on what it read, work runs in between, and a plain write records it (a label
/// bought, its tracking number stored): whatever the record holds, it says the work was
/// done. A cache-aside hands back what it read on a hit instead; a claim after the check
/// is judged as a claim (made after the work or not).
fn records_skipped_work(
    package: &Package,
    summaries: &Summaries,
    f: &FnDef,
    flow: &FnFlow,
    d: &Decision,
    read: &StoreEvent,
    write: &StoreEvent,
) -> bool {
    if write.access.access != Access::Write {
        return false;
    }
    // A branch that fails (`return Err(AlreadyExists)`) rejects a taken name: validation.
    let skips_when_present = d
        .branches
        .iter()
        .any(|b| b.when_present == Some(true) && b.diverges && !returns_an_error(f, b.span));
    let returns_what_it_read = flow.ret.ops().any(|i| {
        flow.store_events
            .get(i)
            .is_some_and(|e| e.span == read.span)
    });
    skips_when_present
        && !returns_what_it_read
        && !sets_row_again(write)
        && !replaces_record(flow, d, write)
        && outside_work_between(package, summaries, flow, d, write.span)
}

/// Whether the code at `span` of `f` returns an `Err(..)` or bails out.
fn returns_an_error(f: &FnDef, span: Span) -> bool {
    let Some(body) = &f.body else { return false };
    let mut found = false;
    body.walk(&mut |e| {
        if found || !span.contains(e.span) {
            return;
        }
        found = match &e.kind {
            ExprKind::Return(Some(v)) => matches!(&v.peel().kind, ExprKind::Call { func, .. }
                if func.as_path().is_some_and(|p| p.last() == "Err")),
            ExprKind::Macro(m) => matches!(m.path.last(), "bail" | "panic"),
            _ => false,
        };
    });
    found
}

/// Whether a call that is not a store operation (an HTTP request, a client's or a trait's
/// call, a crate fn that makes one) runs after the decision and before `write`, on the path
/// that goes on: the work the record stands for. Writes to the same store in between (a
/// batch applied in the check's transaction) are not it: what serializes them is the
/// transaction's business; nor a crate fn without effects (a page rendered to be cached).
fn outside_work_between(
    package: &Package,
    summaries: &Summaries,
    flow: &FnFlow,
    d: &Decision,
    write: Span,
) -> bool {
    // Every crate fn the call may run has a body and no effects; a trait method without an
    // implementation here (`Arc<dyn CreditsApi>`) is another crate's work.
    let pure_crate_call = |e: Span| {
        let mut callees = flow.calls.iter().filter(|c| e.contains(c.span)).peekable();
        callees.peek().is_some()
            && callees.all(|c| {
                c.callee.def(package).1.body.is_some() && !summaries.summary(c.callee).has_effects
            })
    };
    let is_store_op = |e: Span| {
        flow.store_events
            .iter()
            .any(|ev| ev.span.file == e.file && (e.contains(ev.span) || ev.span.contains(e)))
    };
    flow.effects.iter().map(|e| e.span).any(|e| {
        e.file == write.file
            && e.lo > d.span.hi
            && e.hi <= write.lo
            && !d.branches.iter().any(|b| b.diverges && b.span.contains(e))
            && !is_store_op(e)
            && !pure_crate_call(e)
    })
}

/// The record read is deleted after the check and before the write, on the path that goes
/// on: the write replaces it (lemmy's language set: read, compare, delete, insert). A repeat
/// deletes and writes the same rows again; nothing is done twice.
fn replaces_record(flow: &FnFlow, d: &Decision, write: &StoreEvent) -> bool {
    flow.store_events.iter().any(|del| {
        del.access.access == Access::Delete
            && del.span.lo > d.span.hi
            && del.span.hi <= write.span.lo
            && !d
                .branches
                .iter()
                .any(|b| b.diverges && b.span.contains(del.span))
            && same_record(del, write)
    })
}

/// Get-or-create: the function hands back what the read found on a hit (`Ok(Some(session))
/// => session`), and on a miss writes a value (not an increment or an append) with no
/// effect done in between (a default session). What it stores is the thing asked for, not a
/// record of work. With an effect between the check and the write (a charge whose record a
/// repeat gets back), the record marks that work and stays a guard.
fn gets_or_creates(flow: &FnFlow, d: &Decision, read: &StoreEvent, write: &StoreEvent) -> bool {
    let shape = &write.access.shape;
    let returns_what_it_read = flow.ret.ops().any(|i| {
        flow.store_events
            .get(i)
            .is_some_and(|e| e.span == read.span)
    });
    let has_hit_branch = d.branches.iter().any(|b| b.when_present == Some(true));
    returns_what_it_read
        && has_hit_branch
        && !shape.increments
        && !shape.appends
        && EffectsByPosition::new(flow)
            .between(flow, d, write.span)
            .is_none()
}

/// An `UPDATE` of a row that sets its columns to values (what the message carries): a second
/// delivery that passes the check writes the same values again and nothing is done twice.
/// Not one that marks the row done (the marker the check looks for), increments or appends
/// (a lost update: the repeat adds again).
fn sets_row_again(write: &StoreEvent) -> bool {
    let shape = &write.access.shape;
    shape.updates_rows && !shape.marks_done && !shape.increments && !shape.appends
}

/// A function that says it is the idempotency guard (`IdempotencyService::call`, a
/// `dedupe` module): a read then a write of the same key there is the guard, whatever the
/// key is named (a request hash in a session store, say), not a cache-aside.
fn names_a_guard_fn(package: &Package, id: FnId) -> bool {
    let (_, def) = id.def(package);
    let self_ty = def
        .self_ty
        .as_ref()
        .and_then(|t| t.core_path())
        .map(|p| p.last());
    std::iter::once(def.name.as_str())
        .chain(self_ty)
        .chain(def.module.iter().map(String::as_str))
        .any(|n| {
            let n = n.to_ascii_lowercase();
            n.contains("idempot") || n.contains("dedup")
        })
}

/// Whether the code at `span` runs on the path where the check found nothing: inside a
/// branch not taken when the key was present, or after the decision when a branch taken
/// when it was present (or not known to be otherwise) leaves the block.
fn on_proceed_path(d: &Decision, span: Span) -> bool {
    if span.lo <= d.span.hi {
        return false;
    }
    if let Some(b) = d.branches.iter().find(|b| b.span.contains(span)) {
        return b.when_present != Some(true);
    }
    // After the decision in its block, or anywhere later in the body when the branch that
    // leaves returns (`if let Some(hash) = &h { if cached(hash) { return } }` guards
    // what follows the outer `if` too).
    let leaves_when_present = |leaves: fn(&Branch) -> bool| {
        d.branches
            .iter()
            .any(|b| leaves(b) && b.when_present != Some(false))
    };
    d.block.contains(span) && leaves_when_present(|b| b.diverges)
        || d.body.contains(span) && leaves_when_present(|b| b.returns)
}

/// A function's effects sorted by position, to find the ones between two points without
/// scanning them all.
struct EffectsByPosition {
    /// `(span.lo, index in FnFlow::effects)`.
    order: Vec<(u32, usize)>,
}

impl EffectsByPosition {
    fn new(flow: &FnFlow) -> EffectsByPosition {
        let mut order: Vec<(u32, usize)> = flow
            .effects
            .iter()
            .enumerate()
            .map(|(i, e)| (e.span.lo, i))
            .collect();
        order.sort_unstable();
        EffectsByPosition { order }
    }

    /// The first effect (in flow order) after the decision and before `write`, on the
    /// path that goes on.
    fn between(&self, flow: &FnFlow, d: &Decision, write: Span) -> Option<Span> {
        let from = self.order.partition_point(|&(lo, _)| lo <= d.span.hi);
        self.order[from..]
            .iter()
            .take_while(|&&(lo, _)| lo <= write.lo)
            .map(|&(_, i)| (i, flow.effects[i].span))
            .filter(|(_, e)| e.hi <= write.lo)
            .filter(|(_, e)| !d.branches.iter().any(|b| b.diverges && b.span.contains(*e)))
            .min_by_key(|&(i, _)| i)
            .map(|(_, e)| e)
    }
}

fn report(cx: &mut LintContext<'_>, f: Finding, fix: Option<fixes::Fix>) {
    let package = cx.package;
    let (w, r) = (&f.write.access, &f.read.access);
    let message = match f.late_after {
        None => format!(
            "`{}` check and `{}` write are not atomic: two deliveries can both pass the check",
            r.command, w.command
        ),
        Some(_) => format!(
            "the atomic `{}` comes after the work, so two deliveries can both pass the `{}` check",
            w.command, r.command
        ),
    };
    cx.span_lint(&CHECK_THEN_ACT, f.write.span, message, |d| {
        d.primary_label(match f.late_after {
            None => "the marker is written here without an atomic condition",
            Some(_) => "claimed here, after the work",
        });
        d.span_label(f.read.span, "the store is checked here");
        if !f.branch.contains(f.read.span) {
            d.span_label(f.branch, "and the check decides here");
        }
        // Through a helper: where the helper touches the store.
        if let Some(via) = f.read.via {
            d.span_label(
                f.read.access.span,
                format!(
                    "`{}` reads the store here{}",
                    r.command,
                    through(package, via)
                ),
            );
        }
        if let Some(via) = f.write.via {
            d.span_label(
                f.write.access.span,
                format!("`{}` writes it here{}", w.command, through(package, via)),
            );
        }
        if let Some(e) = f.late_after {
            d.span_label(e, "the work starts here, before the claim");
        }
        for also in &f.also {
            d.span_label(
                also.span,
                format!(
                    "`{}` written here too, after the same check, without an atomic condition",
                    also.access.command
                ),
            );
            if let Some(via) = also.via {
                d.span_label(
                    also.access.span,
                    format!(
                        "`{}` writes it here{}",
                        also.access.command,
                        through(package, via)
                    ),
                );
            }
        }
        // The row exists: the atomic form is an update that tests what the check read.
        d.help(atomic_form(w.store, update_kind(w)));
        d.help("or put `#[idempotent(key = ..., store = ...)]` on the handler");
        if let Some(fix) = fix {
            d.suggest_edits(fix.message, fix.edits, Applicability::MaybeIncorrect);
        }
    });
}

/// `, in `impl Store for RedisStore``: the implementation a helper call went through.
fn through(package: &Package, via: FnId) -> String {
    implementation_of(package, via)
        .map(|i| format!(", in `{i}`"))
        .unwrap_or_default()
}

/// What a SQL `UPDATE` after a check does to the row, for its help: the conditional form
/// differs for a counter and for a status.
#[derive(Clone, Copy, PartialEq, Eq)]
enum UpdateKind {
    /// Not an `UPDATE` (an insert, or another store's write).
    None,
    /// Adds to or appends to what the row holds: a read-modify-write.
    Counter,
    /// Sets a done-like status or timestamp: the marker the check reads.
    Status,
    /// Any other `UPDATE`.
    Other,
}

fn update_kind(w: &StoreAccess) -> UpdateKind {
    let shape = &w.shape;
    if !(shape.updates_rows || w.command.starts_with("UPDATE")) {
        return UpdateKind::None;
    }
    if shape.increments || shape.appends {
        UpdateKind::Counter
    } else if shape.marks_done {
        UpdateKind::Status
    } else {
        UpdateKind::Other
    }
}

fn atomic_form(store: Store, update: UpdateKind) -> &'static str {
    match store {
        // A read-modify-write of a row that exists: no row to insert, so the update itself
        // must carry the condition the check tested.
        Store::Sql if update == UpdateKind::Counter => {
            "make the read-modify-write one conditional `UPDATE`: compare the value the \
             check read in its `WHERE` (`SET n = n + 1 WHERE id = $1 AND n = $2`, `$2` the \
             value read) or record the delivery in the same statement (`.. AND NOT counted`), \
             and skip the work when `rows_affected()` is 0"
        }
        Store::Sql if update == UpdateKind::Status => {
            "make the `UPDATE` its own check, a conditional update: move the status the check \
             read into its `WHERE` (`SET status = 'done' WHERE id = $1 AND status <> 'done'`), \
             and skip the work when `rows_affected()` is 0"
        }
        Store::Sql if update == UpdateKind::Other => {
            "make the `UPDATE` its own check, a conditional update: add the condition the \
             read tested to its `WHERE` (`.. WHERE id = $1 AND status = 'pending'`), and \
             skip the work when `rows_affected()` is 0"
        }
        Store::Redis => {
            "claim the key in one step before the work: `SET key value NX EX ttl` \
             (`set_nx`, or `set_options` with `NX`), and skip the work when it returns false"
        }
        Store::DynamoDb => {
            "claim the item in one step before the work: `put_item` with \
             `.condition_expression(\"attribute_not_exists(pk)\")`, and skip the work on \
             `ConditionalCheckFailedException`"
        }
        Store::Sql => {
            "claim the row in one step before the work: `INSERT ... ON CONFLICT DO NOTHING` \
             and skip the work when `rows_affected()` is 0"
        }
        Store::Session => {
            "a session store cannot claim a key atomically: keep idempotency records in a \
             store that can (`SET key value NX EX ttl`, `INSERT ... ON CONFLICT DO NOTHING`, \
             a conditional `put_item`), claimed before the handler runs"
        }
        Store::Kv(name) => crate::catalog::stores::kv::family(name)
            .map_or("claim the key in one atomic step before the work", |f| {
                f.claim_help
            }),
        Store::Named => {
            "replace the check and the mark with one atomic operation of the store that says \
             whether this delivery won the key (`SET NX`, `INSERT ... ON CONFLICT DO NOTHING`), \
             called before the work"
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::settings::{CheckThenActSettings, Settings};
    use crate::testing;

    /// A lock taken in the other branch of an `if` is not held in this one; one taken
    /// before the `if` is.
    #[test]
    fn a_lock_in_the_other_branch_is_not_held() {
        let src = "
            pub async fn handle(pool: &sqlx::PgPool, id: i64, batch: bool) -> sqlx::Result<()> {
                if batch {
                    sqlx::query(\"SELECT pg_advisory_xact_lock($1)\").bind(id).execute(pool).await?;
                } else {
                    let seen = sqlx::query(\"SELECT 1 FROM processed WHERE event_id = $1\")
                        .bind(id).fetch_optional(pool).await?;
                    if seen.is_some() {
                        return Ok(());
                    }
                    refund(id).await;
                    sqlx::query(\"INSERT INTO processed (event_id) VALUES ($1)\") //~ WARN check_then_act
                        .bind(id).execute(pool).await?;
                }
                Ok(())
            }
            async fn refund(id: i64) {}
        ";
        let package = testing::package("app", &["sqlx"], &[("crate", src)]);
        let texts = vec![src.to_owned()];
        let settings = Settings::default();
        testing::assert_annotations(&package, &texts, &settings, &["check_then_act"]);
        // `if batch { lock; check; insert }`: the same block, after the lock.
        let held = src
            .replace("} else {", "")
            .replace(" //~ WARN check_then_act", "");
        let package = testing::package("app", &["sqlx"], &[("crate", &held)]);
        testing::assert_annotations(
            &package,
            std::slice::from_ref(&held),
            &settings,
            &["check_then_act"],
        );
    }

    /// Checks and marks of a store the analysis cannot see can be named in the config.
    #[test]
    fn configured_check_and_mark_names() {
        let src = "
            pub async fn handle(store: &ext::Client, event_id: &str) -> anyhow::Result<()> {
                if store.is_duplicate_delivery(event_id).await? {
                    return Ok(());
                }
                refund(event_id).await;
                store.remember_delivery(event_id).await //~ WARN check_then_act
            }
            async fn refund(id: &str) {}
        ";
        let package = testing::package("app", &["ext"], &[("crate", src)]);
        let texts = vec![src.to_owned()];
        let configured = Settings {
            check_then_act: CheckThenActSettings {
                checks: vec!["is_duplicate_delivery".into()],
                marks: vec!["remember_delivery".into()],
            },
            ..Settings::default()
        };
        testing::assert_annotations(&package, &texts, &configured, &["check_then_act"]);
        let none = vec![src.replace("//~ WARN check_then_act", "")];
        testing::assert_annotations(&package, &none, &Settings::default(), &["check_then_act"]);
    }
}
