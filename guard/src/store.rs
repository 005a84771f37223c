//! The storage contract every backend implements.

use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::key::Fingerprint;
use crate::Error;

/// Identifies one attempt at running a key's body: the fencing token of its reservation.
///
/// Every reservation gets a fresh token, and a store only lets the attempt holding the record's
/// current token complete, release or renew it. An attempt whose lease expired and was taken
/// over therefore cannot overwrite the new owner's record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OwnerToken(String);

impl OwnerToken {
    /// A token unique across processes: 64 random bits per process and a 64-bit counter, as 32
    /// hex digits (stores may rely on that fixed length and alphabet).
    pub fn generate() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        // `RandomState` is seeded from the OS RNG; hashing the pid and the start time into it
        // keeps two processes apart even if they were handed the same seed.
        let seed = *SEED.get_or_init(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            RandomState::new().hash_one((std::process::id(), now))
        });
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        OwnerToken(format!("{seed:016x}{n:016x}"))
    }

    /// Rebuilds a token read back from a store.
    pub fn from_stored(token: impl Into<String>) -> Self {
        OwnerToken(token.into())
    }

    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A completed key's result, as the guard encodes it for storage.
///
/// The text is the guard's encoding of the value (versioned: postcard behind a `p1:` marker, or
/// JSON); stores keep it opaque.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredResult {
    /// The body succeeded; its encoded `Ok` value.
    Ok(String),
    /// The body failed with an error the policy chose to cache; the encoded error.
    Err(String),
    /// The body succeeded but its value could not be encoded. The key stays completed (the effect
    /// happened and must not run again) and replays fail with [`Error::Decode`] and this reason.
    Unreplayable(String),
}

impl StoredResult {
    /// A one-letter tag and the text, for stores that keep a result in one string.
    pub fn tag_and_text(&self) -> (char, &str) {
        match self {
            StoredResult::Ok(s) => ('o', s),
            StoredResult::Err(s) => ('e', s),
            StoredResult::Unreplayable(s) => ('x', s),
        }
    }

    /// The text's length in bytes: what [`Store::max_result_len`] bounds.
    pub fn len(&self) -> usize {
        self.tag_and_text().1.len()
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The inverse of [`tag_and_text`](Self::tag_and_text).
    pub fn from_tag(tag: char, text: String) -> Option<Self> {
        match tag {
            'o' => Some(StoredResult::Ok(text)),
            'e' => Some(StoredResult::Err(text)),
            'x' => Some(StoredResult::Unreplayable(text)),
            _ => None,
        }
    }
}

/// `Ok` when the fenced write found the record ours (or gone), [`Error::NotOwner`] otherwise.
pub(crate) fn fenced(owned: bool, key: &str) -> Result<(), Error> {
    if owned {
        Ok(())
    } else {
        Err(Error::NotOwner {
            key: key.to_owned(),
        })
    }
}

/// The default of [`Store::max_result_len`] for the memory, Redis and PostgreSQL stores: 16 MiB
/// of encoded result, far below what Redis (512 MB a string) and PostgreSQL (1 GB a field) take,
/// and far above what a handler's answer should be; a result that large is a mistake to report,
/// not a record to keep.
pub const DEFAULT_MAX_RESULT_LEN: usize = 16 * 1024 * 1024;

/// What a reservation attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// The record was created, or an expired *completed* one replaced, for the given owner: run
    /// the body.
    Acquired,
    /// The record was an *in-progress* one whose lease had expired, and is now the given
    /// owner's: run the body, knowing that an earlier attempt started it and never finished
    /// (it crashed, or lost its store) and may have made part of its effect.
    TakenOver,
    /// A completed record exists: replay it (after checking the fingerprint).
    Completed {
        /// Fingerprint of the payload that completed the key.
        fingerprint: Fingerprint,
        /// The stored result.
        result: StoredResult,
    },
    /// Another attempt holds a live lease.
    InProgress {
        /// Fingerprint of the payload being processed.
        fingerprint: Fingerprint,
        /// Remaining lease of that attempt (a hint).
        retry_after: Duration,
    },
}

/// Where the guard keeps its records. Implement it for another backend; the conformance suite in
/// `tests/conformance` states each rule below as a test.
///
/// A record is either *in progress* (held by an owner under a lease) or *completed* (holding the
/// result, kept for the retention). Contract:
///
/// - **Atomicity.** [`reserve`](Store::reserve) is one atomic conditional write: of any number
///   of concurrent reservations of a key, across all clones and all processes sharing the
///   backend, exactly one returns [`Reservation::Acquired`] or [`Reservation::TakenOver`] while
///   a live record exists. It creates the record when none exists, and takes it over (new owner,
///   new fingerprint, fresh lease) when the existing one has *expired*: an in-progress record
///   past its lease ([`TakenOver`](Reservation::TakenOver), which a store reports while it still
///   holds the expired record: at least one more lease after it ended), or a completed record
///   past its retention ([`Acquired`](Reservation::Acquired)). An expired record is never
///   reported to the caller.
/// - **Fencing.** [`complete`](Store::complete), [`release`](Store::release) and
///   [`renew`](Store::renew) act only when the record is owned by `owner`, and fail with
///   [`Error::NotOwner`] when another owner holds it (it was taken over). An owner whose lease
///   ended *without* a takeover still owns its record: these calls succeed (recreating it when the
///   backend already dropped it), because no other attempt ran. `complete` is idempotent for its
///   owner (a retried `complete` whose first reply was lost succeeds), and `release` of a missing
///   record succeeds.
/// - **TTL semantics.** `lease` and `retention` are durations from the moment of the write, measured
///   by the backend's clock where it has one. `renew` restarts the lease. `complete` replaces the
///   lease with the retention and keeps the reservation's fingerprint.
/// - **Errors.** A backend failure is [`Error::Store`]; the guard never runs a body whose
///   reservation failed.
/// - **Size.** [`complete`](Store::complete) takes any result whose text is at most
///   [`max_result_len`](Store::max_result_len) bytes; the guard never hands it a longer one. A
///   backend that refuses a result for its size all the same returns
///   [`Error::ResultTooLarge`], never [`Error::Store`] (which the guard retries).
///
/// Clones share state, like a connection pool.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an idempotency store",
    label = "this is not an `idem_guard::Store`",
    note = "a store is a `MemoryStore`, `RedisStore`, `PostgresStore`, `DynamoDbStore`, `SqliteStore`, `MySqlStore`, a `CachedStore` of one, or your own `impl Store`"
)]
pub trait Store: Clone + Send + Sync {
    /// Atomically creates or takes over the record of `key`, or reports the live one.
    fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> impl Future<Output = Result<Reservation, Error>> + Send;

    /// Marks `key` completed with `result` for `retention`, if `owner` still owns it.
    fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Removes `owner`'s record of `key`, so the next delivery runs the body again.
    fn release(
        &self,
        key: &str,
        owner: &OwnerToken,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Extends `owner`'s lease on `key` to `lease` from now.
    fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// The longest result this store keeps, in bytes of a [`StoredResult`]'s text. The guard
    /// checks each result when it encodes it: a longer one fails at once with
    /// [`Error::ResultTooLarge`] instead of reaching the store. Default:
    /// [`DEFAULT_MAX_RESULT_LEN`]; every store of this crate has a setting of the same name.
    fn max_result_len(&self) -> usize {
        DEFAULT_MAX_RESULT_LEN
    }
}
