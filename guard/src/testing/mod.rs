//! A test kit that proves *your* handler exactly-once: it delivers your message the ways queues
//! and clients do (many copies at once, a store that drops out between the effect and the
//! completion, a worker killed mid-run and the message redelivered after its lease) and counts
//! your handler's effects with your own counter.
//!
//! Turning the guard off in tests ([`Guard::disabled`](crate::Guard::disabled)) shows that a
//! handler works once; this shows that it works *once* when delivered many times. The faults are
//! made by a [`TestStore`] wrapped around your store, so the kit runs against every store
//! (memory, Redis, PostgreSQL, DynamoDB, your own).
//!
//! ```
//! use idem_guard::testing::{Delivery, Kill, Kit};
//! use idem_guard::{idempotent, MemoryStore, Store};
//! use std::collections::HashMap;
//! use std::sync::{Arc, Mutex};
//!
//! /// The service under test, generic over its store as services usually are.
//! struct Payments<S> {
//!     store: S,
//!     // The effect, counted per refund id (in a real test: a row in your database).
//!     refunds: Mutex<HashMap<String, u64>>,
//! }
//!
//! impl<S: Store> Payments<S> {
//!     #[idempotent(key = refund_id, store = self.store, payload = cents)]
//!     async fn refund(&self, refund_id: String, cents: u64) -> Result<String, idem_guard::Error> {
//!         *self.refunds.lock().unwrap().entry(refund_id.clone()).or_default() += 1;
//!         Ok(format!("refunded {cents} for {refund_id}"))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)] async fn main() {
//! let kit = Kit::new();
//! // Your store (a RedisStore, a PostgresStore...), wrapped by the kit.
//! let payments = Arc::new(Payments { store: kit.store(MemoryStore::new()), refunds: Mutex::default() });
//! let handler = {
//!     let payments = payments.clone();
//!     move |delivery: Delivery| {
//!         let payments = payments.clone();
//!         async move { payments.refund(delivery.message_id, 500).await }
//!     }
//! };
//! let effects = |id: String| {
//!     let n = payments.refunds.lock().unwrap().get(&id).copied().unwrap_or(0);
//!     async move { n }
//! };
//! let check = kit.check(handler, effects);
//! check.duplicates(16).await.assert_exactly_once();
//! check.store_cut().await.assert_exactly_once();
//! check.kill(Kill::AtReservation).await.assert_exactly_once();
//! // The crash window: a worker killed after the effect, before the completion. Only a
//! // transactional handler, or one passing `attempt.token()` downstream, holds here.
//! let crash = check.kill(Kill::BeforeCompletion).await;
//! assert_eq!(crash.effects(), vec![2]);
//! # }
//! ```
//!
//! Each scenario delivers messages of its own (a fresh `message_id` per message), reads your
//! effect count of each before and after, and returns a [`Report`]: the effects each message
//! had, what every delivery answered. A delivery refused (an error) is delivered again, as a
//! queue would, until it is answered or [`Kit::patience`] runs out.
//!
//! Scenarios:
//!
//! - [`Check::duplicates`] / [`Check::duplicates_of`]: every message delivered `copies` times
//!   at once (the copies alternate between the stores you wrapped, so two clients race);
//! - [`Check::store_cut`]: the store goes down as the first delivery writes its completion,
//!   after its effect, and comes back a few tries later; a duplicate is delivered during the
//!   outage and more after it;
//! - [`Check::kill`]: the first delivery is killed, as a process is, at the point [`Kill`]
//!   says (a panic right after its reservation, an abort mid-body, a panic before its
//!   completion), and the message delivered again once its lease (cut to [`Kit::lease`]) ended.
//!
//! The kill scenarios panic inside the delivery's task on purpose: the panic message
//! (`idem_guard::testing: the delivery was killed ...`) shows in the test's output.

mod store;

use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{sleep, sleep_until, Instant};

