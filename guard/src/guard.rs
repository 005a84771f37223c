//! The guard: reserve, run, complete; the same steps for every store.

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::{sleep, Instant};
use tracing::Instrument as _;

use crate::key::{full_key, Fingerprint, KeyHashing, KeyPart, Payload};
use crate::observe::{self, Seen};
use crate::on_error::{Disposition, OnError, Release};
use crate::store::{OwnerToken, Reservation, Store, StoredResult};
use crate::{Error, Rejected};

/// Default lease of an in-progress record.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// Default retention of a completed record.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// What a duplicate does while the first delivery of its key is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InFlight {
    /// Fail at once with [`Rejected::InProgress`] and its retry-after (the default: the queue's
    /// redelivery or the client's retry comes back later).
    #[default]
    Reject,
    /// Poll until the first delivery completes (then return its result), its record is released
    /// (then run), or the duration passes (then reject as above).
    Wait(Duration),
}

/// A result and whether it was replayed from the store instead of produced by running the body.
///
/// Returned by [`Guard::run_outcome`]; an `#[idempotent]` function returning
/// `Result<Outcome<T>, E>` gets the same (its body builds `Outcome::fresh(value)`). An HTTP
/// handler uses it to set `Idempotent-Replayed: true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<T> {
    value: T,
    replayed: bool,
}

impl<T> Outcome<T> {
    /// A value produced by running the body now.
    pub fn fresh(value: T) -> Self {
        Outcome {
            value,
            replayed: false,
        }
    }

    /// Whether the value was replayed from an earlier delivery.
    pub fn is_replay(&self) -> bool {
        self.replayed
    }

    /// The value.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The value, by reference.
    pub fn value(&self) -> &T {
        &self.value
    }
}

impl<T> From<T> for Outcome<T> {
    fn from(value: T) -> Self {
        Outcome::fresh(value)
    }
}

/// What the body of one attempt knows about itself; given to the body by
/// [`Guard::run_with`] (and `#[idempotent(attempt = name)]`).
///
/// Outside transactional mode no store can make "the effect happened" and "the key completed"
/// one step: a crash between them (kill -9 after the payment provider answered, before the
/// completion reached the store) leaves an in-progress record, and after its lease the
/// redelivery runs the body again. Two things close that window: pass [`key`](Self::key) (or
/// [`token`](Self::token)) downstream as the provider's idempotency token, so the provider
/// dedupes the second call; or, when [`is_takeover`](Self::is_takeover) says an earlier attempt
/// was abandoned, look for its effect before making it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    key: Option<String>,
    taken_over: bool,
}

impl Attempt {
    pub(crate) fn new(key: Option<String>, taken_over: bool) -> Self {
        Attempt { key, taken_over }
    }

    /// The full stored key (prefix, tenant and key; with [`Guard::hash_keys`] the prefix and the
    /// keyed hash): the same on every delivery of a request, and different for any other
    /// request. `None` when the key was missing and the body runs
    /// unguarded (`required(false)`).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The key hashed to 32 hex digits (xxh3-128), for downstream APIs that limit an idempotency
    /// token's length or alphabet (AWS `ClientToken`: at most 64 ASCII characters).
    pub fn token(&self) -> Option<String> {
        self.key
            .as_deref()
            .map(|k| format!("{:032x}", xxhash_rust::xxh3::xxh3_128(k.as_bytes())))
    }

    /// Whether this attempt took over the record of an earlier attempt whose lease ended before
    /// it completed or released it: that attempt crashed, hung or lost its store, possibly after
    /// making part of its effect.
    pub fn is_takeover(&self) -> bool {
        self.taken_over
    }
}

/// Runs a body at most once per key: the plain API behind `#[idempotent]`.
///
/// ```
/// use idem_guard::{Guard, MemoryStore};
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), idem_guard::Error> {
/// let emails_sent = AtomicU32::new(0);
/// let guard = Guard::new(MemoryStore::new()).prefix("send-receipt");
/// for _delivery in 0..3 {
///     // The key comes from the message (its order id), never from the clock or an RNG.
///     let order_id = "order-81";
///     let receipt: Result<String, idem_guard::Error> = guard
///         .run(order_id, &order_id, || async {
///             emails_sent.fetch_add(1, Ordering::SeqCst);
///             Ok(format!("receipt for {order_id}"))
///         })
///         .await;
///     assert_eq!(receipt?, "receipt for order-81");
/// }
/// assert_eq!(emails_sent.load(Ordering::SeqCst), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Guard<S, P = Release> {
    store: S,
    prefix: Cow<'static, str>,
    scope: Option<String>,
    lease: Duration,
    retention: Duration,
    renew: bool,
    deadline: Option<Instant>,
    on_replay: ReplayHook,
    in_flight: InFlight,
    on_error: P,
    required: bool,
    disabled: bool,
    key_hashing: KeyHashing,
}

