//! Round trips per call, counted by a TCP proxy between the store and its server: one per
//! statement (PostgreSQL) or command (Redis), so two per first delivery (reserve, complete) and
//! one per duplicate (reserve, which returns the completed record). DynamoDB: one request per
//! call, counted both by the proxy and by the SDK (an interceptor).

mod common;

use common::{port_of, Proxy};
use idem_guard::{Error, Guard, PostgresStore, Store};

const CALLS: u64 = 50;

/// Round trips of `CALLS` first deliveries, then of `CALLS` duplicates, after a warm-up that
/// lets the connections open and prepare their statements.
async fn count<S: Store>(store: S, proxy: &Proxy) -> (u64, u64) {
    let guard = Guard::new(store).prefix(common::unique("rt"));
    let run = |key: String| {
        let guard = &guard;
        async move {
            guard
                .run(key, &1, || async { Ok::<u32, Error>(7) })
                .await
                .unwrap()
        }
    };
    for i in 0..5 {
        run(format!("warm-{i}")).await;
        run(format!("warm-{i}")).await;
    }
    // No wait before taking a count: the proxy counts a request before passing it on, so a
    // request is counted before its reply can reach the caller, and every call awaits its
    // replies. Work nobody awaits (a pool's ping of a connection it takes back) is settled by
    // the caller before this runs.
    proxy.take_round_trips();
    for i in 0..CALLS {
        run(format!("k-{i}")).await;
    }
    let first = proxy.take_round_trips();
    for i in 0..CALLS {
        run(format!("k-{i}")).await;
    }
    (first, proxy.take_round_trips())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_makes_one_round_trip_per_statement() {
    let schema = common::pg_schema("round_trips").await;
    let proxy = Proxy::start(port_of(&common::database_url(), 5432)).await;
    let pool = common::pg_pool_at(&common::database_url_through(&proxy), &schema, 4).await;
    let store = PostgresStore::from_pool(pool.clone()).await.unwrap();
    // Creating the table borrowed a pool connection, and the pool pings it in a task of its
    // own once it is back: counted, that ping would be a round trip of the calls.
    common::pool_settled(&pool).await;
    let (first, duplicate) = count(store, &proxy).await;
    assert_eq!(
        (first, duplicate),
        (2 * CALLS, CALLS),
        "round trips of {CALLS} first deliveries and {CALLS} duplicates"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_makes_one_round_trip_per_command() {
    let proxy = Proxy::start(port_of(&common::redis_url(), 6379)).await;
    let store = common::redis_store_at(&format!("redis://127.0.0.1:{}", proxy.port)).await;
    let (first, duplicate) = count(store, &proxy).await;
    assert_eq!((first, duplicate), (2 * CALLS, CALLS));
}

/// A `CachedStore` answers a duplicate of a key it completed or saw completed without a round
/// trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_store_replays_without_a_round_trip() {
    let proxy = Proxy::start(port_of(&common::redis_url(), 6379)).await;
    let redis = common::redis_store_at(&format!("redis://127.0.0.1:{}", proxy.port)).await;
    let store = idem_guard::CachedStore::new(redis, 100, std::time::Duration::from_secs(60));
    let guard = Guard::new(store.clone()).prefix(common::unique("cached"));
    let run = |v: u32| guard.run("k", &1, move || async move { Ok::<u32, Error>(v) });
    run(0).await.unwrap(); // warm-up of the scripts, on another key below
    let guard = Guard::new(store.clone()).prefix(common::unique("cached"));
    let run = |v: u32| guard.run("k", &1, move || async move { Ok::<u32, Error>(v) });
    proxy.take_round_trips();
    assert_eq!(run(1).await.unwrap(), 1);
    assert_eq!(proxy.take_round_trips(), 2, "first delivery");
    assert_eq!(run(2).await.unwrap(), 1);
    assert_eq!(
        proxy.take_round_trips(),
        0,
        "first duplicate: the completion was cached as it was written"
    );
    assert_eq!(run(3).await.unwrap(), 1);
    assert_eq!(
        proxy.take_round_trips(),
        0,
        "later duplicates: from the cache"
    );
    assert!(
        matches!(
            guard.run("k", &2, || async { Ok::<u32, Error>(4) }).await,
            Err(Error::Rejected(
                idem_guard::Rejected::PayloadMismatch { .. }
            ))
        ),
        "the cache keeps the fingerprint: a mismatch is still refused"
    );
    assert_eq!(proxy.take_round_trips(), 0);
}

#[cfg(feature = "dynamodb")]
mod dynamodb {
    use super::*;

    async fn counted() -> (idem_guard::DynamoDbStore, common::RequestCounter, Proxy) {
        let proxy = Proxy::start(port_of(&common::dynamodb_endpoint(), 5124)).await;
        let endpoint = format!("http://127.0.0.1:{}", proxy.port);
        let (store, requests) = common::dynamodb_store_counted(&endpoint, "round-trips").await;
        (store, requests, proxy)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dynamodb_makes_one_request_per_call() {
        let (store, requests, proxy) = counted().await;
        requests.take();
        let (first, duplicate) = count(store, &proxy).await;
        assert_eq!(
            (first, duplicate),
            (2 * CALLS, CALLS),
            "counted by the proxy"
        );
        // The SDK's own count, over the whole run (warm-up included): 10 warm-up calls, then
        // the counted ones.
        assert_eq!(requests.take(), 15 + 3 * CALLS, "counted by the SDK");
    }

    /// Transactional mode: the reservation, then one `TransactWriteItems` with the business
    /// write and the completion; a duplicate is the reservation alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dynamodb_transactional_mode_makes_two_requests_then_one() {
        let (store, requests, _proxy) = counted().await;
        let business = store.clone();
        let guard = Guard::new(store).prefix(common::unique("rt-tx"));
        let run = || {
            guard.run_transact("k", &1, |_| async {
                let put = idem_guard::aws_sdk_dynamodb::types::Put::builder()
                    .table_name(business.table())
                    .item(
                        "pk",
                        idem_guard::aws_sdk_dynamodb::types::AttributeValue::S("order-1".into()),
                    )
                    .build()
                    .map_err(Error::store)?;
                let write = idem_guard::aws_sdk_dynamodb::types::TransactWriteItem::builder()
                    .put(put)
                    .build();
                Ok::<_, Error>((7u32, vec![write]))
            })
        };
        requests.take();
        assert_eq!(run().await.unwrap(), 7);
        assert_eq!(requests.take(), 2, "first delivery");
        assert_eq!(run().await.unwrap(), 7);
        assert_eq!(requests.take(), 1, "duplicate");
    }
}
