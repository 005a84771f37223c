//! In-process store: the default for a single process and for tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::key::Fingerprint;
use crate::store::{OwnerToken, Reservation, Store, StoredResult};
use crate::Error;

/// Records kept in this process's memory: bounded and expiring.
///
/// Clones share the records. Expired records are purged as new ones arrive. When the store is
/// full of live records a reservation fails with [`Error::Store`] rather than evicting one: a
/// silently evicted record would let a duplicate run, so the store fails closed.
///
/// It cannot dedupe across processes: use [`RedisStore`](crate::RedisStore) or
/// [`PostgresStore`](crate::PostgresStore) as soon as more than one worker consumes the queue.
///
/// ```
/// use idem_guard::{Guard, MemoryStore};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = MemoryStore::with_capacity(10_000);
/// let guard = Guard::new(store.clone()).prefix("welcome-mail");
/// let sent: Result<u32, idem_guard::Error> = guard.run("user-42", &(), || async { Ok(1) }).await;
/// // A clone of the store sees the same record: the second delivery replays.
/// let again: Result<u32, idem_guard::Error> = Guard::new(store)
///     .prefix("welcome-mail")
///     .run("user-42", &(), || async { Ok(2) })
///     .await;
/// assert_eq!((sent.unwrap(), again.unwrap()), (1, 1));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    max_result_len: usize,
}

#[derive(Debug)]
struct Inner {
    records: HashMap<String, Entry>,
    /// Records by expiry, so purging costs O(expired · log n) instead of a full scan.
    expiry: BTreeMap<(Instant, u64), String>,
    next_seq: u64,
    capacity: usize,
}

#[derive(Debug)]
struct Entry {
    owner: OwnerToken,
    fingerprint: Fingerprint,
    /// `None` while in progress.
    result: Option<StoredResult>,
    expires: (Instant, u64),
}

/// Default bound of [`MemoryStore::new`].
pub const DEFAULT_CAPACITY: usize = 100_000;

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store holding at most [`DEFAULT_CAPACITY`] live records.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A store holding at most `capacity` live records (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        MemoryStore {
            inner: Arc::new(Mutex::new(Inner {
                records: HashMap::new(),
                expiry: BTreeMap::new(),
                next_seq: 0,
                capacity: capacity.max(1),
            })),
            max_result_len: crate::DEFAULT_MAX_RESULT_LEN,
        }
    }

    /// The longest result kept, in bytes of its encoded text (default
    /// [`DEFAULT_MAX_RESULT_LEN`](crate::DEFAULT_MAX_RESULT_LEN)): a longer one fails at once with
    /// [`Error::ResultTooLarge`](crate::Error::ResultTooLarge). See
    /// [`Store::max_result_len`](crate::Store::max_result_len).
    pub fn max_result_len(mut self, bytes: usize) -> Self {
        self.max_result_len = bytes;
        self
    }

    /// Number of live (unexpired) records.
    pub fn len(&self) -> usize {
        let mut inner = self.lock();
        inner.purge(Instant::now());
        inner.records.len()
    }

    /// Whether no live record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a record half-written (every update is a
        // few assignments), so a poisoned lock is still consistent.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Inner {
    fn purge(&mut self, now: Instant) {
        while let Some(entry) = self.expiry.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.records.remove(&key);
        }
    }

    fn stamp(&mut self, key: &str, ttl: Duration, now: Instant) -> (Instant, u64) {
        self.next_seq += 1;
        // An absurd TTL saturates instead of panicking on overflow.
        let at = now
            .checked_add(ttl)
            .unwrap_or(now + Duration::from_secs(100 * 365 * 86_400));
        let stamp = (at, self.next_seq);
        self.expiry.insert(stamp, key.to_owned());
        stamp
    }

    /// Writes `key`'s record, replacing any previous one and its expiry.
    fn put(
        &mut self,
        key: &str,
        owner: &OwnerToken,
        fingerprint: Fingerprint,
        result: Option<StoredResult>,
        ttl: Duration,
    ) {
        let now = Instant::now();
        self.remove(key);
        let expires = self.stamp(key, ttl, now);
        self.records.insert(
            key.to_owned(),
            Entry {
                owner: owner.clone(),
                fingerprint,
                result,
                expires,
            },
        );
    }

    /// Drops `key`'s record and its expiry entry, if any.
    fn remove(&mut self, key: &str) {
        if let Some(old) = self.records.remove(key) {
            self.expiry.remove(&old.expires);
        }
    }

    /// Whether `owner` may write `key`: it holds the record, or nobody does.
    fn owned_by(&self, key: &str, owner: &OwnerToken) -> Result<bool, Error> {
        match self.records.get(key) {
            Some(e) if e.owner != *owner => Err(Error::NotOwner {
                key: key.to_owned(),
            }),
            Some(_) => Ok(true),
            None => Ok(false),
        }
    }
}

impl Store for MemoryStore {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        let mut inner = self.lock();
        let now = Instant::now();
        // Looked at before the purge drops it: an in-progress record past its lease.
        let abandoned = inner
            .records
            .get(key)
            .is_some_and(|e| e.result.is_none() && e.expires.0 <= now);
        inner.purge(now);
        if let Some(e) = inner.records.get(key) {
            return Ok(match &e.result {
                Some(result) => Reservation::Completed {
                    fingerprint: e.fingerprint,
                    result: result.clone(),
                },
                None => Reservation::InProgress {
                    fingerprint: e.fingerprint,
                    retry_after: e.expires.0.saturating_duration_since(now),
                },
            });
        }
        if inner.records.len() >= inner.capacity {
            return Err(Error::store(format!(
                "memory store is full ({} live records); raise MemoryStore::with_capacity or use a shared store",
                inner.capacity
            )));
        }
        inner.put(key, owner, fingerprint, None, lease);
        Ok(if abandoned {
            Reservation::TakenOver
        } else {
            Reservation::Acquired
        })
    }

    async fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> Result<(), Error> {
        let mut inner = self.lock();
        inner.purge(Instant::now());
        let fingerprint = inner
            .records
            .get(key)
            .map_or(fingerprint, |e| e.fingerprint);
        inner.owned_by(key, owner)?;
        inner.put(key, owner, fingerprint, Some(result.clone()), retention);
        Ok(())
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        let mut inner = self.lock();
        inner.purge(Instant::now());
        let in_progress = inner.records.get(key).is_some_and(|e| e.result.is_none());
        // A completed record stays: releasing after completing is a no-op, as in the other stores.
        if inner.owned_by(key, owner)? && in_progress {
            inner.remove(key);
        }
        Ok(())
    }

    fn max_result_len(&self) -> usize {
        self.max_result_len
    }

    async fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<(), Error> {
        let mut inner = self.lock();
        inner.purge(Instant::now());
        let completed = inner.records.get(key).is_some_and(|e| e.result.is_some());
        inner.owned_by(key, owner)?;
        if !completed {
            inner.put(key, owner, fingerprint, None, lease);
        }
        Ok(())
    }
}
