//! The store's own PostgreSQL connections: one round trip per statement.
//!
//! A `PgPool` pings a connection before lending it (`test_before_acquire`) and always after it
//! comes back, so every statement through the pool costs three round trips. The store keeps a
//! few long-lived connections of its own ("lanes") instead, opened lazily with the pool's
//! connect options (so the same `search_path`, credentials and TLS). A lane whose connection
//! failed below the SQL level (I/O, protocol) is dropped and reopened on its next use, so a
//! terminated backend costs one failed statement, as with the pool.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::ConnectOptions as _;
use tokio::sync::{Mutex, MutexGuard};

use crate::Error;

/// How many connections a store opens at most (beside the pool it was given, which stays the
/// caller's for business queries). Statements are short, so a few serve many callers.
pub(crate) const LANES: usize = 4;

#[derive(Debug)]
pub(crate) struct Lanes {
    options: Arc<PgConnectOptions>,
    lanes: Box<[Mutex<Option<PgConnection>>]>,
}

/// A lane's connection, held for one statement.
pub(crate) struct Lane<'a>(MutexGuard<'a, Option<PgConnection>>);

impl Lanes {
    pub(crate) fn new(options: Arc<PgConnectOptions>) -> Self {
        Lanes {
            options,
            lanes: (0..LANES).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// The first free lane (so a sequential caller always reuses one warm connection and its
    /// prepared statements), or the one a counter picks when all are busy.
    pub(crate) async fn get(&self) -> Result<Lane<'_>, Error> {
        let mut guard = match self.lanes.iter().find_map(|l| l.try_lock().ok()) {
            Some(guard) => guard,
            None => {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                let i = NEXT.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
                self.lanes[i].lock().await
            }
        };
        if guard.is_none() {
            *guard = Some(self.options.connect().await.map_err(Error::store)?);
        }
        Ok(Lane(guard))
    }
}

impl Lane<'_> {
    /// Passes a statement's result through, dropping the connection when the failure was not an
    /// answer from the database (the connection may be broken).
    pub(crate) fn check<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(Error::Store(e)) = &result {
            let answered = e.downcast_ref::<sqlx::Error>().is_none_or(|e| {
                matches!(
                    e,
                    sqlx::Error::Database(_) | sqlx::Error::ColumnDecode { .. }
                )
            });
            if !answered {
                *self.0 = None;
            }
        }
        result
    }
}

impl Deref for Lane<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.0.as_ref().expect("a lane is connected when lent")
    }
}

impl DerefMut for Lane<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.0.as_mut().expect("a lane is connected when lent")
    }
}
