//! MySQL / MariaDB store: one InnoDB table, reservations by `INSERT` (a duplicate key says the
//! row exists) and a conditional `UPDATE` of an expired row, timestamps by the server's clock.

use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError, MySqlPool, MySqlPoolOptions};
use sqlx::Row;

use crate::key::Fingerprint;
use crate::sql_rows::{churning, live_row, state_of, RESERVE_TRIES};
use crate::store::{fenced, OwnerToken, Reservation, Store, StoredResult};
use crate::Error;

/// The table this store uses (also in `migrations/mysql/` of the crate source).
pub const MYSQL_MIGRATION: &str = include_str!("../migrations/mysql/0001_idem_guard_records.sql");

/// Room left in the server's `max_allowed_packet` for the rest of a completion's statement
/// (the key is at most 1 KiB, the tokens 64 bytes, the statement text a few hundred).
const PACKET_HEADROOM: usize = 64 * 1024;

/// Records in the MySQL or MariaDB table `idem_guard_records` of the connection's database
/// (InnoDB), with expiry measured by the server's clock (`UTC_TIMESTAMP(6)`, so the sessions'
/// `time_zone` does not matter).
///
/// Reserving is a plain `INSERT`: it succeeds (the key was free) or fails on the duplicate key,
/// and then the row is read: a live row is reported, an expired one taken over by an `UPDATE`
/// that succeeds only if the row is still the one read (same owner, same state, still expired),
/// checked by the rows it matched. No `INSERT IGNORE` (it would also turn a truncated key into
/// a warning) and no `ON DUPLICATE KEY UPDATE` (whose affected-rows count depends on the client
/// flag `CLIENT_FOUND_ROWS`; sqlx sets it, so an `UPDATE` reports the rows it matched, which
/// is what the fenced writes test). Completing, releasing and renewing are fenced by `owner`.
///
/// Round trips: one per first delivery's reservation, two per duplicate (the insert, the read),
/// one per completion; a pooled connection is pinged when lent (sqlx's `test_before_acquire`),
/// so a connection the server killed (`KILL`, a restart) is replaced before a statement is lost
/// on it.
///
/// The default [`max_result_len`](Self::max_result_len) is the server's `max_allowed_packet`
/// less 64 KiB, at most [`DEFAULT_MAX_RESULT_LEN`](crate::DEFAULT_MAX_RESULT_LEN), read when
/// the store is built with [`connect`](Self::connect) or [`from_pool`](Self::from_pool). A
/// cap raised above it still fails a longer result with
/// [`Error::ResultTooLarge`](crate::Error::ResultTooLarge), before the statement is sent; with
/// [`from_pool_unmigrated`](Self::from_pool_unmigrated) the packet size is not read, and a
/// completion the server refuses for its size fails the same way when the server's error
/// reaches the client (it may close the connection first: keep the cap below the packet).
///
/// Not offered: completion inside the caller's transaction (`Guard::run_in_tx` is for the
/// PostgreSQL store). An uncommitted reservation row holds an InnoDB lock on its key, so a
/// duplicate's `INSERT` would wait on it for as long as the first transaction stays open (up to
/// `innodb_lock_wait_timeout`, 50 s by default) instead of following the guard's in-flight
/// policy; the PostgreSQL store avoids that with `pg_try_advisory_xact_lock`, and MySQL has no
/// transaction-scoped lock to try (`GET_LOCK` belongs to the session: a rollback keeps it, and a
/// pooled connection would carry it to its next user).
///
/// ```no_run
/// use idem_guard::{Guard, MySqlStore};
///
/// # #[tokio::main] async fn main() -> Result<(), idem_guard::Error> {
/// // Creates `idem_guard_records` in the database `test` if it is missing.
/// let store = MySqlStore::connect("mysql://root@127.0.0.1:3306/test").await?;
/// let guard = Guard::new(store).prefix("ship-order");
/// let shipped: Result<String, idem_guard::Error> =
///     guard.run("order-9", &"order-9", || async { Ok("label-1".to_owned()) }).await;
/// # shipped?; Ok(()) }
/// ```
/// (`no_run` here: it needs a server; `tests/conformance` runs every rule of the `Store`
/// contract against MariaDB, and `tests/mysql.rs` kills the store's connections.)
#[derive(Clone, Debug)]
pub struct MySqlStore {
    pool: MySqlPool,
    max_result_len: usize,
    /// The longest body the server's `max_allowed_packet` takes in a completion (less
    /// [`PACKET_HEADROOM`]), when read at start-up. A longer statement makes the server close
    /// the connection, and whether the client then sees its error or only a broken pipe is a
    /// race: so the body is measured against it before anything is sent.
    server_fits: Option<usize>,
}

