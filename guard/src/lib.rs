//! Runs a handler at most once per idempotency key, however often its message is delivered.
//!
//! Queues, webhooks, Lambda retries and double clicks deliver the same request more than once.
//! The guard makes the handler safe: one atomic reservation per key (no check-then-act race),
//! the stored result replayed to duplicates, a concurrent duplicate refused (or made to wait),
//! a key reused with a different payload refused, a crashed attempt taken over after its lease,
//! and, with PostgreSQL (or DynamoDB's `TransactWriteItems`), the completion written in the same
//! transaction as the business change.
//!
//! # With the attribute
//!
//! ```
//! use idem_guard::{idempotent, MemoryStore};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug)]
//! enum AppError { Guard(idem_guard::Error) }
//! impl From<idem_guard::Error> for AppError {
//!     fn from(e: idem_guard::Error) -> Self { AppError::Guard(e) }
//! }
//!
//! #[derive(Serialize, Deserialize, Clone)]
//! struct Refund { refund_id: String, cents: u64 }
//!
//! struct Payments { store: MemoryStore, refunded_cents: std::sync::atomic::AtomicU64 }
//!
//! impl Payments {
//!     // The key comes from the command (its id); the payload is every argument but `self`.
//!     #[idempotent(key = refund.refund_id, store = self.store)]
//!     async fn refund(&self, refund: Refund) -> Result<u64, AppError> {
//!         let total = self.refunded_cents.fetch_add(refund.cents, std::sync::atomic::Ordering::SeqCst);
//!         Ok(total + refund.cents)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), AppError> {
//! let payments = Payments { store: MemoryStore::new(), refunded_cents: Default::default() };
//! let refund = Refund { refund_id: "rf_1".into(), cents: 500 };
//! assert_eq!(payments.refund(refund.clone()).await?, 500);
//! // The redelivery replays the stored result; the money moves once.
//! assert_eq!(payments.refund(refund).await?, 500);
//! // The same id with another amount is refused, not served.
//! let other = Refund { refund_id: "rf_1".into(), cents: 900 };
//! assert!(matches!(
//!     payments.refund(other).await,
//!     Err(AppError::Guard(idem_guard::Error::Rejected(idem_guard::Rejected::PayloadMismatch { .. })))
//! ));
//! # Ok(()) }
//! ```
//!
//! The attribute expands to a call of [`Guard::run`] (see [`idempotent`] for its options); use
//! that directly where an attribute does not fit. Stores: [`MemoryStore`] (one process),
//! [`RedisStore`], [`PostgresStore`] (with [`Guard::run_in_tx`]), `DynamoDbStore` (feature
//! `dynamodb`, with `Guard::run_transact`), `SqliteStore` (feature `sqlite`: a database file,
//! no server), `MySqlStore` (feature `mysql`: MySQL or MariaDB), and [`CachedStore`] in front
//! of a remote one;
//! implement [`Store`] for another. The driver crates are re-exported
//! ([`sqlx`], [`redis`]) so pools and connections are built with the versions the stores take.
//!
//! With the `http` feature, `idem_guard::http::IdempotencyLayer` guards an axum (or any `tower`)
//! service by its requests' `Idempotency-Key` header.

// Lets `#[idempotent]`, which names `::idem_guard`, be used in this crate's own tests.
extern crate self as idem_guard;

pub mod batch;
mod cached;
mod codec;
#[cfg(feature = "dynamodb")]
pub mod dynamodb;
mod error;
mod guard;
#[cfg(feature = "http")]
pub mod http;
mod key;
mod memory;
#[cfg(feature = "mysql")]
mod mysql;
pub mod observe;
pub mod on_error;
mod postgres;
mod redis_store;
#[cfg(any(feature = "sqlite", feature = "mysql"))]
mod sql_rows;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
pub mod testing;
mod transactional;

