//! Completion inside the caller's transaction: a balance update and the key's mark commit, or
//! roll back, together.

mod common;

use std::time::{Duration, Instant};

use idem_guard::{idempotent, Guard, InFlight, PostgresStore, Rejected, TxStart};
use sqlx::{PgPool, Postgres, Transaction};

#[derive(Debug)]
#[allow(dead_code)] // The fields are read through `Debug` in failed assertions.
enum AppError {
    Guard(idem_guard::Error),
    Db(sqlx::Error),
}

impl From<idem_guard::Error> for AppError {
    fn from(e: idem_guard::Error) -> Self {
        AppError::Guard(e)
    }
}

impl From<sqlx::Error> for AppError {
    fn from(e: sqlx::Error) -> Self {
        AppError::Db(e)
    }
}

async fn setup(name: &str) -> (Guard<PostgresStore>, PgPool) {
    let schema = common::pg_schema(name).await;
    let pool = common::pg_pool(&schema, 10).await;
    sqlx::raw_sql("CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL); INSERT INTO accounts VALUES (1, 0)")
        .execute(&pool)
        .await
        .unwrap();
    let store = PostgresStore::from_pool(pool.clone()).await.unwrap();
    (Guard::new(store).prefix("credit"), pool)
}

/// The handler: credit the account and complete the key, in one transaction the caller commits.
async fn credit(
    guard: &Guard<PostgresStore>,
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
    cents: i64,
) -> Result<i64, AppError> {
    let attempt = match guard.begin_in_tx(tx, event_id, &cents).await? {
        TxStart::Done(replayed) => return replayed.map(|outcome| outcome.into_inner()),
        TxStart::Run(attempt) => attempt,
    };
    let result = sqlx::query_scalar(
        "UPDATE accounts SET balance = balance + $1 WHERE id = 1 RETURNING balance",
    )
    .bind(cents)
    .fetch_one(&mut **tx)
    .await
    .map_err(AppError::from);
    attempt.finish(guard, tx, result).await
}

/// The same with the closure form.
async fn credit_closure(
    guard: &Guard<PostgresStore>,
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
    cents: i64,
) -> Result<i64, AppError> {
    guard
        .run_in_tx(tx, event_id, &cents, async |tx| {
            let balance: i64 = sqlx::query_scalar(
                "UPDATE accounts SET balance = balance + $1 WHERE id = 1 RETURNING balance",
            )
            .bind(cents)
            .fetch_one(&mut **tx)
            .await?;
            Ok::<_, AppError>(balance)
        })
        .await
}

async fn balance(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT balance FROM accounts WHERE id = 1")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn marks(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM idem_guard_records WHERE state = 1")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn balance_and_mark_commit_together() {
    let (guard, pool) = setup("tx_commit").await;
    for _delivery in 0..3 {
        let mut tx = pool.begin().await.unwrap();
        assert_eq!(
            credit_closure(&guard, &mut tx, "evt-1", 100).await.unwrap(),
            100
        );
        tx.commit().await.unwrap();
    }
    assert_eq!((balance(&pool).await, marks(&pool).await), (100, 1));
}

#[tokio::test]
async fn a_crash_before_commit_rolls_back_both() {
    let (guard, pool) = setup("tx_rollback").await;
    let mut tx = pool.begin().await.unwrap();
    assert_eq!(credit(&guard, &mut tx, "evt-1", 100).await.unwrap(), 100);
    drop(tx); // the worker dies before COMMIT
    assert_eq!(
        (balance(&pool).await, marks(&pool).await),
        (0, 0),
        "neither the credit nor the mark"
    );
    // The dropped transaction rolls back when the pool next uses its connection; until then
    // its key is busy, so the redelivery waits for it rather than being rejected.
    let guard = guard.in_flight(InFlight::Wait(Duration::from_secs(5)));
    let mut tx = pool.begin().await.unwrap();
    assert_eq!(
        credit(&guard, &mut tx, "evt-1", 100).await.unwrap(),
        100,
        "the redelivery runs again"
    );
    tx.commit().await.unwrap();
    assert_eq!((balance(&pool).await, marks(&pool).await), (100, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_credit_once() {
    let (guard, pool) = setup("tx_concurrent").await;
    let guard = guard.in_flight(InFlight::Wait(Duration::from_secs(10)));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (guard, pool) = (guard.clone(), pool.clone());
        // Spawning proves the future is `Send`, as a web framework needs.
        tasks.push(tokio::spawn(async move {
            let mut tx = pool.begin().await.unwrap();
            let balance = credit(&guard, &mut tx, "evt-1", 100).await.unwrap();
            tx.commit().await.unwrap();
            balance
        }));
    }
    for task in tasks {
        // Duplicates wait for the first transaction, then replay its committed result.
        assert_eq!(task.await.unwrap(), 100);
    }
    assert_eq!((balance(&pool).await, marks(&pool).await), (100, 1));
}

fn in_progress(r: &Result<i64, AppError>) -> Option<Duration> {
    match r {
        Err(AppError::Guard(idem_guard::Error::Rejected(Rejected::InProgress {
            retry_after,
            ..
        }))) => Some(*retry_after),
        _ => None,
    }
}

/// A duplicate while the first transaction is open is rejected at once (`in_flight = "reject"`,
/// the default), instead of blocking until that transaction ends or failing with a raw
/// `55P03 lock timeout`; after the commit it replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_reject_is_honoured_while_the_first_transaction_is_open() {
    let (guard, pool) = setup("tx_reject").await;
    let mut first = pool.begin().await.unwrap();
    assert_eq!(credit(&guard, &mut first, "evt-1", 100).await.unwrap(), 100);

    // The first transaction stays open until the end: a duplicate that waited on its lock
    // would never answer, whatever the machine's speed.
    let mut dup = pool.begin().await.unwrap();
    let r = tokio::time::timeout(
        common::LOCAL_SERVER_PATIENCE,
        credit(&guard, &mut dup, "evt-1", 100),
    )
    .await
    .expect("the duplicate must not block on the open transaction");
    let retry_after = in_progress(&r).unwrap_or_else(|| panic!("{r:?}"));
    assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_secs(60));
    // The rejected duplicate's transaction is still usable.
    sqlx::query("SELECT 1").execute(&mut *dup).await.unwrap();
    dup.rollback().await.unwrap();

    first.commit().await.unwrap();
    let mut again = pool.begin().await.unwrap();
    assert_eq!(credit(&guard, &mut again, "evt-1", 100).await.unwrap(), 100);
    again.commit().await.unwrap();
    assert_eq!((balance(&pool).await, marks(&pool).await), (100, 1));
}