const INSERT: &str = "
INSERT INTO idem_guard_records (`key`, owner, fingerprint, state, body, expires_at)
VALUES (?, ?, ?, 0, NULL, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";

const READ: &str = "
SELECT owner, fingerprint, state, body,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) AS remaining_us
FROM idem_guard_records WHERE `key` = ?";

/// Takes over the expired row read, only if it is still that row: same owner and state (a
/// completion changes the state, a takeover the owner) and still expired (its owner may have
/// renewed it).
const TAKE_OVER: &str = "
UPDATE idem_guard_records
SET owner = ?, fingerprint = ?, state = 0, body = NULL,
    expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE `key` = ? AND owner = ? AND state = ? AND expires_at <= UTC_TIMESTAMP(6)";

const COMPLETE: &str = "
UPDATE idem_guard_records
SET state = ?, body = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE `key` = ? AND owner = ?";

/// The completion of an owner whose row is gone (its lease ended and the row was purged):
/// no other attempt ran, so it is written again (see the `Store` contract).
const COMPLETE_GONE: &str = "
INSERT INTO idem_guard_records (`key`, owner, fingerprint, state, body, expires_at)
VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";

const RELEASE: &str = "DELETE FROM idem_guard_records WHERE `key` = ? AND owner = ? AND state = 0";

const HELD_BY_ANOTHER: &str =
    "SELECT EXISTS (SELECT 1 FROM idem_guard_records WHERE `key` = ? AND owner <> ?)";

const RENEW: &str = "
UPDATE idem_guard_records
SET expires_at = IF(state = 0, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, expires_at)
WHERE `key` = ? AND owner = ?";

/// MySQL's and MariaDB's error numbers for a statement over `max_allowed_packet`
/// (`ER_NET_PACKET_TOO_LARGE`, after which the server closes the connection) and for a value
/// over it (`ER_WARN_ALLOWED_PACKET_OVERFLOWED`).
const PACKET_TOO_LARGE: [u16; 2] = [1153, 1301];

impl MySqlStore {
    /// Connects to `url` with a pool of at most 10 connections and creates the table if missing.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let options: MySqlConnectOptions = url.parse().map_err(Error::store)?;
        let pool = MySqlPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(Error::store)?;
        Self::from_pool(pool).await
    }

    /// Uses an existing pool (its database holds the table) and creates the table if missing.
    pub async fn from_pool(pool: MySqlPool) -> Result<Self, Error> {
        // `CREATE TABLE IF NOT EXISTS` is atomic under the server's metadata lock: concurrent
        // first starts do not race.
        sqlx::raw_sql(MYSQL_MIGRATION)
            .execute(&pool)
            .await
            .map_err(Error::store)?;
        let packet: u64 = sqlx::query_scalar("SELECT CAST(@@max_allowed_packet AS UNSIGNED)")
            .fetch_one(&pool)
            .await
            .map_err(Error::store)?;
        let fits = usize::try_from(packet)
            .unwrap_or(usize::MAX)
            .saturating_sub(PACKET_HEADROOM);
        let mut store = Self::from_pool_unmigrated(pool)
            .max_result_len(fits.min(crate::DEFAULT_MAX_RESULT_LEN));
        store.server_fits = Some(fits);
        Ok(store)
    }

    /// Uses an existing pool whose database already has the table (from your own migrations,
    /// with [`MYSQL_MIGRATION`] copied in). The result cap is
    /// [`DEFAULT_MAX_RESULT_LEN`](crate::DEFAULT_MAX_RESULT_LEN) unless set: keep it below the
    /// server's `max_allowed_packet`.
    pub fn from_pool_unmigrated(pool: MySqlPool) -> Self {
        MySqlStore {
            pool,
            max_result_len: crate::DEFAULT_MAX_RESULT_LEN,
            server_fits: None,
        }
    }

    /// The longest result kept, in bytes of its encoded text: a longer one fails at once with
    /// [`Error::ResultTooLarge`](crate::Error::ResultTooLarge). See
    /// [`Store::max_result_len`](crate::Store::max_result_len).
    pub fn max_result_len(mut self, bytes: usize) -> Self {
        self.max_result_len = bytes;
        self
    }

    /// The pool, to run business queries next to the guard.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Deletes expired rows and returns how many. Expired rows are harmless (they are taken over
    /// in place), so this only reclaims space; run it from a periodic job.
    pub async fn purge_expired(&self) -> Result<u64, Error> {
        let done =
            sqlx::query("DELETE FROM idem_guard_records WHERE expires_at <= UTC_TIMESTAMP(6)")
                .execute(&self.pool)
                .await
                .map_err(Error::store)?;
        Ok(done.rows_affected())
    }
}

