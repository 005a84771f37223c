//! `claim_without_expiry`: an atomic claim (`SET NX`, a conditional `put_item`, an `INSERT ..
//! ON CONFLICT DO NOTHING` claim row) that nothing ever expires.

use crate::analysis::expiry::{expr_at, never_expiring_claims};
use crate::analysis::{Store, StoreAccess};
use crate::context::LintContext;
use crate::declare_lint;
use crate::diagnostic::Applicability;
use crate::model::ir::{Expr, ExprKind};
use crate::model::Span;

declare_lint! {
    /// ### What it does
    /// Finds atomic claims, whose answer the code tests, that never expire:
    ///
    /// - Redis `SET NX` without `EX`/`PX`, in every spelling: `set_nx`, `SETNX`,
    ///   `set_options` with `ExistenceCheck::NX` and no `SetExpiry`, fred's `set(k, v, None,
    ///   Some(SetOptions::NX), false)`, `cmd("SET").arg(k).arg(v).arg("NX")`, in a pipeline
    ///   or not, with no `EXPIRE` of a key in the same function;
    /// - a DynamoDB `put_item` conditioned on `attribute_not_exists(..)` whose item has no
    ///   TTL, lease, status or timestamp attribute;
    /// - an `INSERT .. ON CONFLICT DO NOTHING` into a dedupe-named table (`processed_*`,
    ///   `*idempot*`, `inbox`...) whose columns hold no lease, status or timestamp, run on a
    ///   pool or connection outside a transaction.
    ///
    /// ### Why is this bad?
    /// The claim says "this message is being processed". When the worker that holds it
    /// crashes, is killed by a deploy or times out before it marks the work done or deletes
    /// the claim, nothing removes it: every redelivery of the message finds it taken and
    /// skips, so the work is never done. The processing state needs a TTL (twice the work
    /// time or more) or a lease a reaper can take back.
    ///
    /// ### Known problems
    /// Only claims that store a marker are judged: a Redis value that is a literal, a
    /// constant or a timestamp (an item's payload stored under its id until a worker
    /// completes it is storage, meant to stay; a lock valued with its owner's id is missed),
    /// a DynamoDB item or a key-value store's value (sled, JetStream KV, MongoDB) of markers
    /// and context or in a table named for claims, locks or dedupe (an insert-if-absent of a
    /// mapping, a URL to the alias it names, is kept for good); a key-value claim whose value
    /// is named as a lease, a state or a timestamp, or read from a clock (a job state holding
    /// the time it was taken, renewed by a heartbeat), is a lease that a stale-job scan takes
    /// back; a key minted in the function (a nonce) is not a message's claim. `SADD` and
    /// `HSETNX` claims are not judged (a set member or a hash field has no TTL of its own). Options or items built outside the function (a parameter, a helper) are
    /// not judged. An `EXPIRE` of any key in the function counts as the claim's. A
    /// function of the crate that sets the TTL under another name can be named:
    /// `expires = ["refresh_lease"]` in `[lints.claim_without_expiry]`.
    ///
    /// ### Example
    /// ```rust
    /// let claimed: bool = conn.set_nx(format!("processing:{}", msg.id), 1).await?;
    /// if !claimed {
    ///     return Ok(());
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// let claimed: bool = redis::cmd("SET").arg(format!("processing:{}", msg.id)).arg(1)
    ///     .arg("NX").arg("EX").arg(600).query_async(&mut conn).await?;
    /// if !claimed {
    ///     return Ok(());
    /// }
    /// ```
    /// or `#[idempotent(key = msg.id, store = redis)]` from `idem-guard`, whose
    /// reservation carries an in-progress TTL.
    pub CLAIM_WITHOUT_EXPIRY, "claim_without_expiry", Allow,
    "a claim (`SET NX`, a conditional put, a claim row) that never expires"
}

pub use crate::settings::claim_without_expiry::Settings;

/// The TTL the fix writes: one day, long enough for most work and short enough that a
/// crashed worker's claim goes away. `MaybeIncorrect`: twice the work time is the rule.
const FIX_TTL_SECS: &str = "86_400";

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let summaries = cx.analysis().summaries(package);
    let expires = &cx.settings.expire_names();
    let mut findings = Vec::new();
    for id in summaries.ids() {
        let (_, f) = id.def(package);
        if f.in_test || calls_any(f.body.as_ref(), expires) {
            continue;
        }
        let flow = summaries.flow(id);
        for i in never_expiring_claims(package, f, flow) {
            let ev = &flow.store_events[i];
            let fix = f
                .body
                .as_ref()
                .and_then(|b| expr_at(b, ev.span))
                .and_then(|op| fix_of(op, &ev.access));
            findings.push((ev.access.clone(), ev.span, fix));
        }
    }
    for (access, span, fix) in findings {
        report(cx, &access, span, fix);
    }
}

