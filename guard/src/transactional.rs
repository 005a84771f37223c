//! Completion inside the caller's PostgreSQL transaction: the fix `mark_outside_transaction`
//! points to.

use std::future::Future;
use std::ops::DerefMut;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sqlx::PgConnection;

use tokio::time::Instant;
use tracing::Instrument as _;

use crate::guard::{seen, Outcome, Step, Waiting};
use crate::key::{KeyPart, Payload};
use crate::observe::{self, Seen};
use crate::on_error::OnError;
use crate::postgres::{complete_on, release_on, reserve_in_tx};
use crate::store::OwnerToken;
use crate::{Error, Guard, PostgresStore};

impl<P> Guard<PostgresStore, P> {
    /// Runs `body` at most once per key, writing the reservation and the completion through the
    /// caller's transaction `tx`, which the body also writes through. Commit `tx` afterwards: the
    /// business writes and the "done" mark then commit, or roll back, together. A crash between
    /// them leaves neither, so a redelivery runs the body again on a clean slate.
    ///
    /// While the transaction is open its reservation is invisible to others. A concurrent
    /// duplicate does not block on it: it follows the guard's in-flight policy, so by default it
    /// gets [`Rejected::InProgress`](crate::Rejected::InProgress) at once (retry-after: 1 s, or
    /// the lease if shorter), and with [`InFlight::Wait`](crate::InFlight::Wait) it polls until
    /// the first transaction commits (then replays its result), rolls back (then runs), or the
    /// wait ends (then is rejected). Each reservation holds a transaction-scoped advisory lock
    /// on the key's hash until the commit. Needs `READ COMMITTED` (PostgreSQL's default). `tx` is a `Transaction<'_, Postgres>` or
    /// a pooled connection inside `BEGIN`.
    ///
    /// The body is an async closure, whose future stable Rust cannot yet prove `Send`; to spawn
    /// the call (a web handler, `tokio::spawn`) use [`begin_in_tx`](Self::begin_in_tx) or
    /// `#[idempotent(tx = ..)]`, which never lend the transaction to a closure.
    ///
    /// ```no_run
    /// use idem_guard::{Guard, PostgresStore};
    ///
    /// #[derive(Debug)]
    /// enum AppError { Guard(idem_guard::Error), Db(sqlx::Error) }
    /// impl From<idem_guard::Error> for AppError { fn from(e: idem_guard::Error) -> Self { AppError::Guard(e) } }
    /// impl From<sqlx::Error> for AppError { fn from(e: sqlx::Error) -> Self { AppError::Db(e) } }
    ///
    /// async fn credit(guard: &Guard<PostgresStore>, event_id: &str, account: i64, cents: i64) -> Result<i64, AppError> {
    ///     let mut tx = guard.store().pool().begin().await?;
    ///     let balance = guard
    ///         .run_in_tx(&mut tx, event_id, &(account, cents), async |tx| {
    ///             let row: (i64,) = sqlx::query_as("UPDATE accounts SET balance = balance + $2 WHERE id = $1 RETURNING balance")
    ///                 .bind(account)
    ///                 .bind(cents)
    ///                 .fetch_one(&mut **tx)
    ///                 .await?;
    ///             Ok::<_, AppError>(row.0)
    ///         })
    ///         .await?;
    ///     // One commit: the balance update and the key's completion.
    ///     tx.commit().await?;
    ///     Ok(balance)
    /// }
    /// ```
    /// (`no_run` here; `tests/transactional.rs` runs the same against the live server.)
    pub fn run_in_tx<'a, C, K, Pl, T, E, F>(
        &'a self,
        tx: &'a mut C,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<T, E>> + use<'a, P, C, K, Pl, T, E, F>
    where
        C: DerefMut<Target = PgConnection> + Send,
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: AsyncFnOnce(&mut C) -> Result<T, E>,
    {
        let prepared = self.prepare(&key, payload);
        async move {
            self.execute_in_tx(tx, prepared, body)
                .await
                .map(Outcome::into_inner)
        }
    }

