//! The test kit (`idem_guard::testing`) run on a handler as a user writes one, over every store:
//! each scenario holds for a guarded handler, and the kit catches the handlers that are not
//! exactly-once (no guard; the crash window of a handler whose effect is outside the store,
//! closed by passing the attempt's token downstream).

mod common;

use std::sync::Arc;
use std::time::Duration;

use idem_guard::testing::{Delivery, Kill, Kit};
use idem_guard::{Attempt, Error, Guard, Store};
use sqlx::PgPool;

/// The handler's world: a ledger in PostgreSQL whose credit is deliberately not idempotent,
/// and a payment provider that dedupes by the token it is given (as Stripe does).
async fn ledger(schema: &str) -> PgPool {
    let pool = common::pg_pool(schema, 4).await;
    sqlx::raw_sql(
        "CREATE TABLE credits (message text NOT NULL);
         CREATE TABLE provider_charges (token text PRIMARY KEY, message text NOT NULL);",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool
}

async fn credit(pool: &PgPool, message: &str) -> Result<u64, Error> {
    sqlx::query("INSERT INTO credits (message) VALUES ($1)")
        .bind(message)
        .execute(pool)
        .await
        .map_err(Error::store)?;
    Ok(42)
}

async fn count(pool: &PgPool, table: &str, message: &str) -> u64 {
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {table} WHERE message = $1"
    )))
    .bind(message)
    .fetch_one(pool)
    .await
    .unwrap();
    n as u64
}

/// Every scenario over two clients `a` and `b` of one store.
async fn prove<S: Store + 'static>(a: S, b: S, schema: &str) {
    let pool = ledger(schema).await;
    let kit = Kit::new();
    let guards = Arc::new([
        Guard::new(kit.store(a)).prefix("credit"),
        Guard::new(kit.store(b)).prefix("credit"),
    ]);

    // A guarded handler whose effect is outside the store: every scenario but the crash
    // window holds.
    let guarded = {
        let (guards, pool) = (guards.clone(), pool.clone());
        move |delivery: Delivery| {
            let (guards, pool) = (guards.clone(), pool.clone());
            async move {
                let id = delivery.message_id;
                guards[delivery.copy % 2]
                    .run(&id, &id, || async {
                        // The copy killed mid-body is still in here when it is aborted.
                        if delivery.copy == 0 {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                        }
                        credit(&pool, &id).await
                    })
                    .await
            }
        }
    };
    let credits = |id: String| {
        let pool = pool.clone();
        async move { count(&pool, "credits", &id).await }
    };
    let check = kit.check(guarded, credits);
    check.duplicates(16).await.assert_exactly_once();
    check.duplicates_of(20, 8, 32).await.assert_exactly_once();
    let cut = check.store_cut().await;
    cut.assert_exactly_once();
    assert!(
        cut.redeliveries > 0,
        "the copy during the outage was refused"
    );
    check.kill(Kill::AtReservation).await.assert_exactly_once();
    check
        .kill(Kill::After(Duration::from_millis(100)))
        .await
        .assert_exactly_once();
    // The crash window: the kit sees the second effect.
    let crash = check.kill(Kill::BeforeCompletion).await;
    assert_eq!(crash.effects(), vec![2], "{crash:?}");
    assert!(!crash.is_exactly_once());

    // The same handler passing the attempt's token to a provider that dedupes by it: the
    // crash window is closed.
    let tokened = {
        let (guards, pool) = (guards.clone(), pool.clone());
        move |delivery: Delivery| {
            let (guards, pool) = (guards.clone(), pool.clone());
            async move {
                let id = delivery.message_id;
                let message = id.clone();
                guards[delivery.copy % 2]
                    .run_with(&id, &id, |attempt: Attempt| async move {
                        sqlx::query(
                            "INSERT INTO provider_charges (token, message) VALUES ($1, $2)
                             ON CONFLICT (token) DO NOTHING",
                        )
                        .bind(attempt.token().expect("the key is required"))
                        .bind(&message)
                        .execute(&pool)
                        .await
                        .map_err(Error::store)?;
                        Ok::<_, Error>(7u8)
                    })
                    .await
            }
        }
    };
    let charges = |id: String| {
        let pool = pool.clone();
        async move { count(&pool, "provider_charges", &id).await }
    };
    let check = kit.check(tokened, charges);
    check
        .kill(Kill::BeforeCompletion)
        .await
        .assert_exactly_once();
    check.duplicates(16).await.assert_exactly_once();

    // No guard at all: the kit says so.
    let unguarded = {
        let pool = pool.clone();
        move |delivery: Delivery| {
            let pool = pool.clone();
            async move { credit(&pool, &delivery.message_id).await }
        }
    };
    let credits = |id: String| {
        let pool = pool.clone();
        async move { count(&pool, "credits", &id).await }
    };
    let report = kit.check(unguarded, credits).duplicates(8).await;
    assert_eq!(report.effects(), vec![8]);
    assert!(!report.is_exactly_once());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory() {
    let store = common::memory_store();
    prove(store.clone(), store, &common::pg_schema("kit_memory").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis() {
    let (a, b) = (common::redis_store().await, common::redis_store().await);
    prove(a, b, &common::pg_schema("kit_redis").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let schema = common::pg_schema("kit_postgres").await;
    let (a, b) = (
        common::postgres_store(&schema).await,
        common::postgres_store(&schema).await,
    );
    prove(a, b, &schema).await;
}

#[cfg(feature = "redis-cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster() {
    let (a, b) = (
        common::redis_cluster_store().await,
        common::redis_cluster_store().await,
    );
    prove(a, b, &common::pg_schema("kit_redis_cluster").await).await;
}

#[cfg(feature = "dynamodb")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb() {
    let table = common::unique("kit");
    let endpoint = common::dynamodb_endpoint();
    let (a, b) = (
        common::dynamodb_store_at(&endpoint, &table).await,
        common::dynamodb_store_at(&endpoint, &table).await,
    );
    prove(a, b, &common::pg_schema("kit_dynamodb").await).await;
}

/// A panic in the handler's own body is a kill the kit need not make: the guard leaves the
/// record for the lease, and the redelivery runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_body_runs_once_more() {
    let pool = ledger(&common::pg_schema("kit_panic").await).await;
    let kit = Kit::new();
    let guard = Arc::new(
        Guard::new(kit.store(common::redis_store().await))
            .prefix("credit")
            .lease(Duration::from_millis(500)),
    );
    let handler = {
        let pool = pool.clone();
        move |delivery: Delivery| {
            let (guard, pool) = (guard.clone(), pool.clone());
            async move {
                let id = delivery.message_id;
                guard
                    .run(&id, &id, || async {
                        assert!(delivery.copy != 0, "the first copy's body panics");
                        credit(&pool, &id).await
                    })
                    .await
            }
        }
    };
    let credits = |id: String| {
        let pool = pool.clone();
        async move { count(&pool, "credits", &id).await }
    };
    let report = kit.check(handler, credits).duplicates(4).await;
    report.assert_exactly_once();
}

