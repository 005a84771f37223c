//! Completion inside the caller's `TransactWriteItems`: the business writes and the "done" mark
//! are applied together or not at all (the DynamoDB counterpart of `run_in_tx`).
//!
//! The reservation is an ordinary conditional `PutItem`, visible to every duplicate at once. The
//! body returns its value and the writes it wants; the guard appends one `Update` of the record
//! (conditional on its owner token and the record still running) and sends them as one
//! transaction with the owner token as `ClientRequestToken`, so DynamoDB applies a retried
//! request at most once. Consequences:
//!
//! - a crash before the transaction leaves only the running record: after its lease a
//!   redelivery takes it over and runs on a clean slate;
//! - a transaction that is cancelled (a business condition failed, a conflict) applied nothing:
//!   the record is released and the error reported, so a redelivery runs again;
//! - an attempt whose lease ended and was taken over cannot apply its writes at all: the
//!   record's condition cancels the whole transaction ([`Error::NotOwner`]), so the business
//!   writes happen once even then.

use std::future::Future;

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    CancellationReason, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::record::{
    completed_values, s, Expiry, Item, OURS_RUNNING_OR_GONE, RUNNING, SET_COMPLETED,
};
use super::{DynamoDbStore, StoreFailure};
use crate::guard::{retry_store, Prepared, Reserved};
use crate::key::{Fingerprint, KeyPart, Payload};
use crate::on_error::OnError;
use crate::store::{OwnerToken, StoredResult};
use crate::{Attempt, Error, Guard, Outcome, Store, TxStart};

/// What the body hands back in transactional mode: its value and the writes to apply with the
/// completion (at most 99: DynamoDB takes 100 actions per transaction, one is the record's).
pub type Transact<T> = (T, Vec<TransactWriteItem>);

