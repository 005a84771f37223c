//! The `Idempotency-Key` layer, through real HTTP: an axum server on a loopback port, a hyper
//! client, and each store (memory, Redis, PostgreSQL) behind the layer.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{from_fn, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::Router;
use common::http::{request, serve, Reply, Server};
use idem_guard::http::IdempotencyLayer;
use idem_guard::{Guard, MemoryStore, Store};

/// How many times the handlers ran, over all routes.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicU64>);

impl Runs {
    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The signed-in user, as an authentication middleware would insert it.
#[derive(Clone)]
struct User(String);

/// A stand-in for real authentication: trusts an `x-user` header.
async fn authenticate(mut request: Request, next: Next) -> Response {
    if let Some(user) = request
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
    {
        let user = User(user.to_owned());
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

/// A created resource: 201, a header naming the run, and a body echoing the request.
fn created(n: u64, what: &str, body: &str) -> Response {
    (
        StatusCode::CREATED,
        [("x-run", n.to_string())],
        format!("{what} #{n}: {body}"),
    )
        .into_response()
}

fn app(layer: IdempotencyLayer<impl Store + 'static>, runs: &Runs) -> Router {
    let r = runs.clone();
    let orders = post(move |body: String| async move { created(r.next(), "order", &body) });
    let r = runs.clone();
    let list = get(move || async move { format!("list #{}", r.next()) });
    let r = runs.clone();
    let amend = patch(move |Path(id): Path<u64>, body: String| async move {
        created(r.next(), &format!("amendment of {id}"), &body)
    });
    let r = runs.clone();
    let other = post(move |body: String| async move { created(r.next(), "other", &body) });
    let r = runs.clone();
    let slow = post(move |body: String| async move {
        let n = r.next();
        tokio::time::sleep(Duration::from_millis(300)).await;
        created(n, "slow", &body)
    });
    let r = runs.clone();
    let flaky = post(move |body: String| async move {
        match r.next() {
            1 => (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response(),
            n => created(n, "flaky", &body),
        }
    });
    let r = runs.clone();
    let login = post(move || async move {
        let n = r.next();
        (
            [("set-cookie", format!("session={n}"))],
            format!("login #{n}"),
        )
            .into_response()
    });
    Router::new()
        .route("/orders", orders.merge(list))
        .route("/orders/{id}", amend)
        .route("/other", other)
        .route("/slow", slow)
        .route("/flaky", flaky)
        .route("/login", login)
        .layer(layer)
        .layer(from_fn(authenticate))
}

/// The layer as the README shows it: the principal from the authentication extension.
fn layer<S: Store + 'static>(store: S, name: &str) -> IdempotencyLayer<S> {
    // A prefix per test run: Redis keys outlive the test.
    IdempotencyLayer::from_guard(Guard::new(store).prefix(common::unique(name)))
        .principal(|parts| parts.extensions.get::<User>().map(|u| u.0.clone()))
}

async fn start<S: Store + 'static>(layer: IdempotencyLayer<S>) -> (Server, Runs) {
    let runs = Runs::default();
    (serve(app(layer, &runs)).await, runs)
}

fn post_with_key(
    path: &str,
    key: &str,
    body: &str,
) -> axum::http::Request<http_body_util::Full<axum::body::Bytes>> {
    request("POST", path, &[("idempotency-key", key)], body)
}

/// The headers a replay must repeat: all but `Date` (the server's, per response) and the replay
/// marker.
fn comparable(headers: &HeaderMap) -> Vec<(String, Vec<u8>)> {
    let mut pairs: Vec<_> = headers
        .iter()
        .filter(|(name, _)| *name != "date" && *name != "idempotent-replayed")
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
        .collect();
    pairs.sort();
    pairs
}

macro_rules! on_every_store {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                super::$scenario(super::common::memory_store(), stringify!($scenario)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                super::$scenario(super::common::redis_store().await, stringify!($scenario)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let schema = super::common::pg_schema(concat!("http_", stringify!($scenario))).await;
                let store = super::common::postgres_store(&schema).await;
                super::$scenario(store, stringify!($scenario)).await;
            }
        }
    )*};
}

on_every_store!(
    duplicate_replays_the_first_response,
    concurrent_duplicates_run_once,
    another_payload_under_a_key_is_422,
    mismatch_status_can_be_400,
    missing_key_is_400_only_when_required,
    get_is_not_guarded,
    server_errors_are_not_cached,
    route_and_principal_keep_keys_apart,
    a_client_hanging_up_does_not_double_the_effect,
);

