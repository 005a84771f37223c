//! The MySQL/MariaDB store beyond the conformance suite: the store's connections killed with
//! `KILL <id>` from another connection (while idle, and while a body runs), 16 concurrent
//! duplicates of 200 keys, and a result the server refuses for its size.
//! (Connections cut through a proxy, and lost replies: `tests/faults.rs`.)

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_guard::testing::{Delivery, Kit};
use idem_guard::{Error, Fingerprint, Guard, MySqlStore, OwnerToken, Reservation, Store};
use sqlx::{Connection as _, MySqlConnection};

/// Kills every connection to `database` but the caller's, and returns how many.
async fn kill_connections_to(database: &str) -> usize {
    let mut admin = MySqlConnection::connect(&common::mysql_url())
        .await
        .unwrap();
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
    )
    .bind(database)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    for id in &ids {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("KILL {id}")))
            .execute(&mut admin)
            .await
            .unwrap();
    }
    ids.len()
}

fn database_of(url: &str) -> String {
    url.rsplit('/').next().unwrap().to_owned()
}

/// `KILL` of the store's idle connection: the pool pings a connection before lending it, so the
/// dead one is replaced and no statement fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_idle_connection_costs_no_failed_statement() {
    let url = common::mysql_database("mysql_killed_idle", None).await;
    let store = MySqlStore::from_pool(common::mysql_pool(&url, 1).await)
        .await
        .unwrap();
    let fp = Fingerprint::of(&()).unwrap();
    let reserve = |key: &'static str| {
        let store = store.clone();
        async move {
            store
                .reserve(key, fp, &OwnerToken::generate(), Duration::from_secs(60))
                .await
        }
    };
    reserve("before").await.unwrap();
    assert_eq!(kill_connections_to(&database_of(&url)).await, 1);
    let mut failures = Vec::new();
    for key in ["after-1", "after-2", "after-3"] {
        match reserve(key).await {
            Ok(Reservation::Acquired) => {}
            other => failures.push(format!("{key}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "failed statements: {failures:#?}");
}

/// `KILL` of every connection of the store while the body runs (after its reservation): the
/// completion goes through on a new connection and the duplicate replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_killed_mid_body_do_not_lose_the_completion() {
    let url = common::mysql_database("mysql_killed_mid_body", None).await;
    let store = MySqlStore::from_pool(common::mysql_pool(&url, 2).await)
        .await
        .unwrap();
    let guard = Guard::new(store).prefix("kill");
    let database = database_of(&url);
    let (runs, killed) = (AtomicU32::new(0), AtomicU32::new(0));
    let body = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        killed.fetch_add(
            kill_connections_to(&database).await as u32,
            Ordering::SeqCst,
        );
        Ok::<u32, Error>(7)
    };
    assert_eq!(guard.run("k", &(), body).await.unwrap(), 7);
    assert!(killed.load(Ordering::SeqCst) >= 1);
    let replay = guard.run_outcome("k", &(), body).await.unwrap();
    assert!(replay.is_replay());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// 200 keys, each delivered 16 times at once through two stores (two pools), with a body that
/// increments a per-key counter in the same database: every counter ends at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_duplicates_of_200_keys_run_each_body_once() {
    let url = common::mysql_database("mysql_duplicates", None).await;
    let a = MySqlStore::from_pool(common::mysql_pool(&url, 4).await)
        .await
        .unwrap();
    let b = MySqlStore::from_pool(common::mysql_pool(&url, 4).await)
        .await
        .unwrap();
    let counters = a.pool().clone();
    sqlx::query("CREATE TABLE counters (`key` VARCHAR(255) PRIMARY KEY, n INT NOT NULL)")
        .execute(&counters)
        .await
        .unwrap();
    let kit = Kit::new().patience(Duration::from_secs(120));
    let guards = Arc::new([
        Guard::new(kit.store(a)).prefix("dup"),
        Guard::new(kit.store(b)).prefix("dup"),
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
                        sqlx::query(
                            "INSERT INTO counters (`key`, n) VALUES (?, 1)
                             ON DUPLICATE KEY UPDATE n = n + 1",
                        )
                        .bind(&key)
                        .execute(&counters)
                        .await
                        .map_err(Error::store)?;
                        Ok::<_, Error>(())
                    })
                    .await
            }
        }
    };
    let effects = |key: String| {
        let counters = counters.clone();
        async move {
            let n: Option<i32> = sqlx::query_scalar("SELECT n FROM counters WHERE `key` = ?")
                .bind(key)
                .fetch_optional(&counters)
                .await
                .unwrap();
            n.map_or(0, |n| n as u64)
        }
    };
    let report = kit.check(handler, effects).duplicates_of(200, 16, 64).await;
    report.assert_exactly_once();
    let (keys, min, max): (i64, i32, i32) =
        sqlx::query_as("SELECT count(*), min(n), max(n) FROM counters")
            .fetch_one(&counters)
            .await
            .unwrap();
    assert_eq!((keys, min, max), (200, 1, 1));
}

/// The default cap follows the server's `max_allowed_packet`, and a cap raised above it still
/// gets the server's limit as the same final error, before the statement is sent (sending it
/// would end in the server's refusal or a broken pipe, whichever the client sees first), never
/// as a store failure to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_max_allowed_packet_is_final() {
    let url = common::mysql_database("mysql_packet", None).await;
    let pool = common::mysql_pool(&url, 2).await;
    let packet: u64 = sqlx::query_scalar("SELECT CAST(@@max_allowed_packet AS UNSIGNED)")
        .fetch_one(&pool)
        .await
        .unwrap();
    let store = MySqlStore::from_pool(pool).await.unwrap();
    let default_cap = Store::max_result_len(&store);
    assert!(
        default_cap < packet as usize && default_cap <= idem_guard::DEFAULT_MAX_RESULT_LEN,
        "{default_cap} for a packet of {packet}"
    );
    let guard = Guard::new(store.max_result_len(usize::MAX)).prefix("size");
    let runs = AtomicU32::new(0);
    let big = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Error>("x".repeat(packet as usize + 1024))
    };
    let first = tokio::time::timeout(common::LOCAL_SERVER_PATIENCE, guard.run("big", &(), big))
        .await
        .expect("the call returns instead of retrying the completion");
    assert!(
        matches!(
            first,
            Err(Error::ResultTooLarge { limit, .. }) if limit < packet as usize
        ),
        "{first:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