/// The environment variable that switches every guard off when set to `1` or `true` (read by
/// [`Guard::new`]; [`Guard::disabled`] overrides it): for tests that exercise a handler's logic
/// without a store, as AWS Lambda Powertools' `POWERTOOLS_IDEMPOTENCY_DISABLED`.
pub const DISABLED_ENV: &str = "IDEM_GUARD_DISABLED";

/// Whether [`DISABLED_ENV`] switches the guard off.
fn disabled_by_env() -> bool {
    std::env::var(DISABLED_ENV)
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// A callback told of every replay.
#[derive(Clone, Default)]
struct ReplayHook(Option<std::sync::Arc<ReplayFn>>);

type ReplayFn = dyn Fn(&str) + Send + Sync;

impl std::fmt::Debug for ReplayHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

/// Key and fingerprint, computed before the body runs; `None` when the key is missing and not
/// required.
pub(crate) type Prepared = Result<Option<(String, Fingerprint)>, Error>;

/// What the store's answer means for this delivery.
pub(crate) enum Step<T, E> {
    Run { taken_over: bool },
    Done(Result<Outcome<T>, E>),
    Busy(Duration),
}

/// What a reservation, after any waiting, leaves the caller to do.
pub(crate) enum Reserved<T, E> {
    /// Run the body; the record is this attempt's at least until `held_until` (local clock).
    Run {
        taken_over: bool,
        held_until: Instant,
    },
    Done(Result<Outcome<T>, E>),
}

/// How long a failed reservation's withdrawal may add to the failure.
const WITHDRAW_WITHIN: Duration = Duration::from_secs(1);

/// The longest pause between two tries of a write after the body ran.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

impl<S: Store> Guard<S> {
    /// A guard over `store` with the defaults: prefix `"idem"`, lease 1 min renewed while the
    /// body runs, retention 24 h, duplicates in flight rejected, errors released, key required.
    pub fn new(store: S) -> Self {
        Guard {
            store,
            prefix: Cow::Borrowed("idem"),
            scope: None,
            lease: DEFAULT_LEASE,
            retention: DEFAULT_RETENTION,
            renew: true,
            deadline: None,
            on_replay: ReplayHook::default(),
            in_flight: InFlight::Reject,
            on_error: Release,
            required: true,
            disabled: disabled_by_env(),
            key_hashing: KeyHashing::Off,
        }
    }
}

// The settings need no `Store`: with the bound only on running, a store that is not one is
// reported once, where it is given, not again at each setting.
impl<S, P> Guard<S, P> {
    /// Names the operation; part of every stored key, so two operations keyed by the same order
    /// id do not dedupe each other. `#[idempotent]` uses the function's name.
    pub fn prefix(mut self, prefix: impl Into<Cow<'static, str>>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Stores every key as its HMAC-SHA256 under `secret`, so that no store (nor anyone reading
    /// it) sees the keys, which may hold personal data: the stored key is the prefix, `:#` and
    /// 64 hex digits; tenant and key are only in the hash. Duplicates dedupe as before. Every
    /// process sharing the records must use the same secret.
    ///
    /// Changing the secret (rotation) makes every record written under the old one invisible:
    /// a duplicate delivered after the change runs its body again, and a request in flight
    /// during the change is not seen as in flight. Rotate when no redelivery of what ran before
    /// can still come (after the retention), or accept those re-runs. Switching hashing on or
    /// off has the same effect. An empty secret fails every guarded call with
    /// [`Error::InvalidKey`]. The test kit ([`testing`](crate::testing)) finds a message's
    /// records by its id in the key, so its fault scenarios refuse hashed keys (with an error
    /// saying so): test handlers with a guard without `hash_keys`.
    ///
    /// ```
    /// use idem_guard::{Guard, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), idem_guard::Error> {
    /// // The secret from your secret store, never from the source.
    /// # let secret_from_vault = b"0123456789abcdef0123456789abcdef".to_vec();
    /// let guard = Guard::new(MemoryStore::new())
    ///     .prefix("signup")
    ///     .hash_keys(secret_from_vault);
    /// let sent: u32 = guard.run("alice@example.com", &(), || async { Ok::<_, idem_guard::Error>(1) }).await?;
    /// # assert_eq!(sent, 1); Ok(()) }
    /// ```
    pub fn hash_keys(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.key_hashing = KeyHashing::with_secret(secret.as_ref());
        self
    }

    /// Scopes keys by tenant (or any other partition): the same key under two tenants is two
    /// records.
    pub fn tenant(mut self, tenant: impl KeyPart) -> Self {
        self.scope = tenant.key_part();
        self
    }

    /// How long an in-progress record blocks duplicates before a retry may take it over (it is
    /// renewed while the body runs, so this bounds how long a crashed attempt blocks).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long a completed result is kept for replay. Make it longer than the longest
    /// redelivery window (SQS retention, webhook retry schedule), or late duplicates run again.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Ties the lease to a deadline the caller has (a Lambda's remaining time, a request
    /// timeout): the in-progress record never outlives it, and renewal stops there. When the
    /// invocation is killed at its deadline, a retry can take the key over right after instead of
    /// waiting out a longer lease.
    ///
    /// ```
    /// # use idem_guard::{Guard, MemoryStore};
    /// # use std::time::Duration;
    /// // Lambda: `let remaining = Duration::from_millis(ctx.deadline - now_ms);`
    /// let remaining = Duration::from_secs(14);
    /// let guard = Guard::new(MemoryStore::new())
    ///     .deadline(tokio::time::Instant::now() + remaining);
    /// ```
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The lease for a write now: the configured one, cut at the deadline (at least 1 ms).
    fn lease_now(&self) -> Duration {
        match self.deadline {
            Some(deadline) => self
                .lease
                .min(deadline.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1)),
            None => self.lease,
        }
    }

    /// Calls `hook` with the full stored key whenever a delivery is answered from the store (a
    /// replayed result or cached error) instead of running the body: for metrics and logs.
    ///
    /// ```
    /// # use idem_guard::{Guard, MemoryStore};
    /// let guard = Guard::new(MemoryStore::new())
    ///     .on_replay(|key| tracing::info!(key, "duplicate delivery replayed"));
    /// ```
    pub fn on_replay(mut self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_replay = ReplayHook(Some(std::sync::Arc::new(hook)));
        self
    }

    /// Whether to renew the lease every third of its length while the body runs (default on).
    pub fn renew_lease(mut self, renew: bool) -> Self {
        self.renew = renew;
        self
    }

    /// What a duplicate does while the first delivery is running.
    pub fn in_flight(mut self, in_flight: InFlight) -> Self {
        self.in_flight = in_flight;
        self
    }

    /// Whether a missing key (`None`) is an error (the default) or runs the body unguarded, with
    /// a `tracing` warning.
    pub fn required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    /// The policy for failed bodies: [`Release`] (default), [`Cache`](crate::on_error::Cache),
    /// [`Cacheable`](crate::on_error::Cacheable)
    /// or [`Classified`](crate::on_error::Classified).
    pub fn on_error<Q>(self, policy: Q) -> Guard<S, Q> {
        Guard {
            store: self.store,
            prefix: self.prefix,
            scope: self.scope,
            lease: self.lease,
            retention: self.retention,
            renew: self.renew,
            deadline: self.deadline,
            on_replay: self.on_replay,
            in_flight: self.in_flight,
            on_error: policy,
            required: self.required,
            disabled: self.disabled,
            key_hashing: self.key_hashing,
        }
    }

    /// Switches the guard off (`true`) or on: a switched-off guard runs every body directly,
    /// with no store call, as if each delivery were the first; each call is counted with the
    /// outcome `disabled` and the first of each prefix logged as a warning. For tests of a
    /// handler's own logic (the kit of [`testing`](crate::testing) tests its exactly-once
    /// instead). Default: off unless the environment variable [`DISABLED_ENV`]
    /// (`IDEM_GUARD_DISABLED`) is `1` or `true` when the guard is made; this setting overrides
    /// it.
    ///
    /// ```
    /// # use idem_guard::{Guard, MemoryStore};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let guard = Guard::new(MemoryStore::new()).disabled(true);
    /// for expected in [1, 2] {
    ///     let runs = guard.run("k", &(), || async { Ok::<_, idem_guard::Error>(expected) }).await;
    ///     assert_eq!(runs.unwrap(), expected); // the duplicate ran too
    /// }
    /// # }
    /// ```
    pub fn disabled(mut self, disabled: bool) -> Self {
        self.disabled = disabled;
        self
    }

    /// Whether the guard is switched off ([`disabled`](Self::disabled)).
    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    pub(crate) fn lease_and_retention(&self) -> (Duration, Duration) {
        (self.lease_now(), self.retention)
    }

    pub(crate) fn in_flight_policy(&self) -> InFlight {
        self.in_flight
    }

    /// Counts a call that runs its body with no record: without a key, or switched off.
    pub(crate) fn count_unguarded(&self) {
        if self.disabled {
            observe::disabled(&self.prefix);
        } else {
            observe::outcome(&self.prefix, Seen::Unguarded);
        }
    }

    /// The operation's name, as the metrics label it.
    pub(crate) fn prefix_name(&self) -> &str {
        &self.prefix
    }
}

impl<S: Store, P> Guard<S, P> {
    /// Runs `body` unless this key already ran: returns the body's result, the stored result of an
    /// earlier delivery, or the guard's refusal as `E::from(Error)`.
    ///
    /// The key and the payload's fingerprint are computed when `run` is called, before the body
    /// can change anything. If the store cannot be reached the body does not run.
    pub fn run<K, Pl, T, E, F, Fut>(
        &self,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<T, E>> + use<'_, S, P, K, Pl, T, E, F, Fut>
    where
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let prepared = self.prepare(&key, payload);
        async move {
            self.execute(prepared, |_| body())
                .await
                .map(Outcome::into_inner)
        }
    }

    /// Like [`run`](Self::run), and gives the body its [`Attempt`]: the key to pass downstream as
    /// an idempotency token, and whether an earlier attempt was abandoned.
    ///
    /// ```
    /// use idem_guard::{Attempt, Guard, MemoryStore};
    ///
    /// /// A payment provider that dedupes by the idempotency token it is given.
    /// async fn provider_charge(token: &str, cents: u64) -> Result<String, idem_guard::Error> {
    ///     Ok(format!("ch_{}", &token[..8]))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), idem_guard::Error> {
    /// let guard = Guard::new(MemoryStore::new()).prefix("charge");
    /// let charge_id = guard
    ///     .run_with("order-7", &700u64, |attempt: Attempt| async move {
    ///         // The same token on every delivery: if an earlier attempt charged and crashed
    ///         // before completing the key, the provider returns that charge instead of a new one.
    ///         let token = attempt.token().expect("the key is required");
    ///         provider_charge(&token, 700).await
    ///     })
    ///     .await?;
    /// # assert!(charge_id.starts_with("ch_")); Ok(()) }
    /// ```
    pub fn run_with<K, Pl, T, E, F, Fut>(
        &self,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<T, E>> + use<'_, S, P, K, Pl, T, E, F, Fut>
    where
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let prepared = self.prepare(&key, payload);
        async move { self.execute(prepared, body).await.map(Outcome::into_inner) }
    }

    /// Like [`run_with`](Self::run_with), and tells whether the result was replayed.
    pub fn run_outcome_with<K, Pl, T, E, F, Fut>(
        &self,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<Outcome<T>, E>> + use<'_, S, P, K, Pl, T, E, F, Fut>
    where
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let prepared = self.prepare(&key, payload);
        self.execute(prepared, body)
    }

    /// Like [`run`](Self::run), and tells whether the result was replayed.
    pub fn run_outcome<K, Pl, T, E, F, Fut>(
        &self,
        key: K,
        payload: Pl,
        body: F,
    ) -> impl Future<Output = Result<Outcome<T>, E>> + use<'_, S, P, K, Pl, T, E, F, Fut>
    where
        K: KeyPart,
        Pl: Payload,
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let prepared = self.prepare(&key, payload);
        self.execute(prepared, |_| body())
    }

    pub(crate) fn prepare<K: KeyPart, Pl: Payload>(&self, key: &K, payload: Pl) -> Prepared {
        self.prepare_with(key, || payload.fingerprint())
    }

    /// The fingerprint is only computed when there is a key: a missing key never hashes anything.
    pub(crate) fn prepare_with<K: KeyPart>(
        &self,
        key: &K,
        fingerprint: impl FnOnce() -> Result<Fingerprint, Error>,
    ) -> Prepared {
        let Some(key) = key.key_part() else {
            if self.disabled {
                return Ok(None);
            }
            if self.required {
                return Err(Error::MissingKey);
            }
            tracing::warn!(prefix = %self.prefix, "idempotency key is missing; running the body unguarded");
            return Ok(None);
        };
        let full = full_key(&self.prefix, self.scope.as_deref(), &key)?;
        let full = self.key_hashing.stored(&self.prefix, full)?;
        if self.disabled {
            // The key is kept for the body's `Attempt` (a token it passes downstream); the
            // payload is never compared, so it is not hashed.
            return Ok(Some((
                full,
                Fingerprint::of_value(&serde_json::Value::Null),
            )));
        }
        Ok(Some((full, fingerprint()?)))
    }

    /// One guarded call, in its `idem_guard` span (see [`observe`](crate::observe)).
    pub(crate) async fn execute<T, E, F, Fut>(
        &self,
        prepared: Prepared,
        body: F,
    ) -> Result<Outcome<T>, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let span = self.span_of(&prepared);
        self.execute_in_span(prepared, body).instrument(span).await
    }

    /// The `idem_guard` span of a call with this key (see [`observe`](crate::observe)).
    pub(crate) fn span_of(&self, prepared: &Prepared) -> tracing::Span {
        let key = prepared.as_ref().ok().and_then(Option::as_ref);
        observe::span(&self.prefix, key.map(|(key, _)| key.as_str()))
    }

    async fn execute_in_span<T, E, F, Fut>(
        &self,
        prepared: Prepared,
        body: F,
    ) -> Result<Outcome<T>, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E> + Sync,
        F: FnOnce(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let Some((key, fingerprint)) = prepared? else {
            self.count_unguarded();
            return body(Attempt::new(None, false)).await.map(Outcome::fresh);
        };
        if self.disabled {
            observe::disabled(&self.prefix);
            return body(Attempt::new(Some(key), false))
                .await
                .map(Outcome::fresh);
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
        self.settle(&key, fingerprint, &owner, held_until, result)
            .await
    }

    /// Reserves `key` for `owner`, polling while another attempt holds it if the in-flight policy
    /// says to wait: either the body may run, or what to return instead (a replay, a rejection,
    /// a store error).
    pub(crate) async fn reserve_key<T, E>(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
    ) -> Reserved<T, E>
    where
        T: DeserializeOwned,
        E: From<Error>,
        P: OnError<E>,
    {
        let mut waiting = Waiting::new(self.in_flight);
        loop {
            let (started, lease) = (Instant::now(), self.lease_now());
            let found = self.store.reserve(key, fingerprint, owner, lease).await;
            let took = started.elapsed();
            observe::store_call(&self.prefix, "reserve", took);
            tracing::Span::current().record("store_ms", took.as_secs_f64() * 1000.0);
            let found = match found {
                Ok(found) => found,
                Err(e) => {
                    observe::outcome(&self.prefix, Seen::StoreError);
                    self.withdraw(key, owner, &e).await;
                    return Reserved::Done(Err(e.into()));
                }
            };
            let seen = seen(&found, fingerprint);
            match self.judge(key, fingerprint, found) {
                Step::Run { taken_over } => {
                    observe::outcome(&self.prefix, seen);
                    if taken_over {
                        tracing::warn!(key_hash = %crate::observe::key_hash(key), "took over the key of an abandoned attempt (its lease ended before it completed); its effect may have happened");
                    }
                    return Reserved::Run {
                        taken_over,
                        held_until: started + lease,
                    };
                }
                Step::Done(result) => {
                    observe::outcome(&self.prefix, seen);
                    return Reserved::Done(result);
                }
                Step::Busy(retry_after) => {
                    if let Err(e) = waiting.pause(key, retry_after).await {
                        observe::outcome(&self.prefix, Seen::InFlight);
                        return Reserved::Done(Err(e.into()));
                    }
                }
            }
        }
    }

    /// After a reservation that failed on a store error: the reservation may have been written
    /// all the same (only its reply was lost), and would then block the key for a whole lease
    /// and make the retry that takes it over believe an effect may have happened. The token is
    /// this attempt's own, so releasing it is safe: it removes that record or nothing.
    async fn withdraw(&self, key: &str, owner: &OwnerToken, failure: &Error) {
        if !matches!(failure, Error::Store(_)) {
            return;
        }
        // Tried twice within a second, not longer: when the store is unreachable, the caller
        // waits for nothing.
        let release = async {
            let released = self.store.release(key, owner).await;
            if !matches!(released, Err(Error::Store(_))) {
                return released;
            }
            sleep(Duration::from_millis(100)).await;
            self.store.release(key, owner).await
        };
        let released = tokio::time::timeout(WITHDRAW_WITHIN, release)
            .await
            .unwrap_or_else(|_| {
                Err(Error::store(
                    "no answer within the time given to withdrawing",
                ))
            });
        match released {
            Ok(()) | Err(Error::NotOwner { .. }) => {
                tracing::debug!(
                    key_hash = %crate::observe::key_hash(key),
                    "withdrew the reservation whose reply was lost, if it was written"
                );
            }
            Err(e) => {
                tracing::warn!(key_hash = %crate::observe::key_hash(key), error = %e, "the reservation failed and could not be withdrawn; if it was written, the key stays blocked until its lease ends");
            }
        }
    }

    /// Records the body's result through the store (completes the key, or releases or caches it
    /// after an error, per the policy), retrying a store error while the record is held (see
    /// [`retry_while_held`](Self::retry_while_held)), and hands the result back.
    pub(crate) async fn settle<T, E>(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        held_until: Instant,
        result: Result<T, E>,
    ) -> Result<Outcome<T>, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        P: OnError<E>,
    {
        let (record, mut result) = self.to_store(key, result);
        let settle = match record {
            Some(stored) => {
                let complete = |stored: &StoredResult| {
                    let stored = stored.clone();
                    let complete = move || {
                        let stored = stored.clone();
                        async move {
                            self.store
                                .complete(key, fingerprint, owner, &stored, self.retention)
                                .await
                        }
                    };
                    self.retry_while_held(
                        key,
                        fingerprint,
                        owner,
                        held_until,
                        ("complete", "record the result"),
                        complete,
                    )
                };
                match complete(&stored).await {
                    // The backend refused the result for its size (a `max_result_len` set
                    // above what it takes): final, as if the guard had seen it. The key is
                    // completed as unreplayable; the caller gets the refusal.
                    Err(refused @ Error::ResultTooLarge { .. }) if result.is_ok() => {
                        let marked = complete(&StoredResult::Unreplayable(refused.to_string()));
                        let marked = marked.await;
                        result = Err(refused.into());
                        marked
                    }
                    written => written,
                }
            }
            None => {
                let release = || self.store.release(key, owner);
                self.retry_while_held(
                    key,
                    fingerprint,
                    owner,
                    held_until,
                    ("release", "release the record"),
                    release,
                )
                .await
            }
        };
        match (result, settle) {
            (Ok(value), Ok(())) => Ok(Outcome::fresh(value)),
            // The effect happened but is not recorded: say so rather than return a value a retry
            // would produce again. The record stays in progress, so retries are refused until the
            // lease ends.
            (Ok(_), Err(e)) => {
                observe::unrecorded(&self.prefix);
                Err(e.into())
            }
            (Err(error), Ok(())) => Err(error),
            (Err(error), Err(e)) => {
                // The body's error says more than the bookkeeping failure; the record expires
                // with its lease.
                tracing::warn!(key_hash = %crate::observe::key_hash(key), error = %e, "could not settle the record of a failed body");
                Err(error)
            }
        }
    }

    /// What to record for the body's result (the completion to store, or `None` to release the
    /// record: an error the policy does not cache), and the result to hand back.
    ///
    /// A value whose encoding is over the store's [`max_result_len`](Store::max_result_len) is
    /// final: the key is completed as unreplayable (the effect happened) and the caller gets
    /// [`Error::ResultTooLarge`] at once, never a retried write. An error to cache that is over
    /// it is released instead, as an error that cannot be encoded is.
    pub(crate) fn to_store<T: Serialize + DeserializeOwned, E: From<Error>>(
        &self,
        key: &str,
        result: Result<T, E>,
    ) -> (Option<StoredResult>, Result<T, E>)
    where
        P: OnError<E>,
    {
        match result {
            Ok(value) => match self.encode_within(key, &value) {
                Ok(stored) => (Some(stored), Ok(value)),
                Err(too_large) => {
                    tracing::error!(key_hash = %crate::observe::key_hash(key), error = %too_large, "result not stored: over the store's max_result_len");
                    let marker = StoredResult::Unreplayable(too_large.to_string());
                    (Some(marker), Err(too_large.into()))
                }
            },
            Err(error) => match self.on_error.decide(&error) {
                Disposition::Release => (None, Err(error)),
                Disposition::Cache(text) if text.len() > self.store.max_result_len() => {
                    tracing::warn!(
                        key_hash = %crate::observe::key_hash(key),
                        len = text.len(),
                        limit = self.store.max_result_len(),
                        "error not cached: over the store's max_result_len; the record is released"
                    );
                    (None, Err(error))
                }
                Disposition::Cache(text) => (Some(StoredResult::Err(text)), Err(error)),
            },
        }
    }

    /// `value` encoded for storage, or [`Error::ResultTooLarge`] when the store would not keep
    /// it.
    pub(crate) fn encode_within<T: Serialize + DeserializeOwned>(
        &self,
        key: &str,
        value: &T,
    ) -> Result<StoredResult, Error> {
        let stored = encode(value);
        let limit = self.store.max_result_len();
        if stored.len() > limit {
            return Err(Error::ResultTooLarge {
                key: key.to_owned(),
                len: stored.len(),
                limit,
            });
        }
        Ok(stored)
    }

    /// Retries a write made after the body ran (the completion, or the release of a failed
    /// body's record) on store errors, for as long as this attempt holds its record: the effect
    /// happened, and a result left unrecorded would let the retry that takes the key over after
    /// the lease run the body again. Fencing makes every try safe, and `complete` is idempotent
    /// for its owner. When a third of the lease is left the lease is renewed (the renewal may get
    /// through when the store is back), so the hold extends while the store answers renewals.
    /// Each failure is logged with the time left; giving up is logged as an error.
    pub(crate) async fn retry_while_held<T, Fut>(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        mut held_until: Instant,
        (op, what): (&'static str, &str),
        mut write: impl FnMut() -> Fut,
    ) -> Result<T, Error>
    where
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut backoff = Duration::from_millis(50);
        let mut failures: u32 = 0;
        loop {
            let started = Instant::now();
            let written = write().await;
            observe::store_call(&self.prefix, op, started.elapsed());
            let e = match written {
                Err(Error::Store(e)) => e,
                done => {
                    if failures > 0 {
                        tracing::info!(key_hash = %crate::observe::key_hash(key), failures, "could {what} after {failures} failed tries");
                    }
                    return done;
                }
            };
            failures += 1;
            let left = held_until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::error!(key_hash = %crate::observe::key_hash(key), failures, error = %e, "could not {what} before this attempt's lease ended; giving up (a later delivery may take the key over and run the body again)");
                return Err(Error::Store(e));
            }
            let pause = backoff.min(left);
            tracing::warn!(
                key_hash = %crate::observe::key_hash(key),
                failures,
                error = %e,
                retry_in_ms = pause.as_millis() as u64,
                lease_left_ms = left.as_millis() as u64,
                "could not {what}; retrying while the lease holds"
            );
            sleep(pause).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            if self.renew && held_until.saturating_duration_since(Instant::now()) < self.lease / 3 {
                self.renew_hold(key, fingerprint, owner, &mut held_until)
                    .await;
            }
        }
    }

    /// Renews the lease, moving `held_until` on when the store took it. Never shortens it: past
    /// the caller's deadline the lease is left to end.
    async fn renew_hold(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        held_until: &mut Instant,
    ) {
        let (started, lease) = (Instant::now(), self.lease_now());
        if started + lease <= *held_until {
            return;
        }
        let renewed = self.store.renew(key, fingerprint, owner, lease).await;
        observe::store_call(&self.prefix, "renew", started.elapsed());
        match renewed {
            Ok(()) => *held_until = started + lease,
            Err(e) => {
                tracing::warn!(key_hash = %crate::observe::key_hash(key), error = %e, "could not renew the lease")
            }
        }
    }

    /// Polls the body, renewing the lease every third of it so a long body keeps its key. If the
    /// record was taken over meanwhile the body still finishes (stopping an effect half-way is
    /// worse) and completion then fails with [`Error::NotOwner`]. `held_until` follows the
    /// renewals.
    pub(crate) async fn run_renewing<T, E>(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        held_until: &mut Instant,
        body: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        if !self.renew {
            return body.await;
        }
        let period = (self.lease / 3).max(Duration::from_millis(10));
        let mut body = std::pin::pin!(body);
        let mut next = Instant::now() + period;
        loop {
            tokio::select! {
                biased;
                result = &mut body => return result,
                () = tokio::time::sleep_until(next) => {
                    next = Instant::now() + period;
                    if self.deadline.is_some_and(|d| Instant::now() >= d) {
                        // Past the caller's deadline the record is left to expire.
                        next = Instant::now() + Duration::from_secs(365 * 86_400);
                        continue;
                    }
                    self.renew_hold(key, fingerprint, owner, held_until).await;
                }
            }
        }
    }

    /// Interprets a reservation: run, replay, or wait for another attempt.
    pub(crate) fn judge<T, E>(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        found: Reservation,
    ) -> Step<T, E>
    where
        T: DeserializeOwned,
        E: From<Error>,
        P: OnError<E>,
    {
        let mismatch = || {
            Step::Done(Err(Error::from(Rejected::PayloadMismatch {
                key: key.to_owned(),
            })
            .into()))
        };
        match found {
            Reservation::Acquired => Step::Run { taken_over: false },
            Reservation::TakenOver => Step::Run { taken_over: true },
            Reservation::InProgress {
                fingerprint: theirs,
                ..
            } if theirs != fingerprint => mismatch(),
            Reservation::InProgress { retry_after, .. } => Step::Busy(retry_after),
            Reservation::Completed {
                fingerprint: theirs,
                ..
            } if theirs != fingerprint => mismatch(),
            Reservation::Completed { result, .. } => {
                if let Some(hook) = &self.on_replay.0 {
                    hook(key);
                }
                let decode = |reason: String| Error::Decode {
                    key: key.to_owned(),
                    reason,
                };
                Step::Done(match result {
                    StoredResult::Ok(text) => crate::codec::decode(&text)
                        .map(|value| Outcome {
                            value,
                            replayed: true,
                        })
                        .map_err(|reason| decode(reason).into()),
                    StoredResult::Err(json) => match self.on_error.replay(&json) {
                        Ok(error) => Err(error),
                        Err(reason) => Err(decode(reason).into()),
                    },
                    StoredResult::Unreplayable(reason) => Err(decode(reason).into()),
                })
            }
        }
    }
}