pub use crate::cached::CachedStore;
#[cfg(feature = "dynamodb")]
pub use crate::dynamodb::DynamoDbStore;
pub use crate::error::{Error, Rejected};
pub use crate::guard::{
    Attempt, Guard, InFlight, Outcome, DEFAULT_LEASE, DEFAULT_RETENTION, DISABLED_ENV,
};
pub use crate::key::{DisplayKey, Fingerprint, KeyPart, Payload, MAX_KEY_LEN};
pub use crate::memory::{MemoryStore, DEFAULT_CAPACITY};
#[cfg(feature = "mysql")]
pub use crate::mysql::{MySqlStore, MYSQL_MIGRATION};
pub use crate::on_error::Classify;
pub use crate::postgres::{PostgresStore, MIGRATION};
#[cfg(feature = "redis-cluster")]
pub use crate::redis_store::{RedisClusterConnection, RedisClusterStore};
pub use crate::redis_store::{RedisConnection, RedisStore};
#[cfg(feature = "sqlite")]
pub use crate::sqlite::{SqliteStore, SQLITE_BUSY_TIMEOUT, SQLITE_MIGRATION};
pub use crate::store::{OwnerToken, Reservation, Store, StoredResult, DEFAULT_MAX_RESULT_LEN};
pub use crate::transactional::{TxAttempt, TxStart};

/// Makes an `async fn` returning `Result<T, E>` idempotent. See the crate docs for an example.
///
/// ```text
/// #[idempotent(
///     key = <expr over the arguments>,      // required: String, &str, integer, Option, tuple, or Display
///     store = <expr>,                       // required: a Store (cloned), e.g. self.store
///     payload = <expr>,                     // default: all arguments but self, as a tuple
///     prefix = "name",                      // names the operation (also spelled `scope`); default: the fn name
///     tenant = <expr>,                      // tenant scoping: one more part of the key
///     lease = <Duration expr>,              // default 60 s, renewed while the body runs
///     retention = <Duration expr>,          // default 24 h
///     deadline = <tokio::time::Instant>,    // the caller's deadline: the lease never outlives it
///     in_flight = "reject" | wait(<Duration expr>),
///     on_error = "release" | "cache" | "cacheable" | "classify",
///     required = false,                     // a `None` key runs unguarded instead of failing
///     tx = <argument name>,                 // PostgreSQL: complete in this transaction argument
///     attempt = <name>,                     // binds an `Attempt` (key, token, is_takeover) in the body
/// )]
/// ```
///
/// `E` must implement `From<idem_guard::Error>`. When the function returns
/// `Result<Outcome<T>, E>`, its body builds `Outcome::fresh(value)` and callers learn whether a
/// result was replayed. A `key` that calls a clock or an RNG (`Uuid::new_v4()`, `Utc::now()`,
/// `rand::random()`...) is a compile error: it would give every redelivery a new key.
pub use idem_guard_macros::idempotent;

/// The `redis` crate this version is built against (1.x), so that a `ConnectionManager` given
/// to [`RedisStore::new`] is of the same version.
pub use ::redis;
/// The `sqlx` crate this version is built against (0.9, PostgreSQL; SQLite and MySQL with the
/// features of those names), so that a pool given to
/// [`PostgresStore::from_pool`] and the transactions given to [`Guard::run_in_tx`] are of the
/// same version.
pub use ::sqlx;

/// The `aws-sdk-dynamodb` crate this version is built against (1.x), so that a `Client` given
/// to [`DynamoDbStore::new`] and the `TransactWriteItem`s of [`Guard::run_transact`] are of the
/// same version.
#[cfg(feature = "dynamodb")]
pub use ::aws_sdk_dynamodb;

/// Support for the code `#[idempotent]` generates; not a public API.
#[doc(hidden)]
pub mod __private {
    use std::fmt::Display;

    use serde::Serialize;

    use crate::{Error, Fingerprint, KeyPart};