async fn duplicate_replays_the_first_response<S: Store + 'static>(store: S, name: &str) {
    let (server, runs) = start(layer(store, name)).await;
    let first = server
        .send(post_with_key("/orders", "k-1", "2 apples"))
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert_eq!(first.text(), "order #1: 2 apples");
    assert!(!first.is_replay());
    for _ in 0..2 {
        let again = server
            .send(post_with_key("/orders", "k-1", "2 apples"))
            .await;
        assert!(again.is_replay(), "{again:?}");
        assert_eq!(again.status, first.status);
        assert_eq!(comparable(&again.headers), comparable(&first.headers));
        assert_eq!(again.body, first.body);
    }
    // The quoted form of the draft is the same key.
    let quoted = server
        .send(post_with_key("/orders", "\"k-1\"", "2 apples"))
        .await;
    assert!(quoted.is_replay(), "{quoted:?}");
    assert_eq!(runs.count(), 1, "the handler ran once");
}

async fn concurrent_duplicates_run_once<S: Store + 'static>(store: S, name: &str) {
    let (server, runs) = start(layer(store, name)).await;
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let server = server.clone();
        calls.spawn(async move { server.send(post_with_key("/slow", "k-c", "x")).await });
    }
    let replies: Vec<Reply> = calls.join_all().await;
    let fresh = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED && !r.is_replay())
        .count();
    assert_eq!(fresh, 1, "one request ran: {replies:#?}");
    for reply in &replies {
        match reply.status {
            StatusCode::CREATED => assert_eq!(reply.text(), "slow #1: x"),
            StatusCode::CONFLICT => {
                assert_eq!(reply.problem_code(), "idempotency_request_in_progress");
                let retry: u64 = reply.headers["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                // The remaining lease is about 60 s; the handler takes 300 ms.
                assert_eq!(retry, 1, "a short Retry-After, not the lease");
            }
            other => panic!("unexpected {other}: {reply:?}"),
        }
    }
    assert_eq!(runs.count(), 1);
    let after = server.send(post_with_key("/slow", "k-c", "x")).await;
    assert!(
        after.is_replay() && after.text() == "slow #1: x",
        "{after:?}"
    );
}

async fn another_payload_under_a_key_is_422<S: Store + 'static>(store: S, name: &str) {
    let (server, runs) = start(layer(store, name)).await;
    assert_eq!(
        server
            .send(post_with_key("/orders", "k-m", "a"))
            .await
            .status,
        StatusCode::CREATED
    );
    let other_body = server.send(post_with_key("/orders", "k-m", "b")).await;
    assert_eq!(other_body.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(other_body.problem_code(), "idempotency_key_reused");
    let other_query = server
        .send(post_with_key("/orders?dry=1", "k-m", "a"))
        .await;
    assert_eq!(other_query.status, StatusCode::UNPROCESSABLE_ENTITY);
    // One route template, two paths: the path is part of the payload.
    let amend = |id: u32| {
        request(
            "PATCH",
            &format!("/orders/{id}"),
            &[("idempotency-key", "k-p")],
            "a",
        )
    };
    assert_eq!(server.send(amend(1)).await.status, StatusCode::CREATED);
    assert_eq!(
        server.send(amend(2)).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(runs.count(), 2);
}

/// `mismatch_status(BadRequest)`: a key reused with another body or path is refused with 400,
/// the problem code unchanged; the handler does not run again (issue 39).
async fn mismatch_status_can_be_400<S: Store + 'static>(store: S, name: &str) {
    use idem_guard::http::MismatchStatus;
    let (server, runs) =
        start(layer(store, name).mismatch_status(MismatchStatus::BadRequest)).await;
    let first = server.send(post_with_key("/orders", "k-400", "a")).await;
    assert_eq!(first.status, StatusCode::CREATED);
    for (path, body) in [("/orders", "b"), ("/orders?dry=1", "a")] {
        let reused = server.send(post_with_key(path, "k-400", body)).await;
        assert_eq!(reused.status, StatusCode::BAD_REQUEST, "{reused:?}");
        assert_eq!(reused.problem_code(), "idempotency_key_reused");
        assert!(!reused.is_replay());
    }
    let same = server.send(post_with_key("/orders", "k-400", "a")).await;
    assert!(
        same.is_replay() && same.status == StatusCode::CREATED,
        "{same:?}"
    );
    assert_eq!(runs.count(), 1);
    assert_eq!(
        MismatchStatus::default(),
        MismatchStatus::UnprocessableEntity
    );
}