/// What a reservation's answer means for the counters.
pub(crate) fn seen(found: &Reservation, fingerprint: Fingerprint) -> Seen {
    match found {
        Reservation::Acquired => Seen::Fresh,
        Reservation::TakenOver => Seen::TakenOver,
        Reservation::Completed {
            fingerprint: theirs,
            ..
        }
        | Reservation::InProgress {
            fingerprint: theirs,
            ..
        } if *theirs != fingerprint => Seen::Mismatch,
        Reservation::Completed { .. } => Seen::Replayed,
        Reservation::InProgress { .. } => Seen::InFlight,
    }
}

/// Encodes a successful value; a value that cannot be encoded still completes the key.
pub(crate) fn encode<T: Serialize + DeserializeOwned>(value: &T) -> StoredResult {
    match crate::codec::encode(value) {
        Ok(text) => StoredResult::Ok(text),
        Err(e) => StoredResult::Unreplayable(format!(
            "the result could not be encoded when it was produced: {e}"
        )),
    }
}

/// Retries a store write that failed on a store error (a dropped connection, say) a few times
/// within about a second, for writes that must not keep their caller waiting long (withdrawing
/// a reservation, releasing a cancelled transaction's record). The DynamoDB store's
/// transactions are its only caller, hence the feature gate.
#[cfg(feature = "dynamodb")]
pub(crate) async fn retry_store<T, Fut: Future<Output = Result<T, Error>>>(
    mut write: impl FnMut() -> Fut,
) -> Result<T, Error> {
    let mut backoff = Duration::from_millis(50);
    for _ in 0..3 {
        match write().await {
            Err(Error::Store(e)) => {
                tracing::warn!(error = %e, "store write failed; retrying");
                sleep(backoff).await;
                backoff *= 4;
            }
            done => return done,
        }
    }
    write().await
}

/// The in-flight policy's state across polls.
pub(crate) struct Waiting {
    deadline: Option<Instant>,
    backoff: Duration,
}

impl Waiting {
    pub(crate) fn new(policy: InFlight) -> Self {
        let deadline = match policy {
            InFlight::Reject => None,
            InFlight::Wait(d) => Some(Instant::now() + d),
        };
        Waiting {
            deadline,
            backoff: Duration::from_millis(10),
        }
    }

    /// Sleeps before the next poll, or rejects when waiting is not allowed or took too long.
    pub(crate) async fn pause(&mut self, key: &str, retry_after: Duration) -> Result<(), Error> {
        let now = Instant::now();
        let reject = || {
            Error::from(Rejected::InProgress {
                key: key.to_owned(),
                retry_after,
            })
        };
        let deadline = self.deadline.ok_or_else(reject)?;
        if now >= deadline {
            return Err(reject());
        }
        sleep(self.backoff.min(deadline - now)).await;
        self.backoff = (self.backoff * 2).min(Duration::from_millis(500));
        Ok(())
    }
}