/// A duration in whole microseconds, rounded up, capped at about 300 years (`DATETIME` ends at
/// the year 9999).
fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros())
        .unwrap_or(i64::MAX)
        .min(10_000_000_000_000_000)
}

fn is_duplicate_key(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// A completion the server refused for its size is final, not a store failure to retry.
fn write_error(key: &str, len: usize, limit: usize, e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(db)
            if db
                .try_downcast_ref::<MySqlDatabaseError>()
                .is_some_and(|e| PACKET_TOO_LARGE.contains(&e.number())) =>
        {
            Error::ResultTooLarge {
                key: key.to_owned(),
                len,
                limit,
            }
        }
        _ => Error::store(e),
    }
}

impl Store for MySqlStore {
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
                .bind(micros(lease))
                .execute(&self.pool)
                .await;
            match inserted {
                Ok(_) => return Ok(Reservation::Acquired),
                Err(e) if is_duplicate_key(&e) => {}
                Err(e) => return Err(Error::store(e)),
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
            let state: i8 = row.try_get("state").map_err(Error::store)?;
            let remaining_us: i64 = row.try_get("remaining_us").map_err(Error::store)?;
            if remaining_us > 0 {
                return live_row(
                    key,
                    &row.try_get::<String, _>("fingerprint")
                        .map_err(Error::store)?,
                    state,
                    row.try_get("body").map_err(Error::store)?,
                    Duration::from_micros(remaining_us.unsigned_abs()),
                );
            }
            let taken = sqlx::query(TAKE_OVER)
                .bind(owner.as_str())
                .bind(&fingerprint_hex)
                .bind(micros(lease))
                .bind(key)
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
        if let Some(fits) = self.server_fits.filter(|&fits| body.len() > fits) {
            return Err(Error::ResultTooLarge {
                key: key.to_owned(),
                len: body.len(),
                limit: fits,
            });
        }
        let too_large = |e| write_error(key, body.len(), self.max_result_len, e);
        let updated = sqlx::query(COMPLETE)
            .bind(state)
            .bind(body)
            .bind(micros(retention))
            .bind(key)
            .bind(owner.as_str())
            .execute(&self.pool)
            .await
            .map_err(too_large)?;
        if updated.rows_affected() == 1 {
            return Ok(());
        }
        let inserted = sqlx::query(COMPLETE_GONE)
            .bind(key)
            .bind(owner.as_str())
            .bind(fingerprint.to_string())
            .bind(state)
            .bind(body)
            .bind(micros(retention))
            .execute(&self.pool)
            .await;
        match inserted {
            Ok(_) => Ok(()),
            // Not ours (the update matched nothing) yet there: another owner's.
            Err(e) if is_duplicate_key(&e) => fenced(false, key),
            Err(e) => Err(too_large(e)),
        }
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
        let updated = sqlx::query(RENEW)
            .bind(micros(lease))
            .bind(key)
            .bind(owner.as_str())
            .execute(&self.pool)
            .await
            .map_err(Error::store)?;
        if updated.rows_affected() == 1 {
            return Ok(());
        }
        let inserted = sqlx::query(INSERT)
            .bind(key)
            .bind(owner.as_str())
            .bind(fingerprint.to_string())
            .bind(micros(lease))
            .execute(&self.pool)
            .await;
        match inserted {
            Ok(_) => Ok(()),
            Err(e) if is_duplicate_key(&e) => fenced(false, key),
            Err(e) => Err(Error::store(e)),
        }
    }

    fn max_result_len(&self) -> usize {
        self.max_result_len
    }
}