/// Whether the body calls one of `names` (a configured TTL helper).
fn calls_any(body: Option<&crate::model::ir::Block>, names: &[String]) -> bool {
    let (Some(body), false) = (body, names.is_empty()) else {
        return false;
    };
    let mut found = false;
    body.walk(&mut |e| {
        found |= match &e.kind {
            ExprKind::MethodCall { method, .. } => names.iter().any(|n| n == method),
            ExprKind::Call { func, .. } => func
                .as_path()
                .is_some_and(|p| names.iter().any(|n| n == p.last())),
            _ => false,
        }
    });
    found
}

/// The edits that add `EX ttl`: after the `"NX"` argument of a raw `SET`, or `set_nx` made
/// a `set_options` with NX and EX.
fn fix_of(op: &Expr, access: &StoreAccess) -> Option<Vec<(Span, String)>> {
    if access.store != Store::Redis {
        return None;
    }
    let ExprKind::MethodCall {
        receiver,
        method,
        method_span,
        ..
    } = &op.kind
    else {
        return None;
    };
    if method == "set_nx" {
        // `conn.set_nx(k, v)`: the closing parenthesis is the call's last byte.
        let close = Span {
            lo: op.span.hi - 1,
            hi: op.span.hi - 1,
            ..op.span
        };
        return Some(vec![
            (*method_span, "set_options".to_owned()),
            (
                close,
                format!(
                    ", redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX)\
                     .with_expiration(redis::SetExpiry::EX({FIX_TTL_SECS}))"
                ),
            ),
        ]);
    }
    // `cmd("SET")..arg("NX")..query_async(..)`: after the `.arg("NX")` step.
    let mut cur = receiver.as_ref();
    while let ExprKind::MethodCall { receiver, args, .. } = &cur.kind {
        if args
            .first()
            .and_then(Expr::as_str_lit)
            .is_some_and(|s| s.eq_ignore_ascii_case("nx"))
        {
            let end = Span {
                lo: cur.span.hi,
                hi: cur.span.hi,
                ..cur.span
            };
            return Some(vec![(end, format!(".arg(\"EX\").arg({FIX_TTL_SECS})"))]);
        }
        cur = receiver;
    }
    None
}

fn report(
    cx: &mut LintContext<'_>,
    access: &StoreAccess,
    span: Span,
    fix: Option<Vec<(Span, String)>>,
) {
    let (what, help) = match access.store {
        Store::Redis => (
            format!("`{}` claim without an expiry", access.command),
            "give the claim a TTL (`SET key value NX EX ttl`, at least twice the work time) \
             so a crashed worker's claim goes away; `idem_guard`'s `#[idempotent]` \
             reservation carries a lease (`lease = ..`), renewed while the work runs",
        ),
        Store::DynamoDb => (
            "conditional `put_item` claim without a TTL or lease attribute".to_owned(),
            "write a TTL attribute (epoch seconds, now + twice the work time) enabled as the \
             table's TTL, or a lease a reaper can take back; `idem_guard`'s DynamoDB store \
             writes one",
        ),
        Store::Kv(_) => (
            format!("`{}` claim that never expires", access.command),
            "the store keeps the key forever: store a lease (a deadline) in the value that a \
             later delivery may take back with another atomic swap, and delete the key when \
             the work fails",
        ),
        _ => (
            format!("claim row `{}` without a lease or status", access.command),
            "add a lease column (`locked_until`) or a status and timestamp a reaper can reset, \
             or claim inside the transaction of the work; `idem_guard`'s PostgreSQL store \
             leases its reservations",
        ),
    };
    cx.span_lint(&CLAIM_WITHOUT_EXPIRY, span, what, |d| {
        d.primary_label("claimed here, and nothing expires the claim");
        d.note("if the worker dies before releasing it, every redelivery skips the message");
        d.help(help);
        if let Some(edits) = fix {
            d.suggest_edits(
                "expire the claim after a day (choose twice the work time)",
                edits,
                Applicability::MaybeIncorrect,
            );
        }
    });
}
