//! A store connection dropped between reserve and complete, through a proxy the test cuts.
//! (Panicking and cancelled bodies, and stale owners, are in the conformance suite.)

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{port_of, Proxy};
use idem_guard::{Error, Guard, PostgresStore, Rejected, Store};

/// The connection dies for good while the body runs: the guard reports an error, and no later
/// delivery runs the body again (store down, then the live lease, refuse it).
async fn dropped_for_good<S: Store>(store: S, proxy: Proxy, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let runs = AtomicU32::new(0);
    let body = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        proxy.down();
        Ok::<u32, Error>(1)
    };
    let r = guard.run("k", &(), body).await;
    assert!(
        matches!(r, Err(Error::Store(_))),
        "the lost completion is reported: {r:?}"
    );
    let r = guard.run("k", &(), body).await;
    assert!(
        matches!(r, Err(Error::Store(_))),
        "a store that is down never runs the body: {r:?}"
    );
    proxy.up();
    let r = guard.run("k", &(), body).await;
    assert!(
        matches!(r, Err(Error::Rejected(Rejected::InProgress { .. }))),
        "{r:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The connection is cut while the body runs but the store is reachable again: the completion
/// is retried on a new connection, and the duplicate replays.
async fn cut_and_restored<S: Store>(store: S, proxy: Proxy, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let runs = AtomicU32::new(0);
    let body = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        proxy.cut();
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok::<u32, Error>(7)
    };
    assert_eq!(guard.run("k", &(), body).await.unwrap(), 7);
    let replay = guard.run_outcome("k", &(), body).await.unwrap();
    assert!(replay.is_replay());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

async fn redis_through_proxy() -> (idem_guard::RedisStore, Proxy) {
    let proxy = Proxy::start(port_of(&common::redis_url(), 6379)).await;
    let store = common::redis_store_at(&format!("redis://127.0.0.1:{}", proxy.port)).await;
    (store, proxy)
}

async fn postgres_through_proxy(schema: &str) -> (PostgresStore, Proxy) {
    let proxy = Proxy::start(port_of(&common::database_url(), 5432)).await;
    let proxied = common::database_url_through(&proxy);
    let pool = common::pg_pool_at(&proxied, schema, 2).await;
    (PostgresStore::from_pool(pool).await.unwrap(), proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_connection_dropped_for_good_between_reserve_and_complete() {
    let (store, proxy) = redis_through_proxy().await;
    dropped_for_good(store, proxy, &common::unique("fault")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_connection_cut_between_reserve_and_complete_then_restored() {
    let (store, proxy) = redis_through_proxy().await;
    cut_and_restored(store, proxy, &common::unique("fault")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connection_dropped_for_good_between_reserve_and_complete() {
    let (store, proxy) = postgres_through_proxy(&common::pg_schema("fault_pg_dropped").await).await;
    dropped_for_good(store, proxy, "fault").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connection_cut_between_reserve_and_complete_then_restored() {
    let (store, proxy) = postgres_through_proxy(&common::pg_schema("fault_pg_cut").await).await;
    cut_and_restored(store, proxy, "fault").await;
}
