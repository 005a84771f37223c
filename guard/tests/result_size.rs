//! A result over its store's `max_result_len` fails at once with `Error::ResultTooLarge`, its
//! key completed so that duplicates do not run the body again; never a write retried as if the
//! store were down (issue 39, item 2), for the memory, SQLite and MySQL stores. DynamoDB's
//! default: `tests/dynamodb_result_size.rs`; MySQL's `max_allowed_packet`: `tests/mysql.rs`.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};

use idem_guard::on_error::Cache;
use idem_guard::{Error, Guard, MemoryStore, Store};

#[tokio::test]
async fn a_result_over_the_cap_fails_fast_and_is_not_run_again() {
    over_the_cap(MemoryStore::new().max_result_len(64)).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_result_over_the_cap_fails_fast_and_is_not_run_again() {
    over_the_cap(
        common::sqlite_store("result_size_cap")
            .await
            .max_result_len(64),
    )
    .await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_result_over_the_cap_fails_fast_and_is_not_run_again() {
    over_the_cap(
        common::mysql_store("result_size_cap")
            .await
            .max_result_len(64),
    )
    .await;
}

/// A store whose cap is 64 bytes.
async fn over_the_cap<S: Store>(store: S) {
    assert_eq!(store.max_result_len(), 64);
    let guard = Guard::new(store).prefix("size");
    let runs = AtomicU32::new(0);
    let big = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Error>("x".repeat(1000))
    };
    let first = guard.run("big", &(), big).await;
    match first {
        Err(Error::ResultTooLarge { key, len, limit }) => {
            assert_eq!((key.as_str(), limit), ("size::big", 64));
            assert!(len > 1000, "{len}");
        }
        other => panic!("expected ResultTooLarge, got {other:?}"),
    }
    // The effect happened: a duplicate is told why it cannot be replayed, and does not run.
    let again = guard.run("big", &(), big).await;
    match again {
        Err(e @ Error::Decode { .. }) => assert!(e.to_string().contains("max_result_len"), "{e}"),
        other => panic!("expected a decode error naming the cap, got {other:?}"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A result within the cap is stored and replayed as before.
    let small: Result<String, Error> = guard
        .run("small", &(), || async { Ok("ok".to_owned()) })
        .await;
    assert_eq!(small.unwrap(), "ok");
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Declined(String);

impl From<Error> for Declined {
    fn from(e: Error) -> Self {
        Declined(e.to_string())
    }
}

/// An error to cache that is over the cap is released, as an error that cannot be encoded is:
/// the next delivery runs the body again.
#[tokio::test]
async fn an_error_over_the_cap_is_released_not_cached() {
    let guard = Guard::new(MemoryStore::new().max_result_len(64))
        .prefix("size-err")
        .on_error(Cache);
    let runs = AtomicU32::new(0);
    for _ in 0..2 {
        let r: Result<u32, Declined> = guard
            .run("k", &(), || async {
                runs.fetch_add(1, Ordering::SeqCst);
                Err(Declined("y".repeat(1000)))
            })
            .await;
        assert_eq!(r.unwrap_err().0.len(), 1000);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // Within the cap, the same policy caches it.
    let small: Result<u32, Declined> = guard
        .run("small", &(), || async {
            runs.fetch_add(1, Ordering::SeqCst);
            Err(Declined("no".into()))
        })
        .await;
    let replayed: Result<u32, Declined> = guard.run("small", &(), || async { Ok(1) }).await;
    assert_eq!(
        (small.unwrap_err().0, replayed.unwrap_err().0),
        ("no".into(), "no".into())
    );
}

/// A cap raised above what DynamoDB takes: DynamoDB refuses the item for its size, and the
/// store reports that as the same final error instead of a store failure to retry.
#[cfg(feature = "dynamodb")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_refusing_the_item_size_is_final() {
    let store = common::dynamodb_store("result_size_refused")
        .await
        .max_result_len(usize::MAX);
    let guard = Guard::new(store).prefix("size");
    let runs = AtomicU32::new(0);
    let big = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Error>(vec![7u8; 500_000])
    };
    // The safety net of a test that hung on the old code; the call itself is one round trip.
    let patience = common::LOCAL_SERVER_PATIENCE;
    let first = tokio::time::timeout(patience, guard.run("big", &(), big))
        .await
        .expect("the call returns instead of retrying the completion");
    assert!(
        matches!(
            first,
            Err(Error::ResultTooLarge {
                limit: usize::MAX,
                ..
            })
        ),
        "{first:?}"
    );
    let again = tokio::time::timeout(patience, guard.run("big", &(), big))
        .await
        .unwrap();
    assert!(matches!(again, Err(Error::Decode { .. })), "{again:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
