//! What the guard tells about each guarded call: a `tracing` span and `metrics` counters.
//!
//! Every call of [`Guard::run`](crate::Guard::run) (and its variants, the transactional ones
//! included, and the HTTP layer) runs in
//! an `idem_guard` span with the fields `prefix`, `key_hash` (the key hashed, as
//! [`Attempt::token`](crate::Attempt::token): keys may hold personal data), `outcome` and
//! `store_ms` (time spent waiting for the store). Through the `metrics` facade, whatever
//! recorder the application installs (Prometheus, StatsD...) receives:
//!
//! - `idem_guard_calls_total{prefix, outcome}`: one per guarded call, `outcome` being `fresh`
//!   (the body ran), `taken_over` (the body ran after an abandoned attempt's lease),
//!   `replayed`, `in_flight` (refused or given up waiting while another attempt runs),
//!   `mismatch` (the key was used with another payload), `store_error` (the store failed before
//!   the body could run), `unguarded` (no key, and none required) or `disabled` (the guard is
//!   switched off, [`Guard::disabled`](crate::Guard::disabled): the body ran directly);
//! - `idem_guard_unrecorded_total{prefix}`: a body ran but its result could not be recorded
//!   within its lease (a later delivery may run it again);
//! - `idem_guard_store_seconds{prefix, op}`: the latency of each store call (`op` =
//!   `reserve`, `complete`, `release`, `renew`), as a histogram.

use std::time::Duration;

/// How a guarded call ended, as far as the guard is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    Fresh,
    TakenOver,
    Replayed,
    InFlight,
    Mismatch,
    StoreError,
    Unguarded,
    Disabled,
}

impl Seen {
    fn as_str(self) -> &'static str {
        match self {
            Seen::Fresh => "fresh",
            Seen::TakenOver => "taken_over",
            Seen::Replayed => "replayed",
            Seen::InFlight => "in_flight",
            Seen::Mismatch => "mismatch",
            Seen::StoreError => "store_error",
            Seen::Unguarded => "unguarded",
            Seen::Disabled => "disabled",
        }
    }
}

/// A key as the guard's spans, logs and error messages show it: hashed (xxh3-128, 32 hex
/// digits), since keys may hold personal data (an e-mail address, an account number).
pub fn key_hash(key: &str) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(key.as_bytes()))
}

/// The span of one guarded call; `outcome` and `store_ms` are recorded as they become known.
pub(crate) fn span(prefix: &str, key: Option<&str>) -> tracing::Span {
    let key_hash = key.map(key_hash);
    tracing::info_span!(
        "idem_guard",
        prefix,
        key_hash,
        outcome = tracing::field::Empty,
        store_ms = tracing::field::Empty,
    )
}

/// Records how the call ended, on its span and in `idem_guard_calls_total`.
pub(crate) fn outcome(prefix: &str, seen: Seen) {
    tracing::Span::current().record("outcome", seen.as_str());
    metrics::counter!(
        "idem_guard_calls_total",
        "prefix" => prefix.to_owned(),
        "outcome" => seen.as_str(),
    )
    .increment(1);
}

/// A call of a switched-off guard: counted, and said once per prefix in the log, so that a
/// switch left on in production shows.
pub(crate) fn disabled(prefix: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    outcome(prefix, Seen::Disabled);
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.iter().any(|p| p == prefix) {
        said.push(prefix.to_owned());
        tracing::warn!(
            prefix,
            "the idempotency guard is disabled (IDEM_GUARD_DISABLED or `Guard::disabled`): bodies run directly, duplicates run again (logged once per prefix)"
        );
    }
}

/// A body whose result could not be recorded.
pub(crate) fn unrecorded(prefix: &str) {
    metrics::counter!("idem_guard_unrecorded_total", "prefix" => prefix.to_owned()).increment(1);
}

/// One store call's latency.
pub(crate) fn store_call(prefix: &str, op: &'static str, took: Duration) {
    metrics::histogram!(
        "idem_guard_store_seconds",
        "prefix" => prefix.to_owned(),
        "op" => op,
    )
    .record(took.as_secs_f64());
}
