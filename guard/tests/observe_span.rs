//! The `idem_guard` span of each guarded call, with its outcome and a hash of the key.
//!
//! A test binary of its own: tracing caches per callsite whether anyone listens, and a test
//! running the guard on another thread of the same binary without a subscriber can leave the
//! span's callsite switched off for this test's thread-local subscriber.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use idem_guard::{Error, Guard, MemoryStore};

/// The span's `outcome` and `key_hash` fields, as a subscriber sees them. It tracks the entered
/// spans too, as real subscribers do, since the guard records on the current span.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(String, String)>>>, Arc<Mutex<Entered>>);

#[derive(Default)]
struct Entered {
    next: u64,
    metadata: HashMap<u64, &'static tracing::Metadata<'static>>,
    stack: Vec<u64>,
}

struct Fields<'a>(&'a Spans);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let value = format!("{value:?}").trim_matches('"').to_owned();
        self.0
             .0
            .lock()
            .unwrap()
            .push((field.name().to_owned(), value));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0
             .0
            .lock()
            .unwrap()
            .push((field.name().to_owned(), value.to_owned()));
    }
}

impl tracing::Subscriber for Spans {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attributes: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        if attributes.metadata().name() == "idem_guard" {
            attributes.record(&mut Fields(self));
        }
        let mut entered = self.1.lock().unwrap();
        entered.next += 1;
        let id = entered.next;
        entered.metadata.insert(id, attributes.metadata());
        tracing::span::Id::from_u64(id)
    }
    fn current_span(&self) -> tracing_core::span::Current {
        let entered = self.1.lock().unwrap();
        match entered.stack.last() {
            Some(id) => tracing_core::span::Current::new(
                tracing::span::Id::from_u64(*id),
                entered.metadata[id],
            ),
            None => tracing_core::span::Current::none(),
        }
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut Fields(self));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, id: &tracing::span::Id) {
        self.1.lock().unwrap().stack.push(id.into_u64());
    }
    fn exit(&self, _: &tracing::span::Id) {
        self.1.lock().unwrap().stack.pop();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_span_carries_the_outcome_and_a_hash_of_the_key() {
    let spans = Spans::default();
    let _default = tracing::subscriber::set_default(spans.clone());
    let guard = Guard::new(MemoryStore::new()).prefix("observe-span");
    let ok = || async { Ok::<u32, Error>(1) };
    guard.run("order-7", &1, ok).await.unwrap();
    guard.run("order-7", &1, ok).await.unwrap();
    let fields = spans.0.lock().unwrap().clone();
    let values = |name: &str| -> Vec<String> {
        fields
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(values("outcome"), ["fresh", "replayed"], "{fields:?}");
    let hashes = values("key_hash");
    assert_eq!(hashes.len(), 2);
    assert!(
        hashes.iter().all(|h| h.len() == 32 && !h.contains("order")),
        "the key is hashed: {hashes:?}"
    );
    assert_eq!(values("store_ms").len(), 2, "{fields:?}");
}

/// `run_in_tx` (PostgreSQL's transactional mode) runs in the same span (issue 39, item 3).
#[tokio::test(flavor = "current_thread")]
async fn transactional_calls_have_the_span() {
    let store = common::postgres_store(&common::pg_schema("observe_span_tx").await).await;
    let spans = Spans::default();
    let _default = tracing::subscriber::set_default(spans.clone());
    let guard = Guard::new(store.clone()).prefix("observe-span-tx");
    for _ in 0..2 {
        let mut tx = store.pool().begin().await.unwrap();
        let value = guard
            .run_in_tx(&mut tx, "order-8", &1, async |_| Ok::<u32, Error>(1))
            .await
            .unwrap();
        assert_eq!(value, 1);
        tx.commit().await.unwrap();
    }
    let fields = spans.0.lock().unwrap().clone();
    let values = |name: &str| -> Vec<String> {
        fields
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    };
    assert_eq!(values("outcome"), ["fresh", "replayed"], "{fields:?}");
    assert_eq!(values("key_hash").len(), 2, "{fields:?}");
    assert_eq!(values("store_ms").len(), 2, "{fields:?}");
}
