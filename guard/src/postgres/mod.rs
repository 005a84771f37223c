//! PostgreSQL store: one table, `INSERT ... ON CONFLICT` reservations, and completion inside the
//! caller's transaction.

mod lanes;

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{PgConnection, PgExecutor, Row};

use crate::key::Fingerprint;
use crate::store::{fenced, OwnerToken, Reservation, Store, StoredResult};
use crate::Error;
use lanes::Lanes;

/// The migration this crate ships (also in `migrations/` of the crate source).
pub const MIGRATION: &str = include_str!("../../migrations/0001_idem_guard_records.sql");

/// Records in the PostgreSQL table `idem_guard_records` (resolved through the connection's
/// `search_path`), with expiry measured by the database's clock.
///
/// Reserving is one statement that inserts the row, or takes over an expired one
/// (`ON CONFLICT DO UPDATE ... WHERE expires_at <= clock_timestamp()`), or returns the live one;
/// completing, releasing and renewing are one fenced statement each (`WHERE owner = $token`).
/// Expired rows are taken over in place; [`purge_expired`](Self::purge_expired) deletes the rest.
///
/// Round trips: one per statement, so two per first delivery (reserve, complete) and one per
/// duplicate. The store runs its statements on up to four connections of its own, opened
/// lazily with the pool's connect options: a `PgPool` pings a connection before lending it and
/// after it comes back, which would triple the round trips. The pool stays yours for business
/// queries ([`pool`](Self::pool)).
///
/// [`Guard::run_in_tx`](crate::Guard::run_in_tx) writes the reservation and the completion
/// through the caller's transaction, so the business writes and the mark commit together.
///
/// ```no_run
/// use idem_guard::{Guard, PostgresStore};
///
/// # #[tokio::main] async fn main() -> Result<(), idem_guard::Error> {
/// // Creates `idem_guard_records` if it is missing.
/// let store = PostgresStore::connect("postgres://postgres@127.0.0.1:5432/test").await?;
/// let guard = Guard::new(store).prefix("ship-order");
/// let shipped: Result<String, idem_guard::Error> =
///     guard.run("order-9", &"order-9", || async { Ok("label-1".to_owned()) }).await;
/// # shipped?; Ok(()) }
/// ```
/// (`no_run` here: it needs a server; `tests/conformance` runs every rule of the `Store`
/// contract against the live server.)
#[derive(Clone, Debug)]
pub struct PostgresStore {
    pool: PgPool,
    lanes: Arc<Lanes>,
    max_result_len: usize,
}

/// Reads the live row first and inserts only when there is none, so that a duplicate (the
/// common case under redelivery) is a read: no row lock, no transaction id, no WAL flush.
const RESERVE: &str = "
WITH live AS (
    SELECT fingerprint, state, body, expires_at
    FROM idem_guard_records
    WHERE key = $1 AND expires_at > clock_timestamp()
), abandoned AS (
    SELECT 1 FROM idem_guard_records
    WHERE key = $1 AND state = 0 AND expires_at <= clock_timestamp()
), acquired AS (
    INSERT INTO idem_guard_records AS r (key, owner, fingerprint, state, body, expires_at)
    SELECT $1, $2, $3, 0, NULL, clock_timestamp() + $4::float8 * interval '1 millisecond'
    WHERE NOT EXISTS (SELECT 1 FROM live)
    ON CONFLICT (key) DO UPDATE
        SET owner = EXCLUDED.owner, fingerprint = EXCLUDED.fingerprint, state = 0,
            body = NULL, expires_at = EXCLUDED.expires_at
        WHERE r.expires_at <= clock_timestamp()
    RETURNING 1
)
SELECT true AS acquired, EXISTS (SELECT 1 FROM abandoned) AS taken_over,
       NULL::text AS fingerprint, NULL::smallint AS state, NULL::text AS body,
       NULL::float8 AS remaining_ms
FROM acquired
UNION ALL
SELECT false, false, fingerprint, state, body,
       GREATEST(0, EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000)::float8
