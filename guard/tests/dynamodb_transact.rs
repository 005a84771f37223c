//! DynamoDB transactional mode: the business writes and the key's completion go out in one
//! `TransactWriteItems`, so they are applied together or not at all (against a local moto
//! server, see `tests/common`).
#![cfg(feature = "dynamodb")]

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem_guard::aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, TransactWriteItem, Update,
};
use idem_guard::dynamodb::Transact;
use idem_guard::{DynamoDbStore, Error, Guard, TxStart};

/// The guard's store and a business table (`pk` string key) on the same server.
async fn setup(name: &str) -> (Guard<DynamoDbStore>, DynamoDbStore) {
    let store = common::dynamodb_store(name).await;
    let business = common::dynamodb_store(&format!("{name}-accounts")).await;
    (Guard::new(store).prefix("credit"), business)
}

fn text(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn credit(accounts: &DynamoDbStore, cents: u64) -> TransactWriteItem {
    let update = Update::builder()
        .table_name(accounts.table())
        .key("pk", text("acct-1"))
        .update_expression("ADD balance :c")
        .expression_attribute_values(":c", AttributeValue::N(cents.to_string()))
        .build()
        .unwrap();
    TransactWriteItem::builder().update(update).build()
}

fn put(accounts: &DynamoDbStore, pk: &str) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(accounts.table())
        .item("pk", text(pk))
        .build()
        .unwrap();
    TransactWriteItem::builder().put(put).build()
}

/// A check that holds only once `pk` has an `approved` attribute.
fn approved(accounts: &DynamoDbStore, pk: &str) -> TransactWriteItem {
    let check = ConditionCheck::builder()
        .table_name(accounts.table())
        .key("pk", text(pk))
        .condition_expression("attribute_exists(approved)")
        .build()
        .unwrap();
    TransactWriteItem::builder().condition_check(check).build()
}