/// `in_flight = wait(d)` polls for at most `d`, then rejects; a longer wait sees the commit and
/// replays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_wait_is_bounded_by_the_configured_wait() {
    let (guard, pool) = setup("tx_wait").await;
    let mut first = pool.begin().await.unwrap();
    assert_eq!(credit(&guard, &mut first, "evt-1", 100).await.unwrap(), 100);

    let short = guard
        .clone()
        .in_flight(InFlight::Wait(Duration::from_millis(400)));
    let started = Instant::now();
    let mut dup = pool.begin().await.unwrap();
    // The first transaction is still open: the duplicate ends only because its wait does.
    let r = tokio::time::timeout(
        common::LOCAL_SERVER_PATIENCE,
        credit(&short, &mut dup, "evt-1", 100),
    )
    .await
    .expect("the wait must end with its configured duration");
    assert!(in_progress(&r).is_some(), "{r:?}");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    dup.rollback().await.unwrap();

    let long = guard.in_flight(InFlight::Wait(Duration::from_secs(10)));
    let waiter = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            let r = credit(&long, &mut tx, "evt-1", 100).await;
            tx.commit().await.unwrap();
            r
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.commit().await.unwrap();
    assert_eq!(waiter.await.unwrap().unwrap(), 100);
    assert_eq!((balance(&pool).await, marks(&pool).await), (100, 1));
}

#[tokio::test]
async fn a_failed_body_releases_the_key_in_the_transaction() {
    let (guard, pool) = setup("tx_failed").await;
    let mut tx = pool.begin().await.unwrap();
    let r: Result<i64, AppError> = guard
        .run_in_tx(&mut tx, "evt-1", &100, async |tx| {
            sqlx::query("UPDATE accounts SET balance = balance + 100 WHERE id = 1")
                .execute(&mut **tx)
                .await?;
            Err(AppError::Db(sqlx::Error::RowNotFound))
        })
        .await;
    assert!(matches!(r, Err(AppError::Db(_))));
    tx.rollback().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    assert_eq!(credit(&guard, &mut tx, "evt-1", 100).await.unwrap(), 100);
    tx.commit().await.unwrap();
    assert_eq!(balance(&pool).await, 100);
}

/// The same handler with the attribute: `tx = tx` names the transaction argument.
#[idempotent(key = event_id, store = store, tx = tx, payload = cents)]
async fn credit_attr(
    store: &PostgresStore,
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
    cents: i64,
) -> Result<i64, AppError> {
    let balance = sqlx::query_scalar(
        "UPDATE accounts SET balance = balance + $1 WHERE id = 1 RETURNING balance",
    )
    .bind(cents)
    .fetch_one(&mut **tx)
    .await?;
    Ok(balance)
}

#[tokio::test]
async fn attribute_completes_in_the_callers_transaction() {
    let (guard, pool) = setup("tx_attr").await;
    for _delivery in 0..2 {
        let mut tx = pool.begin().await.unwrap();
        assert_eq!(
            credit_attr(guard.store(), &mut tx, "evt-9", 40)
                .await
                .unwrap(),
            40
        );
        tx.commit().await.unwrap();
    }
    let mut tx = pool.begin().await.unwrap();
    let r = credit_attr(guard.store(), &mut tx, "evt-9", 41).await;
    assert!(
        matches!(r, Err(AppError::Guard(idem_guard::Error::Rejected(_)))),
        "{r:?}"
    );
    assert_eq!(balance(&pool).await, 40);
}
