//! SQLite store: one table in a database file, conditional writes (`INSERT .. ON CONFLICT`,
//! `UPDATE .. WHERE` the row is as read) for reservations, no server.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;

use crate::key::Fingerprint;
use crate::sql_rows::{churning, live_row, state_of, RESERVE_TRIES};
use crate::store::{fenced, OwnerToken, Reservation, Store, StoredResult};
use crate::Error;

/// The table this store uses (also in `migrations/sqlite/` of the crate source).
pub const SQLITE_MIGRATION: &str = include_str!("../migrations/sqlite/0001_idem_guard_records.sql");

/// How long a connection waits for another one's write lock before failing with
/// `SQLITE_BUSY`: SQLite takes one writer at a time, and the store's writes are short, so a
/// wait this long means a writer is stuck (a transaction of the application left open).
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// Records in a SQLite database file, table `idem_guard_records`: durable with no server, for
/// small services (one host, a few processes) and tests.
///
/// Every operation is one statement or a few, each a conditional write that SQLite runs
/// atomically: reserving inserts the row (`INSERT .. ON CONFLICT (key) DO NOTHING`) or, when the
/// existing one has expired, takes it over with an `UPDATE` that succeeds only if the row is
/// still the one read (same owner, same state, still expired); completing, releasing and
/// renewing are fenced by `owner`. So any number of connections, pools and processes can share
/// the file. Expiry is measured by SQLite's clock (`julianday('now')`, the host's clock): the
/// processes sharing a file share a host. Expired rows are taken over in place;
/// [`purge_expired`](Self::purge_expired) deletes the rest.
///
/// [`open`](Self::open) sets what the guarantees need: WAL journal (readers do not block the
/// writer), `synchronous = FULL` (a completion that returned survives a power loss, not only a
/// crash of the process), a busy timeout of [`SQLITE_BUSY_TIMEOUT`]. With
/// [`from_pool`](Self::from_pool) those are the pool's own settings.
///
/// Not offered: completion inside the caller's transaction (`Guard::run_in_tx` is for the
/// PostgreSQL store). SQLite has one writer per database: a transaction that wrote the
/// reservation would hold the write lock of the whole file for as long as its body runs, so
/// every other key's reservation, not only a duplicate's, would wait for it (and fail after
/// the busy timeout). Where the business data and the records share a file, keep the body's
/// writes keyed by [`Attempt::token`](crate::Attempt::token), or idempotent, instead.
///
/// ```no_run
/// use idem_guard::{Guard, SqliteStore};
///
/// # #[tokio::main] async fn main() -> Result<(), idem_guard::Error> {
/// // Creates the file and the table if missing.
/// let store = SqliteStore::open("/var/lib/my-service/idem.db").await?;
/// let guard = Guard::new(store).prefix("ship-order");
/// let shipped: Result<String, idem_guard::Error> =
///     guard.run("order-9", &"order-9", || async { Ok("label-1".to_owned()) }).await;
/// # shipped?; Ok(()) }
/// ```
/// (`no_run` here: it writes a file; `tests/conformance` runs every rule of the `Store` contract
/// against a file of its own, and `tests/sqlite.rs` reopens one and kills a process mid-body.)
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    max_result_len: usize,
}

/// Unix milliseconds now, by SQLite's clock (constant within one statement).
macro_rules! now_ms {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    };
}