async fn item(
    store: &DynamoDbStore,
    pk: &str,
) -> Option<std::collections::HashMap<String, AttributeValue>> {
    store
        .client()
        .get_item()
        .table_name(store.table())
        .key("pk", text(pk))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

async fn balance(accounts: &DynamoDbStore) -> u64 {
    item(accounts, "acct-1")
        .await
        .and_then(|i| i.get("balance").and_then(|b| b.as_n().ok()).cloned())
        .map_or(0, |n| n.parse().unwrap())
}

/// The state of the guard's record of `key` under the prefix "credit" (no tenant).
async fn record(guard: &Guard<DynamoDbStore>, key: &str) -> Option<String> {
    item(guard.store(), &format!("credit::{key}"))
        .await
        .and_then(|i| i.get("state").and_then(|s| s.as_s().ok()).cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_and_business_write_commit_together_and_replay() {
    let (guard, accounts) = setup("tx_commit").await;
    let runs = AtomicU32::new(0);
    let deliver = || {
        guard.run_outcome_transact("evt-1", &100u64, |_| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Error>((100u64, vec![credit(&accounts, 100)]))
        })
    };
    let first = deliver().await.unwrap();
    assert_eq!((first.is_replay(), *first.value()), (false, 100));
    assert_eq!(record(&guard, "evt-1").await.as_deref(), Some("ok"));
    for _ in 0..3 {
        let again = deliver().await.unwrap();
        assert_eq!((again.is_replay(), again.into_inner()), (true, 100));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(balance(&accounts).await, 100, "credited once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_transaction_applies_nothing_and_the_redelivery_runs_again() {
    let (guard, accounts) = setup("tx_cancel").await;
    let runs = AtomicU32::new(0);
    let deliver = || {
        guard.run_transact("order-1", &"order-1", |_| async {
            runs.fetch_add(1, Ordering::SeqCst);
            // The order is written only if its limit was approved.
            let writes = vec![put(&accounts, "order-1"), approved(&accounts, "limit-1")];
            Ok::<_, Error>(("placed".to_owned(), writes))
        })
    };
    let refused = deliver().await;
    let message = match &refused {
        Err(Error::Store(e)) => e.to_string(),
        other => panic!("the cancellation is reported as a store error: {other:?}"),
    };
    assert!(
        message.contains("cancelled") && message.contains("item 1: ConditionalCheckFailed"),
        "{message}"
    );
    assert!(
        item(&accounts, "order-1").await.is_none(),
        "no business write"
    );
    assert_eq!(
        record(&guard, "order-1").await,
        None,
        "no completion; released"
    );

    accounts
        .client()
        .put_item()
        .table_name(accounts.table())
        .item("pk", text("limit-1"))
        .item("approved", AttributeValue::Bool(true))
        .send()
        .await
        .unwrap();
    assert_eq!(deliver().await.unwrap(), "placed");
    assert!(item(&accounts, "order-1").await.is_some());
    assert_eq!(record(&guard, "order-1").await.as_deref(), Some("ok"));
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the redelivery ran again");
}

/// An attempt whose lease ended and was taken over cannot apply its writes: the record's
/// condition cancels its whole transaction, so the account is credited once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_owner_cannot_apply_its_writes_after_a_takeover() {
    let (guard, accounts) = setup("tx_stale").await;
    let lease = Duration::from_millis(300);
    let guard = guard.lease(lease).renew_lease(false);
    // The first body ends only after the takeover, however long the store takes; it started
    // after its reservation was taken, so its lease is over `lease` after that.
    let (release, hold) = tokio::sync::oneshot::channel::<()>();
    let (started, has_started) = tokio::sync::oneshot::channel();
    let slow = tokio::spawn({
        let (guard, accounts) = (guard.clone(), accounts.clone());
        async move {
            guard
                .run_transact("evt-7", &100u64, move |_| async move {
                    started.send(tokio::time::Instant::now()).ok();
                    hold.await.ok();
                    Ok::<_, Error>((1u32, vec![credit(&accounts, 100)]))
                })
                .await
        }
    });
    let started = has_started.await.expect("the first delivery starts");
    tokio::time::sleep_until(started + lease + Duration::from_millis(150)).await;
    let took_over: u32 = guard
        .run_transact("evt-7", &100u64, |attempt| {
            assert!(attempt.is_takeover());
            async { Ok::<_, Error>((2, vec![credit(&accounts, 100)])) }
        })
        .await
        .unwrap();
    assert_eq!(took_over, 2);
    release.send(()).unwrap();
    let stale = slow.await.unwrap();
    assert!(matches!(stale, Err(Error::NotOwner { .. })), "{stale:?}");
    assert_eq!(balance(&accounts).await, 100, "credited once");
}

/// The two-step form, as a handler that is spawned (its future is `Send`).
async fn handle(
    guard: Guard<DynamoDbStore>,
    accounts: DynamoDbStore,
    event: &'static str,
) -> Result<u64, Error> {
    let attempt = match guard.begin_transact(event, &50u64).await? {
        TxStart::Done(replayed) => return replayed.map(|o| o.into_inner()),
        TxStart::Run(attempt) => attempt,
    };
    assert_eq!(
        attempt.attempt().key(),
        Some(format!("credit::{event}").as_str())
    );
    let result: Result<Transact<u64>, Error> = Ok((50, vec![credit(&accounts, 50)]));
    attempt.finish(&guard, result).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_step_form_is_spawnable_and_replays() {
    let (guard, accounts) = setup("tx_two_step").await;
    for _ in 0..3 {
        let done = tokio::spawn(handle(guard.clone(), accounts.clone(), "evt-2"))
            .await
            .unwrap();
        assert_eq!(done.unwrap(), 50);
    }
    assert_eq!(balance(&accounts).await, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_body_applies_none_of_its_writes() {
    let (guard, accounts) = setup("tx_failed_body").await;
    let r: Result<u32, Error> = guard
        .run_transact("evt-3", &(), |_| async {
            // A body that prepared writes and then failed: none of them goes out.
            let _prepared = credit(&accounts, 100);
            Err(Error::MissingKey)
        })
        .await;
    assert!(matches!(r, Err(Error::MissingKey)), "{r:?}");
    assert_eq!(balance(&accounts).await, 0);
    assert_eq!(record(&guard, "evt-3").await, None, "released by default");
    let retried: u32 = guard
        .run_transact("evt-3", &(), |_| async {
            Ok::<_, Error>((3, vec![credit(&accounts, 100)]))
        })
        .await
        .unwrap();
    assert_eq!((retried, balance(&accounts).await), (3, 100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_not_required_applies_the_writes_unguarded() {
    let (guard, accounts) = setup("tx_unguarded").await;
    let lenient = guard.required(false);
    for _ in 0..2 {
        let r: u32 = lenient
            .run_transact(None::<&str>, &(), |_| async {
                Ok::<_, Error>((1, vec![credit(&accounts, 10)]))
            })
            .await
            .unwrap();
        assert_eq!(r, 1);
    }
    assert_eq!(
        balance(&accounts).await,
        20,
        "unguarded: every call applies"
    );
}
