//! The kill switch for tests: `Guard::disabled(true)` or `IDEM_GUARD_DISABLED=1` runs each body
//! directly, touching no store, with the outcome `disabled` counted and logged once per prefix.
//! One test, because the environment variable is the process's.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use common::counts::Counts;
use idem_guard::{Error, Guard, DISABLED_ENV};

/// Warning messages logged.
#[derive(Default, Clone)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn said_disabled(warnings: &Warnings) -> usize {
    warnings
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains("the idempotency guard is disabled"))
        .count()
}

#[tokio::test(flavor = "current_thread")]
async fn switched_off_by_setting_and_by_environment() {
    let counts = Counts::default();
    metrics::set_global_recorder(counts.clone()).unwrap();
    let warnings = Warnings::default();
    let _logging = tracing::subscriber::set_default(warnings.clone());
    let store = common::redis_store().await;
    let prefix = common::unique("disabled");
    let runs = AtomicU32::new(0);
    let body = || async { Ok::<u32, Error>(runs.fetch_add(1, Ordering::SeqCst) + 1) };

    // The setting: every delivery runs, nothing is written.
    let off = Guard::new(store.clone())
        .prefix(prefix.clone())
        .disabled(true);
    assert!(off.is_disabled());
    assert_eq!(off.run("k", &1, body).await.unwrap(), 1);
    assert_eq!(off.run("k", &1, body).await.unwrap(), 2);
    // Another payload is no mismatch: nothing is compared.
    assert_eq!(off.run("k", &2, body).await.unwrap(), 3);
    let disabled = format!("idem_guard_calls_total{{prefix={prefix},outcome=disabled}}");
    assert_eq!(counts.0.lock().unwrap().get(&disabled), Some(&3));
    assert_eq!(said_disabled(&warnings), 1, "said once per prefix");
    // The body's attempt still has its key, for a token passed downstream.
    let token = off
        .run_with("k", &1, |attempt: idem_guard::Attempt| async move {
            Ok::<_, Error>(attempt.token())
        })
        .await
        .unwrap();
    assert!(token.is_some());
    // Nothing reached the store: the guard switched on runs the key as new, then replays.
    let on = Guard::new(store.clone()).prefix(prefix.clone());
    assert!(!on.is_disabled());
    assert_eq!(on.run("k", &1, body).await.unwrap(), 4);
    assert_eq!(on.run("k", &1, body).await.unwrap(), 4);

    // The environment variable, read when a guard is made; the setting overrides it.
    std::env::set_var(DISABLED_ENV, "1");
    let by_env = Guard::new(store.clone()).prefix(prefix.clone());
    let overridden = Guard::new(store.clone())
        .prefix(prefix.clone())
        .disabled(false);
    std::env::remove_var(DISABLED_ENV);
    assert!(by_env.is_disabled());
    assert_eq!(by_env.run("k", &1, body).await.unwrap(), 5, "ran again");
    assert_eq!(overridden.run("k", &1, body).await.unwrap(), 4, "replayed");
    assert_eq!(counts.0.lock().unwrap().get(&disabled), Some(&5));
    assert_eq!(said_disabled(&warnings), 1);

    // Transactional mode: the body runs in the caller's transaction, with no record.
    let schema = common::pg_schema("disabled_tx").await;
    let pg = common::postgres_store(&schema).await;
    let off = Guard::new(pg.clone()).prefix(prefix.clone()).disabled(true);
    for expected in [6, 7] {
        let mut tx = pg.pool().begin().await.unwrap();
        let started = off
            .begin_in_tx::<_, _, _, u32, Error>(&mut tx, "k", &1)
            .await
            .unwrap();
        let idem_guard::TxStart::Run(attempt) = started else {
            panic!("a switched-off guard runs the body");
        };
        let value = body().await;
        assert_eq!(
            attempt.finish(&off, &mut tx, value).await.unwrap(),
            expected
        );
        tx.commit().await.unwrap();
    }
}
