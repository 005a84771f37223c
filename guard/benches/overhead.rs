//! Guard overhead per call for each store, and Redis round trips per call.
//!
//! `cargo bench -p idem-guard --bench overhead` (needs the services of `tests/common`). Calls are
//! sequential, so each number is one call's latency: a first delivery (reserve + complete), and
//! a duplicate (one reservation that finds the completed record and replays it).

use std::time::{Duration, Instant};

use idem_guard::{Error, Guard, MemoryStore, PostgresStore, RedisStore, Store};

const CALLS: usize = 2_000;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

async fn measure<S: Store>(guard: &Guard<S>, tag: &str) -> (Duration, Duration) {
    let payload = ("order", 42u64, "capture");
    let (mut first, mut dup) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    for i in 0..CALLS {
        let key = format!("{tag}-{i}");
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

/// Calls per command from `INFO commandstats` (all clients: run on a quiet server). Redis
/// counts the commands a Lua script runs too, under their own names.
async fn redis_calls(
    conn: &mut redis::aio::MultiplexedConnection,
) -> std::collections::HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let redis_url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let db_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();

    let base = baseline().await;
    println!("body alone: median {base:?} per call; {CALLS} calls per row below");
    println!(
        "{:<10} {:>16} {:>16}",
        "store", "first delivery", "duplicate"
    );

    let memory = Guard::new(MemoryStore::new()).prefix("bench");
    let (mf, md) = measure(&memory, "m").await;
    println!("{:<10} {:>16?} {:>16?}", "memory", mf, md);

    let redis_store = RedisStore::connect(&redis_url).await.unwrap();
    let redis = Guard::new(redis_store).prefix(format!("bench-{run_id}"));
    // Load the scripts once, so the count below is the steady state.
    let _ = measure_one(&redis).await;
    let client = redis::Client::open(redis_url.as_str()).unwrap();
    let mut stats = client.get_multiplexed_async_connection().await.unwrap();
    let before = redis_calls(&mut stats).await;
    let (rf, rd) = measure(&redis, "r").await;
    let after = redis_calls(&mut stats).await;
    println!("{:<10} {:>16?} {:>16?}", "redis", rf, rd);

    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&db_url)
        .await
        .unwrap();
    sqlx::raw_sql("CREATE SCHEMA IF NOT EXISTS idem_bench")
        .execute(&pool)
        .await
        .unwrap();
    let options: sqlx::postgres::PgConnectOptions = db_url.parse().unwrap();
    let pg_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options.options([("search_path", "idem_bench")]))
        .await
        .unwrap();
    let pg_store = PostgresStore::from_pool(pg_pool).await.unwrap();
    sqlx::query("TRUNCATE idem_guard_records")
        .execute(pg_store.pool())
        .await
        .unwrap();
    let pg = Guard::new(pg_store).prefix("bench");
    let (pf, pd) = measure(&pg, "p").await;
    println!("{:<10} {:>16?} {:>16?}", "postgres", pf, pd);

    let delta = |name: &str| after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);
    let (set, evalsha, get) = (delta("set"), delta("evalsha"), delta("get"));
    // Each completion script runs one GET and one SET inside Redis; those are not round trips.
    let round_trips = (set - evalsha) + evalsha;
    println!(
        "redis commandstats over {CALLS} first deliveries + {CALLS} duplicates: set {set} (of which {evalsha} inside scripts), evalsha {evalsha}, get {get} (inside scripts)"
    );
    println!(
        "redis round trips: {:.2} per first delivery (SET NX PX GET + EVALSHA), {:.2} per duplicate (SET NX PX GET)",
        evalsha as f64 / CALLS as f64 + (set - evalsha) as f64 / (2 * CALLS) as f64,
        (set - evalsha) as f64 / (2 * CALLS) as f64
    );
    println!(
        "redis round trips in all: {round_trips} for {} calls",
        2 * CALLS
    );
    println!(
        "ratios (first delivery): redis/memory {:.0}x, postgres/memory {:.0}x, postgres/redis {:.1}x",
        rf.as_secs_f64() / mf.as_secs_f64(),
        pf.as_secs_f64() / mf.as_secs_f64(),
        pf.as_secs_f64() / rf.as_secs_f64()
    );
}

async fn measure_one<S: Store>(guard: &Guard<S>) -> Result<u64, Error> {
    guard.run("warm-up", &(), || async { Ok(1) }).await
}
