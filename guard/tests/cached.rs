//! `CachedStore` in front of Redis and PostgreSQL: the completions it writes itself are cached,
//! so a run of duplicates after a first delivery costs no round trip (it used to answer only
//! from a key's third delivery); what the cache answers is what the store holds.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{port_of, Proxy};
use idem_guard::{CachedStore, Error, Guard, Rejected, Store};

const DUPLICATES: u64 = 5;

/// A first delivery, then `DUPLICATES` duplicates: every duplicate is answered by the cache,
/// with no round trip to the store behind `proxy`; another payload is still refused; an error
/// released by its body is not cached; a cached completion lasts at most its retention.
async fn duplicates_hit_the_cache<S: Store>(store: S, proxy: &Proxy, ns: &str) {
    let cached = CachedStore::new(store, 100, Duration::from_secs(60));
    let guard = Guard::new(cached.clone()).prefix(ns.to_owned());
    let runs = AtomicU32::new(0);
    let body = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Error>("receipt".to_owned())
    };
    assert_eq!(guard.run("order-1", &1, body).await.unwrap(), "receipt");
    proxy.take_round_trips();
    for _ in 0..DUPLICATES {
        assert_eq!(guard.run("order-1", &1, body).await.unwrap(), "receipt");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        cached.hits(),
        DUPLICATES,
        "every duplicate answered by the cache"
    );
    assert_eq!(
        proxy.take_round_trips(),
        0,
        "no duplicate reached the store"
    );
    let other = guard.run("order-1", &2, body).await;
    assert!(
        matches!(
            other,
            Err(Error::Rejected(Rejected::PayloadMismatch { .. }))
        ),
        "{other:?}"
    );

    // A failed body's record is released, not cached: the retry runs.
    let failed = guard
        .run("order-2", &1, || async {
            Err::<String, _>(Error::store("down"))
        })
        .await;
    assert!(failed.is_err());
    assert_eq!(guard.run("order-2", &1, body).await.unwrap(), "receipt");
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // A completion kept for less than the cache's ttl is not served past its retention.
    let short = Guard::new(cached.clone())
        .prefix(ns.to_owned())
        .retention(Duration::from_millis(300));
    assert_eq!(short.run("order-3", &1, body).await.unwrap(), "receipt");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(short.run("order-3", &1, body).await.unwrap(), "receipt");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        4,
        "run again after the retention"
    );
}

#[tokio::test]
async fn redis() {
    let proxy = Proxy::start(port_of(&common::redis_url(), 6379)).await;
    let store = common::redis_store_at(&format!("redis://127.0.0.1:{}", proxy.port)).await;
    duplicates_hit_the_cache(store, &proxy, &common::unique("cached")).await;
}

#[tokio::test]
async fn postgres() {
    let schema = common::pg_schema("cached_postgres").await;
    common::postgres_store(&schema).await; // creates the table
    let proxy = Proxy::start(port_of(&common::database_url(), 5432)).await;
    let url = common::database_url_through(&proxy);
    let store = idem_guard::PostgresStore::from_pool(common::pg_pool_at(&url, &schema, 2).await)
        .await
        .unwrap();
    duplicates_hit_the_cache(store, &proxy, "cached").await;
}
