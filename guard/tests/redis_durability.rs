//! `RedisStore::connect` warns through `tracing` when the server would lose records on a restart
//! (no AOF, no snapshots) or under memory pressure (an evicting policy).

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Keeps the message of every warning.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn connect_warns_when_redis_would_lose_records() {
    // What the server under test is configured with decides what must be said. `.ci/run` starts
    // Redis without persistence, so there the warning must appear.
    let client = redis::Client::open(common::redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let config: HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .arg("save")
        .arg("maxmemory-policy")
        .query_async(&mut conn)
        .await
        .unwrap();
    let persists = config["appendonly"] == "yes" || !config["save"].trim().is_empty();
    let evicts = config["maxmemory-policy"] != "noeviction";

    let warnings = Warnings::default();
    let _default = tracing::subscriber::set_default(warnings.clone());
    idem_guard::RedisStore::connect(&common::redis_url())
        .await
        .unwrap();
    let said = warnings.0.lock().unwrap().clone();
    assert_eq!(
        said.iter().any(|w| w.contains("persists nothing")),
        !persists,
        "{config:?}: {said:?}"
    );
    assert_eq!(
        said.iter().any(|w| w.contains("maxmemory-policy")),
        evicts,
        "{config:?}: {said:?}"
    );
}
