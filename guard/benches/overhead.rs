//! Guard overhead per call for each store, and round trips per call.
//!
//! `cargo bench -p idem-guard --features dynamodb --bench overhead` (needs the services of
//! `tests/common`; without the feature the DynamoDB row is left out). Calls are sequential, so
//! each number is one call's latency: a first delivery (reserve + complete), and a duplicate (one
//! reservation that finds the completed record and replays it).
//!
//! Round trips: Redis and PostgreSQL through a TCP proxy that counts request/answer exchanges,
//! in a separate pass (the proxy's hop would add latency); DynamoDB by an SDK interceptor that
//! counts every HTTP request the client transmits (retries included), in the timed pass itself.

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use idem_guard::{Error, Guard, MemoryStore, PostgresStore, RedisStore, Store};

const CALLS: usize = 2_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

async fn measure<S: Store>(guard: &Guard<S>, tag: &str) -> (Duration, Duration) {
    measure_calls(guard, tag, CALLS, |_| {}).await
}

/// Medians of `calls` first deliveries and duplicates; `after_each` runs after each call,
/// outside the timed part, told whether it was a first delivery.
async fn measure_calls<S: Store>(
    guard: &Guard<S>,
    tag: &str,
    calls: usize,
    mut after_each: impl FnMut(bool),
) -> (Duration, Duration) {
    let payload = ("order", 42u64, "capture");
    let (mut first, mut dup) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for i in 0..calls {
        let key = format!("{tag}-{i}");
        let t = Instant::now();
        let v: Result<u64, Error> = guard.run(&key, &payload, || async { Ok(7) }).await;
        first.push(t.elapsed());
        v.unwrap();
        after_each(true);
        let t = Instant::now();
        let v: Result<u64, Error> = guard.run(&key, &payload, || async { Ok(8) }).await;
        dup.push(t.elapsed());
        assert_eq!(v.unwrap(), 7);
        after_each(false);
    }
    (median(first), median(dup))
}

async fn baseline() -> Duration {
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        let v: Result<u64, Error> = std::hint::black_box(async { Ok(7) }).await;
        samples.push(t.elapsed());
        v.unwrap();
    }
    median(samples)
}

/// Round trips of `calls` first deliveries and of `calls` duplicates, counted by a proxy in front
/// of the server (a separate pass: the proxy's hop is not in the latencies above).
async fn round_trips<S: Store>(guard: &Guard<S>, proxy: &common::Proxy, tag: &str) -> (f64, f64) {
    const COUNTED: usize = 200;
    let run = |key: String, v: u64| async move {
        let r: Result<u64, Error> = guard.run(&key, &(), || async move { Ok(v) }).await;
        r.unwrap()
    };
    // Warm up: connections open, statements are prepared, scripts loaded.
    for i in 0..10 {
        run(format!("{tag}-warm-{i}"), 1).await;
        run(format!("{tag}-warm-{i}"), 1).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.take_round_trips();
    for i in 0..COUNTED {
        run(format!("{tag}-{i}"), 1).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first = proxy.take_round_trips();
    for i in 0..COUNTED {
        run(format!("{tag}-{i}"), 2).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let dup = proxy.take_round_trips();
    (first as f64 / COUNTED as f64, dup as f64 / COUNTED as f64)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let redis_url = common::redis_url();
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();

    let base = baseline().await;
    println!("body alone: median {base:?} per call; {CALLS} calls per row below");
    println!(
        "{:<10} {:>16} {:>16} {:>22}",
        "store", "first delivery", "duplicate", "round trips first/dup"
    );

    let memory = Guard::new(MemoryStore::new()).prefix("bench");
    let (mf, md) = measure(&memory, "m").await;
    println!("{:<10} {:>16?} {:>16?} {:>22}", "memory", mf, md, "0 / 0");

    let redis = Guard::new(RedisStore::connect(&redis_url).await.unwrap())
        .prefix(format!("bench-{run_id}"));
    let (rf, rd) = measure(&redis, "r").await;
    let proxy = common::Proxy::start(common::port_of(&redis_url, 6379)).await;
    let proxied = RedisStore::connect(&format!("redis://127.0.0.1:{}", proxy.port))
        .await
        .unwrap();
    let (rtf, rtd) = round_trips(
        &Guard::new(proxied).prefix(format!("bench-rt-{run_id}")),
        &proxy,
        "r",
    )
    .await;
    println!(
        "{:<10} {:>16?} {:>16?} {:>22}",
        "redis",
        rf,
        rd,
        format!("{rtf:.2} / {rtd:.2}")
    );

    let schema = common::pg_schema("bench").await;
    let pg_store = PostgresStore::from_pool(common::pg_pool(&schema, 2).await)
        .await
        .unwrap();
    let pg = Guard::new(pg_store).prefix("bench");
    let (pf, pd) = measure(&pg, "p").await;
    let proxy = common::Proxy::start(common::port_of(&common::database_url(), 5432)).await;
    let proxied = PostgresStore::from_pool(
        common::pg_pool_at(&common::database_url_through(&proxy), &schema, 2).await,
    )
    .await
    .unwrap();
    let (ptf, ptd) = round_trips(&Guard::new(proxied).prefix("bench-rt"), &proxy, "p").await;
    println!(
        "{:<10} {:>16?} {:>16?} {:>22}",
        "postgres",
        pf,
        pd,
        format!("{ptf:.2} / {ptd:.2}")
    );

    println!(
        "ratios (first delivery): redis/memory {:.0}x, postgres/memory {:.0}x, postgres/redis {:.1}x",
        rf.as_secs_f64() / mf.as_secs_f64(),
        pf.as_secs_f64() / mf.as_secs_f64(),
        pf.as_secs_f64() / rf.as_secs_f64()
    );
    dynamodb_row(rf).await;
}

/// Calls per DynamoDB row: moto, the local server, takes milliseconds per request.
#[cfg(feature = "dynamodb")]
const DYNAMODB_CALLS: usize = 500;

#[cfg(feature = "dynamodb")]
async fn dynamodb_row(redis_first: Duration) {
    let (store, requests) =
        common::dynamodb_store_counted(&common::dynamodb_endpoint(), "bench").await;
    let guard = Guard::new(store).prefix("bench");
    // Warm-up: the client's connection pool and credentials.
    for i in 0..10 {
        let _: Result<u64, Error> = guard
            .run(format!("warm-{i}"), &(), || async { Ok(1) })
            .await;
    }
    requests.take();
    let (mut first_requests, mut dup_requests) = (0, 0);
    let (df, dd) = measure_calls(&guard, "d", DYNAMODB_CALLS, |first| {
        let sent = requests.take();
        if first {
            first_requests += sent;
        } else {
            dup_requests += sent;
        }
    })
    .await;
    let per_call = |n: u64| n as f64 / DYNAMODB_CALLS as f64;
    println!(
        "{:<10} {:>16?} {:>16?} {:>22}   ({DYNAMODB_CALLS} calls, local moto server; requests counted by an SDK interceptor)",
        "dynamodb",
        df,
        dd,
        format!("{:.2} / {:.2}", per_call(first_requests), per_call(dup_requests))
    );
    println!(
        "ratio (first delivery): dynamodb(moto)/redis {:.0}x",
        df.as_secs_f64() / redis_first.as_secs_f64()
    );
}

#[cfg(not(feature = "dynamodb"))]
async fn dynamodb_row(_: Duration) {
    println!("dynamodb   (left out: build with `--features dynamodb`)");
}
