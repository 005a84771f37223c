//! The layer's transactional mode (PostgreSQL), through real HTTP: the handler's writes and the
//! stored response commit in one transaction, or neither does.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use common::http::{request, serve, Server};
use idem_guard::http::{IdempotencyLayer, RequestTx};
use idem_guard::{Guard, InFlight, PostgresStore};
use sqlx::PgPool;

/// Credits the account by the body's cents through the request's transaction; `fail` in the
/// body writes, then answers 500.
async fn credit(tx: RequestTx, body: String) -> Result<String, (StatusCode, String)> {
    let internal = |e: &dyn std::fmt::Display| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    let mut conn = tx.lock().await.map_err(|e| internal(&e))?;
    let cents: i64 = body.trim_start_matches("fail ").parse().unwrap_or(1);
    let balance: i64 =
        sqlx::query_scalar("UPDATE accounts SET balance = balance + $1 RETURNING balance")
            .bind(cents)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| internal(&e))?;
    if body.starts_with("fail") {
        return Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            "failed after its write".into(),
        ));
    }
    Ok(format!("balance {balance}"))
}

async fn app(name: &str, tune: impl FnOnce(PostgresStore) -> PostgresStore) -> (Server, PgPool) {
    let schema = common::pg_schema(name).await;
    let pool = common::pg_pool(&schema, 8).await;
    sqlx::raw_sql(
        "CREATE TABLE accounts (balance bigint NOT NULL); INSERT INTO accounts VALUES (0);",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = tune(PostgresStore::from_pool(pool.clone()).await.unwrap());
    let guard = Guard::new(store)
        .prefix("credits")
        .in_flight(InFlight::Wait(Duration::from_secs(30)));
    let layer = IdempotencyLayer::from_guard(guard).transactional(true);
    let app = Router::new().route("/credits", post(credit)).layer(layer);
    (serve(app).await, pool)
}

async fn balance(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT balance FROM accounts")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_credit_once_and_replay() {
    let (server, pool) = app("http_tx_duplicates", |s| s).await;
    let sends = (0..16).map(|_| {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .send(request(
                    "POST",
                    "/credits",
                    &[("idempotency-key", "a")],
                    "100",
                ))
                .await
        })
    });
    let mut replies = Vec::new();
    for send in sends.collect::<Vec<_>>() {
        replies.push(send.await.unwrap());
    }
    assert_eq!(balance(&pool).await, 100, "credited once");
    for reply in &replies {
        assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
        assert_eq!(reply.text(), "balance 100");
    }
    assert_eq!(replies.iter().filter(|r| !r.is_replay()).count(), 1);
    let later = server
        .send(request(
            "POST",
            "/credits",
            &[("idempotency-key", "a")],
            "100",
        ))
        .await;
    assert!(later.is_replay());
    assert_eq!(later.text(), "balance 100");
    let reused = server
        .send(request(
            "POST",
            "/credits",
            &[("idempotency-key", "a")],
            "7",
        ))
        .await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY);
    // A request without a key runs in a transaction of its own, committed.
    let unkeyed = server.send(request("POST", "/credits", &[], "5")).await;
    assert_eq!(unkeyed.text(), "balance 105");
    assert_eq!(balance(&pool).await, 105);
}

/// A handler that wrote and then failed leaves nothing: its write is rolled back with the
/// reservation, and the retry runs on a clean slate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handler_rolls_back_its_writes() {
    let (server, pool) = app("http_tx_rollback", |s| s).await;
    let failed = server
        .send(request(
            "POST",
            "/credits",
            &[("idempotency-key", "b")],
            "fail 100",
        ))
        .await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(balance(&pool).await, 0, "the write was rolled back");
    let retried = server
        .send(request(
            "POST",
            "/credits",
            &[("idempotency-key", "b")],
            "fail 100",
        ))
        .await;
    assert!(!retried.is_replay(), "the key was released: the retry ran");
    assert_eq!(balance(&pool).await, 0);
}

/// A response the store cannot keep fails the request before anything commits: the handler's
/// write and the key's mark are rolled back together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_too_large_to_store_commits_nothing() {
    let (server, pool) = app("http_tx_too_large", |s| s.max_result_len(16)).await;
    let reply = server
        .send(request(
            "POST",
            "/credits",
            &[("idempotency-key", "c")],
            "100",
        ))
        .await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.problem_code(), "idempotency_response_too_large");
    assert_eq!(balance(&pool).await, 0, "the credit was rolled back");
}

/// A handler that takes the request's transaction behind a layer that is not transactional
/// gets a clear 500, not a panic.
#[tokio::test]
async fn no_transaction_without_the_mode() {
    let app = Router::new()
        .route("/credits", post(credit))
        .layer(IdempotencyLayer::new(common::memory_store()));
    let server = serve(app).await;
    let reply = server
        .send(request(
            "POST",
            "/credits",
            &[("idempotency-key", "d")],
            "1",
        ))
        .await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.problem_code(), "idempotency_no_transaction");
}
