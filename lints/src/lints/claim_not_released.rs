//! `claim_not_released`: after a claim that never expires, an error returned by `?` leaves
//! the claim in place, so the retry of the message finds it taken.

use crate::analysis::expiry::{expire_calls, never_expiring_claims, never_expiring_helper_claims};
use crate::analysis::{Access, FnFlow, Store, StoreAccess};
use crate::context::LintContext;
use crate::declare_lint;
use crate::model::ir::{Block, Expr, ExprKind};
use crate::model::Span;

declare_lint! {
    /// ### What it does
    /// Finds a `?` (or its spellings `Err(e) => return Err(e)` in a `match` and `if let
    /// Err(e) = .. { return Err(e) }`) on an awaited call or a store call that runs after a
    /// claim that never
    /// expires (the claims of `claim_without_expiry`: `SET NX` without `EX`, a conditional
    /// `put_item` without a TTL, a claim row without a lease) and before anything releases
    /// it: a delete of the key, a write to the same key or table (a `failed` status, the
    /// done mark), an `EXPIRE`, or a configured release helper. Errors returned in the
    /// branch where the claim was lost are not counted. A claim made through a helper of
    /// the crate (`if !store::claim(conn, &id).await? { .. }`, a helper returning a
    /// never-expiring claim's answer) counts at its call, and a helper deleting the same
    /// key (`store::release(conn, &id)`) releases it.
    ///
    /// ### Why is this bad?
    /// A transient failure (the payment API times out, the database restarts) returns the
    /// error and the queue redelivers the message, but the claim is still there: the retry
    /// sees the key taken and skips, and the message is never processed. On failure the
    /// claim must go (delete the key, or set a status the retry may take over) so the retry
    /// can run.
    ///
    /// ### Known problems
    /// One finding per claim, at the first such `?`. A release anywhere between the claim
    /// and the `?` counts, even in a branch that may not run. Releases done by a `Drop`
    /// guard are not seen (a function using `scopeguard`'s `defer!` is not judged). A claim
    /// helper is followed when it returns the claim's answer; an `EXPIRE` two helpers deep
    /// is not seen, and SQL claims through a helper are not judged. A helper that releases
    /// under a name the analysis cannot follow can be named: `releases = ["release_claim"]`
    /// in `[lints.claim_not_released]`.
    ///
    /// ### Example
    /// ```rust
    /// if !conn.set_nx(&key, 1).await? {
    ///     return Ok(());
    /// }
    /// payments.charge(&msg).await?;
    /// conn.set(&key, "done").await?;
    /// ```
    ///
    /// ### Use instead
    /// ```rust
    /// if !conn.set_nx(&key, 1).await? {
    ///     return Ok(());
    /// }
    /// if let Err(e) = payments.charge(&msg).await {
    ///     conn.del(&key).await?;
    ///     return Err(e.into());
    /// }
    /// conn.set(&key, "done").await?;
    /// ```
    /// `idem_guard`'s `#[idempotent]` releases its reservation on a transient failure.
    pub CLAIM_NOT_RELEASED, "claim_not_released", Allow,
    "an error returned after a claim leaves the claim in place, blocking the retry"
}

pub use crate::settings::claim_not_released::Settings;

/// Macros and paths of `Drop`-based cleanup: what they release is not seen.
const DROP_GUARDS: &[&str] = &[
    "defer",
    "defer_on_unwind",
    "scopeguard",
    "ScopeGuard",
    "guard",
];

pub fn check(cx: &mut LintContext<'_>) {
    let package = cx.package;
    let summaries = cx.analysis().summaries(package);
    let configured = &cx.settings.release_names();
    let mut findings = Vec::new();
    for id in summaries.ids() {
        let (_, f) = id.def(package);
        let Some(body) = &f.body else { continue };
        if f.in_test {
            continue;
        }
        let flow = summaries.flow(id);
        let mut claims = never_expiring_claims(package, f, flow);
        claims.extend(never_expiring_helper_claims(package, flow));
        if claims.is_empty() || uses_drop_guard(body) {
            continue;
        }
        let mut releases = expire_calls(body);
        releases.extend(named_calls(body, configured));
        for i in claims {
            let claim = &flow.store_events[i];
            let mut released_at = releases.clone();
            released_at.extend(
                flow.store_events
                    .iter()
                    .filter(|r| {
                        r.span.lo > claim.span.hi && releases_claim(&claim.access, &r.access)
                    })
                    .map(|r| r.span),
            );
            if let Some(exit) = first_leaking_exit(body, flow, i, &released_at) {
                findings.push((claim.access.clone(), claim.span, exit));
            }
        }
    }
    for (access, claim, exit) in findings {
        report(cx, &access, claim, exit);
    }
}

/// Whether store operation `r` undoes or settles claim `c`: a delete, or a write of the same
/// key (Redis) or of the same table (SQL, DynamoDB), such as a status.
fn releases_claim(c: &StoreAccess, r: &StoreAccess) -> bool {
    if r.store != c.store || !(r.access == Access::Delete || r.access.is_write()) {
        return false;
    }
    match c.store {
        Store::Redis => match (&c.key, &r.key) {
            (Some(a), Some(b)) => a.same_key(b),
            // A key the analysis cannot describe may be the claim's.
            _ => true,
        },
        _ => c.table.is_none() || r.table.is_none() || c.table == r.table,
    }
}

