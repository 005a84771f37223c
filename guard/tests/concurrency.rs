//! 1,000 keys, each delivered 16 times at once through two separate store clients, with a body
//! that increments a per-key counter in PostgreSQL: every counter must end at exactly 1 (the
//! test kit's `duplicates_of`, `idem_guard::testing`). For
//! every store: memory, Redis, (feature `redis-cluster`) Redis Cluster, PostgreSQL and (feature
//! `dynamodb`) DynamoDB.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_guard::testing::{Delivery, Kit};
use idem_guard::{Error, Guard, Store};
use sqlx::PgPool;

const KEYS: usize = 1_000;
const DELIVERIES: usize = 16;

async fn counters(schema: &str) -> PgPool {
    let pool = common::pg_pool(schema, 4).await;
    sqlx::query("CREATE TABLE counters (key text PRIMARY KEY, n int NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

/// How long a run may take before it counts as hung: generous, the point is exactly-once.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Delivers every key `DELIVERIES` times, alternating between the two clients, with the
/// deliveries of one key running concurrently: the test kit's `duplicates_of` scenario, with
/// the per-key counter as the effect count.
async fn deliver_all<S: Store + 'static>(a: S, b: S, counters: PgPool, ns: &str) {
    deliver_all_within(a, b, counters, ns, HANG_GUARD).await;
}

async fn deliver_all_within<S: Store + 'static>(
    a: S,
    b: S,
    counters: PgPool,
    ns: &str,
    hang_guard: Duration,
) {
    let started = Instant::now();
    let kit = Kit::new().patience(hang_guard);
    let guards = Arc::new([
        Guard::new(kit.store(a)).prefix(ns.to_owned()),
        Guard::new(kit.store(b)).prefix(ns.to_owned()),
    ]);
    let handler = {
        let counters = counters.clone();
        move |delivery: Delivery| {
            let (guards, counters) = (guards.clone(), counters.clone());
            async move {
                let key = delivery.message_id;
                guards[delivery.copy % 2]
                    .run(&key, &key, || async {
                        // Deliberately not idempotent: only the guard keeps it at one.
                        let n: i32 = sqlx::query_scalar(
                            "INSERT INTO counters (key, n) VALUES ($1, 1)
                             ON CONFLICT (key) DO UPDATE SET n = counters.n + 1 RETURNING n",
                        )
                        .bind(&key)
                        .fetch_one(&counters)
                        .await
                        .map_err(Error::store)?;
                        Ok::<_, Error>(n)
                    })
                    .await
            }
        }
    };
    let effects = |key: String| {
        let counters = counters.clone();
        async move {
            let n: Option<i32> = sqlx::query_scalar("SELECT n FROM counters WHERE key = $1")
                .bind(key)
                .fetch_optional(&counters)
                .await
                .unwrap();
            n.map_or(0, |n| n as u64)
        }
    };
    // Enough in flight for every key's duplicates to overlap, few enough for the pools.
    let report = kit
        .check(handler, effects)
        .duplicates_of(KEYS, DELIVERIES, 64)
        .await;
    report.assert_exactly_once();
    let (keys, min, max): (i64, i32, i32) =
        sqlx::query_as("SELECT count(*), min(n), max(n) FROM counters")
            .fetch_one(&counters)
            .await
            .unwrap();
    assert_eq!(
        (keys, min, max),
        (KEYS as i64, 1, 1),
        "every counter must end at exactly 1"
    );
    println!(
        "{ns}: {} deliveries, {} refused in flight and delivered again, {:?}",
        KEYS * DELIVERIES,
        report.redeliveries,
        started.elapsed()
    );
    assert!(started.elapsed() < hang_guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_counters_end_at_one() {
    let counters = counters(&common::pg_schema("concurrency_redis").await).await;
    // Two clients: two connection managers, two TCP connections.
    let (a, b) = (common::redis_store().await, common::redis_store().await);
    deliver_all(a, b, counters, &common::unique("concurrency")).await;
}

#[cfg(feature = "redis-cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_counters_end_at_one() {
    let counters = counters(&common::pg_schema("concurrency_redis_cluster").await).await;
    // Two cluster clients, each with its own connection to every node; the keys spread over
    // the three primaries.
    let (a, b) = (
        common::redis_cluster_store().await,
        common::redis_cluster_store().await,
    );
    deliver_all(a, b, counters, &common::unique("concurrency")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_counters_end_at_one() {
    let schema = common::pg_schema("concurrency_postgres").await;
    let counters = counters(&schema).await;
    // Two clients: two pools.
    let a = idem_guard::PostgresStore::from_pool(common::pg_pool(&schema, 4).await)
        .await
        .unwrap();
    let b = idem_guard::PostgresStore::from_pool(common::pg_pool(&schema, 4).await)
        .await
        .unwrap();
    deliver_all(a, b, counters, "concurrency").await;
}

#[cfg(feature = "dynamodb")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_counters_end_at_one() {
    let counters = counters(&common::pg_schema("concurrency_dynamodb").await).await;
    // Two clients (two HTTP connection pools) on one table.
    let table = common::unique("concurrency");
    let endpoint = common::dynamodb_endpoint();
    // moto handles one request at a time (see .ci/moto_serial.py), several ms each on a
    // loaded 2-core machine, and this run makes 17,000 of them: a request can wait in its
    // queue longer than the store's default 5 s per call (seen once in CI), which says
    // nothing about the counters this test is about, so each call gets 120 s here.
    let per_call = Duration::from_secs(120);
    let a = common::dynamodb_store_at(&endpoint, &table)
        .await
        .timeout(per_call);
    let b = common::dynamodb_store_at(&endpoint, &table)
        .await
        .timeout(per_call);
    deliver_all_within(a, b, counters, "concurrency", HANG_GUARD * 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_counters_end_at_one() {
    let counters = counters(&common::pg_schema("concurrency_memory").await).await;
    // A memory store is shared within a process only: two clones.
    let a = common::memory_store();
    deliver_all(a.clone(), a, counters, "concurrency").await;
}
