//! When a claim or a TTL'd write expires ([`Expiry`]), one function per store family,
//! called by [`super::store_ops`] as it classifies the operation.
//!
//! - Redis: `SET NX` without `EX`/`PX` (`set_nx`, `SETNX`, `set_options` with NX and no
//!   `SetExpiry`, fred's `set(k, v, None, Some(NX), ..)`, a raw `SET .. NX`) never expires;
//!   `EX n`/`PX n`, `set_ex`, `SETEX`, or an `EXPIRE` in the same pipeline do.
//! - DynamoDB: a `put_item` claimed with `attribute_not_exists` expires when an attribute
//!   is named as a TTL, a lease, a status or a timestamp (what a reaper can test).
//! - SQL: an `INSERT .. ON CONFLICT DO NOTHING` into a dedupe-named table expires when a
//!   column is a lease, a status or a timestamp.

use super::durations::{int_of, millis_of};
use super::flow::FnFlow;
use super::sql::{OnConflict, SqlStatement, SqlVerb};
use super::store_ops::{Access, Expiry, OpEnv, Store};
use super::summary::StoreAccess;
use super::transactions::{names_a_transaction, Executor, Transactions};
use crate::catalog::stores::{redis, Ttl};
use crate::model::ir::{Block, Expr, ExprKind};
use crate::model::{FnDef, Package, Span};

/// A store method's expiry as its catalog row says ([`Ttl`]): `args` the call's arguments,
/// `access` what the call does (options give only a claim an expiry).
pub(crate) fn of_ttl<'a>(
    env: &dyn OpEnv<'a>,
    ttl: Ttl,
    access: Access,
    args: &'a [Expr],
) -> Option<Expiry> {
    let int = |i: usize| args.get(i).and_then(|a| int_of(env, a));
    match ttl {
        Ttl::Never => Some(Expiry::Never),
        Ttl::Secs(i) => Some(Expiry::After(int(i).map(|s| s * 1000))),
        Ttl::Millis(i) => Some(Expiry::After(int(i))),
        Ttl::At => Some(Expiry::After(None)),
        Ttl::Options if access == Access::Claim => Some(
            args.get(2..)
                .unwrap_or_default()
                .iter()
                .find_map(|a| options_expiry(env, a, 0))
                .unwrap_or(Expiry::Never),
        ),
        _ => None,
    }
}

/// The expiry set options carry (`SetOptions::default().with_expiration(SetExpiry::EX(60))`,
/// fred's `Some(Expiration::EX(60))`), following the locals they were built in.
fn options_expiry<'a>(env: &dyn OpEnv<'a>, e: &'a Expr, depth: usize) -> Option<Expiry> {
    let mut found = None;
    let mut with_expiration = false;
    let mut locals = Vec::new();
    e.walk(&mut |x| match &x.kind {
        ExprKind::Call { func, args } if found.is_none() => {
            let Some(p) = func.as_path() else { return };
            found = match (p.last(), args.as_slice()) {
                ("EX", [n]) => Some(Expiry::After(int_of(env, n).map(|s| s * 1000))),
                ("PX", [n]) => Some(Expiry::After(int_of(env, n))),
                ("EXAT" | "PXAT", _) => Some(Expiry::After(None)),
                _ => None,
            };
        }
        ExprKind::MethodCall { method, .. } if method == "with_expiration" => {
            with_expiration = true;
        }
        ExprKind::Path(p) => locals.extend(p.as_ident().map(str::to_owned)),
        _ => {}
    });
    // An expiration whose length is not a constant (`with_expiration(ttl)`).
    let found = found.or(with_expiration.then_some(Expiry::After(None)));
    found.or_else(|| {
        (depth < 4)
            .then(|| {
                locals.iter().find_map(|n| {
                    env.local_init(n)
                        .and_then(|init| options_expiry(env, init, depth + 1))
                })
            })
            .flatten()
    })
}

