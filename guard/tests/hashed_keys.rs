//! `Guard::hash_keys` (issue 39): every store keeps the HMAC-SHA256 of the key under the user's
//! secret, never the key. Each store's records are read back with a raw client: the key (and the
//! tenant) appear in no stored key or value, duplicates still dedupe, and two secrets give two
//! records (so a rotated secret runs a duplicate again, as the README says).

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};

use hmac::{Hmac, KeyInit, Mac};
use idem_guard::{Error, Guard, Store};
use sha2::Sha256;

const SECRET_A: &[u8] = b"first secret, 32 bytes long.....";
const SECRET_B: &[u8] = b"second secret, 32 bytes long....";
const TENANT: &str = "tenant-acme-eu";

/// The key of the scenario: personal data, unique to the test's namespace.
fn raw_key(ns: &str) -> String {
    format!("alice@example.com/{ns}")
}

/// The stored key, computed here from the documented form: `prefix:#` + hex HMAC-SHA256 of the
/// full key `prefix:tenant:key` under the secret.
fn expected_key(ns: &str, secret: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).unwrap();
    mac.update(format!("{ns}:{TENANT}:{}", raw_key(ns)).as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{ns}:#{hex}")
}

/// Runs the key under secret A twice (one run, one replay) and once under secret B (another
/// record: it runs again). Returns the stored keys the bodies were given.
async fn dedupe_under_two_secrets<S: Store + Clone>(store: S, ns: &str) -> BTreeSet<String> {
    let runs = AtomicU32::new(0);
    let guard = |secret: &[u8]| {
        Guard::new(store.clone())
            .prefix(ns.to_owned())
            .tenant(TENANT)
            .hash_keys(secret)
    };
    let body = |attempt: idem_guard::Attempt| {
        runs.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<String, Error>(attempt.key().unwrap().to_owned()) }
    };
    let (a, b) = (guard(SECRET_A), guard(SECRET_B));
    let first = a.run_outcome_with(raw_key(ns), &1, body).await.unwrap();
    assert!(!first.is_replay());
    let key_a = first.into_inner();
    assert_eq!(key_a, expected_key(ns, SECRET_A));
    let duplicate = a.run_outcome_with(raw_key(ns), &1, body).await.unwrap();
    assert!(
        duplicate.is_replay(),
        "a duplicate under the same secret replays"
    );
    assert_eq!(duplicate.into_inner(), key_a);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A payload mismatch is still caught on the hashed record.
    let other = a.run_with(raw_key(ns), &2, body).await;
    assert!(
        matches!(
            other,
            Err(Error::Rejected(
                idem_guard::Rejected::PayloadMismatch { .. }
            ))
        ),
        "{other:?}"
    );
    let rotated = b.run_outcome_with(raw_key(ns), &1, body).await.unwrap();
    assert!(
        !rotated.is_replay(),
        "another secret does not see the record"
    );
    let key_b = rotated.into_inner();
    assert_eq!(key_b, expected_key(ns, SECRET_B));
    assert_ne!(key_a, key_b);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    BTreeSet::from([key_a, key_b])
}

/// What a raw read of the store found for the namespace: every stored key with its value.
fn assert_hidden(ns: &str, records: &[(String, String)], expected: &BTreeSet<String>) {
    let keys: BTreeSet<String> = records.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        &keys, expected,
        "exactly the two hashed records: {records:#?}"
    );
    for (key, value) in records {
        for secret in [raw_key(ns).as_str(), "alice@example.com", TENANT] {
            assert!(
                !key.contains(secret) && !value.contains(secret),
                "`{secret}` stored in {key} = {value}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stores_hashed_keys() {
    use idem_guard::{Fingerprint, OwnerToken, Reservation};
    let store = common::memory_store();
    let ns = common::unique("hashed");
    let keys = dedupe_under_two_secrets(store.clone(), &ns).await;
    assert_eq!(store.len(), 2);
    // The raw full key finds nothing; the hashed one finds the completed record.
    let fingerprint = Fingerprint::of(&1).unwrap();
    let lease = std::time::Duration::from_secs(60);
    let raw_full = format!("{ns}:{TENANT}:{}", raw_key(&ns));
    let owner = OwnerToken::generate();
    let probe = store.reserve(&raw_full, fingerprint, &owner, lease).await;
    assert!(matches!(probe, Ok(Reservation::Acquired)), "{probe:?}");
    store.release(&raw_full, &owner).await.unwrap();
    for key in &keys {
        let found = store
            .reserve(key, fingerprint, &OwnerToken::generate(), lease)
            .await;
        assert!(
            matches!(found, Ok(Reservation::Completed { .. })),
            "{found:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stores_hashed_keys() {
    let ns = common::unique("hashed");
    let keys = dedupe_under_two_secrets(common::redis_store().await, &ns).await;
    let client = redis::Client::open(common::redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let found: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{ns}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut records = Vec::new();
    for key in found {
        let value: String = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        records.push((key, value));
    }
    assert_hidden(&ns, &records, &keys);
}

/// The stored key goes inside the cluster's hash tag like any other (`{prefix:#hex}`): the
/// records are found on the nodes that own their slots, and nowhere holds the raw key.
#[cfg(feature = "redis-cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_stores_hashed_keys() {
    let ns = common::unique("hashed");
    let keys = dedupe_under_two_secrets(common::redis_cluster_store().await, &ns).await;
    let mut records = Vec::new();
    // Each node alone (not the cluster client): `KEYS` lists what that node holds.
    for url in common::redis_cluster_urls() {
        let client = redis::Client::open(url).unwrap();
        let mut node = client.get_multiplexed_async_connection().await.unwrap();
        let found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("*{ns}*"))
            .query_async(&mut node)
            .await
            .unwrap();
        for key in found {
            let value: Option<String> = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut node)
                .await
                .ok();
            // A replica holds a copy; the primary answers for the record.
            if let Some(value) = value {
                records.push((key, value));
            }
        }
    }
    records.sort();
    records.dedup();
    let untagged: Vec<(String, String)> = records
        .iter()
        .map(|(k, v)| {
            let inner = k.strip_prefix('{').and_then(|k| k.strip_suffix('}'));
            (inner.unwrap_or(k).to_owned(), v.clone())
        })
        .collect();
    assert_hidden(&ns, &untagged, &keys);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stores_hashed_keys() {
    let schema = common::pg_schema("hashed_keys").await;
    let store = common::postgres_store(&schema).await;
    let pool = store.pool().clone();
    let keys = dedupe_under_two_secrets(store, "hashed").await;
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT key, row_to_json(r)::text FROM idem_guard_records r")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_hidden("hashed", &rows, &keys);
}

#[cfg(feature = "dynamodb")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_stores_hashed_keys() {
    let store = common::dynamodb_store("hashed").await;
    let (client, table) = (store.client().clone(), store.table().to_owned());
    let keys = dedupe_under_two_secrets(store, "hashed").await;
    let scanned = client.scan().table_name(&table).send().await.unwrap();
    let records: Vec<(String, String)> = scanned
        .items()
        .iter()
        .map(|item| {
            let pk = item["pk"].as_s().unwrap().clone();
            (pk, format!("{item:?}"))
        })
        .collect();
    assert_hidden("hashed", &records, &keys);
}