pub use self::store::TestStore;
use self::store::{Fault, Faults, KillPoint, Plan};
use crate::Store;

/// The test kit: wraps your stores ([`store`](Self::store)), then checks a handler
/// ([`check`](Self::check)). See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Kit {
    faults: Arc<Faults>,
    run: Arc<str>,
    scenarios: Arc<AtomicU64>,
    lease: Duration,
    patience: Duration,
    cut_tries: u32,
}

impl Default for Kit {
    fn default() -> Self {
        Kit::new()
    }
}

impl Kit {
    /// A kit whose message ids no other run uses (Redis keys outlive a test): the lease of a
    /// killed attempt 1 s, patience 60 s, outages of 4 failed completions.
    pub fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Kit {
            faults: Arc::default(),
            run: format!("kit-{}-{nanos}", std::process::id()).into(),
            scenarios: Arc::default(),
            lease: Duration::from_secs(1),
            patience: Duration::from_secs(60),
            cut_tries: 4,
        }
    }

    /// The lease the store grants an attempt the kit kills (whatever the guard asks), so that
    /// its redelivery comes after a second, not after the guard's minute. Keep it longer than
    /// a store round trip.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long a refused delivery keeps being delivered again before the scenario reports it
    /// unanswered.
    pub fn patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// How many completions fail in [`Check::store_cut`]'s outage (the last one written, its
    /// reply lost). The guard retries a completion with pauses of 50 ms doubling up to 1 s.
    pub fn cut_tries(mut self, tries: u32) -> Self {
        self.cut_tries = tries.max(1);
        self
    }

    /// Wraps a store for the handler under test. Wrap each client you build (two connections,
    /// two pools): they share the kit's faults.
    pub fn store<S: Store>(&self, inner: S) -> TestStore<S> {
        TestStore::new(inner, self.faults.clone())
    }

    /// The scenarios for `handler`, which delivers one message (built from the
    /// [`Delivery`]'s `message_id`) through the stores this kit wrapped, and `effects`, which
    /// counts the effects of one message id (from your own counter: a row, a mock provider's
    /// calls). A counter of all messages works too: scenarios read it before and after, one
    /// scenario at a time.
    pub fn check<H, C>(&self, handler: H, effects: C) -> Check<H, C> {
        Check {
            kit: self.clone(),
            handler,
            effects,
        }
    }

    /// A message id for scenario `name`, unique in this run and never inside another id.
    fn message_ids(&self, name: &str, messages: usize) -> Vec<String> {
        let n = self.scenarios.fetch_add(1, Ordering::Relaxed);
        (0..messages)
            .map(|i| format!("{}-s{n}-{name}-m{i}.", self.run))
            .collect()
    }
}

/// One delivery of a message to the handler under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The message's id: build the message (and so its idempotency key) from it. The same on
    /// every copy of a message, different for every message.
    pub message_id: String,
    /// Which copy of the message this is (0, 1, ...): pick a client by it
    /// (`clients[delivery.copy % 2]`) to race two.
    pub copy: usize,
}

/// Where [`Check::kill`] kills the first delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kill {
    /// Right after its reservation was written, before the body starts (the store call
    /// panics). The redelivery takes the key over after the lease: one effect.
    AtReservation,
    /// Aborted (its task cancelled) this long after its reservation, wherever the body is
    /// then; its completion is held back so that the abort comes first. One effect if the body
    /// had not made it yet; otherwise as [`BeforeCompletion`](Self::BeforeCompletion).
    After(Duration),
    /// After the body's effect, as the completion is written (the store call panics): the
    /// crash window that no store closes. The redelivery after the lease runs the body again,
    /// so only a handler whose effect commits with the completion (`tx = ..`, `run_in_tx`,
    /// `run_transact`) or is deduped downstream by [`Attempt::token`](crate::Attempt::token)
    /// has one effect.
    BeforeCompletion,
}