async fn missing_key_is_400_only_when_required<S: Store + 'static>(store: S, name: &str) {
    let (optional, runs) = start(layer(store.clone(), name)).await;
    for _ in 0..2 {
        let reply = optional.send(request("POST", "/orders", &[], "a")).await;
        assert_eq!(reply.status, StatusCode::CREATED);
        assert!(!reply.is_replay());
    }
    assert_eq!(runs.count(), 2, "without a key every request runs");

    let (required, runs) = start(layer(store, name).required(true)).await;
    let reply = required.send(request("POST", "/orders", &[], "a")).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.problem_code(), "idempotency_key_missing");
    for bad in ["", "has space", "\u{e9}t\u{e9}"] {
        let reply = required.send(post_with_key("/orders", bad, "a")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "key {bad:?}");
        assert_eq!(reply.problem_code(), "idempotency_key_invalid");
    }
    let long = "k".repeat(256);
    let reply = required.send(post_with_key("/orders", &long, "a")).await;
    assert_eq!(reply.problem_code(), "idempotency_key_invalid");
    assert_eq!(runs.count(), 0);
}

async fn get_is_not_guarded<S: Store + 'static>(store: S, name: &str) {
    let (server, runs) = start(layer(store, name).required(true)).await;
    for n in 1..=2 {
        let reply = server
            .send(request("GET", "/orders", &[("idempotency-key", "k-g")], ""))
            .await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), format!("list #{n}"));
        assert!(!reply.is_replay());
    }
    assert_eq!(runs.count(), 2);
}

async fn server_errors_are_not_cached<S: Store + 'static>(store: S, name: &str) {
    let (server, runs) = start(layer(store, name)).await;
    let failed = server.send(post_with_key("/flaky", "k-f", "x")).await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(failed.text(), "try again", "the handler's own response");
    let retried = server.send(post_with_key("/flaky", "k-f", "x")).await;
    assert_eq!(retried.status, StatusCode::CREATED);
    assert!(!retried.is_replay(), "the retry ran the handler again");
    let replayed = server.send(post_with_key("/flaky", "k-f", "x")).await;
    assert!(replayed.is_replay());
    assert_eq!(replayed.text(), "flaky #2: x");
    assert_eq!(runs.count(), 2);
}

async fn route_and_principal_keep_keys_apart<S: Store + 'static>(store: S, name: &str) {
    let (server, runs) = start(layer(store, name)).await;
    let as_user = |user: &str, path: &str| {
        request(
            "POST",
            path,
            &[("idempotency-key", "k-r"), ("x-user", user)],
            "same",
        )
    };
    let alice = server.send(as_user("alice", "/orders")).await;
    let bob = server.send(as_user("bob", "/orders")).await;
    let alice_elsewhere = server.send(as_user("alice", "/other")).await;
    let anonymous = server.send(post_with_key("/orders", "k-r", "same")).await;
    for reply in [&alice, &bob, &alice_elsewhere, &anonymous] {
        assert_eq!(reply.status, StatusCode::CREATED, "{reply:?}");
        assert!(!reply.is_replay(), "no collision: {reply:?}");
    }
    assert_eq!(runs.count(), 4);
    let alice_again = server.send(as_user("alice", "/orders")).await;
    assert!(alice_again.is_replay());
    assert_eq!(alice_again.body, alice.body);
    // A principal that would escape into the route part stays its own key.
    let tricky = server.send(as_user("alice:/orders", "/orders")).await;
    assert!(!tricky.is_replay());
    assert_eq!(runs.count(), 5);
}

#[tokio::test]
async fn per_response_headers_are_not_replayed() {
    let (server, runs) = start(layer(MemoryStore::new(), "cookies")).await;
    let first = server.send(post_with_key("/login", "k-l", "")).await;
    assert_eq!(first.headers["set-cookie"], "session=1");
    let again = server.send(post_with_key("/login", "k-l", "")).await;
    assert!(again.is_replay());
    assert!(!again.headers.contains_key("set-cookie"), "{again:?}");
    assert_eq!(again.text(), "login #1");

    let keeping =
        layer(MemoryStore::new(), "cookies-kept").keep_header("set-cookie".parse().unwrap());
    let (server, _) = start(keeping).await;
    server.send(post_with_key("/login", "k-l", "")).await;
    let again = server.send(post_with_key("/login", "k-l", "")).await;
    assert_eq!(
        again.headers["set-cookie"], "session=1",
        "kept: the first response's cookie"
    );
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn a_large_body_is_413_and_a_large_response_is_not_stored() {
    let guarded = layer(MemoryStore::new(), "sizes")
        .max_request_body(8)
        .max_stored_body(12);
    let (server, runs) = start(guarded).await;
    let reply = server
        .send(post_with_key("/orders", "k-big", "123456789"))
        .await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(reply.problem_code(), "request_body_too_large");
    assert_eq!(runs.count(), 0);
    // "order #1: 12345678" is over 12 bytes: sent, recorded as done, not replayable.
    let first = server
        .send(post_with_key("/orders", "k-r", "12345678"))
        .await;
    assert_eq!(first.text(), "order #1: 12345678");
    let again = server
        .send(post_with_key("/orders", "k-r", "12345678"))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.problem_code(), "idempotency_response_not_stored");
    assert!(!again.headers.contains_key("retry-after"));
    assert_eq!(runs.count(), 1);
}

