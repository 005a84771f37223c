//! Whether a point of a function runs serialized with other deliveries: after a lock is
//! taken or a claim is won, a check and a write cannot race, because a second delivery
//! stops at the lock or the claim.
//!
//! Public API:
//! - [`held_before`]`(flow, at) -> Option<Span>`: an operation before `at` in the function
//!   that serializes what follows: an atomic claim whose result is tested (`SET NX`, `INSERT
//!   .. ON CONFLICT DO NOTHING` with a `rows_affected` test), a PostgreSQL advisory lock
//!   (`pg_try_advisory_lock`, `pg_advisory_xact_lock`) or a locking read (`SELECT .. FOR
//!   UPDATE`), directly or inside a helper that is itself a guard.
//! - [`claimed_before`]`(flow, at) -> Option<Span>`: the same for a won claim only (a lock
//!   makes a second delivery wait, then go on with what it read before).
//! - [`held_by_every_caller`]`(summaries, id) -> bool`: every call of `id` in the crate runs
//!   where [`held_before`] holds (a Redis lock held by the caller around the whole helper),
//!   or in a caller all of whose calls do, up to five calls up.
//!
//! A lock counts as held until the function returns: an unlock in between is not seen
//! (documented in `check_then_act`'s known problems). A lock taken in another arm of a
//! `match` (or the other branch of an `if`) than the point is not held there.

use super::flow::{FnFlow, FnId, StoreEvent};
use super::store_ops::{Access, Store};
use super::summary::Summaries;
use crate::model::ir::{Block, ExprKind};
use crate::model::{FnDef, Package, Span};

/// The first operation before `at` in function `f` (whose walk is `flow`) that holds a lock
/// or a won claim over what follows.
pub fn held_before(summaries: &Summaries, f: &FnDef, flow: &FnFlow, at: Span) -> Option<Span> {
    first_before(f, flow, at, |ev| serializes(summaries, ev))
}

/// The first won claim before `at` in function `f` (whose walk is `flow`), made here or by a
/// guard helper: unlike a lock, it stops a second delivery instead of making it wait, so
/// what a check read before it is never acted on twice.
pub fn claimed_before(summaries: &Summaries, f: &FnDef, flow: &FnFlow, at: Span) -> Option<Span> {
    first_before(f, flow, at, |ev| {
        let won_claim = ev.access.access == Access::Claim && ev.checked;
        won_claim || ev.via.is_some_and(|h| summaries.summary(h).is_guard())
    })
}

fn first_before(
    f: &FnDef,
    flow: &FnFlow,
    at: Span,
    holds: impl Fn(&StoreEvent) -> bool,
) -> Option<Span> {
    flow.store_events
        .iter()
        .filter(|ev| ev.span.file == at.file && ev.span.hi <= at.lo)
        .filter(|ev| holds(ev))
        .find(|ev| !f.body.as_ref().is_some_and(|b| exclusive(b, ev.span, at)))
        .map(|ev| ev.span)
}

/// Whether `a` and `b` are in different arms of one `match`, or in the two branches of one
/// `if`: they never both run (`Q::FetchTask => fetch_for_update(..)` does not hold its lock
/// in the `Q::Insert => ..` arm).
fn exclusive(body: &Block, a: Span, b: Span) -> bool {
    let mut found = false;
    body.walk(&mut |e| {
        if found || !e.span.contains(a) || !e.span.contains(b) {
            return;
        }
        found = match &e.kind {
            ExprKind::Match { arms, .. } => {
                let arm_of = |s: Span| arms.iter().position(|arm| arm.body.span.contains(s));
                matches!((arm_of(a), arm_of(b)), (Some(x), Some(y)) if x != y)
            }
            ExprKind::If {
                then,
                els: Some(els),
                ..
            } => {
                let apart = |x: Span, y: Span| then.span.contains(x) && els.span.contains(y);
                apart(a, b) || apart(b, a)
            }
            _ => false,
        };
    });
    found
}

/// Whether store event `ev` takes a lock or wins a claim for what follows it.
pub fn serializes(summaries: &Summaries, ev: &StoreEvent) -> bool {
    let a = &ev.access;
    let won_claim = a.access == Access::Claim && ev.checked;
    // An advisory lock or `FOR UPDATE` read; a lock reported by a helper's summary counts
    // the same way.
    let lock = a.store == Store::Sql && a.locking;
    let guard_helper = ev.via.is_some_and(|f| summaries.summary(f).is_guard());
    won_claim || lock || guard_helper
}

/// Whether `id` is called somewhere in the crate and every call runs under a lock or a won
/// claim of its caller, or in a caller whose own calls all do (a helper between the lock
/// and the work: `with_lock` → `step` → `process_locked`), up to five calls up.
pub fn held_by_every_caller(package: &Package, summaries: &Summaries, id: FnId) -> bool {
    held_by_callers_within(package, summaries, id, 5)
}

fn held_by_callers_within(package: &Package, summaries: &Summaries, id: FnId, up: usize) -> bool {
    let mut calls = 0usize;
    for caller in summaries.ids() {
        let flow = summaries.flow(caller);
        let f = caller.def(package).1;
        for call in flow.calls.iter().filter(|c| c.callee == id) {
            calls += 1;
            let held = held_before(summaries, f, flow, call.span).is_some()
                || up > 1
                    && caller != id
                    && held_by_callers_within(package, summaries, caller, up - 1);
            if !held {
                return false;
            }
        }
    }
    calls > 0
}