/// The first `?` after claim `i` on an awaited or store call, outside the branch where the
/// claim was lost and outside closures and async blocks, with no release before it.
fn first_leaking_exit(body: &Block, flow: &FnFlow, i: usize, releases: &[Span]) -> Option<Span> {
    let claim = flow.store_events[i].span;
    let lost = lost_branches(flow, i);
    let calls: Vec<Span> = flow
        .store_events
        .iter()
        .map(|e| e.span)
        .chain(flow.effects.iter().map(|e| e.span))
        .collect();
    let mut nested = Vec::new();
    let mut exits = Vec::new();
    body.walk(&mut |e| match &e.kind {
        ExprKind::Closure { .. } | ExprKind::Async { .. } => nested.push(e.span),
        ExprKind::Try(inner) if transient(inner, &calls) => exits.push((e.span, e.span)),
        // `match call().await { Ok(v) => v, Err(e) => return Err(e.into()) }`: `?` spelled out.
        ExprKind::Match { scrutinee, arms } if transient(scrutinee, &calls) => {
            for arm in arms {
                arm.body.walk(&mut |x| {
                    if returns_err(x) {
                        exits.push((x.span, e.span));
                    }
                });
            }
        }
        // `if let Err(e) = call().await { return Err(e) }`.
        ExprKind::If { cond, then, .. } => {
            if let ExprKind::Let { expr, .. } = &cond.kind {
                if transient(expr, &calls) {
                    then.walk(&mut |x| {
                        if returns_err(x) {
                            exits.push((x.span, e.span));
                        }
                    });
                }
            }
        }
        _ => {}
    });
    // Each exit with the expression that fails (the `?` or the `match`): one that holds the
    // claim is the claim's own failure.
    exits.sort_by_key(|(x, _)| x.lo);
    let (exit, _) = exits.into_iter().find(|&(x, failing)| {
        failing.lo > claim.hi
            && !nested.iter().any(|n| n.contains(x) && !n.contains(claim))
            && !lost.iter().any(|b| b.contains(x))
            && !releases.iter().any(|r| r.lo > claim.hi && r.hi <= x.hi)
    })?;
    Some(exit)
}

/// A `?` on something that may fail for a while and then succeed: an awaited call or a
/// store call (sync clients), not a parse of the message.
fn transient(e: &Expr, calls: &[Span]) -> bool {
    let mut awaited = false;
    e.walk(&mut |x| awaited |= matches!(x.kind, ExprKind::Await(_)));
    awaited || calls.contains(&e.peel().span)
}

/// `return Err(..)`.
fn returns_err(e: &Expr) -> bool {
    let ExprKind::Return(Some(value)) = &e.kind else {
        return false;
    };
    matches!(&value.kind, ExprKind::Call { func, .. }
        if func.as_path().is_some_and(|p| p.last() == "Err"))
}

/// The branches that run when claim `i` was lost (or whose polarity is not known): what
/// they return leaves no claim of this delivery behind.
fn lost_branches(flow: &FnFlow, i: usize) -> Vec<Span> {
    flow.decisions
        .iter()
        .filter(|d| d.ops.contains(&i))
        .flat_map(|d| &d.branches)
        .filter(|b| b.when_present != Some(false))
        .map(|b| b.span)
        .collect()
}

fn uses_drop_guard(body: &Block) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        found |= match &e.kind {
            ExprKind::Macro(m) => DROP_GUARDS.contains(&m.path.last()),
            ExprKind::Call { func, .. } => func.as_path().is_some_and(|p| {
                p.segments
                    .iter()
                    .any(|s| s == "scopeguard" || s == "ScopeGuard")
            }),
            _ => false,
        }
    });
    found
}

/// Calls of the configured release helpers.
fn named_calls(body: &Block, names: &[String]) -> Vec<Span> {
    let mut out = Vec::new();
    if names.is_empty() {
        return out;
    }
    body.walk(&mut |e| {
        let hit = match &e.kind {
            ExprKind::MethodCall { method, .. } => names.iter().any(|n| n == method),
            ExprKind::Call { func, .. } => func
                .as_path()
                .is_some_and(|p| names.iter().any(|n| n == p.last())),
            _ => false,
        };
        if hit {
            out.push(e.span);
        }
    });
    out
}

fn report(cx: &mut LintContext<'_>, access: &StoreAccess, claim: Span, exit: Span) {
    let release = match access.store {
        Store::Redis => "delete the key (`DEL`)",
        Store::DynamoDb => "delete the item or set its status to failed",
        _ => "delete the claim row or set its status to failed",
    };
    cx.span_lint(
        &CLAIM_NOT_RELEASED,
        exit,
        "this error returns with the claim still held",
        |d| {
            d.primary_label("returns the error here, the claim stays");
            d.span_label(claim, "claimed here, never expires");
            d.note("the redelivered message finds the claim taken and is skipped for good");
            d.help(format!(
                "on the error path, {release} before returning the error, or give the claim \
                 a TTL; `idem_guard`'s `#[idempotent]` releases its reservation on a \
                 transient failure"
            ));
        },
    );
}
