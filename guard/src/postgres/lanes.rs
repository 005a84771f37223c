//! The store's own PostgreSQL connections: one round trip per statement.
//!
//! A `PgPool` pings a connection before lending it (`test_before_acquire`) and always after it
//! comes back, so every statement through the pool costs three round trips. The store keeps a
//! few long-lived connections of its own ("lanes") instead, opened lazily with the pool's
//! connect options (so the same `search_path`, credentials and TLS). A lane whose connection
//! failed below the SQL level (I/O, protocol), or whose server ended the session (a `FATAL`
//! error, such as `57P01` from `pg_terminate_backend` or a server shutdown), is dropped and
//! reopened; when the server said so (a `FATAL` answer), the statement runs again on the new
//! connection, so a terminated backend costs no failed statement.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgDatabaseError, PgSeverity};
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
    /// Passes a statement's result through, dropping the connection unless the failure was an
    /// answer from a session that goes on (the connection may be broken, or its session over).
    pub(crate) fn check<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(Error::Store(e)) = &result {
            let session_goes_on = e.downcast_ref::<sqlx::Error>().is_none_or(session_goes_on);
            if !session_goes_on {
                *self.0 = None;
            }
        }
        result
    }
}

/// Whether the server ended the session with this answer (`FATAL`, or SQLSTATE class `08` or
/// `57`): the statement did not commit (the server aborts a session's open transaction when it
/// ends it), so it may run again on a new connection. An I/O error is not one of these: the
/// statement may have committed before the connection broke.
pub(crate) fn session_ended(e: &Error) -> bool {
    let Error::Store(e) = e else { return false };
    match e.downcast_ref::<sqlx::Error>() {
        Some(db @ sqlx::Error::Database(_)) => !session_goes_on(db),
        _ => false,
    }
}

/// Whether the connection is still good after this error: the statement failed, the session
/// did not. A `FATAL` (or `PANIC`) error ends the session, and SQLSTATE classes `08`
/// (connection exception) and `57` (operator intervention: `57P01` terminated by an
/// administrator, `57P02` crash shutdown, `57P03` cannot connect now) say the same.
fn session_goes_on(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            let ended = db
                .try_downcast_ref::<PgDatabaseError>()
                .is_some_and(|pg| matches!(pg.severity(), PgSeverity::Fatal | PgSeverity::Panic));
            let class = db
                .code()
                .map(|code| code.get(..2).unwrap_or_default().to_owned());
            !ended && !matches!(class.as_deref(), Some("08" | "57"))
        }
        sqlx::Error::ColumnDecode { .. } => true,
        _ => false,
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
