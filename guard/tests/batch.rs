//! `run_batch_concurrent`: at most `limit` messages in flight, failures in batch order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use idem_guard::batch::BatchItem;
use idem_guard::{Error, Guard, MemoryStore};

#[tokio::test]
async fn runs_up_to_the_limit_at_once() {
    let guard = Guard::new(MemoryStore::new()).prefix("batch");
    let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let started = Instant::now();
    let report = guard
        .run_batch_concurrent(
            0..20u32,
            |m| BatchItem::new(format!("m{m}"), *m, m),
            |m| {
                let (now, peak) = (&now, &peak);
                async move {
                    let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(running, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    if m % 7 == 3 {
                        Err(Error::MissingKey)
                    } else {
                        Ok(m)
                    }
                }
            },
            5,
        )
        .await;
    let elapsed = started.elapsed();
    // Five ran at once, never more; 20 messages 5 at a time, 100 ms each, take four rounds
    // at least (how much longer is the machine's speed).
    assert_eq!(peak.load(Ordering::SeqCst), 5);
    assert!(elapsed >= Duration::from_millis(400), "{elapsed:?}");
    assert_eq!(report.failed_ids(), ["m3", "m10", "m17"]);
    assert_eq!(report.succeeded, 17);
}

#[tokio::test]
async fn a_duplicate_in_the_same_batch_runs_once() {
    let guard = Guard::new(MemoryStore::new()).prefix("batch");
    let runs = AtomicUsize::new(0);
    let messages = [("m1", 1u32), ("m2", 1), ("m3", 2)];
    let report = guard
        .run_batch_concurrent(
            messages,
            |(id, key)| BatchItem::new(*id, *key, key),
            |(_, key)| {
                let runs = &runs;
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<u32, Error>(key)
                }
            },
            3,
        )
        .await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // The concurrent duplicate is refused as in progress: redelivered later, it replays.
    assert_eq!(report.failed_ids(), ["m2"]);
}
