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

/// Credits like [`credit`], and writes an audit row whose reference to `auditors` is checked
/// at commit (a deferred foreign key): while `auditors` is empty, the handler succeeds and the
/// commit fails.
async fn audited_credit(tx: RequestTx, body: String) -> Result<String, (StatusCode, String)> {
    let internal = |e: &dyn std::fmt::Display| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    {
        let mut conn = tx.lock().await.map_err(|e| internal(&e))?;
        sqlx::query("INSERT INTO audit (auditor) VALUES (1)")
            .execute(&mut *conn)
            .await
            .map_err(|e| internal(&e))?;
    }
    credit(tx, body).await
}

async fn app(name: &str, tune: impl FnOnce(PostgresStore) -> PostgresStore) -> (Server, PgPool) {
    let (router, pool) = routes(name, tune).await;
    (serve(router).await, pool)
}

/// The app's router (`/credits`, `/audited-credits`) behind the transactional layer, and the
/// pool of its schema.
async fn routes(name: &str, tune: impl FnOnce(PostgresStore) -> PostgresStore) -> (Router, PgPool) {
    let schema = common::pg_schema(name).await;
    let pool = common::pg_pool(&schema, 8).await;
    sqlx::raw_sql(
        "CREATE TABLE accounts (balance bigint NOT NULL); INSERT INTO accounts VALUES (0);
         CREATE TABLE auditors (id int PRIMARY KEY);
         CREATE TABLE audit (auditor int NOT NULL
             REFERENCES auditors (id) DEFERRABLE INITIALLY DEFERRED);",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store = tune(PostgresStore::from_pool(pool.clone()).await.unwrap());
    let guard = Guard::new(store)
        .prefix("credits")
        .in_flight(InFlight::Wait(Duration::from_secs(30)));
    let layer = IdempotencyLayer::from_guard(guard).transactional(true);
    let app = Router::new()
        .route("/credits", post(credit))
        .route("/audited-credits", post(audited_credit))
        .layer(layer);
    (app, pool)
}

/// The key's rows in the guard's table, committed (what any other session sees).
async fn records(pool: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as("SELECT key, state::text FROM idem_guard_records ORDER BY key")
        .fetch_all(pool)
        .await
        .unwrap()
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

/// The handler succeeds but the commit fails (a deferred foreign key, checked at `COMMIT`): the
/// layer answers 503 (`idempotency_store_unavailable`: nothing of the request was applied, as
/// `transactional` documents), no record of the key exists, the credit is not there, and the
/// next delivery of the same request runs the handler again (issue 39).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_is_503_and_the_next_delivery_runs_again() {
    let (server, pool) = app("http_tx_commit_fails", |s| s).await;
    let send = || {
        server.send(request(
            "POST",
            "/audited-credits",
            &[("idempotency-key", "e")],
            "100",
        ))
    };
    let failed = send().await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE, "{failed:?}");
    assert_eq!(failed.problem_code(), "idempotency_store_unavailable");
    assert_eq!(balance(&pool).await, 0, "the credit was not committed");
    assert_eq!(
        records(&pool).await,
        [],
        "no record: not completed, not held"
    );

    // The cause is fixed; the same request is delivered again and runs.
    sqlx::query("INSERT INTO auditors VALUES (1)")
        .execute(&pool)
        .await
        .unwrap();
    let retried = send().await;
    assert_eq!(retried.status, StatusCode::OK, "{retried:?}");
    assert!(!retried.is_replay(), "the handler ran again");
    assert_eq!(retried.text(), "balance 100");
    assert_eq!(balance(&pool).await, 100);
    let records = records(&pool).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(records[0].0.ends_with(":e"), "{records:?}");
    assert_eq!(records[0].1, "1", "completed ok: {records:?}");
    let replay = send().await;
    assert!(
        replay.is_replay() && replay.text() == "balance 100",
        "{replay:?}"
    );
    assert_eq!(balance(&pool).await, 100);
}

/// Sends `()` when dropped before `finished`: the handler's future was dropped mid-request.
struct DroppedUnfinished(Option<tokio::sync::mpsc::UnboundedSender<()>>);

