//! DynamoDB with the table's own attribute names (issue 39): a single table keyed `PK`/`SK`,
//! created without the store, holding the guard's records beside other items. (The conformance
//! suite runs every rule on such a table too: `dynamodb_custom_attributes`.)
#![cfg(feature = "dynamodb")]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem_guard::aws_sdk_dynamodb::types::AttributeValue;
use idem_guard::dynamodb::Attributes;
use idem_guard::{DynamoDbStore, Error, Guard, InFlight, Rejected};

fn text(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

async fn items(store: &DynamoDbStore) -> Vec<HashMap<String, AttributeValue>> {
    let scanned = store
        .client()
        .scan()
        .table_name(store.table())
        .send()
        .await
        .unwrap();
    scanned.items().to_vec()
}

/// The records carry the configured names only, under `SK = IDEMPOTENCY`; another item of the
/// same partition (`SK = PROFILE`) is left as it was; dedupe, in-progress rejection, cached
/// results and expiry work through the renamed attributes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_use_the_configured_names_beside_other_items() {
    let store = common::dynamodb_custom_store("custom-attrs").await;
    let ns = "orders";
    // Another entity in the same partition as the guard's record of key `o-1`.
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("PK", text("orders::o-1"))
        .item("SK", text("PROFILE"))
        .item("name", text("Alice"))
        .send()
        .await
        .unwrap();
    let guard = Guard::new(store.clone())
        .prefix(ns)
        .retention(Duration::from_secs(2));
    let runs = AtomicU32::new(0);
    let body = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<String, Error>("receipt-1".to_owned())
    };
    // Dedupe and result caching.
    assert_eq!(guard.run("o-1", &1, body).await.unwrap(), "receipt-1");
    let replay = guard.run_outcome("o-1", &1, body).await.unwrap();
    assert!(replay.is_replay());
    assert_eq!(replay.into_inner(), "receipt-1");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    let all = items(&store).await;
    assert_eq!(all.len(), 2, "{all:#?}");
    let profile = all
        .iter()
        .find(|i| i["SK"] == text("PROFILE"))
        .expect("the other item is still there");
    assert_eq!(profile["name"], text("Alice"));
    assert_eq!(profile.len(), 3, "untouched: {profile:?}");
    let record = all
        .iter()
        .find(|i| i["SK"] == text("IDEMPOTENCY"))
        .expect("the guard's record under its sort key value");
    assert_eq!(record["PK"], text("orders::o-1"));
    assert_eq!(record["idem_status"], text("ok"));
    assert!(!record["idem_result"].as_s().unwrap().is_empty());
    let mut names: Vec<&str> = record.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "PK",
            "SK",
            "idem_expires_at_ms",
            "idem_fp",
            "idem_owner",
            "idem_result",
            "idem_status",
            "idem_ttl"
        ]
    );

    // In progress: a running record blocks a duplicate.
    let (entered_tx, entered) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let guard = guard.clone();
        tokio::spawn(async move {
            guard
                .run("o-2", &1, || async move {
                    entered_tx.send(()).unwrap();
                    release.await.unwrap();
                    Ok::<u32, Error>(2)
                })
                .await
        })
    };
    entered.await.unwrap();
    let busy = guard
        .clone()
        .in_flight(InFlight::Reject)
        .run("o-2", &1, || async { Ok::<u32, Error>(0) })
        .await;
    assert!(
        matches!(busy, Err(Error::Rejected(Rejected::InProgress { .. }))),
        "{busy:?}"
    );
    let running = items(&store)
        .await
        .into_iter()
        .find(|i| i["PK"] == text("orders::o-2"))
        .unwrap();
    assert_eq!(running["idem_status"], text("running"));
    release_tx.send(()).unwrap();
    assert_eq!(holder.await.unwrap().unwrap(), 2);

    // Expiry: once the retention (2 s, by the stored expiry attribute) has passed, the key
    // runs again. Waits for the stored instant, read back, not a guessed delay.
    let record = items(&store)
        .await
        .into_iter()
        .find(|i| i["PK"] == text("orders::o-1") && i["SK"] == text("IDEMPOTENCY"))
        .unwrap();
    let expires_ms: u64 = record["idem_expires_at_ms"]
        .as_n()
        .unwrap()
        .parse()
        .unwrap();
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        if now > expires_ms {
            break;
        }
        tokio::time::sleep(Duration::from_millis(expires_ms - now + 1)).await;
    }
    let again = guard.run_outcome("o-1", &1, body).await.unwrap();
    assert!(!again.is_replay(), "expired: runs again");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let profile_after = items(&store)
        .await
        .into_iter()
        .find(|i| i["SK"] == text("PROFILE"))
        .unwrap();
    assert_eq!(profile_after["name"], text("Alice"));
}

/// A store with the default names on a `PK`/`SK` table fails with DynamoDB's key error, and bad
/// names are refused before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_or_invalid_names_are_clear_errors() {
    let custom = common::dynamodb_custom_store("custom-attrs-wrong").await;
    let defaults = DynamoDbStore::new(custom.client().clone(), custom.table());
    let r: Result<u32, Error> = Guard::new(defaults)
        .prefix("wrong")
        .run("k", &(), || async { panic!("ran without a reservation") })
        .await;
    let Err(Error::Store(e)) = r else {
        panic!("{r:?}")
    };
    assert!(e.to_string().contains("PutItem (reserve)"), "{e}");

    let store = || DynamoDbStore::new(custom.client().clone(), custom.table());
    for (attributes, says) in [
        (Attributes::default().status("owner"), "both named `owner`"),
        (Attributes::default().partition_key(""), "partition key"),
        (
            Attributes::default().sort_key("SK", ""),
            "sort key value of the records is empty",
        ),
        (Attributes::default().sort_key("ttl", "x"), "named `ttl`"),
    ] {
        let e = store().attributes(attributes).unwrap_err();
        assert!(e.to_string().contains(says), "{e}");
    }
}

/// `create_table_if_missing` makes the table of the configured key schema and TTL attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_if_missing_uses_the_configured_key_schema() {
    let client = common::dynamodb_client(&common::dynamodb_endpoint());
    let table = common::unique("custom-attrs-created");
    let store = DynamoDbStore::new(client.clone(), &table)
        .attributes(common::custom_attributes())
        .unwrap();
    store.create_table_if_missing().await.unwrap();
    let described = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let schema: Vec<(String, String)> = described
        .table()
        .unwrap()
        .key_schema()
        .iter()
        .map(|k| {
            (
                k.attribute_name().to_owned(),
                k.key_type().as_str().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        schema,
        [
            ("PK".to_owned(), "HASH".to_owned()),
            ("SK".to_owned(), "RANGE".to_owned())
        ]
    );
    let ttl = client
        .describe_time_to_live()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    assert_eq!(
        ttl.time_to_live_description()
            .and_then(|d| d.attribute_name()),
        Some("idem_ttl")
    );
    let guard = Guard::new(store).prefix("created");
    let ran: Result<u32, Error> = guard.run("k", &(), || async { Ok(5) }).await;
    assert_eq!(ran.unwrap(), 5);
}
