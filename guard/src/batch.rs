//! Message batches (SQS, Kinesis): each message under its own key, failures reported by id.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::task::Poll;

use crate::key::{Fingerprint, KeyPart};
use crate::on_error::OnError;
use crate::store::Store;
use crate::{Error, Guard, Outcome};

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
    fn new() -> Self {
        BatchReport {
            failures: Vec::new(),
            succeeded: 0,
            replayed: 0,
        }
    }

    fn record<T>(&mut self, id: String, result: Result<Outcome<T>, E>) {
        match result {
            Ok(outcome) => {
                self.succeeded += 1;
                self.replayed += usize::from(outcome.is_replay());
            }
            Err(error) => self.failures.push((id, error)),
        }
    }

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
        let mut report = BatchReport::new();
        for message in messages {
            let item = describe(&message);
            let prepared = self.prepare_with(&item.key, || item.fingerprint);
            let result = self.execute(prepared, |_| handler(message)).await;
            report.record(item.id, result);
        }
        report
    }

    /// Like [`run_batch`](Self::run_batch), with up to `limit` messages in flight at once (at
    /// least one), for standard queues where order does not matter. Failures are still reported
    /// in batch order. Two messages of one batch with the same key are two deliveries: one
    /// runs, the other is refused as in progress (so it is reported failed, comes back, and
    /// replays), unless the guard waits (`InFlight::Wait`).
    ///
    /// ```
    /// use idem_guard::{batch::BatchItem, Guard, MemoryStore};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let guard = Guard::new(MemoryStore::new()).prefix("thumbnail");
    /// let ids: Vec<u32> = (0..20).collect();
    /// let report = guard
    ///     .run_batch_concurrent(
    ///         ids,
    ///         |id| BatchItem::new(id.to_string(), *id, id),
    ///         |id| async move { Ok::<u32, idem_guard::Error>(id * 2) },
    ///         4,
    ///     )
    ///     .await;
    /// assert_eq!((report.succeeded, report.failures.len()), (20, 0));
    /// # }
    /// ```
    pub async fn run_batch_concurrent<M, K, T, E, D, F, Fut>(
        &self,
        messages: impl IntoIterator<Item = M>,
        describe: D,
        handler: F,
        limit: usize,
    ) -> BatchReport<E>
    where
        K: KeyPart,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        D: Fn(&M) -> BatchItem<K>,
        F: Fn(M) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let limit = limit.max(1);
        let handler = &handler;
        // Every message's run is the same closure's future, so they share one concrete type and
        // are polled in place, without boxing them as trait objects or spawning them.
        let start = |(index, message): (usize, M)| {
            let item = describe(&message);
            let prepared = self.prepare_with(&item.key, || item.fingerprint);
            let id = item.id;
            Box::pin(async move {
                let result = self.execute(prepared, move |_| handler(message)).await;
                (index, id, result)
            })
        };
        let mut pending = messages.into_iter().enumerate();
        let mut running = Vec::with_capacity(limit);
        let mut finished = Vec::new();
        std::future::poll_fn(|cx| loop {
            while running.len() < limit {
                match pending.next() {
                    Some(next) => running.push(start(next)),
                    None => break,
                }
            }
            if running.is_empty() {
                return Poll::Ready(());
            }
            let before = running.len();
            let mut i = 0;
            while i < running.len() {
                match running[i].as_mut().poll(cx) {
                    Poll::Ready(done) => {
                        finished.push(done);
                        drop(running.swap_remove(i));
                    }
                    Poll::Pending => i += 1,
                }
            }
            if running.len() == before {
                return Poll::Pending;
            }
        })
        .await;
        finished.sort_by_key(|(index, _, _)| *index);
        let mut report = BatchReport::new();
        for (_, id, result) in finished {
            report.record(id, result);
        }
        report
    }
}