/// A memory store full of live records fails closed, like a store that cannot be reached.
#[tokio::test]
async fn a_full_memory_store_is_503() {
    let (server, runs) = start(layer(MemoryStore::with_capacity(1), "full")).await;
    assert_eq!(
        server
            .send(post_with_key("/orders", "k-1", "a"))
            .await
            .status,
        StatusCode::CREATED
    );
    let refused = server.send(post_with_key("/orders", "k-2", "a")).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.problem_code(), "idempotency_store_unavailable");
    assert_eq!(runs.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_503_unless_fail_open() {
    let proxy = common::Proxy::start(common::port_of(&common::redis_url(), 6379)).await;
    let store = common::redis_store_at(&format!("redis://127.0.0.1:{}", proxy.port)).await;
    let (closed, runs) = start(layer(store.clone(), "redis-down")).await;
    let (open, open_runs) = start(layer(store, "redis-down-open").fail_open(true)).await;
    assert_eq!(
        closed
            .send(post_with_key("/orders", "k-1", "a"))
            .await
            .status,
        StatusCode::CREATED
    );
    proxy.down();
    let refused = closed.send(post_with_key("/orders", "k-2", "a")).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{refused:?}"
    );
    assert_eq!(refused.problem_code(), "idempotency_store_unavailable");
    assert_eq!(
        runs.count(),
        1,
        "the handler did not run without its reservation"
    );
    let unguarded = open.send(post_with_key("/orders", "k-3", "a")).await;
    assert_eq!(unguarded.status, StatusCode::CREATED, "{unguarded:?}");
    assert_eq!(open_runs.count(), 1, "fail-open ran the handler");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_is_503() {
    let schema = common::pg_schema("http_pg_down").await;
    let proxy = common::Proxy::start(common::port_of(&common::database_url(), 5432)).await;
    let pool = common::pg_pool_at(&common::database_url_through(&proxy), &schema, 2).await;
    let store = idem_guard::PostgresStore::from_pool(pool).await.unwrap();
    let (server, runs) = start(layer(store, "pg-down")).await;
    assert_eq!(
        server
            .send(post_with_key("/orders", "k-1", "a"))
            .await
            .status,
        StatusCode::CREATED
    );
    proxy.down();
    let refused = server.send(post_with_key("/orders", "k-2", "a")).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{refused:?}"
    );
    assert_eq!(refused.problem_code(), "idempotency_store_unavailable");
    assert_eq!(runs.count(), 1);
}

/// The store goes down while the handler runs, for longer than the lease: its response is real,
/// so it is sent once the completion has been retried for the whole lease. The next delivery
/// then takes the key over and runs again: the guard cannot know the first one's effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_could_not_be_recorded_is_still_sent() {
    let proxy = common::Proxy::start(common::port_of(&common::redis_url(), 6379)).await;
    let store = common::redis_store_at(&format!("redis://127.0.0.1:{}", proxy.port)).await;
    // A short lease: the completion is retried until it ends. The duplicate waits it out.
    let guard = Guard::new(store)
        .prefix(common::unique("redis-lost"))
        .lease(Duration::from_secs(1))
        .in_flight(idem_guard::InFlight::Wait(Duration::from_secs(60)));
    let (server, runs) = start(IdempotencyLayer::from_guard(guard)).await;
    let first = {
        let server = server.clone();
        tokio::spawn(async move { server.send(post_with_key("/slow", "k-l", "x")).await })
    };
    // The handler counts its run before it sleeps: from then on the key is reserved.
    for _ in 0..500 {
        if runs.count() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(runs.count(), 1, "the handler started");
    proxy.down();
    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert_eq!(first.text(), "slow #1: x");
    proxy.up();
    let duplicate = server.send(post_with_key("/slow", "k-l", "x")).await;
    assert_eq!(duplicate.status, StatusCode::CREATED, "{duplicate:?}");
    assert_eq!(duplicate.text(), "slow #2: x", "taken over after the lease");
    assert_eq!(runs.count(), 2);
}