FROM live";

/// [`RESERVE`] for a reservation inside the caller's transaction. Its row stays invisible to
/// others until that transaction commits, and a concurrent `INSERT` of the same key would block
/// on it until then (or fail with the caller's `lock_timeout`). So each transactional
/// reservation first takes a transaction-scoped advisory lock on the key's hash (seeded with the
/// table's oid), without
/// waiting: when another open transaction holds it, nothing is inserted and, unless a committed
/// live row is visible, one row with `state = -1` says "busy", which the guard turns into its
/// in-flight policy (reject with a retry-after, or poll until its wait ends).
const RESERVE_TX: &str = "
WITH lock AS MATERIALIZED (
    -- Seeded with the table's oid, so that two schemas (two apps) sharing a database and a key
    -- do not contend: advisory locks are database-wide.
    SELECT pg_try_advisory_xact_lock(
        hashtextextended($1, 'idem_guard_records'::regclass::oid::bigint)) AS held
), live AS (
    SELECT fingerprint, state, body, expires_at
    FROM idem_guard_records
    WHERE key = $1 AND expires_at > clock_timestamp()
), abandoned AS (
    SELECT 1 FROM idem_guard_records
    WHERE key = $1 AND state = 0 AND expires_at <= clock_timestamp()
), acquired AS (
    INSERT INTO idem_guard_records AS r (key, owner, fingerprint, state, body, expires_at)
    SELECT $1, $2, $3, 0, NULL, clock_timestamp() + $4::float8 * interval '1 millisecond'
    WHERE (SELECT held FROM lock) AND NOT EXISTS (SELECT 1 FROM live)
    ON CONFLICT (key) DO UPDATE
        SET owner = EXCLUDED.owner, fingerprint = EXCLUDED.fingerprint, state = 0,
            body = NULL, expires_at = EXCLUDED.expires_at
        WHERE r.expires_at <= clock_timestamp()
    RETURNING 1
)
SELECT true AS acquired, EXISTS (SELECT 1 FROM abandoned) AS taken_over,
       NULL::text AS fingerprint, NULL::smallint AS state, NULL::text AS body,
       NULL::float8 AS remaining_ms
FROM acquired
UNION ALL
SELECT false, false, fingerprint, state, body,
       GREATEST(0, EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000)::float8
FROM live
UNION ALL
SELECT false, false, NULL, -1::smallint, NULL, NULL
WHERE NOT (SELECT held FROM lock) AND NOT EXISTS (SELECT 1 FROM live)";

/// How long a duplicate is told to wait when another open transaction holds its key: the end
/// of a transaction cannot be known, and they are usually short.
const BUSY_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Writes the completion if the row is ours or gone (see the `Store` contract).
const COMPLETE: &str = "
INSERT INTO idem_guard_records AS r (key, owner, fingerprint, state, body, expires_at)
VALUES ($1, $2, $3, $4, $5, clock_timestamp() + $6::float8 * interval '1 millisecond')
ON CONFLICT (key) DO UPDATE
    SET state = EXCLUDED.state, body = EXCLUDED.body, expires_at = EXCLUDED.expires_at
    WHERE r.owner = EXCLUDED.owner";

/// Deletes our in-progress row; reports whether another owner holds the key.
const RELEASE: &str = "
WITH deleted AS (
    DELETE FROM idem_guard_records WHERE key = $1 AND owner = $2 AND state = 0 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM idem_guard_records WHERE key = $1 AND owner <> $2)
       AND NOT EXISTS (SELECT 1 FROM deleted) AS taken";

const RENEW: &str = "
INSERT INTO idem_guard_records AS r (key, owner, fingerprint, state, body, expires_at)
VALUES ($1, $2, $3, 0, NULL, clock_timestamp() + $4::float8 * interval '1 millisecond')
ON CONFLICT (key) DO UPDATE
    SET expires_at = CASE WHEN r.state = 0 THEN EXCLUDED.expires_at ELSE r.expires_at END
    WHERE r.owner = EXCLUDED.owner";

