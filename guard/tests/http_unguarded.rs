//! A request the HTTP layer lets through without a key is counted (`unguarded`) and logged once
//! per route, so a key source that finds nothing does not switch the guard off unseen; with
//! `required(true)` it is the IETF draft's 400, whose problem `type` links to the
//! documentation `key_docs` names (issue 39, item 4). A binary of its own: it installs the
//! process's metrics recorder and tracing subscriber.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::routing::post;
use axum::Router;
use common::counts::Counts;
use common::http::{request, serve};
use idem_guard::http::IdempotencyLayer;
use idem_guard::{Guard, MemoryStore};

/// The `route` field of every warning event.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Route<'a>(&'a mut Option<String>);

impl tracing::field::Visit for Route<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "route" {
            *self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "route" {
            *self.0 = Some(value.to_owned());
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut route = None;
            event.record(&mut Route(&mut route));
            if let Some(route) = route {
                self.0.lock().unwrap().push(route);
            }
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_key_are_counted_and_logged_once_per_route() {
    let counters = Counts::default();
    metrics::set_global_recorder(counters.clone()).unwrap();
    let warnings = Warnings::default();
    tracing::subscriber::set_global_default(warnings.clone()).unwrap();

    let runs = Arc::new(AtomicU32::new(0));
    let handler = {
        let runs = runs.clone();
        move || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            "done"
        }
    };
    let layer = IdempotencyLayer::from_guard(Guard::new(MemoryStore::new()).prefix("unguarded"));
    let app = Router::new()
        .route("/a", post(handler.clone()))
        .route("/b/{id}", post(handler))
        .layer(layer);
    let server = serve(app).await;
    for path in ["/a", "/a", "/a", "/b/1", "/b/2"] {
        let reply = server.send(request("POST", path, &[], "x")).await;
        assert_eq!(reply.status, 200);
    }
    let keyed = request("POST", "/a", &[("idempotency-key", "k1")], "x");
    assert_eq!(server.send(keyed).await.status, 200);
    assert_eq!(runs.load(Ordering::SeqCst), 6);

    let count = |outcome: &str| {
        let name = format!("idem_guard_calls_total{{prefix=unguarded,outcome={outcome}}}");
        counters.0.lock().unwrap().get(&name).copied().unwrap_or(0)
    };
    assert_eq!((count("unguarded"), count("fresh")), (5, 1));
    let mut logged = warnings.0.lock().unwrap().clone();
    logged.sort();
    assert_eq!(logged, ["/a", "/b/{id}"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_key_missing_is_400_linking_to_the_docs() {
    let docs = "https://example.com/docs/idempotency-keys";
    let layer = IdempotencyLayer::new(MemoryStore::new())
        .required(true)
        .key_docs(docs);
    let app = Router::new()
        .route("/a", post(|| async { "done" }))
        .layer(layer);
    let server = serve(app).await;
    let reply = server.send(request("POST", "/a", &[], "x")).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.problem_code(), "idempotency_key_missing");
    let problem: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(problem["type"], docs);
}
