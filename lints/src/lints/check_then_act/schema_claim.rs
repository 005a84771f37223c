//! A plain `INSERT` that the schema makes a claim: it provides every column of a unique key
//! of its table (the package's migrations, [`Schema`]), each with the value the check looked
//! the row up by, so a racing duplicate's insert fails on the key. The check is then only a
//! shortcut, provided the duplicate leaves nothing done when its insert fails: whatever it
//! did after the check and before the insert (and after the insert, when the insert's error
//! does not stop it) runs in the insert's transaction and rolls back with it, or changes
//! nothing when repeated.

use crate::analysis::completion::{Completion, Role, Write};
use crate::analysis::flow::{Decision, FnFlow, FnId, StoreEvent};
use crate::analysis::schema::Schema;
use crate::analysis::transactions::{Executor, TxId};
use crate::analysis::Analysis;
use crate::analysis::{Access, Store};
use crate::model::{Package, Span};
use std::cell::OnceCell;

/// What the schema and the writes say, computed once per package when first asked.
pub(super) struct SchemaClaims<'a> {
    pub(super) package: &'a Package,
    analysis: &'a Analysis,
    /// The configured mark names (a mark written twice changes nothing).
    marks: &'a [String],
    schema: OnceCell<Schema>,
    completion: OnceCell<Completion<'a>>,
}

impl<'a> SchemaClaims<'a> {
    pub(super) fn new(
        package: &'a Package,
        analysis: &'a Analysis,
        marks: &'a [String],
    ) -> SchemaClaims<'a> {
        SchemaClaims {
            package,
            analysis,
            marks,
            schema: OnceCell::new(),
            completion: OnceCell::new(),
        }
    }

    fn schema(&self) -> &Schema {
        self.schema
            .get_or_init(|| Schema::of_migrations(&self.package.migrations))
    }

    fn completion(&self) -> &Completion<'a> {
        self.completion.get_or_init(|| {
            let (package, analysis) = (self.package, self.analysis);
            Completion::new(
                package,
                &analysis.resolver,
                analysis.call_graph(package),
                analysis.summaries(package),
                self.marks,
            )
        })
    }

    /// Whether `write`, after the check `read` decided by `d` in fn `id`, is an insert the
    /// schema makes fail for a duplicate, with nothing of the duplicate's left done.
    pub(super) fn fails_safely(
        &self,
        id: FnId,
        flow: &FnFlow,
        d: &Decision,
        read: &StoreEvent,
        write: &StoreEvent,
    ) -> bool {
        is_plain_insert(write)
            && !self.package.migrations.files.is_empty()
            && keyed_like_check(self.schema(), read, write)
            && self.undone_with_insert(id, flow, d, write)
    }

    /// Every write and effect after the check that a duplicate performs before its insert
    /// fails (and after, when the insert's error does not stop it) rolls back with the
    /// insert or changes nothing when repeated.
    fn undone_with_insert(
        &self,
        id: FnId,
        flow: &FnFlow,
        d: &Decision,
        write: &StoreEvent,
    ) -> bool {
        let completion = self.completion();
        let writes = completion.writes(id);
        let insert_tx =
            writes
                .iter()
                .find(|w| w.span == write.span)
                .and_then(|w| match w.executor {
                    Executor::Tx(t) => Some(t),
                    _ => None,
                });
        let txs = completion.transactions(id);
        // The insert's own transaction opening and committing is not work done.
        let own_tx_call = |span: Span| {
            insert_tx.is_some_and(|t| {
                let tx = txs.get(t);
                overlaps(tx.begin, span) || tx.commits.iter().any(|c| overlaps(*c, span))
            })
        };
        let stops_on_error = write.checked || write.tried;
        // In the body that decided (the function, or the async block or closure the check
        // is in: what `return` after the check leaves).
        let after_check = |span: Span| {
            span.lo > d.span.hi
                && d.body.contains(span)
                && !d
                    .branches
                    .iter()
                    .any(|b| b.diverges && b.span.contains(span))
        };
        let counts = |span: Span| {
            span != write.span
                && !overlaps(span, write.span)
                && after_check(span)
                && (span.hi <= write.span.lo || !stops_on_error)
        };
        let effects = flow.effects.iter().map(|e| e.span);
        let store_writes = flow
            .store_events
            .iter()
            .filter(|e| e.access.access.is_write())
            .map(|e| e.span);
        effects
            .chain(store_writes)
            .filter(|s| counts(*s))
            .all(|span| {
                // Every write made there (a helper may make several); a call that writes
                // nothing seen is work of another kind (an e-mail, an HTTP call).
                let mut there = writes.iter().filter(|w| overlaps(w.span, span)).peekable();
                own_tx_call(span)
                    || there.peek().is_some()
                        && there.all(|w| rolls_back_or_repeats_nothing(w, insert_tx))
            })
    }
}

/// A plain SQL `INSERT` (no `ON CONFLICT`): it fails on a unique key, if its table has one.
fn is_plain_insert(write: &StoreEvent) -> bool {
    let w = &write.access;
    w.store == Store::Sql && w.access == Access::Write && w.command.starts_with("INSERT")
}

/// The insert provides every column of a unique key of its table, each with the value the
/// check compared that column with (`WHERE idempotency_key = $1` and the same key bound in
/// the insert): the duplicate the check missed is the row the insert collides with.
fn keyed_like_check(schema: &Schema, read: &StoreEvent, write: &StoreEvent) -> bool {
    let (r, w) = (&read.access, &write.access);
    let Some(table) = w.table.as_deref() else {
        return false;
    };
    schema.unique_sets(table).any(|set| {
        set.iter()
            .all(|c| match (w.column_value(c), r.column_value(c)) {
                (Some(a), Some(b)) => a.same_key(b),
                _ => false,
            })
    })
}

/// A write in the insert's transaction (it rolls back when the insert fails), or one whose
/// repeat leaves the same state (`SET updated_at = $1`, a mark).
fn rolls_back_or_repeats_nothing(w: &Write, insert_tx: Option<TxId>) -> bool {
    let same_tx = insert_tx.is_some_and(|t| w.executor == Executor::Tx(t));
    same_tx || matches!(w.role, Role::Business { idempotent: true } | Role::Mark)
}

fn overlaps(a: Span, b: Span) -> bool {
    a.file == b.file && a.lo < b.hi && b.lo < a.hi
}
