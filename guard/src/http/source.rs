//! Where the layer finds a request's idempotency key, and what of the request counts as its
//! payload: most webhook senders do not send `Idempotency-Key`, and reformatted JSON is the same
//! request.

use std::fmt;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::HeaderName;
use serde_json::Value;

use super::request::IDEMPOTENCY_KEY;

type KeyFn = dyn Fn(&Parts, Option<&Value>) -> Option<String> + Send + Sync;

/// Where the key of a request comes from (see [`IdempotencyLayer::key_source`]).
///
/// Whatever the source, the key is checked as the `Idempotency-Key` header is (visible ASCII,
/// at most [`max_key_len`](super::IdempotencyLayer::max_key_len)); a source that finds nothing
/// means "no key" (passed through, or `400` when the layer requires a key).
///
/// [`IdempotencyLayer::key_source`]: super::IdempotencyLayer::key_source
#[derive(Clone)]
pub struct KeySource(Source);

#[derive(Clone)]
enum Source {
    Header(HeaderName),
    JsonPointer(String),
    Function(Arc<KeyFn>),
}

impl KeySource {
    /// The `Idempotency-Key` header (the default).
    pub fn idempotency_key() -> Self {
        Self::header(IDEMPOTENCY_KEY)
    }

    /// A header of this name (its value bare, or quoted as the `Idempotency-Key` draft writes it).
    pub fn header(name: HeaderName) -> Self {
        KeySource(Source::Header(name))
    }

    /// A string or number in the JSON body, at this JSON pointer (RFC 6901, e.g. `/data/id`).
    pub fn json_body(pointer: impl Into<String>) -> Self {
        KeySource(Source::JsonPointer(pointer.into()))
    }

    /// A function of the request's parts (headers, extensions) and its body parsed as JSON
    /// (`None` when the body is not JSON).
    pub fn from_request(
        key: impl Fn(&Parts, Option<&Value>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        KeySource(Source::Function(Arc::new(key)))
    }

    /// Stripe webhooks: the event id, `id` in the JSON body (`evt_...`). Stripe resends an
    /// event with the same id.
    pub fn stripe() -> Self {
        Self::json_body("/id")
    }

    /// Standard Webhooks (Svix and others): the `webhook-id` header.
    pub fn standard_webhooks() -> Self {
        Self::header(HeaderName::from_static("webhook-id"))
    }

    /// GitHub webhooks: the `X-GitHub-Delivery` header (the same on a redelivery).
    pub fn github() -> Self {
        Self::header(HeaderName::from_static("x-github-delivery"))
    }

    /// Shopify webhooks: the `X-Shopify-Webhook-Id` header.
    pub fn shopify() -> Self {
        Self::header(HeaderName::from_static("x-shopify-webhook-id"))
    }

    /// Amazon SNS HTTP(S) deliveries: `MessageId` in the JSON body.
    pub fn sns() -> Self {
        Self::json_body("/MessageId")
    }

    /// The header this source reads, if it reads one.
    pub(crate) fn header_name(&self) -> Option<&HeaderName> {
        match &self.0 {
            Source::Header(name) => Some(name),
            _ => None,
        }
    }

    /// The raw key a body-reading source finds (the header is read by the caller).
    pub(crate) fn find_in_body(&self, parts: &Parts, json: Option<&Value>) -> Option<String> {
        match &self.0 {
            Source::Header(_) => None,
            Source::JsonPointer(pointer) => json?.pointer(pointer).and_then(scalar_text),
            Source::Function(key) => key(parts, json),
        }
    }
}

/// A JSON string as it is, a number as written; anything else is no key.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::Header(name) => write!(f, "KeySource::header({name})"),
            Source::JsonPointer(pointer) => write!(f, "KeySource::json_body({pointer:?})"),
            Source::Function(_) => f.write_str("KeySource::from_request(..)"),
        }
    }
}

/// What of the request body must be the same for a repeat to be replayed rather than refused
/// with `422` (see [`IdempotencyLayer::payload_match`]). Method, path and query always count.
///
/// [`IdempotencyLayer::payload_match`]: super::IdempotencyLayer::payload_match
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PayloadMatch {
    /// Every byte (the default): reformatted JSON is another payload.
    #[default]
    Bytes,
    /// The body's JSON value: key order and whitespace do not count. A body that is not JSON is
    /// refused (`400`).
    CanonicalJson,
    /// These fields of the JSON body only, as JSON pointers (RFC 6901, e.g. `/amount`); a
    /// missing field counts as `null`. For senders whose retries change other fields (a delivery
    /// attempt counter, a timestamp). A body that is not JSON is refused (`400`).
    JsonFields(Vec<String>),
}

impl PayloadMatch {
    /// Whether the body must be JSON.
    pub(crate) fn needs_json(&self) -> bool {
        !matches!(self, PayloadMatch::Bytes)
    }

    /// What of the parsed body is fingerprinted.
    pub(crate) fn json_part(&self, json: &Value) -> Value {
        match self {
            PayloadMatch::JsonFields(pointers) => Value::Array(
                pointers
                    .iter()
                    .map(|p| json.pointer(p).cloned().unwrap_or(Value::Null))
                    .collect(),
            ),
            _ => json.clone(),
        }
    }
}
