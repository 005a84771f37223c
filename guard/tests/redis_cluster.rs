//! The Redis store over the local Redis Cluster (`REDIS_CLUSTER_URLS`, started by `.ci/run`)
//! beyond the conformance suite: where records live (hash tags), `wait_for_replicas`, and a
//! reserve retried by its own attempt.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_guard::{Error, Fingerprint, Guard, OwnerToken, Reservation, Store};

const LEASE: Duration = Duration::from_secs(30);

/// The slot a node computes for `key` (`CLUSTER KEYSLOT`), asked of the cluster itself.
async fn keyslot(conn: &mut redis::cluster_async::ClusterConnection, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

/// Every record is one key, `{prefix:key}` with the braces of the key escaped, so its slot is the
/// slot of the whole guard key: a user key with braces in it does not choose the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_is_one_key_whose_tag_is_the_whole_guard_key() {
    let urls = common::redis_cluster_urls();
    let mut conn = common::redis_cluster_connection(&urls).await;
    let ns = common::unique("layout");
    let guard = Guard::new(common::redis_cluster_store().await).prefix(ns.clone());
    let mut slots = std::collections::HashSet::new();
    for i in 0..64 {
        // Braces in the key: hashed alone, `{acme}` would put all 64 records in one slot.
        let key = format!("order-{{acme}}-{i}");
        let ran: Result<u32, Error> = guard.run(&key, &i, || async { Ok(i) }).await;
        assert_eq!(ran.unwrap(), i);
        // The guard's key is `prefix:tenant:key` (no tenant here).
        let stored = format!("{{{ns}::order-%7Bacme%7D-{i}}}");
        let value: Option<String> = redis::cmd("GET")
            .arg(&stored)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(value.is_some_and(|v| v.starts_with("C|")), "{stored}");
        let slot = keyslot(&mut conn, &stored).await;
        let inner = &stored[1..stored.len() - 1];
        assert_eq!(slot, keyslot(&mut conn, inner).await, "{stored}");
        slots.insert(slot);
    }
    assert!(
        slots.len() > 32,
        "64 keys should spread over many slots, got {}",
        slots.len()
    );
}

/// Each primary of the local cluster has one replica: `WAIT 1` is acknowledged, and the call
/// goes through (the `WAIT` reaches the node holding the key: sent elsewhere it would count
/// another node's replicas for a write it never saw, or fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_one_replica_is_acknowledged() {
    let store = common::redis_cluster_store()
        .await
        .wait_for_replicas(1, Duration::from_secs(10));
    let guard = Guard::new(store).prefix(common::unique("wait-one"));
    let runs = Arc::new(AtomicU32::new(0));
    for i in 0..50u32 {
        for _ in 0..2 {
            let runs = runs.clone();
            let got: Result<u32, Error> = guard
                .run(&format!("k{i}"), &i, || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(i)
                })
                .await;
            assert_eq!(got.unwrap(), i);
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 50, "each key ran once");
}

/// More replicas asked for than the node has: the claim is not acknowledged, so the body does
/// not run, the caller gets a store error naming the count, and the claim is withdrawn (the key
/// is free for a later delivery).
async fn short_claim_fails_closed<S: Store + 'static>(plain: S, strict: S, acked: u32, asked: u32) {
    let ns = common::unique("wait-short");
    let runs = Arc::new(AtomicU32::new(0));
    let body = |runs: Arc<AtomicU32>| async move {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Error>(7)
    };
    let refused = Guard::new(strict)
        .prefix(ns.clone())
        .run("k", &1, || body(runs.clone()))
        .await;
    let expected = format!("reached {acked} of {asked} replicas");
    match refused {
        Err(Error::Store(e)) => assert!(e.to_string().contains(&expected), "{e}"),
        other => panic!("expected a store error, got {other:?}"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the body must not run");
    // Withdrawn: a delivery without the requirement acquires at once.
    let later = Guard::new(plain)
        .prefix(ns)
        .run("k", &1, || body(runs.clone()))
        .await;
    assert_eq!(later.unwrap(), 7);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Each primary of the local cluster has one replica; two are asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_short_of_replicas_fails_closed_on_the_cluster() {
    let plain = common::redis_cluster_store().await;
    let strict = plain
        .clone()
        .wait_for_replicas(2, Duration::from_millis(200));
    short_claim_fails_closed(plain, strict, 1, 2).await;
}

/// The local single node has no replica; one is asked for (the same pipeline over a
/// `ConnectionManager`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_short_of_replicas_fails_closed_on_one_node() {
    let plain = common::redis_store().await;
    let strict = plain
        .clone()
        .wait_for_replicas(1, Duration::from_millis(200));
    short_claim_fails_closed(plain, strict, 0, 1).await;
}

/// A reserve resent by its own attempt (the first reply lost, as when a cluster client resends
/// a request cut by a failover) finds the claim its own, on one node and on the cluster, instead
/// of reporting it in progress; another attempt still finds it in progress.
async fn own_claim_is_acquired_again<S: Store>(store: S, ns: &str) {
    let key = format!("{ns}:k");
    let fp = Fingerprint::of(&1).unwrap();
    let owner = OwnerToken::generate();
    assert_eq!(
        store.reserve(&key, fp, &owner, LEASE).await.unwrap(),
        Reservation::Acquired
    );
    assert_eq!(
        store.reserve(&key, fp, &owner, LEASE).await.unwrap(),
        Reservation::Acquired,
        "a resent reserve of the same attempt"
    );
    let other = store
        .reserve(&key, fp, &OwnerToken::generate(), LEASE)
        .await
        .unwrap();
    assert!(matches!(other, Reservation::InProgress { .. }), "{other:?}");
    // Still ours: it completes.
    store
        .complete(
            &key,
            fp,
            &owner,
            &idem_guard::StoredResult::Ok("1".into()),
            LEASE,
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resent_reserve_finds_its_own_claim_on_one_node() {
    own_claim_is_acquired_again(common::redis_store().await, &common::unique("resent")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resent_reserve_finds_its_own_claim_on_the_cluster() {
    own_claim_is_acquired_again(
        common::redis_cluster_store().await,
        &common::unique("resent"),
    )
    .await;
}