    /// Like [`run_in_tx`](Self::run_in_tx), and tells whether the result was replayed.
    pub fn run_outcome_in_tx<'a, C, K, Pl, T, E, F>(
        &'a self,
        tx: &'a mut C,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<Outcome<T>, E>> + use<'a, P, C, K, Pl, T, E, F>
    where
        C: DerefMut<Target = PgConnection> + Send,
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: AsyncFnOnce(&mut C) -> Result<T, E>,
    {
        let prepared = self.prepare(&key, payload);
        self.execute_in_tx(tx, prepared, body)
    }

    /// First half of the two-step form of [`run_in_tx`](Self::run_in_tx): reserves the key
    /// through `tx` and says whether to run ([`TxStart::Run`]) or what to return
    /// ([`TxStart::Done`], a replay or a rejection). After running, pass the result to
    /// [`TxAttempt::finish`] with the same transaction, then commit.
    ///
    /// Unlike `run_in_tx`, whose body is an async closure borrowing the transaction, this form
    /// never lends the transaction to a closure, so its future is `Send` and can be spawned (an
    /// async closure's future cannot be proved `Send` on stable Rust yet). `#[idempotent(tx =
    /// ..)]` expands to it.
    ///
    /// ```no_run
    /// # use idem_guard::{Guard, PostgresStore, TxStart};
    /// # async fn credit(guard: &Guard<PostgresStore>, event_id: &str, cents: i64) -> Result<i64, idem_guard::Error> {
    /// let mut tx = guard.store().pool().begin().await.map_err(idem_guard::Error::store)?;
    /// let attempt = match guard.begin_in_tx(&mut tx, event_id, &cents).await? {
    ///     TxStart::Done(replayed) => return replayed.map(|o| o.into_inner()),
    ///     TxStart::Run(attempt) => attempt,
    /// };
    /// let result = sqlx::query_scalar("UPDATE accounts SET balance = balance + $1 WHERE id = 1 RETURNING balance")
    ///     .bind(cents)
    ///     .fetch_one(&mut *tx)
    ///     .await
    ///     .map_err(idem_guard::Error::store);
    /// let balance = attempt.finish(guard, &mut tx, result).await?;
    /// tx.commit().await.map_err(idem_guard::Error::store)?;
    /// # Ok(balance) }
    /// ```
    pub async fn begin_in_tx<C, K, Pl, T, E>(
        &self,
        tx: &mut C,
        key: K,
        payload: Pl,
    ) -> Result<TxStart<T, E>, E>
    where
        C: DerefMut<Target = PgConnection> + Send,
        K: KeyPart,
        Pl: Payload,
        T: DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
    {
        let prepared = self.prepare(&key, payload);
        let span = self.span_of(&prepared);
        let started = self
            .start_in_tx(tx, prepared)
            .instrument(span.clone())
            .await?;
        Ok(match started {
            // `finish` runs in the same span, so the call's completion is seen with it.
            TxStart::Run(attempt) => TxStart::Run(TxAttempt { span, ..attempt }),
            done => done,
        })
    }

    async fn start_in_tx<C, T, E>(
        &self,
        tx: &mut C,
        prepared: crate::guard::Prepared,
    ) -> Result<TxStart<T, E>, E>
    where
        C: DerefMut<Target = PgConnection> + Send,
        T: DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
    {
        let prefix = self.prefix_name();
        // Switched off, the body runs in the caller's transaction with no record.
        let prepared = prepared.map(|p| p.filter(|_| !self.is_disabled()));
        let Some((key, fingerprint)) = prepared? else {
            self.count_unguarded();
            return Ok(TxStart::Run(TxAttempt {
                record: None,
                span: tracing::Span::current(),
            }));
        };
        let (lease, _) = self.lease_and_retention();
        let owner = OwnerToken::generate();
        let mut waiting = Waiting::new(self.in_flight_policy());
        loop {
            let started = Instant::now();
            let found = reserve_in_tx(tx, &key, fingerprint, &owner, lease).await;
            let took = started.elapsed();
            observe::store_call(prefix, "reserve", took);
            tracing::Span::current().record("store_ms", took.as_secs_f64() * 1000.0);
            let found = found.inspect_err(|_| observe::outcome(prefix, Seen::StoreError))?;
            let seen = seen(&found, fingerprint);
            match self.judge(&key, fingerprint, found) {
                // No lease renewal while the body runs: until the caller commits, the row is
                // locked by this transaction and no other attempt can take it over.
                Step::Run { .. } => {
                    observe::outcome(prefix, seen);
                    return Ok(TxStart::Run(TxAttempt {
                        record: Some((key, fingerprint, owner)),
                        span: tracing::Span::current(),
                    }));
                }
                Step::Done(result) => {
                    observe::outcome(prefix, seen);
                    return Ok(TxStart::Done(result));
                }
                Step::Busy(retry_after) => waiting
                    .pause(&key, retry_after)
                    .await
                    .inspect_err(|_| observe::outcome(prefix, Seen::InFlight))?,
            }
        }
    }

