//! A small in-process cache of completed records in front of a remote store (off by default:
//! wrap a store to use it).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::key::Fingerprint;
use crate::store::{OwnerToken, Reservation, Store, StoredResult};
use crate::Error;

/// Wraps a remote store and remembers the completed records it wrote or returned, so that a
/// duplicate seen by this process after its key completed here (or was seen completed once) is
/// replayed (or refused on a payload mismatch) without a round trip. Only completed records
/// are cached: they do not change until their retention ends. In-progress records,
/// reservations and every write go to the store.
///
/// Bounded: at most `capacity` records, the oldest dropped first, each for at most `ttl` (and a
/// completion written here for at most its retention). The trade-off: a record read back from
/// the store may be served up to `ttl` after the store's retention ended (keep `ttl` well below
/// the retention), and each process has its own cache.
///
/// ```
/// use idem_guard::{CachedStore, Guard, MemoryStore};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// // In production the inner store is a RedisStore or PostgresStore.
/// let store = CachedStore::new(MemoryStore::new(), 1_000, Duration::from_secs(60));
/// let guard = Guard::new(store.clone());
/// let first: Result<u32, idem_guard::Error> = guard.run("k", &(), || async { Ok(1) }).await;
/// let again: Result<u32, idem_guard::Error> = guard.run("k", &(), || async { Ok(2) }).await;
/// let third: Result<u32, idem_guard::Error> = guard.run("k", &(), || async { Ok(3) }).await;
/// assert_eq!((first.unwrap(), again.unwrap(), third.unwrap()), (1, 1, 1));
/// // The first delivery's completion was cached as it was written: neither duplicate reached
/// // the inner store.
/// assert_eq!(store.hits(), 2);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct CachedStore<S> {
    inner: S,
    cache: Arc<Mutex<Cache>>,
}

#[derive(Debug)]
struct Cache {
    capacity: usize,
    ttl: Duration,
    records: HashMap<String, (Fingerprint, StoredResult, Instant)>,
    /// Keys in insertion order, for dropping the oldest.
    order: VecDeque<String>,
    hits: u64,
}

impl<S: Store> CachedStore<S> {
    /// Caches up to `capacity` completed records (at least one) for at most `ttl` each.
    pub fn new(inner: S, capacity: usize, ttl: Duration) -> Self {
        CachedStore {
            inner,
            cache: Arc::new(Mutex::new(Cache {
                capacity: capacity.max(1),
                ttl,
                records: HashMap::new(),
                order: VecDeque::new(),
                hits: 0,
            })),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// How many reservations were answered from the cache.
    pub fn hits(&self) -> u64 {
        self.lock().hits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // Every update is a few assignments: a poisoned lock is still consistent.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Cache {
    fn get(&mut self, key: &str) -> Option<Reservation> {
        let (fingerprint, result, until) = self.records.get(key)?;
        if *until <= Instant::now() {
            self.records.remove(key);
            return None;
        }
        let found = Reservation::Completed {
            fingerprint: *fingerprint,
            result: result.clone(),
        };
        self.hits += 1;
        Some(found)
    }

    /// Caches a completed record for the cache's `ttl`, or for `within` if shorter.
    fn put(&mut self, key: &str, fingerprint: Fingerprint, result: StoredResult, within: Duration) {
        let until = Instant::now() + self.ttl.min(within);
        if self
            .records
            .insert(key.to_owned(), (fingerprint, result, until))
            .is_none()
        {
            self.order.push_back(key.to_owned());
        }
        while self.records.len() > self.capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.records.remove(&oldest);
                }
                None => break,
            }
        }
        // Keys already dropped on expiry leave stale entries in `order`; trim them so it stays
        // bounded too.
        if self.order.len() > 2 * self.capacity {
            let records = &self.records;
            self.order.retain(|k| records.contains_key(k));
        }
    }
}

impl<S: Store> Store for CachedStore<S> {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        if let Some(found) = self.lock().get(key) {
            return Ok(found);
        }
        let found = self.inner.reserve(key, fingerprint, owner, lease).await?;
        if let Reservation::Completed {
            fingerprint,
            result,
        } = &found
        {
            let mut cache = self.lock();
            let ttl = cache.ttl;
            cache.put(key, *fingerprint, result.clone(), ttl);
        }
        Ok(found)
    }

    async fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> Result<(), Error> {
        self.inner
            .complete(key, fingerprint, owner, result, retention)
            .await?;
        // Written by its owner, so the record is this until its retention ends: the duplicates
        // that follow a first delivery (a queue's redelivery, a client's retry) are answered
        // here. (Only reads used to fill the cache, so it answered from a key's third delivery.)
        self.lock().put(key, fingerprint, result.clone(), retention);
        Ok(())
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        self.inner.release(key, owner).await
    }

    fn max_result_len(&self) -> usize {
        self.inner.max_result_len()
    }

    async fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<(), Error> {
        self.inner.renew(key, fingerprint, owner, lease).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    async fn complete(store: &CachedStore<MemoryStore>, key: &str, value: &str) {
        let owner = OwnerToken::generate();
        let fp = Fingerprint::of(&()).unwrap();
        store
            .reserve(key, fp, &owner, Duration::from_secs(60))
            .await
            .unwrap();
        store
            .complete(
                key,
                fp,
                &owner,
                &StoredResult::Ok(value.into()),
                Duration::from_secs(600),
            )
            .await
            .unwrap();
    }

    async fn lookup(store: &CachedStore<MemoryStore>, key: &str) -> Reservation {
        let fp = Fingerprint::of(&()).unwrap();
        store
            .reserve(key, fp, &OwnerToken::generate(), Duration::from_secs(60))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn bounded_and_expiring() {
        let store = CachedStore::new(MemoryStore::new(), 2, Duration::from_millis(200));
        for key in ["a", "b", "c"] {
            complete(&store, key, key).await; // cached as it is written
        }
        assert_eq!(store.hits(), 0);
        assert_eq!(store.lock().records.len(), 2, "the oldest (a) was dropped");
        lookup(&store, "c").await;
        lookup(&store, "a").await;
        assert_eq!(store.hits(), 1, "c from the cache, a from the store");
        lookup(&store, "a").await;
        assert_eq!(store.hits(), 2, "a read back from the store is cached too");
        tokio::time::sleep(Duration::from_millis(250)).await;
        lookup(&store, "c").await;
        assert_eq!(store.hits(), 2, "expired entries are not served");
    }

    #[tokio::test]
    async fn in_progress_records_are_not_cached() {
        let store = CachedStore::new(MemoryStore::new(), 10, Duration::from_secs(60));
        let fp = Fingerprint::of(&()).unwrap();
        let owner = OwnerToken::generate();
        store
            .reserve("k", fp, &owner, Duration::from_secs(60))
            .await
            .unwrap();
        assert!(matches!(
            lookup(&store, "k").await,
            Reservation::InProgress { .. }
        ));
        store
            .complete(
                "k",
                fp,
                &owner,
                &StoredResult::Ok("1".into()),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        assert_eq!(
            store.hits(),
            0,
            "the in-progress record was asked of the store"
        );
        assert!(matches!(
            lookup(&store, "k").await,
            Reservation::Completed { .. }
        ));
        assert_eq!(store.hits(), 1, "the completion written here is cached");
    }
}