/// A scenario's result: each message's effects and each delivery's answer.
#[derive(Debug, Clone)]
pub struct Report {
    /// The scenario, as the kit names it in messages.
    pub scenario: String,
    /// Per message: its id, how many effects your counter saw, and the final answer of each
    /// copy (`Ok` with the value's `Debug`, or `Err` with the last error's).
    pub messages: Vec<MessageReport>,
    /// Deliveries refused (errors) and delivered again, over all copies.
    pub redeliveries: usize,
}

/// One message of a [`Report`].
#[derive(Debug, Clone)]
pub struct MessageReport {
    /// The message id.
    pub message_id: String,
    /// How many effects your counter saw for it during the scenario.
    pub effects: u64,
    /// The final answer of each copy that was answered or gave up (`None` for a copy the kit
    /// killed).
    pub answers: Vec<Option<Result<String, String>>>,
}

impl Report {
    /// The effect counts, message by message.
    pub fn effects(&self) -> Vec<u64> {
        self.messages.iter().map(|m| m.effects).collect()
    }

    /// What is wrong, message by message: an effect count other than one, a copy left
    /// unanswered, copies answered differently.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for m in &self.messages {
            if m.effects != 1 {
                failures.push(format!("{}: {} effects", m.message_id, m.effects));
            }
            let answered: Vec<&String> = m.answers.iter().flatten().flatten().collect();
            for answer in m.answers.iter().flatten() {
                if let Err(e) = answer {
                    failures.push(format!("{}: a copy was never answered: {e}", m.message_id));
                }
            }
            if let Some(first) = answered.first() {
                if let Some(other) = answered.iter().find(|a| *a != first) {
                    failures.push(format!(
                        "{}: copies answered differently: {first} and {other}",
                        m.message_id
                    ));
                }
            }
        }
        failures
    }

    /// Whether every message had exactly one effect and every copy the same answer.
    pub fn is_exactly_once(&self) -> bool {
        self.failures().is_empty()
    }

    /// Panics with what went wrong unless [`is_exactly_once`](Self::is_exactly_once).
    #[track_caller]
    pub fn assert_exactly_once(&self) {
        let failures = self.failures();
        if !failures.is_empty() {
            let shown: Vec<&String> = failures.iter().take(10).collect();
            panic!(
                "{}: not exactly once ({} problems over {} messages, the first {}): {shown:#?}",
                self.scenario,
                failures.len(),
                self.messages.len(),
                shown.len()
            );
        }
    }
}

/// The scenarios for one handler; made by [`Kit::check`].
#[derive(Debug, Clone)]
pub struct Check<H, C> {
    kit: Kit,
    handler: H,
    effects: C,
}

/// How a copy ended.
type Answer = Option<Result<String, String>>;

