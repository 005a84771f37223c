//! Keys may hold personal data (an e-mail address, an account number): error messages and log
//! lines show them hashed, as the `idem_guard` span's `key_hash` does, never as they are
//! (issue 39, item 8).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_guard::{Error, Fingerprint, Guard, InFlight, MemoryStore, OwnerToken, Store};

const KEY: &str = "alice@example.com";

fn hash(key: &str) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(key.as_bytes()))
}

/// Every field of every event, as text.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl tracing::Subscriber for Events {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = String::new();
        event.record(&mut Fields(&mut text));
        self.0.lock().unwrap().push(text);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn errors_and_logs_show_keys_hashed() {
    keys_hashed(MemoryStore::new()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "current_thread")]
async fn sqlite_errors_and_logs_show_keys_hashed() {
    keys_hashed(common::sqlite_store("key_privacy").await).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "current_thread")]
async fn mysql_errors_and_logs_show_keys_hashed() {
    keys_hashed(common::mysql_store("key_privacy").await).await;
}

async fn keys_hashed<S: Store>(store: S) {
    let events = Events::default();
    let _default = tracing::subscriber::set_default(events.clone());
    let guard = Guard::new(store.clone()).prefix("privacy");
    let full = format!("privacy::{KEY}");
    let ok = || async { Ok::<u32, Error>(1) };

    // In flight: another owner's live record.
    let fp = Fingerprint::of(&1).unwrap();
    let other = OwnerToken::generate();
    store
        .reserve(&full, fp, &other, Duration::from_secs(60))
        .await
        .unwrap();
    let busy = guard.run(KEY, &1, ok).await.unwrap_err().to_string();
    // Another payload under the key.
    let mismatch = guard.run(KEY, &2, ok).await.unwrap_err().to_string();
    for message in [&busy, &mismatch] {
        assert!(!message.contains(KEY), "the raw key in: {message}");
        assert!(message.contains(&hash(&full)), "no hash in: {message}");
    }

    // Taken over, which is logged: an abandoned record whose lease ended.
    let lapsed = format!("privacy::{KEY}-2");
    store
        .reserve(&lapsed, fp, &other, Duration::from_millis(1))
        .await
        .unwrap();
    let waiting = guard
        .clone()
        .in_flight(InFlight::Wait(Duration::from_secs(30)));
    waiting.run(format!("{KEY}-2"), &1, ok).await.unwrap();
    let logged = events.0.lock().unwrap().clone();
    let takeover: Vec<&String> = logged.iter().filter(|e| e.contains("took over")).collect();
    assert_eq!(takeover.len(), 1, "{logged:?}");
    assert!(takeover[0].contains(&hash(&lapsed)), "{takeover:?}");
    assert!(logged.iter().all(|e| !e.contains(KEY)), "{logged:?}");
}
