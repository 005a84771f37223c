//! A store connection dropped between reserve and complete, through a proxy the test cuts; for
//! DynamoDB also an unreachable and a hung endpoint.
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

#[cfg(feature = "dynamodb")]
mod dynamodb {
    use std::time::{Duration, Instant};

    use super::*;
    use idem_guard::DynamoDbStore;

    async fn through_proxy(name: &str) -> (DynamoDbStore, Proxy) {
        let proxy = Proxy::start(port_of(&common::dynamodb_endpoint(), 5124)).await;
        let endpoint = format!("http://127.0.0.1:{}", proxy.port);
        let store = common::dynamodb_store_at(&endpoint, &common::unique(name)).await;
        (store.timeout(Duration::from_secs(2)), proxy)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dynamodb_endpoint_down_for_good_between_reserve_and_complete() {
        let (store, proxy) = through_proxy("fault-dropped").await;
        dropped_for_good(store, proxy, "fault").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dynamodb_connection_cut_between_reserve_and_complete_then_restored() {
        let (store, proxy) = through_proxy("fault-cut").await;
        cut_and_restored(store, proxy, "fault").await;
    }

    /// Nothing listens at the endpoint: the reservation fails at once with the request, key and
    /// table in the message, and the body never runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unreachable_endpoint_is_a_clear_error() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let client = idem_guard::dynamodb::local_client(&endpoint);
        let guard = Guard::new(DynamoDbStore::new(client, "records")).prefix("fault");
        let started = Instant::now();
        let r: Result<u32, Error> = guard
            .run("k", &(), || async { panic!("ran without a reservation") })
            .await;
        let Err(Error::Store(e)) = r else {
            panic!("{r:?}")
        };
        let message = e.to_string();
        assert!(
            message.contains("PutItem (reserve) of `fault::k` on table `records`"),
            "{message}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "no hang");
    }

    /// A server that accepts connections and never answers: the store's timeout ends the call.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hung_endpoint_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn); // read nothing, answer nothing
            }
        });
        let client = idem_guard::dynamodb::local_client(&endpoint);
        let store = DynamoDbStore::new(client, "records").timeout(Duration::from_millis(800));
        let guard = Guard::new(store).prefix("fault");
        let r: Result<u32, Error> = guard
            .run("k", &(), || async { panic!("ran without a reservation") })
            .await;
        let Err(Error::Store(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("got no answer within 800 ms"), "{e}");
        silent.abort();
    }
}