impl<H, Fut, T, E, C, CF> Check<H, C>
where
    H: Fn(Delivery) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Debug + Send + 'static,
    E: Debug + Send + 'static,
    C: Fn(String) -> CF,
    CF: Future<Output = u64>,
{
    /// One message delivered `copies` times at once.
    pub async fn duplicates(&self, copies: usize) -> Report {
        self.duplicates_of(1, copies, copies).await
    }

    /// `messages` messages, each delivered `copies` times at once, at most `in_flight`
    /// deliveries running (copies of one message are started together, so they overlap).
    pub async fn duplicates_of(&self, messages: usize, copies: usize, in_flight: usize) -> Report {
        let ids = self.kit.message_ids("duplicates", messages);
        let before = self.count(&ids).await;
        let permits = Arc::new(tokio::sync::Semaphore::new(in_flight.max(1)));
        let redeliveries = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::with_capacity(messages * copies);
        for id in &ids {
            for copy in 0..copies {
                let delivery = Delivery {
                    message_id: id.clone(),
                    copy,
                };
                let (permits, redeliveries) = (permits.clone(), redeliveries.clone());
                let (handler, patience) = (self.handler.clone(), self.kit.patience);
                tasks.push(tokio::spawn(async move {
                    let _permit = permits.acquire_owned().await;
                    until_answered(&handler, delivery, patience, &redeliveries).await
                }));
            }
        }
        let mut answers = Vec::with_capacity(tasks.len());
        for task in tasks {
            answers.push(joined(task.await));
        }
        let answers: Vec<Vec<Answer>> = answers.chunks(copies.max(1)).map(<[_]>::to_vec).collect();
        self.report(
            format!("duplicates ({messages} x {copies} at once)"),
            ids,
            before,
            answers,
            &redeliveries,
        )
        .await
    }

    /// The store goes down when the first delivery writes its completion (its effect made),
    /// for [`Kit::cut_tries`] failed completions, the last one written with its reply lost.
    /// One copy is delivered during the outage, two after the first delivery's answer.
    pub async fn store_cut(&self) -> Report {
        let ids = self.kit.message_ids("store-cut", 1);
        let id = ids[0].clone();
        let before = self.count(&ids).await;
        let plan = Plan::new(
            id.clone(),
            Fault::Cut {
                tries: self.kit.cut_tries,
            },
        );
        self.kit.faults.arm(plan.clone());
        let redeliveries = Arc::new(AtomicU64::new(0));
        let first = self.spawn_until_answered(&id, 0, &redeliveries);
        let deadline = Instant::now() + self.kit.patience;
        // Once the store is down (or the first delivery ended without writing a completion).
        while plan.state().failed.is_none() && !first.is_finished() && Instant::now() < deadline {
            sleep(Duration::from_millis(2)).await;
        }
        // During the outage: refused (the store is down) or, once it is back, answered.
        let during = self.spawn_once(&id, 1);
        let mut answers = vec![joined(first.await), joined(during.await)];
        for copy in 2..4 {
            answers.push(joined(
                self.spawn_until_answered(&id, copy, &redeliveries).await,
            ));
        }
        self.kit.faults.disarm(&plan);
        // The copy sent during the outage is expected to be refused; that is not an answer.
        if matches!(answers[1], Some(Err(_))) {
            answers[1] = None;
            redeliveries.fetch_add(1, Ordering::Relaxed);
        }
        let name = format!(
            "store cut after the effect ({} failed completions)",
            self.kit.cut_tries
        );
        self.report(name, ids, before, vec![answers], &redeliveries)
            .await
    }

    /// The first delivery is killed at `kill`; once its lease (cut to [`Kit::lease`]) ended,
    /// the message is delivered again, twice at once.
    pub async fn kill(&self, kill: Kill) -> Report {
        let (name, at) = match kill {
            Kill::AtReservation => ("kill-at-reservation", KillPoint::Reservation),
            Kill::After(_) => ("kill-mid-body", KillPoint::Abort),
            Kill::BeforeCompletion => ("kill-before-completion", KillPoint::Completion),
        };
        let ids = self.kit.message_ids(name, 1);
        let id = ids[0].clone();
        let before = self.count(&ids).await;
        let plan = Plan::new(
            id.clone(),
            Fault::Kill {
                at,
                lease: self.kit.lease,
            },
        );
        self.kit.faults.arm(plan.clone());
        let redeliveries = Arc::new(AtomicU64::new(0));
        let victim = self.spawn_once(&id, 0);
        if let Kill::After(after) = kill {
            let deadline = Instant::now() + self.kit.patience;
            while plan.state().victim.is_none()
                && !victim.is_finished()
                && Instant::now() < deadline
            {
                sleep(Duration::from_millis(1)).await;
            }
            sleep(after).await;
            victim.abort();
        }
        let killed = victim.await;
        let killed_at = Instant::now();
        // The victim's lease was cut to `kit.lease` at its last write, which is before now.
        sleep_until(killed_at + self.kit.lease + Duration::from_millis(100)).await;
        let again: Vec<_> = (1..3)
            .map(|copy| self.spawn_until_answered(&id, copy, &redeliveries))
            .collect();
        // The killed copy: no answer, unless it was never granted the key (then its answer).
        let mut answers = vec![match killed {
            Ok(answer) if plan.state().victim.is_none() => answer,
            _ => None,
        }];
        for task in again {
            answers.push(joined(task.await));
        }
        self.kit.faults.disarm(&plan);
        let name = match kill {
            Kill::AtReservation => "killed right after its reservation".to_owned(),
            Kill::After(d) => format!("aborted {} ms into its body", d.as_millis()),
            Kill::BeforeCompletion => "killed after its effect, before its completion".to_owned(),
        };
        self.report(name, ids, before, vec![answers], &redeliveries)
            .await
    }

    fn spawn_until_answered(
        &self,
        id: &str,
        copy: usize,
        redeliveries: &Arc<AtomicU64>,
    ) -> tokio::task::JoinHandle<Answer> {
        let delivery = Delivery {
            message_id: id.to_owned(),
            copy,
        };
        let (handler, patience) = (self.handler.clone(), self.kit.patience);
        let redeliveries = redeliveries.clone();
        tokio::spawn(
            async move { until_answered(&handler, delivery, patience, &redeliveries).await },
        )
    }

    fn spawn_once(&self, id: &str, copy: usize) -> tokio::task::JoinHandle<Answer> {
        let delivery = Delivery {
            message_id: id.to_owned(),
            copy,
        };
        let handler = self.handler.clone();
        tokio::spawn(async move { Some(answer(handler(delivery).await)) })
    }

    async fn count(&self, ids: &[String]) -> Vec<u64> {
        let mut counts = Vec::with_capacity(ids.len());
        for id in ids {
            counts.push((self.effects)(id.clone()).await);
        }
        counts
    }

    async fn report(
        &self,
        scenario: String,
        ids: Vec<String>,
        before: Vec<u64>,
        answers: Vec<Vec<Answer>>,
        redeliveries: &AtomicU64,
    ) -> Report {
        let after = self.count(&ids).await;
        let messages = ids
            .into_iter()
            .zip(before.into_iter().zip(after))
            .zip(answers)
            .map(|((message_id, (before, after)), answers)| MessageReport {
                message_id,
                effects: after.saturating_sub(before),
                answers,
            })
            .collect();
        Report {
            scenario,
            messages,
            redeliveries: redeliveries.load(Ordering::Relaxed) as usize,
        }
    }
}