/// A raw command (`cmd("SET").arg(k).arg(v).arg("NX").arg("EX").arg(60)`), its arguments
/// in order.
pub(crate) fn redis_cmd<'a>(
    env: &dyn OpEnv<'a>,
    upper: &str,
    access: Access,
    args: &[&'a Expr],
) -> Option<Expiry> {
    let int = |i: usize| args.get(i).and_then(|a| int_of(env, a));
    match redis::raw(upper)?.ttl {
        Ttl::Never => Some(Expiry::Never),
        Ttl::Secs(i) => Some(Expiry::After(int(i).map(|s| s * 1000))),
        Ttl::Millis(i) => Some(Expiry::After(int(i))),
        Ttl::At => Some(Expiry::After(None)),
        Ttl::Options => {
            let at = |word: &str| {
                args.iter().position(|a| {
                    env.string_of(a)
                        .is_some_and(|s| s.eq_ignore_ascii_case(word))
                })
            };
            if let Some(i) = at("EX") {
                Some(Expiry::After(int(i + 1).map(|s| s * 1000)))
            } else if let Some(i) = at("PX") {
                Some(Expiry::After(int(i + 1)))
            } else if at("EXAT").or(at("PXAT")).or(at("KEEPTTL")).is_some() {
                Some(Expiry::After(None))
            } else if access == Access::Claim {
                Some(Expiry::Never)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The expiry an `EXPIRE`/`PEXPIRE` step of a pipeline gives (`.expire(&k, 60)`, `.cmd(
/// "EXPIRE").arg(&k).arg(60)`): its key is the pipeline's claim in every pipeline seen.
pub(crate) fn pipeline_expire<'a>(
    env: &dyn OpEnv<'a>,
    command: &str,
    args: &[&'a Expr],
) -> Option<Expiry> {
    let int = |i: usize| args.get(i).and_then(|a| int_of(env, a));
    match redis::expire(command)?.ttl {
        Ttl::Secs(i) => Some(Expiry::After(int(i).map(|s| s * 1000))),
        Ttl::Millis(i) => Some(Expiry::After(int(i))),
        _ => Some(Expiry::After(None)),
    }
}

/// Attribute and column names a claim can expire or be reclaimed by: a TTL, a lease, a
/// status a worker or a reaper resets, a timestamp a reaper compares.
pub(crate) fn names_a_lease(name: &str) -> bool {
    let n = name
        .trim_start_matches(['#', ':', '"'])
        .to_ascii_lowercase();
    [
        "ttl",
        "expir",
        "lease",
        "until",
        "deadline",
        "timeout",
        "status",
        "state",
        "heartbeat",
        "locked",
        "time",
        "date",
    ]
    .iter()
    .any(|w| n.contains(w))
        || n.ends_with("_at")
        || n.ends_with("_on")
}

/// A key-value claim's stored value that a later delivery can take back when it is stale:
/// named as a lease, a status or a timestamp (a local `state`, a constructor
/// `JobState::running(worker)`, `now.unix_timestamp()`) or read from a clock, followed
/// through the locals it was
/// built in. The store has no TTL of its own, so such a value is its expiry, as a lease
/// attribute of a DynamoDB item or a lease column of a claim row is theirs.
pub(crate) fn kv_value_is_a_lease<'a>(env: &dyn OpEnv<'a>, value: &'a Expr, depth: usize) -> bool {
    let mut lease = false;
    value.walk(&mut |e| match &e.kind {
        ExprKind::Path(p) => {
            // A clock (`Utc::now`, `OffsetDateTime::now_utc`) is a timestamp too.
            lease |= p.last().starts_with("now") || p.segments.iter().any(|s| names_a_lease(s));
            if let Some(init) = p.as_ident().and_then(|n| env.local_init(n)) {
                lease |= depth < 4 && kv_value_is_a_lease(env, init, depth + 1);
            }
        }
        ExprKind::Field { member, .. } => lease |= names_a_lease(member),
        ExprKind::MethodCall { method, .. } => lease |= names_a_lease(method),
        _ => {}
    });
    lease
}

/// Names of a DynamoDB TTL attribute, whose value is the epoch second it expires at.
fn names_a_ttl(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["ttl", "expir", "lease"].iter().any(|w| n.contains(w))
}

/// A `put_item` claimed with `attribute_not_exists`: its attributes (`None` names a
/// value given whole, as `set_item(map)` does; then the item is not judged).
pub(crate) fn dynamodb_put<'a>(
    env: &dyn OpEnv<'a>,
    condition: Option<&str>,
    attributes: &[(Option<String>, &'a Expr)],
    whole_item: bool,
) -> Option<Expiry> {
    if !condition.is_some_and(|c| c.contains("attribute_not_exists")) || whole_item {
        return None;
    }
    if attributes.is_empty() || attributes.iter().any(|(n, _)| n.is_none()) {
        return None;
    }
    let lease = attributes
        .iter()
        .find(|(n, _)| n.as_deref().is_some_and(names_a_lease));
    Some(match lease {
        None => Expiry::Never,
        Some((name, value)) if name.as_deref().is_some_and(names_a_ttl) => {
            Expiry::After(now_plus(env, value).map(|s| s * 1000))
        }
        Some(_) => Expiry::After(None),
    })
}

/// The `N` of a TTL attribute computed as `now + N` (`(Utc::now().timestamp() + 3600)
/// .to_string()`, `now + TTL_SECS`), in seconds.
fn now_plus<'a>(env: &dyn OpEnv<'a>, value: &'a Expr) -> Option<u64> {
    let mut found = None;
    value.walk(&mut |x| {
        if let ExprKind::Binary { lhs, rhs, .. } = &x.kind {
            let clock = |e: &Expr| {
                let mut now = false;
                e.walk(&mut |y| match &y.kind {
                    ExprKind::Path(p) => now |= p.last().to_ascii_lowercase().contains("now"),
                    ExprKind::MethodCall { method, .. } => now |= method.starts_with("now"),
                    _ => {}
                });
                now
            };
            if found.is_none() && clock(lhs) {
                found = int_of(env, rhs).or_else(|| millis_of(env, rhs).map(|ms| ms / 1000));
            }
        }
    });
    found
}

/// An `INSERT .. ON CONFLICT DO NOTHING` claim into a dedupe-named table, by its columns.
pub(crate) fn sql_claim(st: &SqlStatement) -> Option<Expiry> {
    if st.verb != SqlVerb::Insert
        || st.on_conflict != OnConflict::DoNothing
        || !st.is_dedupe_table()
        || st.columns.is_empty()
    {
        return None;
    }
    Some(if st.columns.iter().any(|(c, _)| names_a_lease(c)) {
        Expiry::After(None)
    } else {
        Expiry::Never
    })
}

/// The claims function `f` makes and wins (their answer is tested) that nothing expires,
/// storing a marker ([`holds_a_marker`]) under a key not minted in the function: indices
/// into `flow.store_events`. A Redis claim followed by an `EXPIRE` of any key in
/// the function, and a SQL claim inside a transaction (a failure rolls the row back) or on
/// a connection the caller passes (which may be one), are not among them.
pub fn never_expiring_claims(package: &Package, f: &FnDef, flow: &FnFlow) -> Vec<usize> {
    let Some(body) = &f.body else {
        return Vec::new();
    };
    let mut txs = None;
    // Read only when a Redis claim asks: most functions make none.
    let mut expires = None;
    (0..flow.store_events.len())
        .filter(|&i| {
            let ev = &flow.store_events[i];
            if ev.via.is_some() || !ev.won_claim() || ev.access.shape.expiry != Some(Expiry::Never)
            {
                return false;
            }
            // A key minted here (`Ulid::new()`, a nonce) is never claimed by a redelivery:
            // it reserves a fresh name, not a message.
            let fresh = flow
                .key_uses
                .iter()
                .any(|k| Some(k.span) == ev.access.key_span && k.value.nondet().next().is_some());
            if fresh || !holds_a_marker(&ev.access) {
                return false;
            }
            match ev.access.store {
                Store::Redis => !*expires.get_or_insert_with(|| !expire_calls(body).is_empty()),
                Store::Sql => expr_at(body, ev.span).is_some_and(|op| {
                    let txs = txs.get_or_insert_with(|| Transactions::of_fn(package, f));
                    // A handle named as a transaction is one, even where its `begin` is
                    // not recognised (`pool.begin().await.map_err(..)?`).
                    matches!(txs.executor(op), Executor::Other(n) if !names_a_transaction(&n))
                }),
                _ => true,
            }
        })
        .collect()
}

/// The claims `f` makes through a crate helper that returns a never-expiring claim's answer
/// (`if !store::claim(conn, &id).await? { .. }`) and tests it: indices into
/// `flow.store_events`, whose span is the call. The helper's own claim is reported where it
/// is made ([`never_expiring_claims`] of the helper); these are for what `f` does after it.
/// A Redis helper that also calls `EXPIRE` gives an expiring claim; a SQL helper is not
/// followed (whether its connection is a transaction is the helper's business).
pub fn never_expiring_helper_claims(package: &Package, flow: &FnFlow) -> Vec<usize> {
    (0..flow.store_events.len())
        .filter(|&i| {
            let ev = &flow.store_events[i];
            let Some(helper) = ev.via else {
                return false;
            };
            if !ev.won_claim()
                || ev.access.shape.expiry != Some(Expiry::Never)
                || !holds_a_marker(&ev.access)
            {
                return false;
            }
            match ev.access.store {
                Store::Redis => {
                    let (_, h) = helper.def(package);
                    h.body.as_ref().is_some_and(|b| expire_calls(b).is_empty())
                }
                Store::Sql => false,
                _ => true,
            }
        })
        .collect()
}

/// Whether a claim stores a marker ("taken", a worker, a timestamp) rather than data kept
/// until the work is done (a queue's item payload under its id is storage, not a claim; a
/// URL's alias is a mapping kept for good): claims of the stores that keep a value (Redis,
/// DynamoDB, key-value families) whose value is a marker or in a table named for claims,
/// dedupe-named SQL tables.
fn holds_a_marker(a: &StoreAccess) -> bool {
    let claim_table = a.table.as_deref().is_some_and(|t| {
        let t = t.to_ascii_lowercase();
        super::sql::is_dedupe_table_name(&t)
            || ["claim", "lock", "lease", "reservation"]
                .iter()
                .any(|w| t.contains(w))
    });
    // One rule for the stores that keep a value under the key: what it stores says whether
    // the claim is a marker (a mapping from a URL to the alias it names is kept for good).
    match a.store {
        Store::Sql | Store::Named => true,
        _ => a.value_is_marker || claim_table,
    }
}

/// `conn.expire(&k, 60)`, `pexpire`, `expire_at`, `cmd("EXPIRE")`: where a function gives
/// a key a TTL after setting it.
pub fn expire_calls(body: &Block) -> Vec<Span> {
    let mut out = Vec::new();
    body.walk(&mut |e| match &e.kind {
        ExprKind::MethodCall { method, .. }
            if redis::EXPIRES.iter().any(|r| r.method == method) =>
        {
            out.push(e.span)
        }
        ExprKind::Call { func, args } => {
            let is_cmd = func.as_path().is_some_and(|p| p.last() == "cmd");
            let expire = args.first().and_then(Expr::as_str_lit).is_some_and(|s| {
                s.eq_ignore_ascii_case("expire") || s.eq_ignore_ascii_case("pexpire")
            });
            if is_cmd && expire {
                out.push(e.span);
            }
        }
        _ => {}
    });
    out
}

/// The expression at `span` in `body`.
pub fn expr_at(body: &Block, span: Span) -> Option<&Expr> {
    let mut found = None;
    body.walk(&mut |e| {
        if found.is_none() && e.span == span {
            found = Some(e);
        }
    });
    found
}