impl DroppedUnfinished {
    fn finished(&mut self) {
        self.0 = None;
    }
}

impl Drop for DroppedUnfinished {
    fn drop(&mut self) {
        if let Some(signal) = self.0.take() {
            let _ = signal.send(());
        }
    }
}

/// The client hangs up while the handler, having written its credit, still runs (issue 39).
/// The layer runs a guarded request in a task of its own, so the hang-up does not drop the
/// transaction half way: while the handler runs nothing is visible (no record, neither
/// reservation nor completion, and no credit: all uncommitted); a redelivery meanwhile waits
/// for the key instead of running; once the handler finishes, its credit and the completion
/// commit together, and the redelivery replays the response. The key is not left held: a
/// later delivery replays at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_hanging_up_commits_nothing_and_leaves_no_key_held() {
    use tokio::io::AsyncWriteExt;
    use tokio::sync::{mpsc, watch};

    let (written_tx, mut written) = mpsc::unbounded_channel::<()>();
    let (dropped_tx, mut dropped) = mpsc::unbounded_channel::<()>();
    let (finish, finishing) = watch::channel(false);
    // Credits through the transaction, then waits until the test lets it finish.
    let handler = move |tx: RequestTx, body: String| {
        let (written_tx, mut finishing) = (written_tx.clone(), finishing.clone());
        async move {
            let reply = credit(tx, body).await;
            let _ = written_tx.send(());
            let _ = finishing.wait_for(|finish| *finish).await;
            reply
        }
    };
    let (router, pool) = routes("http_tx_hangup", |s| s).await;
    let hang = Router::new().route("/slow-credits", post(handler));
    let layer = IdempotencyLayer::from_guard(
        Guard::new(PostgresStore::from_pool(pool.clone()).await.unwrap())
            .prefix("credits")
            // A long lease: the redelivery gets its answer from the commit, not a lease ending.
            .lease(Duration::from_secs(3600))
            .in_flight(InFlight::Wait(Duration::from_secs(120))),
    )
    .transactional(true);
    let detect_hangups = axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let mut signal = DroppedUnfinished(Some(dropped_tx.clone()));
            async move {
                let response = next.run(request).await;
                signal.finished();
                response
            }
        },
    );
    let server = serve(router.merge(hang.layer(layer)).layer(detect_hangups)).await;

    let mut client = tokio::net::TcpStream::connect(server.address())
        .await
        .unwrap();
    client
        .write_all(
            b"POST /slow-credits HTTP/1.1\r\nhost: test\r\nidempotency-key: h\r\ncontent-length: 3\r\n\r\n100",
        )
        .await
        .unwrap();
    let within = |what: &'static str| {
        move |_| panic!("{what} did not happen within 60 s (generous; a hang, not a slow machine)")
    };
    tokio::time::timeout(Duration::from_secs(60), written.recv())
        .await
        .unwrap_or_else(within("the credit"));
    drop(client);
    tokio::time::timeout(Duration::from_secs(60), dropped.recv())
        .await
        .unwrap_or_else(within("dropping the request"));
    assert_eq!(balance(&pool).await, 0, "the credit was never committed");
    assert_eq!(records(&pool).await, [], "nothing recorded for the key");

    // A redelivery while the abandoned handler still runs: it waits for the key.
    let redelivery = {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .send(request(
                    "POST",
                    "/slow-credits",
                    &[("idempotency-key", "h")],
                    "100",
                ))
                .await
        })
    };
    finish.send(true).unwrap();
    let again = redelivery.await.unwrap();
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    assert!(again.is_replay(), "the handler ran once: {again:?}");
    assert_eq!(again.text(), "balance 100");
    assert_eq!(
        balance(&pool).await,
        100,
        "credited once, by the first delivery"
    );
    let records = records(&pool).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].1, "1", "completed ok, not held: {records:?}");
    let replay = server
        .send(request(
            "POST",
            "/slow-credits",
            &[("idempotency-key", "h")],
            "100",
        ))
        .await;
    assert!(replay.is_replay(), "{replay:?}");
}
