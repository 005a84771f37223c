//! What happens to a key's record when the guarded body fails.
//!
//! The policy is a type parameter of [`Guard`](crate::Guard), so that caching errors requires an
//! error type that can be stored at compile time, while the default policy works with any error
//! type (`anyhow::Error` included). [`Cache`] stores the whole error (`Serialize +
//! DeserializeOwned`); [`Cacheable`] stores the representation the error type picks
//! ([`CacheableError`]), so the error can keep non-serializable parts, such as the structured
//! [`idem_guard::Error`](crate::Error) it was converted from.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// What to do with the record after the body returned `Err`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Remove the record: the next delivery runs the body again.
    Release,
    /// Complete the record with this encoded error: later deliveries replay it.
    Cache(String),
}

/// A policy for failed bodies. Implemented by [`Release`], [`Cache`] and [`Classified`].
pub trait OnError<E> {
    /// Decides, per error, whether to release the record or cache the error.
    fn decide(&self, error: &E) -> Disposition;

    /// Rebuilds a cached error for a replay, or says why it cannot.
    fn replay(&self, stored: &str) -> Result<E, String>;
}

/// Errors are transient: release the record so a retry runs the body again (the default, and
/// AWS Powertools' behaviour).
#[derive(Debug, Clone, Copy, Default)]
pub struct Release;

/// Errors are final: store the error and replay it to every later delivery (Stripe's behaviour
/// for its API errors). Needs `E: Serialize + DeserializeOwned`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cache;

/// Errors pick what is cached of them ([`CacheableError`]): a final error is stored as its chosen
/// representation and rebuilt from it for every later delivery; a transient one is released.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cacheable;

/// Implemented by an error type for the [`Cacheable`] policy (`on_error = "cacheable"`).
///
/// ```
/// use idem_guard::{on_error::CacheableError, Error, Rejected};
///
/// #[derive(Debug)]
/// enum PayError {
///     /// The guard's error, kept whole: match `Rejected::InProgress { retry_after, .. }`.
///     Guard(Error),
///     Declined { code: String },
///     Timeout,
/// }
///
/// impl From<Error> for PayError {
///     fn from(e: Error) -> Self { PayError::Guard(e) }
/// }
///
/// impl CacheableError for PayError {
///     type Cached = String;
///     fn to_cached(&self) -> Option<String> {
///         match self {
///             PayError::Declined { code } => Some(code.clone()), // final: replay it
///             _ => None,                                         // transient: retry
///         }
///     }
///     fn from_cached(code: String) -> Self { PayError::Declined { code } }
/// }
/// ```
pub trait CacheableError: Sized {
    /// What is stored for a cached error.
    type Cached: Serialize + DeserializeOwned;

    /// The representation to cache for a final error, or `None` for a transient one (its record
    /// is released, so a retry runs the body again).
    fn to_cached(&self) -> Option<Self::Cached>;

    /// The error a later delivery gets, rebuilt from what was cached.
    fn from_cached(cached: Self::Cached) -> Self;
}

/// Ask the error: [`Classify::is_transient`] errors release, the others are cached.
#[derive(Debug, Clone, Copy, Default)]
pub struct Classified;

/// Implemented by an error type to sort its variants for [`Classified`]: a timeout or a
/// rate limit is transient (retrying may succeed), a validation failure or a declined card is
/// permanent (retrying repeats the same answer, and the caller should get it without a re-run).
pub trait Classify {
    /// Whether a retry of the same request could succeed.
    fn is_transient(&self) -> bool;
}

impl<E> OnError<E> for Release {
    fn decide(&self, _: &E) -> Disposition {
        Disposition::Release
    }

    fn replay(&self, _: &str) -> Result<E, String> {
        Err("the record holds a cached error, and this guard's on_error policy (Release) cannot decode errors".into())
    }
}

impl<E: Serialize + DeserializeOwned> OnError<E> for Cache {
    fn decide(&self, error: &E) -> Disposition {
        // An error that cannot be encoded cannot be replayed: let the next delivery retry.
        crate::codec::encode(error).map_or(Disposition::Release, Disposition::Cache)
    }

    fn replay(&self, stored: &str) -> Result<E, String> {
        crate::codec::decode(stored)
    }
}

impl<E: CacheableError> OnError<E> for Cacheable {
    fn decide(&self, error: &E) -> Disposition {
        match error.to_cached() {
            // A representation that cannot be encoded cannot be replayed: let a retry run.
            Some(cached) => {
                crate::codec::encode(&cached).map_or(Disposition::Release, Disposition::Cache)
            }
            None => Disposition::Release,
        }
    }

    fn replay(&self, stored: &str) -> Result<E, String> {
        crate::codec::decode(stored).map(E::from_cached)
    }
}

impl<E: Classify + Serialize + DeserializeOwned> OnError<E> for Classified {
    fn decide(&self, error: &E) -> Disposition {
        if error.is_transient() {
            Disposition::Release
        } else {
            Cache.decide(error)
        }
    }

    fn replay(&self, stored: &str) -> Result<E, String> {
        OnError::<E>::replay(&Cache, stored)
    }
}