/// A guard with `hash_keys` hides the message ids the kit arms its faults for: a fault
/// scenario fails, saying so, instead of passing without its fault; duplicates (no fault) still
/// work and dedupe (issue 39).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hashed_keys_fail_fault_scenarios_loudly() {
    use std::sync::Mutex;
    let kit = Kit::new().patience(Duration::from_millis(300));
    let guard = Arc::new(
        Guard::new(kit.store(common::memory_store()))
            .prefix("hashed")
            .hash_keys(b"a secret of the test, 32 bytes.."),
    );
    let effects: Arc<Mutex<std::collections::HashMap<String, u64>>> = Arc::default();
    let handler = {
        let (guard, effects) = (guard.clone(), effects.clone());
        move |delivery: Delivery| {
            let (guard, effects) = (guard.clone(), effects.clone());
            async move {
                let id = delivery.message_id;
                guard
                    .run(&id, &id, || async {
                        *effects.lock().unwrap().entry(id.clone()).or_default() += 1;
                        Ok::<u32, Error>(1)
                    })
                    .await
            }
        }
    };
    let count = move |id: String| {
        let effects = effects.clone();
        async move { effects.lock().unwrap().get(&id).copied().unwrap_or(0) }
    };
    let check = kit.check(handler, count);
    check.duplicates(8).await.assert_exactly_once();
    let cut = check.store_cut().await;
    assert!(!cut.is_exactly_once(), "{cut:?}");
    let failures = cut.failures().join("\n");
    assert!(failures.contains("hash_keys"), "{failures}");
}