impl<P> Guard<DynamoDbStore, P> {
    /// Runs `body` at most once per key and applies the writes it returns in one
    /// `TransactWriteItems` with the key's completion: both happen, or neither.
    ///
    /// The body gets its [`Attempt`] and returns `Ok((value, writes))`; the writes must not touch
    /// the guard's own record. A body error is handled by the guard's policy (released by
    /// default; its writes are dropped). The lease is renewed while the body runs.
    ///
    /// ```no_run
    /// use idem_guard::dynamodb::DynamoDbStore;
    /// use idem_guard::aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
    /// use idem_guard::{Error, Guard};
    ///
    /// async fn credit(guard: &Guard<DynamoDbStore>, event_id: &str, cents: u64) -> Result<u64, Error> {
    ///     guard
    ///         .run_transact(event_id, &cents, |_attempt| async move {
    ///             let credit = Update::builder()
    ///                 .table_name("accounts")
    ///                 .key("id", AttributeValue::S("acct-1".into()))
    ///                 .update_expression("ADD balance :c")
    ///                 .expression_attribute_values(":c", AttributeValue::N(cents.to_string()))
    ///                 .build()
    ///                 .map_err(Error::store)?;
    ///             // One transaction: the credit and the key's completion.
    ///             Ok((cents, vec![TransactWriteItem::builder().update(credit).build()]))
    ///         })
    ///         .await
    /// }
    /// ```
    /// (`no_run` here; `tests/dynamodb_transact.rs` runs the same against a local server.)
    pub fn run_transact<K, Pl, T, E, F, Fut>(
        &self,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<T, E>> + use<'_, P, K, Pl, T, E, F, Fut>
    where
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<Transact<T>, E>>,
    {
        let prepared = self.prepare(&key, payload);
        async move {
            self.execute_transact(prepared, body)
                .await
                .map(Outcome::into_inner)
        }
    }

    /// Like [`run_transact`](Self::run_transact), and tells whether the result was replayed.
    pub fn run_outcome_transact<K, Pl, T, E, F, Fut>(
        &self,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<Outcome<T>, E>> + use<'_, P, K, Pl, T, E, F, Fut>
    where
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<Transact<T>, E>>,
    {
        let prepared = self.prepare(&key, payload);
        self.execute_transact(prepared, body)
    }

    /// First half of the two-step form of [`run_transact`](Self::run_transact): reserves the
    /// key and says whether to run ([`TxStart::Run`]) or what to return ([`TxStart::Done`]).
    /// After running, pass the value and the writes to [`TransactAttempt::finish`].
    ///
    /// The lease is not renewed between the two steps: make it longer than the body. If it
    /// ends and another delivery takes the key over, `finish` applies nothing and returns
    /// [`Error::NotOwner`].
    pub async fn begin_transact<K, Pl, T, E>(
        &self,
        key: K,
        payload: Pl,
    ) -> Result<TxStart<T, E, TransactAttempt>, E>
    where
        K: KeyPart,
        Pl: Payload,
        T: DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
    {
        let prepared = self.prepare(&key, payload);
        let span = self.span_of(&prepared);
        let Some((key, fingerprint)) = prepared? else {
            span.in_scope(|| self.count_unguarded());
            return Ok(TxStart::Run(TransactAttempt {
                record: None,
                attempt: Attempt::new(None, false),
                span,
            }));
        };
        if self.is_disabled() {
            // Switched off: the writes are applied alone, with no record.
            span.in_scope(|| self.count_unguarded());
            return Ok(TxStart::Run(TransactAttempt {
                record: None,
                attempt: Attempt::new(Some(key), false),
                span,
            }));
        }
        let owner = OwnerToken::generate();
        let reserved = self
            .reserve_key(&key, fingerprint, &owner)
            .instrument(span.clone())
            .await;
        match reserved {
            Reserved::Run {
                taken_over,
                held_until,
            } => Ok(TxStart::Run(TransactAttempt {
                attempt: Attempt::new(Some(key.clone()), taken_over),
                record: Some((key, fingerprint, owner, held_until)),
                span,
            })),
            Reserved::Done(result) => Ok(TxStart::Done(result)),
        }
    }

    async fn execute_transact<T, E, F, Fut>(
        &self,
        prepared: Prepared,
        body: F,
    ) -> Result<Outcome<T>, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<Transact<T>, E>>,
    {
        let span = self.span_of(&prepared);
        self.execute_transact_in_span(prepared, body)
            .instrument(span)
            .await
    }

    async fn execute_transact_in_span<T, E, F, Fut>(
        &self,
        prepared: Prepared,
        body: F,
    ) -> Result<Outcome<T>, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<Transact<T>, E>>,
    {
        let Some((key, fingerprint)) = prepared? else {
            self.count_unguarded();
            let (value, writes) = body(Attempt::new(None, false)).await?;
            self.store().apply_unguarded(writes).await?;
            return Ok(Outcome::fresh(value));
        };
        if self.is_disabled() {
            self.count_unguarded();
            let (value, writes) = body(Attempt::new(Some(key), false)).await?;
            self.store().apply_unguarded(writes).await?;
            return Ok(Outcome::fresh(value));
        }
        let owner = OwnerToken::generate();
        let (taken_over, mut held_until) = match self.reserve_key(&key, fingerprint, &owner).await {
            Reserved::Run {
                taken_over,
                held_until,
            } => (taken_over, held_until),
            Reserved::Done(result) => return result,
        };
        let attempt = Attempt::new(Some(key.clone()), taken_over);
        let result = self
            .run_renewing(&key, fingerprint, &owner, &mut held_until, body(attempt))
            .await;
        self.commit(&key, fingerprint, &owner, held_until, result)
            .await
            .map(Outcome::fresh)
    }

    /// Applies the body's writes with the completion, or settles a failed body by the policy.
    async fn commit<T, E>(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        held_until: Instant,
        result: Result<Transact<T>, E>,
    ) -> Result<T, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E>,
    {
        let (value, writes) = match result {
            Ok(done) => done,
            Err(error) => {
                return self
                    .settle(key, fingerprint, owner, held_until, Err::<T, E>(error))
                    .await
                    .map(Outcome::into_inner)
            }
        };
        let (_, retention) = self.lease_and_retention();
        let store = self.store();
        let result = match self.encode_within(key, &value) {
            Ok(result) => result,
            Err(too_large) => {
                // Found before anything is applied: the writes are dropped and the key freed,
                // so the body's effect never happened.
                tracing::error!(key_hash = %crate::observe::key_hash(key), error = %too_large, "transaction not applied: its result is over the store's max_result_len");
                if let Err(e) = retry_store(|| store.release(key, owner)).await {
                    tracing::warn!(key_hash = %crate::observe::key_hash(key), error = %e, "could not release the record of a result too large to store");
                }
                return Err(too_large.into());
            }
        };
        let completion = Completion {
            key,
            fingerprint,
            owner,
            result,
            expiry: Expiry::retention(retention),
        };
        // The transaction is retried as one request (same `ClientRequestToken`) while the record
        // is held, like any completion.
        let apply = || store.apply_with_completion(&completion, writes.clone());
        match self
            .retry_while_held(
                key,
                fingerprint,
                owner,
                held_until,
                ("complete", "apply the transaction"),
                apply,
            )
            .await?
        {
            Applied::Committed => Ok(value),
            Applied::Cancelled(why) => {
                // Nothing was applied: free the key so that a redelivery runs again.
                if let Err(e) = retry_store(|| store.release(key, owner)).await {
                    tracing::warn!(key_hash = %crate::observe::key_hash(key), error = %e, "could not release the record of a cancelled transaction");
                }
                Err(why.into())
            }
        }
    }
}

/// A key reserved by [`Guard::begin_transact`], to be finished with the body's writes.
#[derive(Debug)]
#[must_use = "a reserved key must be finished with `TransactAttempt::finish`"]
pub struct TransactAttempt {
    /// `None` when the key was missing and not required: the writes go out unguarded.
    record: Option<(String, Fingerprint, OwnerToken, Instant)>,
    attempt: Attempt,
    /// The call's `idem_guard` span, opened by `begin_transact`.
    span: tracing::Span,
}

impl TransactAttempt {
    /// The attempt's key, downstream token and whether it took over an abandoned attempt.
    pub fn attempt(&self) -> &Attempt {
        &self.attempt
    }

    /// Applies `writes` together with the key's completion in one `TransactWriteItems` and hands
    /// the value back; or, when the body failed, settles the record by the guard's policy and
    /// hands the error back (the writes are dropped).
    pub async fn finish<P, T, E>(
        self,
        guard: &Guard<DynamoDbStore, P>,
        result: Result<Transact<T>, E>,
    ) -> Result<T, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E>,
    {
        let Some((key, fingerprint, owner, held_until)) = self.record else {
            let (value, writes) = result?;
            guard.store().apply_unguarded(writes).await?;
            return Ok(value);
        };
        guard
            .commit(&key, fingerprint, &owner, held_until, result)
            .instrument(self.span)
            .await
    }
}

/// The record's completion as one more item of the transaction.
struct Completion<'a> {
    key: &'a str,
    fingerprint: Fingerprint,
    owner: &'a OwnerToken,
    result: StoredResult,
    expiry: Expiry,
}

/// What a transaction that got an answer did.
enum Applied {
    /// Everything was applied (now, or by an earlier try of the same request).
    Committed,
    /// Nothing was applied, for this reason (a business condition, a conflict, an invalid
    /// request).
    Cancelled(Error),
}

impl DynamoDbStore {
    fn completion_item(&self, c: &Completion<'_>) -> Result<TransactWriteItem, Error> {
        let mut values = completed_values(c.fingerprint, c.owner, &c.result, &c.expiry);
        values.insert(":running".to_owned(), s(RUNNING));
        let update = Update::builder()
            .table_name(self.table())
            .set_key(Some(self.attributes.key(c.key)))
            .update_expression(SET_COMPLETED)
            .condition_expression(OURS_RUNNING_OR_GONE)
            .set_expression_attribute_names(Some(self.attributes.completed_names()))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(Error::store)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Sends `writes` and the completion as one transaction. A store error (no answer, a
    /// throttle, a server error) leaves it unknown whether it was applied: the caller retries
    /// the same request, which DynamoDB applies at most once (same `ClientRequestToken`, and
    /// the completion's condition refuses a second application).
    async fn apply_with_completion(
        &self,
        completion: &Completion<'_>,
        mut writes: Vec<TransactWriteItem>,
    ) -> Result<Applied, Error> {
        let key = completion.key;
        writes.push(self.completion_item(completion)?);
        let record_at = writes.len() - 1;
        let action = "TransactWriteItems (complete)";
        let sent = self
            .bounded(action, key, async {
                Ok(self
                    .client
                    .transact_write_items()
                    .set_transact_items(Some(writes))
                    .client_request_token(completion.owner.as_str())
                    .send()
                    .await)
            })
            .await?;
        let e = match sent {
            Ok(_) => return Ok(Applied::Committed),
            Err(e) => e,
        };
        let Some(service) = e.as_service_error() else {
            return Err(self.failure(action, Some(key), e));
        };
        if let TransactWriteItemsError::TransactionCanceledException(cancelled) = service {
            let reasons = cancelled.cancellation_reasons();
            if let Some(record) = reasons.get(record_at).filter(|r| failed_condition(r)) {
                // Our record refused: completed by an earlier try of this very request (whose
                // answer was lost), or taken over by another owner.
                let item = self.refusing_item(key, record.item.clone()).await?;
                let ours_done = item.is_some_and(|item| {
                    let item = Item::new(&self.attributes, &item);
                    item.is_owned_by(completion.owner) && !item.is_running()
                });
                return if ours_done {
                    Ok(Applied::Committed)
                } else {
                    Err(Error::NotOwner {
                        key: key.to_owned(),
                    })
                };
            }
            let listed = list_reasons(reasons);
            return Ok(Applied::Cancelled(self.cancelled(key, &listed, e)));
        }
        if is_definite_refusal(service) {
            return Ok(Applied::Cancelled(self.failure(action, Some(key), e)));
        }
        Err(self.failure(action, Some(key), e))
    }

    fn cancelled<R>(
        &self,
        key: &str,
        reasons: &str,
        e: SdkError<TransactWriteItemsError, R>,
    ) -> Error
    where
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        Error::Store(Box::new(StoreFailure {
            context: format!(
                "DynamoDB TransactWriteItems of #{} on table `{}` was cancelled, nothing was applied: {reasons}; {}",
                crate::observe::key_hash(key),
                self.table,
                DisplayErrorContext(&e)
            ),
            source: Some(Box::new(e)),
        }))
    }

    /// The writes of a body that ran without a key (`required(false)`): one transaction, no
    /// record.
    async fn apply_unguarded(&self, writes: Vec<TransactWriteItem>) -> Result<(), Error> {
        if writes.is_empty() {
            return Ok(());
        }
        let action = "TransactWriteItems (unguarded)";
        self.bounded(action, "-", async {
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| self.failure(action, None, e))
        })
        .await
    }
}

/// The items that cancelled a transaction, by position: `item 0: ConditionalCheckFailed (..)`.
fn list_reasons(reasons: &[CancellationReason]) -> String {
    let listed: Vec<String> = reasons
        .iter()
        .enumerate()
        .filter(|(_, r)| r.code().is_some_and(|c| c != "None"))
        .map(|(i, r)| {
            let message = r.message().map(|m| format!(" ({m})")).unwrap_or_default();
            format!("item {i}: {}{message}", r.code().unwrap_or_default())
        })
        .collect();
    listed.join(", ")
}

fn failed_condition(reason: &CancellationReason) -> bool {
    reason.code() == Some("ConditionalCheckFailed")
}

/// Errors after which the transaction was certainly not applied, so a retry would not help:
/// DynamoDB refused the request as it is.
fn is_definite_refusal(e: &TransactWriteItemsError) -> bool {
    matches!(
        e,
        TransactWriteItemsError::ResourceNotFoundException(_)
            | TransactWriteItemsError::IdempotentParameterMismatchException(_)
    ) || e.code() == Some("ValidationException")
}