/// With the guard's `InFlight::Wait`, a concurrent duplicate waits for the first response and
/// gets its replay instead of 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_duplicates_get_the_replay() {
    let guard = Guard::new(MemoryStore::new())
        .prefix("wait")
        .in_flight(idem_guard::InFlight::Wait(Duration::from_secs(5)));
    let (server, runs) = start(IdempotencyLayer::from_guard(guard)).await;
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let server = server.clone();
        calls.spawn(async move { server.send(post_with_key("/slow", "k-w", "x")).await });
    }
    let replies = calls.join_all().await;
    assert!(
        replies
            .iter()
            .all(|r| r.status == StatusCode::CREATED && r.text() == "slow #1: x"),
        "{replies:#?}"
    );
    assert_eq!(replies.iter().filter(|r| r.is_replay()).count(), 7);
    assert_eq!(runs.count(), 1);
}

/// How many requests a client hangs up on at once.
const HANGUPS: usize = 20;

/// Signals, from its `Drop`, that a request's future was dropped before it finished: hyper
/// dropped it because the client hung up.
struct DroppedUnfinished(Option<tokio::sync::mpsc::UnboundedSender<()>>);

impl DroppedUnfinished {
    /// The request finished: nothing to signal.
    fn finished(&mut self) {
        self.0 = None;
    }
}

impl Drop for DroppedUnfinished {
    fn drop(&mut self) {
        if let Some(dropped) = self.0.take() {
            let _ = dropped.send(());
        }
    }
}

/// Clients hang up while their requests run (issue 23, defect 1). Each handler makes its effect
/// (a debit, counted per key), then waits until every client has closed its connection and
/// hyper has dropped every request's future; only then does it return. The completion must be
/// recorded all the same: a duplicate (waiting while the key is in flight) replays, and no key is
/// debited twice. When the completion was dropped with the request, the record stayed in
/// progress until its lease ended, and the duplicate took it over and debited again.
async fn a_client_hanging_up_does_not_double_the_effect<S: Store + 'static>(store: S, name: &str) {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use tokio::io::AsyncWriteExt;
    use tokio::sync::{mpsc, watch};

    let debits: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let (debited_tx, mut debited) = mpsc::unbounded_channel::<()>();
    let (dropped_tx, mut dropped) = mpsc::unbounded_channel::<()>();
    let (finish, finishing) = watch::channel(false);
    let handler = {
        let debits = debits.clone();
        post(move |headers: HeaderMap| async move {
            let key = headers["idempotency-key"].to_str().unwrap().to_owned();
            *debits.lock().unwrap().entry(key).or_default() += 1;
            let _ = debited_tx.send(());
            let _ = finishing.clone().wait_for(|finish| *finish).await;
            (StatusCode::CREATED, "debited")
        })
    };
    let detect_hangups = from_fn(move |request: Request, next: Next| {
        let mut signal = DroppedUnfinished(Some(dropped_tx.clone()));
        async move {
            let response = next.run(request).await;
            signal.finished();
            response
        }
    });
    // A short lease, so that an abandoned record is taken over within the test; duplicates wait
    // for the key instead of being refused.
    let guard = Guard::new(store)
        .prefix(common::unique(name))
        .lease(Duration::from_secs(2))
        .in_flight(idem_guard::InFlight::Wait(Duration::from_secs(120)));
    let app = Router::new()
        .route("/debit", handler)
        .layer(IdempotencyLayer::from_guard(guard))
        .layer(detect_hangups);
    let server = serve(app).await;

    let mut clients = Vec::new();
    for i in 0..HANGUPS {
        let mut client = tokio::net::TcpStream::connect(server.address())
            .await
            .unwrap();
        let request = format!(
            "POST /debit HTTP/1.1\r\nhost: test\r\nidempotency-key: k-{i}\r\ncontent-length: 1\r\n\r\nx"
        );
        client.write_all(request.as_bytes()).await.unwrap();
        clients.push(client);
    }
    let within = |what: &'static str| {
        move |_| panic!("{what} did not happen within 60 s (generous; a hang, not a slow machine)")
    };
    for _ in 0..HANGUPS {
        let signal = tokio::time::timeout(Duration::from_secs(60), debited.recv());
        signal.await.unwrap_or_else(within("a debit"));
    }
    drop(clients);
    for _ in 0..HANGUPS {
        let signal = tokio::time::timeout(Duration::from_secs(60), dropped.recv());
        signal
            .await
            .unwrap_or_else(within("hyper dropping a hung-up request"));
    }
    finish.send(true).unwrap();

    let mut duplicates = tokio::task::JoinSet::new();
    for i in 0..HANGUPS {
        let server = server.clone();
        duplicates.spawn(async move {
            server
                .send(post_with_key("/debit", &format!("k-{i}"), "x"))
                .await
        });
    }
    for reply in duplicates.join_all().await {
        assert_eq!(reply.status, StatusCode::CREATED, "{reply:?}");
        assert_eq!(reply.text(), "debited");
    }
    let debits = debits.lock().unwrap();
    let twice = debits.values().filter(|n| **n > 1).count();
    println!("{name}: {twice} of {HANGUPS} keys debited twice after their clients hung up");
    assert_eq!(debits.len(), HANGUPS);
    assert_eq!(twice, 0, "keys debited twice: {debits:?}");
}

