//! A result over DynamoDB's 400 KB item limit, with the store's default `max_result_len`: the
//! call fails at once with a clear error, and a duplicate does not run the body again (issue 39,
//! item 2: the completion was retried for as long as lease renewals succeeded, and the call had
//! not returned after 200 s). Written with the API the guard had before the cap, so that it runs
//! against that code too.
#![cfg(feature = "dynamodb")]

mod common;

use std::sync::atomic::{AtomicU32, Ordering};

use idem_guard::{Error, Guard};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_item_limit_fails_fast() {
    let guard = Guard::new(common::dynamodb_store("result_over_item_limit").await).prefix("size");
    let runs = AtomicU32::new(0);
    // 350 KB of bytes: about 470 KB once encoded for storage, over the 400 KB item limit.
    let big = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Error>(vec![7u8; 350_000])
    };
    // The safety net of a test that hangs on the old code; a call that fails fast is one
    // reservation and one write.
    let patience = common::LOCAL_SERVER_PATIENCE;
    let first = tokio::time::timeout(patience, guard.run("big", &(), big))
        .await
        .expect("the call returns instead of retrying the completion while its lease holds");
    let e = first.expect_err("a result DynamoDB cannot keep is an error");
    assert!(e.to_string().contains("max_result_len"), "{e}");
    let again = tokio::time::timeout(patience, guard.run("big", &(), big))
        .await
        .expect("the duplicate returns");
    let e = again.expect_err("the result was not stored, so it cannot be replayed");
    assert!(e.to_string().contains("max_result_len"), "{e}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
