//! The SQLite store beyond the conformance suite: a file reopened after its store was dropped
//! keeps its records, a process killed with SIGKILL mid-body leaves a lease that expires and is
//! taken over, several pools on one file reserve atomically, and 16 concurrent duplicates of
//! 200 keys run each body once.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_guard::testing::{Delivery, Kit};
use idem_guard::{
    Attempt, Error, Fingerprint, Guard, InFlight, OwnerToken, Reservation, SqliteStore, Store,
};

/// The child process of `killed_process_leaves_a_lease_that_expires_and_is_taken_over`.
const CHILD_DB: &str = "IDEM_SQLITE_CHILD_DB";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_sets_wal_and_a_busy_timeout() {
    let store = common::sqlite_store("sqlite_pragmas").await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        (mode.as_str(), busy, synchronous),
        (
            "wal",
            idem_guard::SQLITE_BUSY_TIMEOUT.as_millis() as i64,
            2 // FULL
        )
    );
}

/// Completed and in-progress records are in the file: a store opened on it after the first
/// one was dropped (its pool closed) replays the result and still sees the live lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_file_keeps_its_records() {
    let path = common::sqlite_path("sqlite_reopened");
    let runs = AtomicU32::new(0);
    let body = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<String, Error>("shipped".into())
    };
    let fp = Fingerprint::of(&()).unwrap();
    let holder = OwnerToken::generate();
    {
        let store = SqliteStore::open(&path).await.unwrap();
        let guard = Guard::new(store.clone()).prefix("durable");
        assert_eq!(guard.run("done", &(), body).await.unwrap(), "shipped");
        let held = store
            .reserve("durable::held", fp, &holder, Duration::from_secs(600))
            .await
            .unwrap();
        assert_eq!(held, Reservation::Acquired);
        store.pool().close().await;
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let guard = Guard::new(store.clone()).prefix("durable");
    let replay = guard.run_outcome("done", &(), body).await.unwrap();
    assert!(replay.is_replay(), "{replay:?}");
    assert_eq!(replay.into_inner(), "shipped");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let other = OwnerToken::generate();
    let found = store
        .reserve("durable::held", fp, &other, Duration::from_secs(600))
        .await
        .unwrap();
    assert!(matches!(found, Reservation::InProgress { .. }), "{found:?}");
    // The owner of the record from before the reopen still completes it.
    store
        .complete(
            "durable::held",
            fp,
            &holder,
            &idem_guard::StoredResult::Ok("1".into()),
            Duration::from_secs(600),
        )
        .await
        .unwrap();
}

/// Run as a child process by the test below: reserves `k` under a 2 s lease (renewed while the
/// body runs), says so on stdout, and hangs in the body until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of killed_process_leaves_a_lease_that_expires_and_is_taken_over"]
async fn child_holds_a_key_until_killed() {
    let path = std::env::var(CHILD_DB).expect("run by the parent test");
    let guard = Guard::new(SqliteStore::open(path).await.unwrap())
        .prefix("killed")
        .lease(Duration::from_secs(2));
    let _: Result<u32, Error> = guard
        .run("k", &(), || async {
            println!("BODY STARTED");
            std::future::pending::<()>().await;
            Ok(1)
        })
        .await;
    unreachable!("the body never returns");
}

/// A worker process killed with SIGKILL mid-body cannot release its record: the next delivery
/// (in this process, on a store of its own) waits until the lease the dead worker renewed ends,
/// takes the record over, and knows it did (`Attempt::is_takeover`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_process_leaves_a_lease_that_expires_and_is_taken_over() {
    let path = common::sqlite_path("sqlite_killed");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holds_a_key_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB, &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let started = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("BODY STARTED"))
    })
    .await
    .unwrap();
    assert!(started, "the child never started its body");
    child.kill().unwrap(); // SIGKILL: no destructor, no release
    child.wait().unwrap();

    let guard = Guard::new(SqliteStore::open(&path).await.unwrap())
        .prefix("killed")
        .in_flight(InFlight::Wait(common::LOCAL_SERVER_PATIENCE));
    let runs = AtomicU32::new(0);
    let body = |attempt: Attempt| {
        runs.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<bool, Error>(attempt.is_takeover()) }
    };
    let took_over = guard.run_with("k", &(), body).await.unwrap();
    assert!(took_over, "the redelivery knows an earlier attempt started");
    let replay = guard.run_outcome_with("k", &(), body).await.unwrap();
    assert!(replay.is_replay());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Four stores (four pools, 16 connections) on one file, 32 reservations of one key at once:
/// exactly one gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_from_several_pools_are_exclusive() {
    let path = common::sqlite_path("sqlite_pools");
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(SqliteStore::open(&path).await.unwrap());
    }
    for round in 0..20 {
        let key = format!("k-{round}");
        let fp = Fingerprint::of(&()).unwrap();
        let mut tasks = Vec::new();
        for i in 0..32 {
            let (store, key) = (stores[i % 4].clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                store
                    .reserve(&key, fp, &OwnerToken::generate(), Duration::from_secs(60))
                    .await
            }));
        }
        let mut acquired = 0;
        for task in tasks {
            match task.await.unwrap().unwrap() {
                Reservation::Acquired => acquired += 1,
                Reservation::InProgress { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(acquired, 1, "round {round}");
    }
}

/// 200 keys, each delivered 16 times at once through two stores (two pools) on one file, with
/// a body that increments a per-key counter in the same file: every counter ends at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_duplicates_of_200_keys_run_each_body_once() {
    let path = common::sqlite_path("sqlite_duplicates");
    let (a, b) = (
        SqliteStore::open(&path).await.unwrap(),
        SqliteStore::open(&path).await.unwrap(),
    );
    let counters = a.pool().clone();
    sqlx::query("CREATE TABLE counters (key TEXT PRIMARY KEY, n INTEGER NOT NULL)")
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
                        let n: i64 = sqlx::query_scalar(
                            "INSERT INTO counters (key, n) VALUES (?1, 1)
                             ON CONFLICT (key) DO UPDATE SET n = n + 1 RETURNING n",
                        )
                        .bind(&key)
                        .fetch_one(&counters)
                        .await
                        .map_err(Error::store)?;
                        Ok::<_, Error>(n)
                    })
                    .await
            }
        }
    };
    let effects = |key: String| {
        let counters = counters.clone();
        async move {
            let n: Option<i64> = sqlx::query_scalar("SELECT n FROM counters WHERE key = ?1")
                .bind(key)
                .fetch_optional(&counters)
                .await
                .unwrap();
            n.map_or(0, |n| n as u64)
        }
    };
    let report = kit.check(handler, effects).duplicates_of(200, 16, 64).await;
    report.assert_exactly_once();
    let (keys, min, max): (i64, i64, i64) =
        sqlx::query_as("SELECT count(*), min(n), max(n) FROM counters")
            .fetch_one(&counters)
            .await
            .unwrap();
    assert_eq!((keys, min, max), (200, 1, 1));
}