const INSERT: &str = concat!(
    "INSERT INTO idem_guard_records (key, owner, fingerprint, state, body, expires_at)
     VALUES (?1, ?2, ?3, 0, NULL, ",
    now_ms!(),
    " + ?4) ON CONFLICT (key) DO NOTHING"
);

const READ: &str = concat!(
    "SELECT owner, fingerprint, state, body, expires_at - ",
    now_ms!(),
    " AS remaining_ms FROM idem_guard_records WHERE key = ?1"
);

/// Takes over the expired row read, only if it is still that row: same owner and state (a
/// completion changes the state, a takeover the owner) and still expired (its owner may have
/// renewed it).
const TAKE_OVER: &str = concat!(
    "UPDATE idem_guard_records
     SET owner = ?2, fingerprint = ?3, state = 0, body = NULL, expires_at = ",
    now_ms!(),
    " + ?4 WHERE key = ?1 AND owner = ?5 AND state = ?6 AND expires_at <= ",
    now_ms!()
);

/// Writes the completion if the row is ours or gone (see the `Store` contract).
const COMPLETE: &str = concat!(
    "INSERT INTO idem_guard_records (key, owner, fingerprint, state, body, expires_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ",
    now_ms!(),
    " + ?6) ON CONFLICT (key) DO UPDATE
        SET state = excluded.state, body = excluded.body, expires_at = excluded.expires_at
        WHERE idem_guard_records.owner = excluded.owner"
);

const RELEASE: &str = "DELETE FROM idem_guard_records WHERE key = ?1 AND owner = ?2 AND state = 0";

const HELD_BY_ANOTHER: &str =
    "SELECT EXISTS (SELECT 1 FROM idem_guard_records WHERE key = ?1 AND owner <> ?2)";

const RENEW: &str = concat!(
    "INSERT INTO idem_guard_records (key, owner, fingerprint, state, body, expires_at)
     VALUES (?1, ?2, ?3, 0, NULL, ",
    now_ms!(),
    " + ?4) ON CONFLICT (key) DO UPDATE
        SET expires_at = CASE WHEN idem_guard_records.state = 0
                              THEN excluded.expires_at ELSE idem_guard_records.expires_at END
        WHERE idem_guard_records.owner = excluded.owner"
);

/// SQLite's result code for a string or blob over its `SQLITE_MAX_LENGTH`.
const SQLITE_TOOBIG: &str = "18";

impl SqliteStore {
    /// Opens (creating it if missing) the database file at `path` with a pool of at most four
    /// connections, WAL journal, `synchronous = FULL` and a busy timeout of
    /// [`SQLITE_BUSY_TIMEOUT`], and creates the table if missing.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        Self::connect_with(options).await
    }

    /// Like [`open`](Self::open), from a URL (`sqlite://path/to/file.db`, `sqlite:file.db`).
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(Error::store)?
            .create_if_missing(true);
        Self::connect_with(options).await
    }

    /// Like [`open`](Self::open), with your connect options; the journal mode, `synchronous`
    /// and busy timeout are set to the store's.
    pub async fn connect_with(options: SqliteConnectOptions) -> Result<Self, Error> {
        let options = options
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(SQLITE_BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(Error::store)?;
        Self::from_pool(pool).await
    }

    /// Uses an existing pool (its connect options decide the journal mode and busy timeout:
    /// use WAL and a busy timeout) and creates the table if missing.
    pub async fn from_pool(pool: SqlitePool) -> Result<Self, Error> {
        // One transaction: two processes migrating at once serialize on SQLite's write lock.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN IMMEDIATE; {SQLITE_MIGRATION}; COMMIT;"
        )))
        .execute(&pool)
        .await
        .map_err(Error::store)?;
        Ok(Self::from_pool_unmigrated(pool))
    }

    /// Uses an existing pool whose database already has the table (from your own migrations,
    /// with [`SQLITE_MIGRATION`] copied in).
    pub fn from_pool_unmigrated(pool: SqlitePool) -> Self {
        SqliteStore {
            pool,
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

    /// The pool, to run business queries next to the guard.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Deletes expired rows and returns how many. Expired rows are harmless (they are taken over
    /// in place), so this only reclaims space; run it from a periodic job.
    pub async fn purge_expired(&self) -> Result<u64, Error> {
        let done = sqlx::query(concat!(
            "DELETE FROM idem_guard_records WHERE expires_at <= ",
            now_ms!()
        ))
        .execute(&self.pool)
        .await
        .map_err(Error::store)?;
        Ok(done.rows_affected())
    }
}

/// A duration in whole milliseconds, rounded up (a lease is never shortened), capped at about
/// 300 years so that `now + d` stays an integer.
fn millis(d: Duration) -> i64 {
    let ms = d.as_micros().div_ceil(1000);
    i64::try_from(ms).unwrap_or(i64::MAX).min(1 << 53)
}

/// A write of a completion that SQLite refused for its size is final, not a store failure to
/// retry.
fn write_error(key: &str, len: usize, limit: usize, e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(db) if db.code().as_deref() == Some(SQLITE_TOOBIG) => {
            Error::ResultTooLarge {
                key: key.to_owned(),
                len,
                limit,
            }
        }
        _ => Error::store(e),
    }
}

