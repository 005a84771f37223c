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
pub struct KeySource {
    source: Source,
    /// What a provider's preset says identifies a delivery, used unless the layer is given a
    /// [`PayloadMatch`] of its own.
    payload: Option<PayloadMatch>,
}

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
        KeySource {
            source: Source::Header(name),
            payload: None,
        }
    }

    /// A string or number in the JSON body, at this JSON pointer (RFC 6901, e.g. `/data/id`).
    pub fn json_body(pointer: impl Into<String>) -> Self {
        KeySource {
            source: Source::JsonPointer(pointer.into()),
            payload: None,
        }
    }

    /// A function of the request's parts (headers, extensions) and its body parsed as JSON
    /// (`None` when the body is not JSON).
    pub fn from_request(
        key: impl Fn(&Parts, Option<&Value>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        KeySource {
            source: Source::Function(Arc::new(key)),
            payload: None,
        }
    }

    /// The same source, with the payload a preset compares.
    fn comparing(self, payload: PayloadMatch) -> Self {
        KeySource {
            payload: Some(payload),
            ..self
        }
    }

    /// The payload this preset compares, if it is a provider's preset.
    pub(crate) fn preset_payload(&self) -> Option<&PayloadMatch> {
        self.payload.as_ref()
    }

    // The presets compare what identifies a delivery by the provider's documentation, never
    // the raw body: a redelivery may differ in fields of the attempt (Stripe's
    // `pending_webhooks`), and would get 422 instead of the replay.

    /// Stripe webhooks: the event id, `id` in the JSON body (`evt_...`). Stripe resends an
    /// event with the same id; the event's `pending_webhooks` (deliveries still to make) changes
    /// between attempts, so the payload compared is the event's `id` and `type`.
    pub fn stripe() -> Self {
        Self::json_body("/id").comparing(PayloadMatch::JsonFields(vec![
            "/id".to_owned(),
            "/type".to_owned(),
        ]))
    }

    /// Standard Webhooks (Svix and others): the `webhook-id` header, the same when a message is
    /// resent; `webhook-timestamp` and `webhook-signature` are the attempt's, so the payload
    /// compared is the `webhook-id`.
    pub fn standard_webhooks() -> Self {
        let id = HeaderName::from_static("webhook-id");
        Self::header(id.clone()).comparing(PayloadMatch::Headers(vec![id]))
    }

    /// GitHub webhooks: the `X-GitHub-Delivery` header (the same on a redelivery); the payload
    /// compared is that GUID and `X-GitHub-Event`.
    pub fn github() -> Self {
        let delivery = HeaderName::from_static("x-github-delivery");
        Self::header(delivery.clone()).comparing(PayloadMatch::Headers(vec![
            delivery,
            HeaderName::from_static("x-github-event"),
        ]))
    }

    /// Shopify webhooks: the `X-Shopify-Webhook-Id` header (the same on a retry); the payload
    /// compared is that id and `X-Shopify-Topic`.
    pub fn shopify() -> Self {
        let id = HeaderName::from_static("x-shopify-webhook-id");
        Self::header(id.clone()).comparing(PayloadMatch::Headers(vec![
            id,
            HeaderName::from_static("x-shopify-topic"),
        ]))
    }

    /// Amazon SNS HTTP(S) deliveries: `MessageId` in the JSON body (a retry keeps the original
    /// message's id); the payload compared is `MessageId`, `TopicArn` and `Type`.
    pub fn sns() -> Self {
        Self::json_body("/MessageId").comparing(PayloadMatch::JsonFields(vec![
            "/MessageId".to_owned(),
            "/TopicArn".to_owned(),
            "/Type".to_owned(),
        ]))
    }

    /// The header this source reads, if it reads one.
    pub(crate) fn header_name(&self) -> Option<&HeaderName> {
        match &self.source {
            Source::Header(name) => Some(name),
            _ => None,
        }
    }

    /// The raw key a body-reading source finds (the header is read by the caller).
    pub(crate) fn find_in_body(&self, parts: &Parts, json: Option<&Value>) -> Option<String> {
        match &self.source {
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
        match &self.source {
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
    /// These request headers' values only (all values of each, in order; a missing header
    /// counts as none), not the body: for senders that identify a delivery by headers (the
    /// GitHub, Shopify and Standard Webhooks presets).
    Headers(Vec<HeaderName>),
}

impl PayloadMatch {
    /// Whether the body must be JSON.
    pub(crate) fn needs_json(&self) -> bool {
        matches!(
            self,
            PayloadMatch::CanonicalJson | PayloadMatch::JsonFields(_)
        )
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
