//! What the guard reports of each call: `idem_guard_calls_total{prefix, outcome}` and the store
//! latency histogram through the `metrics` facade (the span: `observe_span.rs`).

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use idem_guard::{Error, Fingerprint, Guard, InFlight, MemoryStore, OwnerToken, Store};
use metrics::{Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata};
use metrics::{Recorder, SharedString, Unit};

/// Every counter's total and every histogram's sample count, by name and labels.
#[derive(Default)]
struct Totals(Mutex<HashMap<String, u64>>);

struct Handle(String, &'static Totals);

impl CounterFn for Handle {
    fn increment(&self, value: u64) {
        *self.1 .0.lock().unwrap().entry(self.0.clone()).or_default() += value;
    }
    fn absolute(&self, value: u64) {
        self.1 .0.lock().unwrap().insert(self.0.clone(), value);
    }
}

impl HistogramFn for Handle {
    fn record(&self, _: f64) {
        self.increment(1);
    }
}

struct Recording(&'static Totals);

fn name_of(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for Recording {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(Handle(name_of(key), self.0)))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(Arc::new(Handle(name_of(key), self.0)))
    }
}

/// The process-wide recorder (installed once); tests read their own prefix's entries.
fn totals() -> &'static Totals {
    static TOTALS: OnceLock<&'static Totals> = OnceLock::new();
    TOTALS.get_or_init(|| {
        let totals: &'static Totals = Box::leak(Box::default());
        metrics::set_global_recorder(Recording(totals)).expect("the only recorder");
        totals
    })
}

fn calls(prefix: &str, outcome: &str) -> u64 {
    let name = format!("idem_guard_calls_total{{prefix={prefix},outcome={outcome}}}");
    totals().0.lock().unwrap().get(&name).copied().unwrap_or(0)
}

#[tokio::test]
async fn each_outcome_is_counted() {
    totals();
    let prefix = "observe-outcomes";
    let store = MemoryStore::new();
    let guard = Guard::new(store.clone()).prefix(prefix);
    let ok = || async { Ok::<u32, Error>(1) };
    guard.run("a", &1, ok).await.unwrap();
    guard.run("a", &1, ok).await.unwrap();
    guard.run("a", &1, ok).await.unwrap();
    assert!(guard.run("a", &2, ok).await.is_err());
    // In flight: another owner's live record.
    let fp = Fingerprint::of(&1).unwrap();
    let other = OwnerToken::generate();
    let full = format!("{prefix}::busy");
    store
        .reserve(&full, fp, &other, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(guard.run("busy", &1, ok).await.is_err());
    // Taken over: another owner's record whose (short) lease has ended.
    let lapsed = format!("{prefix}::lapsed");
    store
        .reserve(&lapsed, fp, &other, Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let waiting = guard
        .clone()
        .in_flight(InFlight::Wait(Duration::from_secs(30)));
    waiting.run("lapsed", &1, ok).await.unwrap();
    // Unguarded: no key, none required.
    let optional = guard.clone().required(false);
    optional.run(None::<&str>, &1, ok).await.unwrap();
    // A store error: a full memory store.
    let full_store = Guard::new(MemoryStore::with_capacity(1)).prefix(prefix);
    full_store.run("x", &1, ok).await.unwrap();
    assert!(full_store.run("y", &1, ok).await.is_err());

    let seen: Vec<(&str, u64)> = [
        "fresh",
        "replayed",
        "mismatch",
        "in_flight",
        "taken_over",
        "unguarded",
        "store_error",
    ]
    .into_iter()
    .map(|o| (o, calls(prefix, o)))
    .collect();
    assert_eq!(
        seen,
        [
            ("fresh", 2),
            ("replayed", 2),
            ("mismatch", 1),
            ("in_flight", 1),
            ("taken_over", 1),
            ("unguarded", 1),
            ("store_error", 1),
        ]
    );
    let reserves = format!("idem_guard_store_seconds{{prefix={prefix},op=reserve}}");
    let completes = format!("idem_guard_store_seconds{{prefix={prefix},op=complete}}");
    let recorded = totals().0.lock().unwrap().clone();
    // One reservation per keyed call (eight), one completion per body that ran with a key.
    assert_eq!(recorded.get(&reserves), Some(&8), "{recorded:#?}");
    assert_eq!(recorded.get(&completes), Some(&3), "{recorded:#?}");
}

/// The transactional mode (PostgreSQL) counts its calls and store calls like every other mode:
/// `run_in_tx`, `begin_in_tx` with `finish`, and `#[idempotent(tx = ..)]` (issue 39, item 3).
#[idem_guard::idempotent(key = event_id, store = store, tx = tx, prefix = "observe-tx-attr")]
async fn noted(
    store: &idem_guard::PostgresStore,
    tx: &mut idem_guard::sqlx::Transaction<'_, idem_guard::sqlx::Postgres>,
    event_id: &str,
) -> Result<u32, Error> {
    Ok(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_calls_are_counted() {
    use idem_guard::TxStart;
    totals();
    let store = common::postgres_store(&common::pg_schema("observe_tx").await).await;
    let run = Guard::new(store.clone()).prefix("observe-tx-run");
    let begin = Guard::new(store.clone()).prefix("observe-tx-begin");
    for _ in 0..2 {
        let mut tx = store.pool().begin().await.unwrap();
        let value = run
            .run_in_tx(&mut tx, "a", &1, async |_| Ok::<u32, Error>(1))
            .await
            .unwrap();
        assert_eq!(value, 1);
        let started = begin
            .begin_in_tx::<_, _, _, u32, Error>(&mut tx, "a", &1)
            .await;
        match started.unwrap() {
            TxStart::Done(replayed) => assert_eq!(replayed.unwrap().into_inner(), 1),
            TxStart::Run(attempt) => {
                let done = attempt.finish(&begin, &mut tx, Ok::<u32, Error>(1)).await;
                assert_eq!(done.unwrap(), 1);
            }
        }
        assert_eq!(noted(&store, &mut tx, "a").await.unwrap(), 1);
        tx.commit().await.unwrap();
    }
    let recorded = totals().0.lock().unwrap().clone();
    for prefix in ["observe-tx-run", "observe-tx-begin", "observe-tx-attr"] {
        let seen = (calls(prefix, "fresh"), calls(prefix, "replayed"));
        assert_eq!(seen, (1, 1), "{prefix}: {recorded:#?}");
        let op = |op: &str| format!("idem_guard_store_seconds{{prefix={prefix},op={op}}}");
        assert_eq!(recorded.get(&op("reserve")), Some(&2), "{prefix}");
        assert_eq!(recorded.get(&op("complete")), Some(&1), "{prefix}");
    }
}
