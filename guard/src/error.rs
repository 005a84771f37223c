//! Errors of the guard itself, as opposed to errors of the guarded body.

use std::fmt;
use std::time::Duration;

use crate::observe::key_hash;

/// Why the guard refused to run the body for a key that it has seen before.
///
/// Both cases are expected in normal operation (they are what the guard is for); map them to a
/// `409 Conflict` / `422` or to "retry later" in the caller, never to a crash.
///
/// It is `Serialize + Deserialize`, so an error type that caches errors (`on_error = "cache"`)
/// can hold it as it is instead of as text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Rejected {
    /// Another delivery of the same key is running. Retry after `retry_after` (the remaining lease
    /// of the running attempt, a hint based on the writer's clock).
    InProgress {
        /// The full stored key (prefix, scope and key).
        key: String,
        /// How long until the running attempt's lease ends.
        retry_after: Duration,
    },
    /// The key was used before with a different payload. Serving the stored result would answer a
    /// different request, so the request is refused (IETF `Idempotency-Key` draft: 422).
    PayloadMismatch {
        /// The full stored key (prefix, scope and key).
        key: String,
    },
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::InProgress { key, retry_after } => write!(
                f,
                "key #{} is being processed by another delivery; retry after {} ms",
                key_hash(key),
                retry_after.as_millis()
            ),
            Rejected::PayloadMismatch { key } => {
                write!(
                    f,
                    "key #{} was already used with a different payload",
                    key_hash(key)
                )
            }
        }
    }
}

impl std::error::Error for Rejected {}

/// An error of the guard: the request was rejected, the store failed, or the guard was misused.
///
/// Messages (`Display`) show a key hashed, as `#` and its
/// [`observe::key_hash`](crate::observe::key_hash) (the `key_hash` of the call's span), never
/// the key itself, which may hold personal data; the variants' `key` fields keep it for code.
///
/// The guarded body's own error type `E` must implement `From<Error>`, so that these reach the
/// caller through the body's `Result` without a second error channel.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The guard refused to run the body (duplicate in progress, or payload mismatch).
    Rejected(Rejected),
    /// The store could not be reached or answered something unexpected. The body did not run
    /// (when reserving) or its result could not be recorded (when completing).
    Store(Box<dyn std::error::Error + Send + Sync>),
    /// Fencing: the record is no longer owned by this attempt (its lease expired and another
    /// delivery took it over), so this attempt may not complete or release it.
    NotOwner {
        /// The full stored key.
        key: String,
    },
    /// The key expression evaluated to `None` and the guard requires a key.
    MissingKey,
    /// The body ran, but its result, encoded for storage, is longer than the store keeps
    /// ([`Store::max_result_len`](crate::Store::max_result_len)). It is final, not retried: the
    /// key is completed as unreplayable (the effect happened; duplicates get [`Error::Decode`]
    /// saying why instead of running the body again). Return less (an id to look the rest up
    /// by), or raise the store's `max_result_len` where the backend allows.
    ResultTooLarge {
        /// The full stored key.
        key: String,
        /// The encoded result's length in bytes.
        len: usize,
        /// The store's `max_result_len`.
        limit: usize,
    },
    /// The key is empty or too long to store.
    InvalidKey(String),
    /// The payload could not be serialized to compute its fingerprint.
    Payload(serde_json::Error),
    /// A stored result could not be decoded into the handler's result type (the type changed
    /// since it was stored, or the result could not be encoded when it was produced).
    Decode {
        /// The full stored key.
        key: String,
        /// What went wrong.
        reason: String,
    },
}

impl Error {
    /// Wraps a backend error; for implementors of [`Store`](crate::Store).
    pub fn store(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Store(source.into())
    }

    /// The rejection, when the guard refused to run the body.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            Error::Rejected(r) => Some(r),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Rejected(r) => r.fmt(f),
            Error::Store(e) => write!(f, "idempotency store error: {e}"),
            Error::NotOwner { key } => write!(
                f,
                "key #{} is no longer owned by this attempt (lease expired and was taken over)",
                key_hash(key)
            ),
            Error::MissingKey => {
                f.write_str("idempotency key is missing (the key expression is `None`)")
            }
            Error::ResultTooLarge { key, len, limit } => write!(
                f,
                "the result of key #{} is {len} bytes encoded, over the store's limit of {limit} bytes (`max_result_len`): not stored for replay, and the key is completed so that duplicates do not run it again",
                key_hash(key)
            ),
            Error::InvalidKey(why) => write!(f, "invalid idempotency key: {why}"),
            Error::Payload(e) => write!(f, "cannot fingerprint the payload: {e}"),
            Error::Decode { key, reason } => {
                write!(
                    f,
                    "cannot replay the stored result of key #{}: {reason}",
                    key_hash(key)
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Rejected(r) => Some(r),
            Error::Store(e) => Some(e.as_ref()),
            Error::Payload(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Rejected> for Error {
    fn from(r: Rejected) -> Self {
        Error::Rejected(r)
    }
}