impl Store for SqliteStore {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        let fingerprint_hex = fingerprint.to_string();
        for _ in 0..RESERVE_TRIES {
            let inserted = sqlx::query(INSERT)
                .bind(key)
                .bind(owner.as_str())
                .bind(&fingerprint_hex)
                .bind(millis(lease))
                .execute(&self.pool)
                .await
                .map_err(Error::store)?;
            if inserted.rows_affected() == 1 {
                return Ok(Reservation::Acquired);
            }
            let Some(row) = sqlx::query(READ)
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(Error::store)?
            else {
                continue; // released or purged since the insert: insert again
            };
            let held_by: String = row.try_get("owner").map_err(Error::store)?;
            let state: i64 = row.try_get("state").map_err(Error::store)?;
            let remaining_ms: i64 = row.try_get("remaining_ms").map_err(Error::store)?;
            if remaining_ms > 0 {
                let state = i8::try_from(state).unwrap_or(i8::MAX);
                return live_row(
                    key,
                    &row.try_get::<String, _>("fingerprint")
                        .map_err(Error::store)?,
                    state,
                    row.try_get("body").map_err(Error::store)?,
                    Duration::from_millis(remaining_ms.unsigned_abs()),
                );
            }
            let taken = sqlx::query(TAKE_OVER)
                .bind(key)
                .bind(owner.as_str())
                .bind(&fingerprint_hex)
                .bind(millis(lease))
                .bind(&held_by)
                .bind(state)
                .execute(&self.pool)
                .await
                .map_err(Error::store)?;
            if taken.rows_affected() == 1 {
                return Ok(if state == 0 {
                    Reservation::TakenOver
                } else {
                    Reservation::Acquired
                });
            }
            // Another attempt took it over, completed or renewed it meanwhile: read it again.
        }
        Err(churning(key))
    }

    async fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> Result<(), Error> {
        let (state, body) = state_of(result);
        let done = sqlx::query(COMPLETE)
            .bind(key)
            .bind(owner.as_str())
            .bind(fingerprint.to_string())
            .bind(state)
            .bind(body)
            .bind(millis(retention))
            .execute(&self.pool)
            .await
            .map_err(|e| write_error(key, body.len(), self.max_result_len, e))?;
        fenced(done.rows_affected() == 1, key)
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        let deleted = sqlx::query(RELEASE)
            .bind(key)
            .bind(owner.as_str())
            .execute(&self.pool)
            .await
            .map_err(Error::store)?;
        if deleted.rows_affected() == 1 {
            return Ok(());
        }
        let taken: bool = sqlx::query_scalar(HELD_BY_ANOTHER)
            .bind(key)
            .bind(owner.as_str())
            .fetch_one(&self.pool)
            .await
            .map_err(Error::store)?;
        fenced(!taken, key)
    }

    async fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<(), Error> {
        let done = sqlx::query(RENEW)
            .bind(key)
            .bind(owner.as_str())
            .bind(fingerprint.to_string())
            .bind(millis(lease))
            .execute(&self.pool)
            .await
            .map_err(Error::store)?;
        fenced(done.rows_affected() == 1, key)
    }

    fn max_result_len(&self) -> usize {
        self.max_result_len
    }
}
