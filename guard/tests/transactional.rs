//! Completion inside the caller's transaction: a balance update and the key's mark commit, or
//! roll back, together.

mod common;

use idem_guard::{idempotent, Guard, PostgresStore, TxStart};
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
        // Duplicates wait on the first transaction's row, then replay its committed result.
        assert_eq!(task.await.unwrap(), 100);
    }
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
