//! Message batches (SQS, Kinesis): each message under its own key, failures reported by id.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;

use crate::key::{Fingerprint, KeyPart};
use crate::on_error::OnError;
use crate::store::Store;
use crate::{Error, Guard};

/// How to guard one message of a batch: its id (reported on failure), its key and its payload.
#[derive(Debug)]
pub struct BatchItem<K> {
    id: String,
    key: K,
    fingerprint: Result<Fingerprint, Error>,
}

impl<K: KeyPart> BatchItem<K> {
    /// Describes a message. Take the key and the payload from the message *body* (event id,
    /// order), not from delivery metadata: an SQS receipt handle or receive count changes on every
    /// delivery and would turn a duplicate into a payload mismatch.
    pub fn new<P: Serialize + ?Sized>(id: impl Into<String>, key: K, payload: &P) -> Self {
        BatchItem {
            id: id.into(),
            key,
            fingerprint: Fingerprint::of(payload),
        }
    }
}

/// What happened to a batch.
#[derive(Debug)]
pub struct BatchReport<E> {
    /// Messages whose handler failed or whose key was refused, with the error, in batch order.
    pub failures: Vec<(String, E)>,
    /// Messages that succeeded (ran now or replayed).
    pub succeeded: usize,
    /// Of those, how many were replays of an earlier delivery.
    pub replayed: usize,
}

impl<E> BatchReport<E> {
    /// Ids to return as `batchItemFailures` (SQS partial batch response): only these are
    /// redelivered. A duplicate still in flight elsewhere is reported too, so it comes back later
    /// and then replays.
    pub fn failed_ids(&self) -> Vec<&str> {
        self.failures.iter().map(|(id, _)| id.as_str()).collect()
    }
}

impl<S: Store, P> Guard<S, P> {
    /// Runs `handler` on each message under that message's key, one after another (so that a
    /// FIFO queue's order holds), and reports the ids that failed.
    ///
    /// ```
    /// use idem_guard::{batch::BatchItem, Guard, MemoryStore};
    ///
    /// #[derive(serde::Serialize)]
    /// struct Msg { message_id: String, order_id: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let guard = Guard::new(MemoryStore::new()).prefix("fulfil");
    /// let batch = vec![
    ///     Msg { message_id: "m1".into(), order_id: 1 },
    ///     Msg { message_id: "m2".into(), order_id: 2 },
    /// ];
    /// let report = guard
    ///     .run_batch(
    ///         batch,
    ///         |m| BatchItem::new(m.message_id.clone(), m.order_id, &m.order_id),
    ///         |m| async move {
    ///             if m.order_id == 2 { Err(idem_guard::Error::MissingKey) } else { Ok(()) }
    ///         },
    ///     )
    ///     .await;
    /// assert_eq!(report.failed_ids(), ["m2"]);
    /// # }
    /// ```
    pub async fn run_batch<M, K, T, E, D, F, Fut>(
        &self,
        messages: impl IntoIterator<Item = M>,
        describe: D,
        mut handler: F,
    ) -> BatchReport<E>
    where
        K: KeyPart,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        D: Fn(&M) -> BatchItem<K>,
        F: FnMut(M) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut report = BatchReport {
            failures: Vec::new(),
            succeeded: 0,
            replayed: 0,
        };
        for message in messages {
            let item = describe(&message);
            let prepared = self.prepare_with(&item.key, || item.fingerprint);
            match self.execute(prepared, |_| handler(message)).await {
                Ok(outcome) => {
                    report.succeeded += 1;
                    report.replayed += usize::from(outcome.is_replay());
                }
                Err(error) => report.failures.push((item.id, error)),
            }
        }
        report
    }
}
