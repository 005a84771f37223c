//! Latency of the SQLite and MySQL stores, beside PostgreSQL's: the median (p50) of 3,000
//! sequential guarded calls per store, each a first delivery (reserve + complete), and of a
//! duplicate of each (one reservation that finds the completed record and replays it).
//!
//! `cargo bench -p idem-guard --features sqlite,mysql --bench sql_stores` (needs the
//! PostgreSQL and MariaDB of `tests/common`; SQLite writes a file under the target directory,
//! `synchronous = FULL`, so each completion waits for the disk).

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use idem_guard::{Error, Guard, Store};

const CALLS: usize = 3_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Medians of `CALLS` first deliveries and of their duplicates.
async fn measure<S: Store>(store: S) -> (Duration, Duration) {
    let guard = Guard::new(store).prefix("bench");
    let payload = ("order", 42u64, "capture");
    let (mut first, mut dup) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    for i in 0..CALLS {
        let key = format!("k-{i}");
        let t = Instant::now();
        let v: Result<u64, Error> = guard.run(&key, &payload, || async { Ok(7) }).await;
        first.push(t.elapsed());
        v.unwrap();
        let t = Instant::now();
        let v: Result<u64, Error> = guard.run(&key, &payload, || async { Ok(8) }).await;
        dup.push(t.elapsed());
        assert_eq!(v.unwrap(), 7);
    }
    (median(first), median(dup))
}

fn row(name: &str, (first, dup): (Duration, Duration)) {
    println!(
        "| {name} | {:.3} ms | {:.3} ms |",
        first.as_secs_f64() * 1e3,
        dup.as_secs_f64() * 1e3
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("p50 of {CALLS} sequential calls per store\n");
    println!("| store | first delivery | duplicate |\n| --- | --- | --- |");
    row(
        "SQLite (WAL, synchronous=FULL)",
        measure(common::sqlite_store("bench_sql_stores").await).await,
    );
    row(
        "MariaDB",
        measure(common::mysql_store("bench_sql_stores").await).await,
    );
    let schema = common::pg_schema("bench_sql_stores").await;
    row(
        "PostgreSQL",
        measure(common::postgres_store(&schema).await).await,
    );
}
