//! `on_error = "cacheable"`: the error type picks what is cached of it, so it can keep the
//! guard's structured error (`Rejected::InProgress { retry_after, .. }`) instead of a string.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem_guard::on_error::CacheableError;
use idem_guard::{idempotent, Error, MemoryStore, Rejected};

#[derive(Debug)]
enum PayError {
    Guard(Error),
    Declined { code: String },
    Timeout,
}

impl From<Error> for PayError {
    fn from(e: Error) -> Self {
        PayError::Guard(e)
    }
}

impl CacheableError for PayError {
    type Cached = String;

    fn to_cached(&self) -> Option<String> {
        match self {
            PayError::Declined { code } => Some(code.clone()),
            _ => None,
        }
    }

    fn from_cached(code: String) -> Self {
        PayError::Declined { code }
    }
}

/// What the provider answers, per call.
struct Provider {
    calls: AtomicU32,
    answer: fn(u32) -> Result<u64, PayError>,
    delay: Duration,
}

#[idempotent(key = payment_id, store = store, payload = cents, on_error = "cacheable")]
async fn pay(
    store: &MemoryStore,
    provider: &Provider,
    payment_id: &str,
    cents: u64,
) -> Result<u64, PayError> {
    let call = provider.calls.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::time::sleep(provider.delay).await;
    (provider.answer)(call)
}

#[tokio::test]
async fn a_final_error_is_cached_as_its_chosen_representation() {
    let store = MemoryStore::new();
    let provider = Provider {
        calls: AtomicU32::new(0),
        answer: |_| {
            Err(PayError::Declined {
                code: "card_declined".into(),
            })
        },
        delay: Duration::ZERO,
    };
    for _delivery in 0..3 {
        let r = pay(&store, &provider, "pay-1", 500).await;
        assert!(
            matches!(&r, Err(PayError::Declined { code }) if code == "card_declined"),
            "{r:?}"
        );
    }
    assert_eq!(
        provider.calls.load(Ordering::SeqCst),
        1,
        "replayed, not re-run"
    );
}

#[tokio::test]
async fn a_transient_error_is_released() {
    let store = MemoryStore::new();
    let provider = Provider {
        calls: AtomicU32::new(0),
        answer: |call| {
            if call == 1 {
                Err(PayError::Timeout)
            } else {
                Ok(42)
            }
        },
        delay: Duration::ZERO,
    };
    assert!(matches!(
        pay(&store, &provider, "pay-1", 500).await,
        Err(PayError::Timeout)
    ));
    assert_eq!(pay(&store, &provider, "pay-1", 500).await.unwrap(), 42);
    assert_eq!(pay(&store, &provider, "pay-1", 500).await.unwrap(), 42);
    assert_eq!(provider.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejections_stay_structured() {
    let store = MemoryStore::new();
    let provider = Provider {
        calls: AtomicU32::new(0),
        answer: |_| Ok(1),
        delay: Duration::from_millis(300),
    };
    let (first, duplicate) = tokio::join!(pay(&store, &provider, "pay-1", 500), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        pay(&store, &provider, "pay-1", 500).await
    });
    assert_eq!(first.unwrap(), 1);
    match duplicate {
        Err(PayError::Guard(Error::Rejected(Rejected::InProgress { retry_after, .. }))) => {
            assert!(retry_after > Duration::ZERO && retry_after <= idem_guard::DEFAULT_LEASE);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        pay(&store, &provider, "pay-1", 900).await,
        Err(PayError::Guard(Error::Rejected(
            Rejected::PayloadMismatch { .. }
        )))
    ));
}

/// With `on_error = "cache"` the error type must be serializable; `Rejected` is, so it can be
/// held as a value rather than as text.
#[test]
fn rejected_is_serializable() {
    let r = Rejected::InProgress {
        key: "p::k".into(),
        retry_after: Duration::from_millis(1500),
    };
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<Rejected>(&json).unwrap(), r);
}