/// A webhook route behind a layer configured with `source` and `matching`: it counts its runs
/// and answers with the run number.
async fn webhook(
    source: idem_guard::http::KeySource,
    matching: idem_guard::http::PayloadMatch,
) -> (Server, Runs) {
    let runs = Runs::default();
    let r = runs.clone();
    let handler = post(move || async move { format!("handled #{}", r.next()) });
    let layer = IdempotencyLayer::from_guard(Guard::new(MemoryStore::new()).prefix("hooks"))
        .key_source(source)
        .payload_match(matching)
        .required(true);
    let app = Router::new().route("/hook", handler).layer(layer);
    (serve(app).await, runs)
}

/// Each sender's redelivery, as it sends it, is replayed; another event is handled.
#[tokio::test]
async fn webhook_presets_take_the_key_where_each_sender_puts_it() {
    use idem_guard::http::{KeySource, PayloadMatch};
    type Delivery = (&'static [(&'static str, &'static str)], &'static str);
    let senders: [(&str, KeySource, Delivery, Delivery); 5] = [
        (
            "stripe",
            KeySource::stripe(),
            (&[], r#"{"id":"evt_1","type":"charge.succeeded"}"#),
            (&[], r#"{"id":"evt_2","type":"charge.succeeded"}"#),
        ),
        (
            "standard webhooks",
            KeySource::standard_webhooks(),
            (&[("webhook-id", "msg_1")], r#"{"type":"a"}"#),
            (&[("webhook-id", "msg_2")], r#"{"type":"a"}"#),
        ),
        (
            "github",
            KeySource::github(),
            (
                &[("x-github-delivery", "72d3162e-1")],
                r#"{"action":"opened"}"#,
            ),
            (
                &[("x-github-delivery", "72d3162e-2")],
                r#"{"action":"opened"}"#,
            ),
        ),
        (
            "shopify",
            KeySource::shopify(),
            (&[("x-shopify-webhook-id", "b54557e4-1")], r#"{"id":1}"#),
            (&[("x-shopify-webhook-id", "b54557e4-2")], r#"{"id":1}"#),
        ),
        (
            "sns",
            KeySource::sns(),
            (&[], r#"{"Type":"Notification","MessageId":"da41e39f-1"}"#),
            (&[], r#"{"Type":"Notification","MessageId":"da41e39f-2"}"#),
        ),
    ];
    for (sender, source, (headers, body), (other_headers, other_body)) in senders {
        let (server, runs) = webhook(source, PayloadMatch::Bytes).await;
        let first = server.send(request("POST", "/hook", headers, body)).await;
        assert_eq!(first.text(), "handled #1", "{sender}: {first:?}");
        let again = server.send(request("POST", "/hook", headers, body)).await;
        assert!(again.is_replay(), "{sender}: {again:?}");
        assert_eq!(again.text(), "handled #1", "{sender}");
        let other = server
            .send(request("POST", "/hook", other_headers, other_body))
            .await;
        assert_eq!(other.text(), "handled #2", "{sender}: another event runs");
        // Without the sender's key the request is refused, not run unguarded.
        let keyless = server.send(request("POST", "/hook", &[], "{}")).await;
        assert_eq!(
            keyless.problem_code(),
            "idempotency_key_missing",
            "{sender}"
        );
        assert_eq!(runs.count(), 2, "{sender}");
    }
}

/// A header of one's choosing, and a function of headers and body.
#[tokio::test]
async fn custom_key_sources() {
    use idem_guard::http::{KeySource, PayloadMatch};
    let header = KeySource::header("x-delivery".parse().unwrap());
    let (server, runs) = webhook(header, PayloadMatch::Bytes).await;
    let send = |id: &'static str| request("POST", "/hook", &[("x-delivery", id)], "{}");
    assert_eq!(server.send(send("d-1")).await.text(), "handled #1");
    assert!(server.send(send("d-1")).await.is_replay());
    let bad = server.send(send("has space")).await;
    assert_eq!(bad.problem_code(), "idempotency_key_invalid");
    assert_eq!(runs.count(), 1);

    // The tenant from a header and the event id from the body, as one key.
    let function = KeySource::from_request(|parts, json| {
        let tenant = parts.headers.get("x-tenant")?.to_str().ok()?;
        let event = json?.get("event")?.as_str()?;
        Some(format!("{tenant}.{event}"))
    });
    let (server, runs) = webhook(function, PayloadMatch::Bytes).await;
    let send = |tenant: &'static str| {
        request(
            "POST",
            "/hook",
            &[("x-tenant", tenant)],
            r#"{"event":"e1"}"#,
        )
    };
    assert_eq!(server.send(send("acme")).await.text(), "handled #1");
    assert!(server.send(send("acme")).await.is_replay());
    assert_eq!(server.send(send("other")).await.text(), "handled #2");
    let not_json = server
        .send(request("POST", "/hook", &[("x-tenant", "acme")], "e1"))
        .await;
    assert_eq!(not_json.problem_code(), "idempotency_key_missing");
    assert_eq!(runs.count(), 2);
}

/// Reformatted JSON (key order, whitespace) is the same payload with `CanonicalJson`; with
/// `JsonFields` only the chosen fields count; with the default, bytes do.
#[tokio::test]
async fn json_payloads_compare_as_values() {
    use idem_guard::http::{KeySource, PayloadMatch};
    let send = |body: &'static str| request("POST", "/hook", &[("webhook-id", "m-1")], body);
    let compact = r#"{"amount":500,"currency":"eur","attempt":1}"#;
    let reformatted = "{\n  \"currency\": \"eur\",\n  \"attempt\": 1,\n  \"amount\": 500\n}";
    let retried = r#"{"amount":500,"currency":"eur","attempt":2}"#;
    let changed = r#"{"amount":900,"currency":"eur","attempt":1}"#;

    let (server, _) = webhook(KeySource::standard_webhooks(), PayloadMatch::Bytes).await;
    server.send(send(compact)).await;
    let reply = server.send(send(reformatted)).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "bytes differ"
    );

    let (server, runs) = webhook(KeySource::standard_webhooks(), PayloadMatch::CanonicalJson).await;
    server.send(send(compact)).await;
    assert!(server.send(send(reformatted)).await.is_replay());
    let reply = server.send(send(retried)).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a field differs"
    );
    let reply = server.send(send("not json")).await;
    assert_eq!(reply.problem_code(), "request_body_not_json");
    assert_eq!(runs.count(), 1);

    let fields = PayloadMatch::JsonFields(vec!["/amount".into(), "/currency".into()]);
    let (server, runs) = webhook(KeySource::standard_webhooks(), fields).await;
    server.send(send(compact)).await;
    assert!(server.send(send(reformatted)).await.is_replay());
    assert!(
        server.send(send(retried)).await.is_replay(),
        "`attempt` does not count"
    );
    let reply = server.send(send(changed)).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "`amount` counts"
    );
    assert_eq!(runs.count(), 1);
}

/// The request's own deadline bounds its lease: a duplicate sent while the first runs is told
/// to come back within that deadline, not after the guard's minute-long lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_follows_the_request_deadline() {
    use tokio::sync::{mpsc, watch};
    let (started_tx, mut started) = mpsc::unbounded_channel::<()>();
    let (finish, finishing) = watch::channel(false);
    let handler = post(move || async move {
        let _ = started_tx.send(());
        let _ = finishing.clone().wait_for(|finish| *finish).await;
        "done"
    });
    let layer = IdempotencyLayer::from_guard(Guard::new(MemoryStore::new()).prefix("deadline"))
        .max_retry_after(Duration::from_secs(3600))
        .deadline_from(|parts| {
            let ms = parts.headers.get("x-timeout-ms")?.to_str().ok()?;
            Some(Duration::from_millis(ms.parse().ok()?))
        });
    let server = serve(Router::new().route("/slow", handler).layer(layer)).await;
    let send = |key: &'static str, timeout: Option<&'static str>| {
        let mut headers = vec![("idempotency-key", key)];
        headers.extend(timeout.map(|t| ("x-timeout-ms", t)));
        request("POST", "/slow", &headers, "x")
    };
    let retry_after = |reply: &Reply| -> u64 {
        assert_eq!(reply.status, StatusCode::CONFLICT, "{reply:?}");
        reply.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut firsts = Vec::new();
    for (key, timeout) in [("k-deadline", Some("3000")), ("k-lease", None)] {
        let server = server.clone();
        firsts.push(tokio::spawn(async move {
            server.send(send(key, timeout)).await
        }));
        started.recv().await.unwrap();
    }
    let bounded = retry_after(&server.send(send("k-deadline", Some("3000"))).await);
    assert!(
        (1..=3).contains(&bounded),
        "within the 3 s deadline: {bounded}"
    );
    let whole = retry_after(&server.send(send("k-lease", None)).await);
    assert!(whole > 50, "no deadline: the guard's 60 s lease: {whole}");
    finish.send(true).unwrap();
    for first in firsts {
        assert_eq!(first.await.unwrap().text(), "done");
    }
}

/// `on_replay` changes replayed responses, and only those.
#[tokio::test]
async fn the_replay_hook_changes_replayed_responses() {
    let layer = layer(MemoryStore::new(), "hook").on_replay(|mut response| {
        response
            .headers_mut()
            .insert("x-served-from", "idempotency-cache".parse().unwrap());
        response
    });
    let (server, runs) = start(layer).await;
    let first = server.send(post_with_key("/orders", "k-h", "a")).await;
    assert!(!first.headers.contains_key("x-served-from"));
    let again = server.send(post_with_key("/orders", "k-h", "a")).await;
    assert!(again.is_replay());
    assert_eq!(again.headers["x-served-from"], "idempotency-cache");
    assert_eq!(again.body, first.body);
    assert_eq!(runs.count(), 1);
}

/// A provider's preset compares what identifies a delivery, not the raw body: a Stripe
/// redelivery whose `pending_webhooks` changed is replayed (it got 422), Standard Webhooks'
/// attempt headers do not count, and the same id for another event is still refused (issue 39,
/// item 5).
#[tokio::test]
async fn webhook_presets_replay_redeliveries_whose_attempt_fields_changed() {
    use idem_guard::http::KeySource;
    type Delivery = (&'static [(&'static str, &'static str)], &'static str);
    // (sender, preset, first delivery, its redelivery, the same id for another event)
    let senders: [(&str, KeySource, Delivery, Delivery, Delivery); 3] = [
        (
            "stripe",
            KeySource::stripe(),
            (
                &[],
                r#"{"id":"evt_1","type":"charge.succeeded","pending_webhooks":2,"data":{}}"#,
            ),
            (
                &[],
                r#"{"id":"evt_1","type":"charge.succeeded","pending_webhooks":1,"data":{}}"#,
            ),
            (&[], r#"{"id":"evt_1","type":"charge.refunded"}"#),
        ),
        (
            "standard webhooks",
            KeySource::standard_webhooks(),
            (
                &[("webhook-id", "msg_1"), ("webhook-timestamp", "1700000000")],
                r#"{"type":"a","attempt":1}"#,
            ),
            (
                &[("webhook-id", "msg_1"), ("webhook-timestamp", "1700000060")],
                r#"{"type":"a","attempt":2}"#,
            ),
            (&[], ""),
        ),
        (
            "github",
            KeySource::github(),
            (
                &[
                    ("x-github-delivery", "72d3162e-1"),
                    ("x-github-event", "issues"),
                ],
                r#"{"action":"opened","sent_at":1}"#,
            ),
            (
                &[
                    ("x-github-delivery", "72d3162e-1"),
                    ("x-github-event", "issues"),
                ],
                r#"{"action":"opened","sent_at":2}"#,
            ),
            (
                &[
                    ("x-github-delivery", "72d3162e-1"),
                    ("x-github-event", "push"),
                ],
                r#"{"action":"opened","sent_at":1}"#,
            ),
        ),
    ];
    for (sender, source, (headers, body), (again_headers, again_body), other) in senders {
        let runs = Runs::default();
        let r = runs.clone();
        let handler = post(move || async move { format!("handled #{}", r.next()) });
        // The preset alone: no `payload_match` of the user's.
        let layer = IdempotencyLayer::from_guard(Guard::new(MemoryStore::new()).prefix("hooks"))
            .key_source(source)
            .required(true);
        let server = serve(Router::new().route("/hook", handler).layer(layer)).await;
        let first = server.send(request("POST", "/hook", headers, body)).await;
        assert_eq!(first.text(), "handled #1", "{sender}: {first:?}");
        let again = server
            .send(request("POST", "/hook", again_headers, again_body))
            .await;
        assert!(again.is_replay(), "{sender}: {again:?}");
        if !other.0.is_empty() || !other.1.is_empty() {
            let reused = server
                .send(request("POST", "/hook", other.0, other.1))
                .await;
            assert_eq!(
                reused.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{sender}: the id of another event"
            );
        }
        assert_eq!(runs.count(), 1, "{sender}");
    }
}
