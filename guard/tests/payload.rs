//! The default payload of `#[idempotent]`: every argument but `self`, the store, the transaction
//! and service types (framework state, pools, stores).

use std::sync::atomic::{AtomicU32, Ordering};

use idem_guard::{idempotent, Error, MemoryStore, Rejected};

/// Stands for axum's `State` extractor (matched by name, as the macro sees no types).
struct State<T>(T);

struct Services {
    calls: AtomicU32,
}

#[idempotent(key = order_id, store = store)]
async fn capture(
    store: &MemoryStore,
    services: State<&Services>,
    order_id: u64,
    cents: u64,
) -> Result<u32, Error> {
    Ok(services.0.calls.fetch_add(1, Ordering::SeqCst) + 1)
}

#[tokio::test]
async fn store_and_state_are_not_part_of_the_payload() {
    let services = Services {
        calls: AtomicU32::new(0),
    };
    let (a, b) = (MemoryStore::new(), MemoryStore::new());
    assert_eq!(capture(&a, State(&services), 1, 500).await.unwrap(), 1);
    // Another store handle and the same request: a replay, not a mismatch.
    assert_eq!(
        capture(&a.clone(), State(&services), 1, 500).await.unwrap(),
        1
    );
    // The amount is payload: another amount under the same key is refused.
    assert!(matches!(
        capture(&a, State(&services), 1, 900).await,
        Err(Error::Rejected(Rejected::PayloadMismatch { .. }))
    ));
    assert_eq!(capture(&b, State(&services), 1, 500).await.unwrap(), 2);
    assert_eq!(services.calls.load(Ordering::SeqCst), 2);
}

/// `attempt = name` binds the attempt's context in the body: a token derived from the key, the
/// same on every delivery, to pass downstream.
#[idempotent(key = order_id, store = store, attempt = attempt)]
async fn token_for(store: &MemoryStore, order_id: u64) -> Result<(String, bool), Error> {
    Ok((attempt.token().unwrap(), attempt.is_takeover()))
}

#[tokio::test]
async fn attempt_is_bound_in_the_body() {
    let store = MemoryStore::new();
    let (token, taken_over) = token_for(&store, 1).await.unwrap();
    assert!(!taken_over);
    assert_eq!(token.len(), 32);
    // The other store has no record: the body runs again, and derives the same token.
    assert_eq!(token_for(&MemoryStore::new(), 1).await.unwrap().0, token);
    assert_ne!(token_for(&store, 2).await.unwrap().0, token);
}

#[tokio::test]
async fn the_replay_hook_sees_every_replay() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let guard = idem_guard::Guard::new(MemoryStore::new())
        .prefix("hook")
        .on_replay({
            let seen = seen.clone();
            move |key| seen.lock().unwrap().push(key.to_owned())
        });
    for _ in 0..3 {
        let r: Result<u32, Error> = guard.run("k", &(), || async { Ok(1) }).await;
        assert_eq!(r.unwrap(), 1);
    }
    assert_eq!(*seen.lock().unwrap(), ["hook::k", "hook::k"]);
}