/// Serializes concurrent first-time migrations (two `CREATE TABLE IF NOT EXISTS` racing can fail
/// on the catalog's unique index). The number is arbitrary but fixed.
const MIGRATION_LOCK: i64 = 0x1de3_9a4d;

impl PostgresStore {
    /// Connects to `url` with a pool of at most 10 connections and creates the table if missing.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let options: PgConnectOptions = url.parse().map_err(Error::store)?;
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(Error::store)?;
        Self::from_pool(pool).await
    }

    /// Uses an existing pool (its `search_path` decides the table's schema) and creates the
    /// table if missing.
    pub async fn from_pool(pool: PgPool) -> Result<Self, Error> {
        let mut tx = pool.begin().await.map_err(Error::store)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(Error::store)?;
        sqlx::raw_sql(MIGRATION)
            .execute(&mut *tx)
            .await
            .map_err(Error::store)?;
        tx.commit().await.map_err(Error::store)?;
        Ok(Self::from_pool_unmigrated(pool))
    }

    /// Uses an existing pool whose database already has the table (from your own migrations,
    /// with [`MIGRATION`] copied in).
    pub fn from_pool_unmigrated(pool: PgPool) -> Self {
        let lanes = Arc::new(Lanes::new(pool.connect_options()));
        PostgresStore {
            pool,
            lanes,
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
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Deletes expired rows and returns how many. Expired rows are harmless (they are taken over
    /// in place), so this only reclaims space; run it from a periodic job.
    pub async fn purge_expired(&self) -> Result<u64, Error> {
        let done =
            sqlx::query("DELETE FROM idem_guard_records WHERE expires_at <= clock_timestamp()")
                .execute(&self.pool)
                .await
                .map_err(Error::store)?;
        Ok(done.rows_affected())
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn state_of(result: &StoredResult) -> (i16, &str) {
    match result {
        StoredResult::Ok(s) => (1, s),
        StoredResult::Err(s) => (2, s),
        StoredResult::Unreplayable(s) => (3, s),
    }
}

/// The reservation statement on a pooled connection.
async fn reserve_on(
    conn: &mut PgConnection,
    key: &str,
    fingerprint: Fingerprint,
    owner: &OwnerToken,
    lease: Duration,
) -> Result<Reservation, Error> {
    reserve_with(RESERVE, conn, key, fingerprint, owner, lease).await
}

/// The reservation statement in the caller's transaction, which never waits for another open
/// transaction holding the key (see [`RESERVE_TX`]).
pub(crate) async fn reserve_in_tx(
    conn: &mut PgConnection,
    key: &str,
    fingerprint: Fingerprint,
    owner: &OwnerToken,
    lease: Duration,
) -> Result<Reservation, Error> {
    reserve_with(RESERVE_TX, conn, key, fingerprint, owner, lease).await
}

async fn reserve_with(
    statement: &'static str,
    conn: &mut PgConnection,
    key: &str,
    fingerprint: Fingerprint,
    owner: &OwnerToken,
    lease: Duration,
) -> Result<Reservation, Error> {
    // The statement reads with its snapshot, which cannot see a row committed by a concurrent
    // reservation after the statement began; the unique conflict still stops our insert (no row
    // comes back), and a retry (a new snapshot under READ COMMITTED) sees the row.
    for _ in 0..5 {
        let row = sqlx::query(statement)
            .bind(key)
            .bind(owner.as_str())
            .bind(fingerprint.to_string())
            .bind(millis(lease))
            .fetch_optional(&mut *conn)
            .await
            .map_err(Error::store)?;
        let Some(row) = row else { continue };
        if row.try_get::<bool, _>("acquired").map_err(Error::store)? {
            return Ok(
                if row.try_get::<bool, _>("taken_over").map_err(Error::store)? {
                    Reservation::TakenOver
                } else {
                    Reservation::Acquired
                },
            );
        }
        if row
            .try_get::<Option<i16>, _>("state")
            .map_err(Error::store)?
            == Some(-1)
        {
            // The other transaction's payload is unknown until it commits; a mismatch shows
            // on a later attempt.
            return Ok(Reservation::InProgress {
                fingerprint,
                retry_after: BUSY_RETRY_AFTER.min(lease),
            });
        }
        return parse_row(key, &row);
    }
    Err(Error::store(format!(
        "the record of #{} conflicts but stays invisible; is the transaction REPEATABLE READ or SERIALIZABLE? reservations need READ COMMITTED",
        crate::observe::key_hash(key)
    )))
}

fn parse_row(key: &str, row: &sqlx::postgres::PgRow) -> Result<Reservation, Error> {
    let corrupt = || {
        let key = crate::observe::key_hash(key);
        Error::store(format!("unexpected row stored for #{key}"))
    };
    let fp: String = row.try_get("fingerprint").map_err(Error::store)?;
    let fingerprint = Fingerprint::from_hex(&fp).ok_or_else(corrupt)?;
    let state: i16 = row.try_get("state").map_err(Error::store)?;
    let body: Option<String> = row.try_get("body").map_err(Error::store)?;
    let remaining: f64 = row.try_get("remaining_ms").map_err(Error::store)?;
    let result = match state {
        0 => {
            let retry_after = Duration::from_secs_f64(remaining.max(0.0) / 1000.0);
            return Ok(Reservation::InProgress {
                fingerprint,
                retry_after,
            });
        }
        1 => StoredResult::Ok(body.unwrap_or_default()),
        2 => StoredResult::Err(body.unwrap_or_default()),
        3 => StoredResult::Unreplayable(body.unwrap_or_default()),
        _ => return Err(corrupt()),
    };
    Ok(Reservation::Completed {
        fingerprint,
        result,
    })
}

pub(crate) async fn complete_on<'e>(
    conn: impl PgExecutor<'e>,
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
        .execute(conn)
        .await
        .map_err(Error::store)?;
    fenced(done.rows_affected() == 1, key)
}

pub(crate) async fn release_on<'e>(
    conn: impl PgExecutor<'e>,
    key: &str,
    owner: &OwnerToken,
) -> Result<(), Error> {
    let taken: bool = sqlx::query(RELEASE)
        .bind(key)
        .bind(owner.as_str())
        .fetch_one(conn)
        .await
        .map_err(Error::store)?
        .try_get("taken")
        .map_err(Error::store)?;
    fenced(!taken, key)
}

/// Runs a statement on a lane, and once more on a fresh connection when the server had ended
/// the lane's session (a backend terminated, a server restarted while the lane sat idle): the
/// server's own `FATAL` answer says the statement did not run, so a dead connection costs no
/// failed call.
macro_rules! on_lane {
    ($store:expr, |$conn:ident| $statement:expr) => {{
        let mut retried = false;
        loop {
            let mut lane = $store.lanes.get().await?;
            let done = {
                let $conn: &mut PgConnection = &mut lane;
                $statement.await
            };
            match lane.check(done) {
                Err(e) if !retried && lanes::session_ended(&e) => {
                    tracing::debug!(error = %e, "the store's connection had been closed by the server; running the statement on a new one");
                    retried = true;
                }
                done => break done,
            }
        }
    }};
}

impl Store for PostgresStore {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        on_lane!(self, |conn| reserve_on(
            conn,
            key,
            fingerprint,
            owner,
            lease
        ))
    }

    async fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> Result<(), Error> {
        on_lane!(self, |conn| complete_on(
            conn,
            key,
            fingerprint,
            owner,
            result,
            retention
        ))
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        on_lane!(self, |conn| release_on(conn, key, owner))
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
        let done = on_lane!(self, |conn| async {
            sqlx::query(RENEW)
                .bind(key)
                .bind(owner.as_str())
                .bind(fingerprint.to_string())
                .bind(millis(lease))
                .execute(conn)
                .await
                .map_err(Error::store)
        })?;
        fenced(done.rows_affected() == 1, key)
    }
}
