//! What the `Idempotency-Key` layer adds to an HTTP request, per store.
//!
//! `cargo bench -p idem-guard --features http --bench http_layer` (needs the services of
//! `tests/common`). One axum server per row on a loopback port, one hyper client, sequential
//! requests (so each sample is one request's latency as the client sees it): a POST through a
//! router without the layer, then through the layer a first delivery (reserve, handler,
//! complete) and a duplicate (replayed from the store).

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use common::http::{request, serve, Server};
use idem_guard::http::IdempotencyLayer;
use idem_guard::{Guard, MemoryStore, Store};

const REQUESTS: usize = 1_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn routes() -> Router {
    Router::new().route(
        "/orders",
        post(|body: String| async move { (StatusCode::CREATED, format!("order: {body}")) }),
    )
}

/// Median latency of `REQUESTS` POSTs, the i-th with key `{tag}-{i}`.
async fn timed(server: &Server, tag: &str, expect_replay: bool) -> Duration {
    let mut samples = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS {
        let key = format!("{tag}-{i}");
        let req = request("POST", "/orders", &[("idempotency-key", &key)], "2 apples");
        let t = Instant::now();
        let reply = server.send(req).await;
        samples.push(t.elapsed());
        assert_eq!(reply.status, StatusCode::CREATED);
        assert_eq!(reply.is_replay(), expect_replay);
    }
    median(samples)
}

/// First deliveries, then their duplicates, through the layer over `store`.
async fn guarded<S: Store + 'static>(store: S, prefix: String) -> (Duration, Duration) {
    let layer = IdempotencyLayer::from_guard(Guard::new(store).prefix(prefix));
    let server = serve(routes().layer(layer)).await;
    let first = timed(&server, "k", false).await;
    let duplicate = timed(&server, "k", true).await;
    (first, duplicate)
}

#[tokio::main]
async fn main() {
    let run = common::unique("bench-http");
    let plain = serve(routes()).await;
    // Warm up the client's connection and the server.
    timed(&plain, "warm", false).await;
    let base = timed(&plain, "plain", false).await;
    println!("no layer: median {base:?} per request; {REQUESTS} sequential requests per cell");
    println!(
        "{:<10} {:>16} {:>16} {:>12} {:>12}",
        "store", "first delivery", "duplicate", "first/none", "dup/none"
    );
    let row = |name: &str, (first, dup): (Duration, Duration)| {
        println!(
            "{:<10} {:>16?} {:>16?} {:>11.2}x {:>11.2}x",
            name,
            first,
            dup,
            first.as_secs_f64() / base.as_secs_f64(),
            dup.as_secs_f64() / base.as_secs_f64()
        );
    };
    row("memory", guarded(MemoryStore::new(), run.clone()).await);
    row(
        "redis",
        guarded(common::redis_store().await, run.clone()).await,
    );
    let schema = common::pg_schema("bench_http").await;
    row(
        "postgres",
        guarded(common::postgres_store(&schema).await, run).await,
    );
}