    async fn execute_in_tx<C, T, E, F>(
        &self,
        tx: &mut C,
        prepared: crate::guard::Prepared,
        body: F,
    ) -> Result<Outcome<T>, E>
    where
        C: DerefMut<Target = PgConnection> + Send,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: AsyncFnOnce(&mut C) -> Result<T, E>,
    {
        let span = self.span_of(&prepared);
        async move {
            match self.start_in_tx(tx, prepared).await? {
                TxStart::Done(result) => result,
                TxStart::Run(attempt) => {
                    let result = body(tx).await;
                    attempt.finish(self, tx, result).await.map(Outcome::fresh)
                }
            }
        }
        .instrument(span)
        .await
    }
}

/// What [`Guard::begin_in_tx`] found (and, with the `dynamodb` feature,
/// `Guard::begin_transact`, whose attempt `A` is a `dynamodb::TransactAttempt`).
#[derive(Debug)]
#[must_use = "a reserved key must be finished with its attempt's `finish`"]
pub enum TxStart<T, E, A = TxAttempt> {
    /// Return this without running: a replayed result (or cached error), or a rejection.
    Done(Result<Outcome<T>, E>),
    /// Run the body, then call the attempt's `finish` ([`TxAttempt::finish`] for PostgreSQL:
    /// through the same transaction).
    Run(A),
}

/// A key reserved in the caller's transaction, to be finished in that transaction.
#[derive(Debug)]
#[must_use = "a reserved key must be finished with `TxAttempt::finish`"]
pub struct TxAttempt {
    /// `None` when the key was missing and not required: nothing to finish.
    record: Option<(String, crate::key::Fingerprint, OwnerToken)>,
    /// The call's `idem_guard` span, opened by `begin_in_tx`.
    span: tracing::Span,
}

impl TxAttempt {
    /// Records the body's result in the transaction (completes the key, or releases or caches
    /// it after an error, per the guard's policy) and hands the result back. Commit afterwards.
    pub async fn finish<C, P, T, E>(
        self,
        guard: &Guard<PostgresStore, P>,
        tx: &mut C,
        result: Result<T, E>,
    ) -> Result<T, E>
    where
        C: DerefMut<Target = PgConnection> + Send,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E>,
    {
        let Some((key, fingerprint, owner)) = self.record else {
            return result;
        };
        let prefix = guard.prefix_name();
        async move {
            let (_, retention) = guard.lease_and_retention();
            let conn = &mut **tx;
            // A result over the store's `max_result_len` comes back as an error, its key
            // completed as unreplayable in this transaction: a caller that rolls back on the
            // error undoes both, one that commits keeps duplicates from running again.
            let (record, result) = guard.to_store(&key, result);
            let started = Instant::now();
            let (op, settled) = match record {
                Some(stored) => (
                    "complete",
                    complete_on(conn, &key, fingerprint, &owner, &stored, retention).await,
                ),
                None => ("release", release_on(conn, &key, &owner).await),
            };
            observe::store_call(prefix, op, started.elapsed());
            match (result, settled) {
                (Ok(value), settled) => {
                    settled?;
                    Ok(value)
                }
                (Err(error), settled) => {
                    if let Err(e) = settled {
                        tracing::warn!(key_hash = %crate::observe::key_hash(&key), error = %e, "could not settle the record of a failed body");
                    }
                    Err(error)
                }
            }
        }
        .instrument(self.span)
        .await
    }
}
