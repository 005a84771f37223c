//! A store connection dropped between reserve and complete, through a proxy the test cuts (Redis,
//! PostgreSQL, MySQL); for DynamoDB also an unreachable and a hung endpoint.
//! (Panicking and cancelled bodies, and stale owners, are in the conformance suite.)

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{port_of, Proxy};
use idem_guard::{Error, Guard, InFlight, PostgresStore, Store};

/// The connection dies for good while the body runs: the completion is retried while the
/// attempt holds its record, then reported; a delivery while the store is down never runs the
/// body; once the store is back and the lease has ended, a redelivery runs the body again (the
/// guard cannot know whether the first effect happened).
async fn dropped_for_good<S: Store>(store: S, proxy: Proxy, ns: &str) {
    // The completion is retried until the lease ends: a short lease keeps the test short. The
    // last delivery waits out what is left of it.
    let guard = Guard::new(store)
        .prefix(ns.to_owned())
        .lease(Duration::from_secs(1))
        .in_flight(InFlight::Wait(Duration::from_secs(60)));
    let (runs, proxy) = (&AtomicU32::new(0), &proxy);
    let body = || async move {
        if runs.fetch_add(1, Ordering::SeqCst) == 0 {
            proxy.down();
        }
        Ok::<u32, Error>(1)
    };
    let r = guard.run("k", &(), body).await;
    assert!(
        matches!(r, Err(Error::Store(_))),
        "the lost completion is reported: {r:?}"
    );
    let r = guard.run("k", &(), body).await;
    assert!(
        matches!(r, Err(Error::Store(_))),
        "a store that is down never runs the body: {r:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    proxy.up();
    let r = guard.run("k", &(), body).await;
    assert!(matches!(r, Ok(1)), "run again after the lease: {r:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Counts the guard's "retrying while the lease holds" warnings: how many times a completion
/// failed and was tried again.
#[derive(Clone, Default)]
struct CompletionRetries(Arc<AtomicU32>);

impl CompletionRetries {
    fn count(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for CompletionRetries {
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
        if message
            .0
            .contains("could not record the result; retrying while the lease holds")
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// How many failed tries of the completion (per key) the outage lasts: with their pauses (50 ms
/// doubling) at least 1.5 s, longer than the three retries within about a second that the guard
/// used to make, and shorter than the lease.
const OUTAGE_TRIES: u32 = 5;

/// Keys in flight when the store goes down.
const IN_FLIGHT: usize = 10;

/// The store goes down while `IN_FLIGHT` bodies have run and their completions are due, and
/// comes back after each completion failed `OUTAGE_TRIES` times (issue 23, defect 2). Then every
/// key is delivered again, the duplicate waiting while the key is held. The completions,
/// retried while their leases hold, get through, so each duplicate replays: no key runs twice.
/// (When a completion gave up early, its record stayed in progress until the lease ended, and
/// the duplicate then took it over and ran the body again.) The outage ends on the guard's own
/// count of failures, not on a timer. The lease is generous (30 s), so that a slow store's
/// failed tries fit in it; it only decides how long the duplicates of a lost completion wait.
/// Runs on one thread, where the counting subscriber is installed.
async fn completion_outlasts_an_outage<S: Store>(store: S, proxy: Proxy, ns: &str) {
    let retries = CompletionRetries::default();
    let _counting = tracing::subscriber::set_default(retries.clone());
    let guard = Guard::new(store)
        .prefix(ns.to_owned())
        .lease(Duration::from_secs(30))
        .in_flight(InFlight::Wait(Duration::from_secs(120)));
    let runs: Vec<AtomicU32> = (0..IN_FLIGHT).map(|_| AtomicU32::new(0)).collect();
    let started = AtomicU32::new(0);
    let body = |i: usize| {
        let (runs, started, proxy) = (&runs, &started, &proxy);
        move || async move {
            runs[i].fetch_add(1, Ordering::SeqCst);
            // The last body to start takes the store down, so every reservation got through.
            if started.fetch_add(1, Ordering::SeqCst) + 1 == IN_FLIGHT as u32 {
                proxy.down();
            }
            while started.load(Ordering::SeqCst) < IN_FLIGHT as u32 {
                tokio::task::yield_now().await;
            }
            Ok::<usize, Error>(i)
        }
    };
    let finished = AtomicU32::new(0);
    let firsts = futures_join_all((0..IN_FLIGHT).map(|i| {
        let (guard, finished, body) = (&guard, &finished, body(i));
        async move {
            let r = guard.run(format!("k-{i}"), &i, body).await;
            finished.fetch_add(1, Ordering::SeqCst);
            r
        }
    }));
    let restore = async {
        let all_retried = OUTAGE_TRIES * IN_FLIGHT as u32;
        while retries.count() < all_retried && finished.load(Ordering::SeqCst) < IN_FLIGHT as u32 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        proxy.up();
    };
    let (firsts, ()) = tokio::join!(firsts, restore);
    let lost = firsts.iter().filter(|r| r.is_err()).count();
    let duplicates = futures_join_all((0..IN_FLIGHT).map(|i| {
        let (guard, body) = (&guard, body(i));
        async move { guard.run_outcome(format!("k-{i}"), &i, body).await }
    }))
    .await;
    for duplicate in &duplicates {
        assert!(duplicate.is_ok(), "{duplicate:?}");
    }
    let twice = runs.iter().filter(|n| n.load(Ordering::SeqCst) > 1).count();
    println!(
        "{ns}: {lost} of {IN_FLIGHT} completions given up during the outage, {twice} of {IN_FLIGHT} keys ran twice"
    );
    assert_eq!(
        (lost, twice),
        (0, 0),
        "completions given up, keys run twice"
    );
}

/// Runs the futures concurrently on this task and collects their outputs in order.
async fn futures_join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut set = Vec::new();
    for future in futures {
        set.push(Box::pin(future));
    }
    let mut outputs: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in set.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// The connection is cut while the body runs but the store is reachable again: the completion
/// is retried on a new connection, and the duplicate replays.
async fn cut_and_restored<S: Store>(store: S, proxy: Proxy, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    let runs = AtomicU32::new(0);
    let body = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        // The completion, sent after this, goes nowhere on the old connection (see `Proxy`).
        proxy.cut();
        Ok::<u32, Error>(7)
    };
    assert_eq!(guard.run("k", &(), body).await.unwrap(), 7);
    let replay = guard.run_outcome("k", &(), body).await.unwrap();
    assert!(replay.is_replay());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The reply to a reservation is lost after the store wrote it (issue 23, defect 6): the
/// delivery fails without running the body, and the next one runs it at once, as a first
/// attempt, instead of finding the key blocked for a lease and then taking it over with a
/// warning that an effect may have happened.
async fn lost_reservation_reply<S: Store>(store: S, proxy: Proxy, ns: &str) {
    let guard = Guard::new(store).prefix(ns.to_owned());
    // A connection and prepared statements (or loaded scripts) before the reply is lost.
    let warm: Result<u32, Error> = guard.run("warm-up", &(), || async { Ok(0) }).await;
    warm.unwrap();
    let runs = AtomicU32::new(0);
    let body = |attempt: idem_guard::Attempt| {
        runs.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<bool, Error>(attempt.is_takeover()) }
    };
    proxy.lose_reply_to(b"k-lost-reply");
    let first = guard.run_with("k-lost-reply", &(), body).await;
    assert!(matches!(first, Err(Error::Store(_))), "{first:?}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "no body without a reservation"
    );
    let second = guard.run_with("k-lost-reply", &(), body).await;
    assert!(
        matches!(second, Ok(false)),
        "the next delivery runs, as a first attempt: {second:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The proxy's own contract, which the tests above stand on: once `down` (or `cut`) returned,
/// nothing the client sends on an open connection reaches the server; the server sees the
/// connection close. (Issue 39: the connections used to be closed by their tasks when they next
/// ran, and a completion sent right after the cut sometimes got through first, so that
/// `dropped_for_good` found the key completed.) Many connections, each cut while its pump task
/// waits, so that the race had many chances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_forwards_nothing_sent_after_a_cut() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = Proxy::start(server.local_addr().unwrap().port()).await;
    for round in 0..50 {
        let mut client = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port))
            .await
            .unwrap();
        let (mut conn, _) = server.accept().await.unwrap();
        client.write_all(b"before").await.unwrap();
        let mut before = [0u8; 6];
        conn.read_exact(&mut before).await.unwrap();
        if round % 2 == 0 {
            proxy.down();
        } else {
            proxy.cut();
        }
        // The write may fail (the proxy closed its end) or be taken and dropped.
        let _ = client.write_all(b"after").await;
        let mut after = Vec::new();
        let _ = conn.read_to_end(&mut after).await;
        assert_eq!(
            String::from_utf8_lossy(&after),
            "",
            "round {round}: bytes sent after the cut reached the server"
        );
        proxy.up();
    }
}

async fn redis_through_proxy() -> (idem_guard::RedisStore, Proxy) {
    let proxy = Proxy::start(port_of(&common::redis_url(), 6379)).await;
    let store = common::redis_store_at(&format!("redis://127.0.0.1:{}", proxy.port)).await;
    (store, proxy)
}

async fn postgres_through_proxy(schema: &str) -> (PostgresStore, Proxy) {
    let proxy = Proxy::start(port_of(&common::database_url(), 5432)).await;
    let proxied = common::database_url_through(&proxy);
    let pool = common::pg_pool_at(&proxied, schema, 2).await;
    (PostgresStore::from_pool(pool).await.unwrap(), proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_connection_dropped_for_good_between_reserve_and_complete() {
    let (store, proxy) = redis_through_proxy().await;
    dropped_for_good(store, proxy, &common::unique("fault")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_connection_cut_between_reserve_and_complete_then_restored() {
    let (store, proxy) = redis_through_proxy().await;
    cut_and_restored(store, proxy, &common::unique("fault")).await;
}

/// `pg_terminate_backend` on the store's connections (issue 23, defect 5; issue 39, item 8): the
/// server sends `FATAL 57P01` and closes the session, and the next statement, told so by that
/// answer, runs again on a new connection: no statement fails. (Issue 23: the error was taken
/// for one from a session that goes on, so the dead connection failed every statement; then
/// the next statement still failed, however long after the termination it came.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_terminated_backend_costs_no_failed_statement() {
    use idem_guard::{Fingerprint, OwnerToken};
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

    let schema = common::pg_schema("fault_pg_terminated").await;
    let app = format!("idem-terminated-{}", std::process::id());
    let options: PgConnectOptions = common::database_url().parse().unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(
            options
                .options([("search_path", schema.as_str())])
                .application_name(&app),
        )
        .await
        .unwrap();
    let store = PostgresStore::from_pool(pool).await.unwrap();
    let fingerprint = Fingerprint::of(&()).unwrap();
    let reserve = |key: &'static str| {
        let store = store.clone();
        async move {
            let owner = OwnerToken::generate();
            store
                .reserve(key, fingerprint, &owner, Duration::from_secs(60))
                .await
        }
    };
    reserve("before")
        .await
        .expect("the store's connection is open");
    let admin = sqlx::PgPool::connect(&common::database_url())
        .await
        .unwrap();
    let terminated: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(&app)
    .fetch_all(&admin)
    .await
    .unwrap();
    assert!(
        !terminated.is_empty() && terminated.iter().all(|t| *t),
        "{terminated:?}"
    );
    let mut failures = Vec::new();
    for key in ["after-1", "after-2", "after-3"] {
        if let Err(e) = reserve(key).await {
            failures.push(format!("{key}: {e}"));
        }
    }
    assert!(failures.is_empty(), "failed statements: {failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lost_reply_to_a_reservation_does_not_block_the_key() {
    let (store, proxy) = redis_through_proxy().await;
    lost_reservation_reply(store, proxy, &common::unique("fault")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_lost_reply_to_a_reservation_does_not_block_the_key() {
    let (store, proxy) =
        postgres_through_proxy(&common::pg_schema("fault_pg_lost_reply").await).await;
    lost_reservation_reply(store, proxy, "fault").await;
}

#[tokio::test(flavor = "current_thread")]
async fn redis_outage_shorter_than_the_lease_does_not_lose_the_completion() {
    let (store, proxy) = redis_through_proxy().await;
    completion_outlasts_an_outage(store, proxy, &common::unique("fault")).await;
}

#[tokio::test(flavor = "current_thread")]
async fn postgres_outage_shorter_than_the_lease_does_not_lose_the_completion() {
    let (store, proxy) = postgres_through_proxy(&common::pg_schema("fault_pg_outage").await).await;
    completion_outlasts_an_outage(store, proxy, "fault").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connection_dropped_for_good_between_reserve_and_complete() {
    let (store, proxy) = postgres_through_proxy(&common::pg_schema("fault_pg_dropped").await).await;
    dropped_for_good(store, proxy, "fault").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connection_cut_between_reserve_and_complete_then_restored() {
    let (store, proxy) = postgres_through_proxy(&common::pg_schema("fault_pg_cut").await).await;
    cut_and_restored(store, proxy, "fault").await;
}

/// MariaDB through the proxy: the same faults as PostgreSQL's above. (Connections killed with
/// `KILL` on the server: `tests/mysql.rs`.)
#[cfg(feature = "mysql")]
mod mysql {
    use super::*;
    use idem_guard::MySqlStore;

    async fn through_proxy(name: &str) -> (MySqlStore, Proxy) {
        let proxy = Proxy::start(port_of(&common::mysql_url(), 3306)).await;
        let url = common::mysql_database(name, Some(&proxy)).await;
        let store = MySqlStore::from_pool(common::mysql_pool(&url, 2).await)
            .await
            .unwrap();
        (store, proxy)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_lost_reply_to_a_reservation_does_not_block_the_key() {
        let (store, proxy) = through_proxy("fault_my_lost_reply").await;
        lost_reservation_reply(store, proxy, "fault").await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn mysql_outage_shorter_than_the_lease_does_not_lose_the_completion() {
        let (store, proxy) = through_proxy("fault_my_outage").await;
        completion_outlasts_an_outage(store, proxy, "fault").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_connection_dropped_for_good_between_reserve_and_complete() {
        let (store, proxy) = through_proxy("fault_my_dropped").await;
        dropped_for_good(store, proxy, "fault").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_connection_cut_between_reserve_and_complete_then_restored() {
        let (store, proxy) = through_proxy("fault_my_cut").await;
        cut_and_restored(store, proxy, "fault").await;
    }
}

#[cfg(feature = "dynamodb")]
mod dynamodb {
    use std::time::{Duration, Instant};

    use super::*;
    use idem_guard::DynamoDbStore;

    async fn through_proxy(name: &str) -> (DynamoDbStore, Proxy) {
        let proxy = Proxy::start(port_of(&common::dynamodb_endpoint(), 5124)).await;
        let endpoint = format!("http://127.0.0.1:{}", proxy.port);
        let store = common::dynamodb_store_at(&endpoint, &common::unique(name)).await;
        (store.timeout(Duration::from_secs(2)), proxy)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dynamodb_endpoint_down_for_good_between_reserve_and_complete() {
        let (store, proxy) = through_proxy("fault-dropped").await;
        dropped_for_good(store, proxy, "fault").await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dynamodb_outage_shorter_than_the_lease_does_not_lose_the_completion() {
        let (store, proxy) = through_proxy("fault-outage").await;
        completion_outlasts_an_outage(store, proxy, "fault").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dynamodb_connection_cut_between_reserve_and_complete_then_restored() {
        let (store, proxy) = through_proxy("fault-cut").await;
        cut_and_restored(store, proxy, "fault").await;
    }

    /// Nothing listens at the endpoint: the reservation fails soon with the request, the key
    /// (hashed: keys may hold personal data) and the table in the message, and the body never
    /// runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unreachable_endpoint_is_a_clear_error() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let client = idem_guard::dynamodb::local_client(&endpoint);
        let guard = Guard::new(DynamoDbStore::new(client, "records")).prefix("fault");
        let started = Instant::now();
        let r: Result<u32, Error> = guard
            .run("k", &(), || async { panic!("ran without a reservation") })
            .await;
        let Err(Error::Store(e)) = r else {
            panic!("{r:?}")
        };
        let message = e.to_string();
        let key_hash = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(b"fault::k"));
        assert!(
            message.contains(&format!(
                "PutItem (reserve) of #{key_hash} on table `records`"
            )),
            "{message}"
        );
        assert!(!message.contains("fault::k"), "{message}");
        // Generous: the point is that it ends (a loaded CI machine is slow, not hung).
        assert!(started.elapsed() < Duration::from_secs(30), "no hang");
    }

    /// A server that accepts connections and never answers: the store's timeout ends the call.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hung_endpoint_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn); // read nothing, answer nothing
            }
        });
        let client = idem_guard::dynamodb::local_client(&endpoint);
        let store = DynamoDbStore::new(client, "records").timeout(Duration::from_millis(800));
        let guard = Guard::new(store).prefix("fault");
        let r: Result<u32, Error> = guard
            .run("k", &(), || async { panic!("ran without a reservation") })
            .await;
        let Err(Error::Store(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("got no answer within 800 ms"), "{e}");
        silent.abort();
    }
}