/// Delivers until the handler answers `Ok`, pausing between tries as a queue's redelivery
/// would, or until `patience` runs out (then the last error).
async fn until_answered<H, Fut, T, E>(
    handler: &H,
    delivery: Delivery,
    patience: Duration,
    redeliveries: &AtomicU64,
) -> Answer
where
    H: Fn(Delivery) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    T: Debug,
    E: Debug,
{
    let deadline = Instant::now() + patience;
    let mut pause = Duration::from_millis(10);
    loop {
        match handler(delivery.clone()).await {
            Ok(value) => return Some(Ok(format!("{value:?}"))),
            Err(e) if Instant::now() >= deadline => {
                return Some(Err(format!(
                    "no answer within {patience:?}; the last error: {e:?}"
                )))
            }
            Err(_) => {
                redeliveries.fetch_add(1, Ordering::Relaxed);
                sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(250));
            }
        }
    }
}

fn answer<T: Debug, E: Debug>(result: Result<T, E>) -> Result<String, String> {
    result
        .map(|v| format!("{v:?}"))
        .map_err(|e| format!("{e:?}"))
}

/// A task's answer; a task that panicked or was aborted (a killed copy) has none.
fn joined(result: Result<Answer, tokio::task::JoinError>) -> Answer {
    result.ok().flatten()
}