    /// Bounds an argument of the default payload, so that one which cannot be serialized is
    /// reported at that argument.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is an argument of this `#[idempotent]` function, so part of its default payload, but does not implement `Serialize`",
        label = "this argument is fingerprinted by default",
        note = "the default payload is every argument but `self`, the store, the transaction and service types (State, pools, stores); say what identifies the request with `payload = (..)`, e.g. `payload = (order, amount)`"
    )]
    pub trait PayloadPart {
        fn to_value(&self) -> Result<serde_json::Value, Error>;
    }

    impl<T: Serialize + ?Sized> PayloadPart for T {
        fn to_value(&self) -> Result<serde_json::Value, Error> {
            serde_json::to_value(self).map_err(Error::Payload)
        }
    }

    /// The return type of an `#[idempotent]` function: a `Result`, under whatever alias.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is the return type of an `#[idempotent]` function, but it is not a `Result<T, E>`",
        label = "`#[idempotent]` needs `Result<T, E>` here (or `Result<Outcome<T>, E>`)",
        note = "the result `T` is stored for replay, and the guard's own errors (a duplicate in flight, a store failure) are returned as `E`, which must implement `From<idem_guard::Error>`: return `Result<{Self}, E>`"
    )]
    pub trait ReturnsResult {
        type Ok;
        type Err;
        fn into_result(self) -> Result<Self::Ok, Self::Err>;
        fn from_result(result: Result<Self::Ok, Self::Err>) -> Self;
    }

    impl<T, E> ReturnsResult for Result<T, E> {
        type Ok = T;
        type Err = E;
        fn into_result(self) -> Self {
            self
        }
        fn from_result(result: Self) -> Self {
            result
        }
    }

    /// The body's value, as the `Result` its declared type (an alias) stands for.
    pub fn into_result<R: ReturnsResult>(value: R) -> Result<R::Ok, R::Err> {
        value.into_result()
    }

    /// The guard's result, as the function's declared type.
    pub fn from_result<R: ReturnsResult>(result: Result<R::Ok, R::Err>) -> R {
        R::from_result(result)
    }

    /// The function's body as an async block whose output is the function's return type `R`:
    /// the bound tells the compiler that type before it checks the block's `return`s and `?`s.
    pub fn returning<R, F: std::future::Future<Output = R>>(body: F) -> F {
        body
    }

    // The checks of `#[idempotent]`, each spanned by the macro at what it checks (the store
    // expression, the result's `T`, its `E`), so that a failure is reported there with the
    // message of the check's trait.

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not an idempotency store",
        label = "the `store` of `#[idempotent]` must implement `idem_guard::Store`",
        note = "a store is a `MemoryStore`, `RedisStore`, `PostgresStore`, `DynamoDbStore`, `SqliteStore`, `MySqlStore`, a `CachedStore` of one, or your own `impl Store`"
    )]
    pub trait GuardStore {}

    impl<S: crate::Store> GuardStore for S {}

    /// Picks the store of an `#[idempotent]` function when it is one (autoref specialization, as
    /// for keys), and [`NotAStore`] otherwise, with [`GuardStore`]'s error at the store
    /// expression: the rest of the expansion then type-checks, so that error is the only one.
    pub struct StoreProbe<T>(pub T);

    pub trait ByStore {
        type Store;
        fn checked(&self) -> Self::Store;
    }

    impl<T: crate::Store> ByStore for StoreProbe<T> {
        type Store = T;
        fn checked(&self) -> T {
            self.0.clone()
        }
    }

    pub trait ByNotAStore<T> {
        fn checked(&self) -> NotAStore
        where
            T: GuardStore;
    }

    impl<T> ByNotAStore<T> for &StoreProbe<T> {
        fn checked(&self) -> NotAStore
        where
            T: GuardStore,
        {
            NotAStore
        }
    }

    /// Stands for a store expression that is not a store, in code that does not compile.
    #[derive(Debug, Clone, Copy)]
    pub struct NotAStore;

    fn not_a_store() -> Error {
        Error::store("`#[idempotent]` was given a value that is not a store")
    }

    impl crate::Store for NotAStore {
        async fn reserve(
            &self,
            _: &str,
            _: Fingerprint,
            _: &crate::OwnerToken,
            _: std::time::Duration,
        ) -> Result<crate::Reservation, Error> {
            Err(not_a_store())
        }

        async fn complete(
            &self,
            _: &str,
            _: Fingerprint,
            _: &crate::OwnerToken,
            _: &crate::StoredResult,
            _: std::time::Duration,
        ) -> Result<(), Error> {
            Err(not_a_store())
        }

        async fn release(&self, _: &str, _: &crate::OwnerToken) -> Result<(), Error> {
            Err(not_a_store())
        }

        async fn renew(
            &self,
            _: &str,
            _: Fingerprint,
            _: &crate::OwnerToken,
            _: std::time::Duration,
        ) -> Result<(), Error> {
            Err(not_a_store())
        }
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is the result of an `#[idempotent]` function, which is stored for replay, but it is not `Serialize + DeserializeOwned`",
        label = "stored, and replayed to every duplicate",
        note = "derive `serde::Serialize` and `serde::Deserialize` for it, or return a type that has them"
    )]
    pub trait Replayable {
        type Same;
        fn same(self) -> Self::Same;
    }

    impl<T: Serialize + serde::de::DeserializeOwned> Replayable for T {
        type Same = T;
        fn same(self) -> T {
            self
        }
    }

    /// The result of an `#[idempotent]` function, its `T` checked.
    pub fn replayable<T: Replayable, E>(result: Result<T, E>) -> Result<T::Same, E> {
        result.map(Replayable::same)
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` is the error type of an `#[idempotent]` function, but does not implement `From<idem_guard::Error>`",
        label = "the guard's own errors (rejections, store failures) are returned as this type",
        note = "add `impl From<idem_guard::Error> for {Self}`; a variant holding the `idem_guard::Error` keeps `Rejected::InProgress {{ retry_after, .. }}` to match on"
    )]
    pub trait GuardError {
        type Same;
        fn same(self) -> Self::Same;
    }

    impl<E: From<Error>> GuardError for E {
        type Same = E;
        fn same(self) -> E {
            self
        }
    }

    /// The result of an `#[idempotent]` function, its `E` checked.
    pub fn guard_error<T, E: GuardError>(result: Result<T, E>) -> Result<T, E::Same> {
        result.map_err(GuardError::same)
    }

    /// One argument of the default payload.
    pub fn payload_part<T: PayloadPart + ?Sized>(value: &T) -> Result<serde_json::Value, Error> {
        value.to_value()
    }

    /// The fingerprint of the default payload's arguments: the same as that of the tuple of them.
    pub fn fingerprint_parts<const N: usize>(
        parts: [Result<serde_json::Value, Error>; N],
    ) -> Result<Fingerprint, Error> {
        let values = parts.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(Fingerprint::of_value(&serde_json::Value::Array(values)))
    }

    /// Picks a key type's [`KeyPart`] impl when it has one and its `Display` otherwise (autoref
    /// specialization: the `KeyPart` method matches without the extra reference, so wins).
    pub struct KeyProbe<'a, T: ?Sized>(pub &'a T);

    pub trait ByKeyPart {
        fn idem_key(&self) -> Option<String>;
    }

    impl<T: KeyPart + ?Sized> ByKeyPart for KeyProbe<'_, T> {
        fn idem_key(&self) -> Option<String> {
            self.0.key_part()
        }
    }

    pub trait ByDisplay {
        fn idem_key(&self) -> Option<String>;
    }

    impl<T: Display + ?Sized> ByDisplay for &KeyProbe<'_, T> {
        fn idem_key(&self) -> Option<String> {
            Some(self.0.to_string())
        }
    }
}
