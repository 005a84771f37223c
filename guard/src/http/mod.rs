//! The HTTP `Idempotency-Key` header (IETF `draft-ietf-httpapi-idempotency-key-header`) as a
//! `tower` layer, for axum services (feature `http`).
//!
//! ```rust,no_run
//! use axum::extract::Request;
//! use axum::http::StatusCode;
//! use axum::middleware::{self, Next};
//! use axum::response::{IntoResponse, Response};
//! use axum::{routing::post, Router};
//! use idem_guard::http::IdempotencyLayer;
//! use idem_guard::{Guard, RedisStore};
//!
//! /// Who is calling, as the authentication middleware established it.
//! #[derive(Clone)]
//! struct User {
//!     id: String,
//! }
//!
//! async fn authenticate(mut request: Request, next: Next) -> Response {
//!     // A real service verifies a token here.
//!     let user = request.headers().get("x-user").and_then(|v| v.to_str().ok());
//!     let Some(id) = user.map(str::to_owned) else {
//!         return StatusCode::UNAUTHORIZED.into_response();
//!     };
//!     request.extensions_mut().insert(User { id });
//!     next.run(request).await
//! }
//!
//! async fn create_payment(body: String) -> (StatusCode, String) {
//!     // The effect: runs once per (user, route, Idempotency-Key).
//!     (StatusCode::CREATED, format!("payment for {body}"))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = RedisStore::connect("redis://127.0.0.1:6379").await?;
//!     let idempotency = IdempotencyLayer::from_guard(Guard::new(store).prefix("payments-api"))
//!         .required(true)
//!         .principal(|parts| parts.extensions.get::<User>().map(|user| user.id.clone()));
//!     let app = Router::new()
//!         .route("/payments", post(create_payment))
//!         // Inside the router, so the key holds the route template (`MatchedPath`).
//!         .layer(idempotency)
//!         // Added last, so it runs first: the `User` is there when the key is built.
//!         .layer(middleware::from_fn(authenticate));
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     axum::serve(listener, app).await?;
//!     Ok(())
//! }
//! ```
//!
//! For each request whose method is guarded (POST and PATCH unless [`methods`] says otherwise):
//!
//! | the request | the answer |
//! | --- | --- |
//! | no `Idempotency-Key` | passed through unguarded (counted as the outcome `unguarded`, and a warning logged once per route), or, when [`required`], `400` as the IETF draft says, its problem `type` the link [`key_docs`] gives |
//! | a key that is empty, repeated, longer than [`max_key_len`] (255) or not visible ASCII | `400` |
//! | a body over [`max_request_body`] (2 MiB) | `413` |
//! | a first request with this key | runs the handler; its response is stored, unless [`cache_when`] refuses its status (5xx by default): then the key is released and a retry runs again |
//! | a repeat, same method, path, query and body | the stored status, headers and body, plus `Idempotent-Replayed: true`; the handler does not run |
//! | a repeat while the first still runs | `409` with `Retry-After` (the remaining lease, at most [`max_retry_after`], 1 s), or waits, with [`InFlight::Wait`](crate::InFlight::Wait) on the guard |
//! | a repeat with another method, path, query or body | `422`, or `400` with [`mismatch_status`] |
//! | the store cannot be reached | `503`; the handler does not run (unless [`fail_open`]) |
//!
//! Errors are `application/problem+json` (RFC 9457) with a stable `code` member
//! (`idempotency_key_missing`, `idempotency_key_invalid`, `request_body_too_large`,
//! `idempotency_request_in_progress`, `idempotency_key_reused`, `idempotency_store_unavailable`,
//! ...).
//!
//! **The key** is the header value (quoted `"..."` as the draft writes it, or bare as most clients
//! send it: the same key; or what [`key_source`] finds: another header, a field of the JSON body,
//! a function of the request, with presets for Stripe, Standard Webhooks, GitHub, Shopify and
//! SNS), the route (axum's [`MatchedPath`](axum::extract::MatchedPath), such
//! as `/orders/{id}`, when the layer runs inside a `Router`; the path otherwise) and the principal
//! that [`principal`] takes from the request (none by default), joined with the guard's tuple-key
//! escaping, so no two of them run into each other: the same key sent by two users or to two
//! routes is two records. **The payload** is the method, path, query and an xxh3-128 hash of the
//! body (its bytes, or with [`payload_match`] its JSON value, chosen fields of it or chosen
//! headers instead; a provider's [`key_source`] preset compares what identifies its deliveries). **What is stored**: status, headers (not hop-by-hop ones, nor those [`drop_header`]
//! names: `Date` and `Set-Cookie` by default) and the body, when at most [`max_stored_body`]
//! (2 MiB); a larger body is sent but not stored, and duplicates get `409` saying it cannot be
//! replayed. Responses are buffered, so a guarded route must not stream without end.
//!
//! Lease, retention (24 h), in-flight policy, prefix (`"http"`) and replay hook are the
//! [`Guard`](crate::Guard)'s: build one and pass it to [`IdempotencyLayer::from_guard`]. Per
//! request, [`deadline_from`] cuts the lease to the request's own deadline, and [`on_replay`]
//! may change a replayed response.
//!
//! **Transactional mode** (PostgreSQL, [`transactional`]): the handler writes through the
//! request's transaction ([`RequestTx`]), in which the layer also reserves the key and stores
//! the response, then commits once: what `#[idempotent(tx = ..)]` does for a function.
//!
//! [`methods`]: IdempotencyLayer::methods
//! [`transactional`]: IdempotencyLayer::transactional
//! [`required`]: IdempotencyLayer::required
//! [`key_docs`]: IdempotencyLayer::key_docs
//! [`max_key_len`]: IdempotencyLayer::max_key_len
//! [`max_request_body`]: IdempotencyLayer::max_request_body
//! [`cache_when`]: IdempotencyLayer::cache_when
//! [`fail_open`]: IdempotencyLayer::fail_open
//! [`principal`]: IdempotencyLayer::principal
//! [`drop_header`]: IdempotencyLayer::drop_header
//! [`max_stored_body`]: IdempotencyLayer::max_stored_body
//! [`max_retry_after`]: IdempotencyLayer::max_retry_after
//! [`mismatch_status`]: IdempotencyLayer::mismatch_status
//! [`key_source`]: IdempotencyLayer::key_source
//! [`payload_match`]: IdempotencyLayer::payload_match
//! [`deadline_from`]: IdempotencyLayer::deadline_from
//! [`on_replay`]: IdempotencyLayer::on_replay

mod request;
mod response;
mod service;
mod source;
mod tx;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header::{DATE, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderName, Method, Response, StatusCode};

pub use self::request::IDEMPOTENCY_KEY;
pub use self::response::IDEMPOTENT_REPLAYED;
pub use self::service::IdempotencyService;
pub use self::source::{KeySource, PayloadMatch};
// `MismatchStatus` is defined below, with the layer.
pub use self::tx::{RequestTx, TxConnection};
use crate::{Guard, PostgresStore, Store};

/// Longest `Idempotency-Key` accepted by default: a UUID needs 36, and no real key needs more.
pub const DEFAULT_MAX_KEY_LEN: usize = 255;
/// Largest request body a guarded request may have by default (axum's own default limit).
pub const DEFAULT_MAX_REQUEST_BODY: usize = 2 * 1024 * 1024;
/// Largest response body stored for replay by default.
pub const DEFAULT_MAX_STORED_BODY: usize = 2 * 1024 * 1024;
/// Longest `Retry-After` of a 409 by default. The running request's remaining lease is no
/// estimate of when it ends (a 300 ms request holds a 60 s lease), and a client that obeys the
/// header should come back soon after the usual request has finished.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(1);

type PrincipalFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;
type CacheWhenFn = dyn Fn(StatusCode) -> bool + Send + Sync;
type DeadlineFn = dyn Fn(&Parts) -> Option<Duration> + Send + Sync;
type ReplayFn = dyn Fn(Response<Body>) -> Response<Body> + Send + Sync;

/// A `tower::Layer` that makes the guarded methods of a service idempotent per
/// `Idempotency-Key`. See the [module docs](self) for what it answers.
#[derive(Debug)]
pub struct IdempotencyLayer<S> {
    guard: Arc<Guard<S>>,
    config: Arc<Config>,
}

impl<S> Clone for IdempotencyLayer<S> {
    fn clone(&self) -> Self {
        IdempotencyLayer {
            guard: self.guard.clone(),
            config: self.config.clone(),
        }
    }
}

/// The layer's settings, shared by every clone of its service.
#[derive(Clone)]
pub(crate) struct Config {
    required: bool,
    methods: Vec<Method>,
    max_key_len: usize,
    max_request_body: usize,
    max_stored_body: usize,
    principal: Option<Arc<PrincipalFn>>,
    cache_when: Arc<CacheWhenFn>,
    dropped_headers: Vec<HeaderName>,
    fail_open: bool,
    max_retry_after: Duration,
    pub(crate) mismatch_status: MismatchStatus,
    pub(crate) key_source: KeySource,
    pub(crate) payload_match: PayloadMatch,
    /// Whether `payload_match` was given (then a preset's does not replace it).
    payload_match_set: bool,
    pub(crate) deadline_from: Option<Arc<DeadlineFn>>,
    pub(crate) on_replay: Option<Arc<ReplayFn>>,
    pub(crate) key_docs: Option<String>,
    /// Transactional mode: the guard over PostgreSQL that reserves and completes each key in
    /// the request's transaction.
    pub(crate) tx: Option<Arc<Guard<PostgresStore>>>,
    /// The routes whose unguarded requests were already logged, shared by every clone.
    unguarded_routes: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// How many routes' unguarded requests are remembered, so that a layer outside a `Router`
/// (where the route is the raw path, one per id) does not grow without bound.
const MAX_LOGGED_ROUTES: usize = 1024;

impl Config {
    /// Whether this is the first unguarded request seen on `route` (among the first
    /// [`MAX_LOGGED_ROUTES`] routes).
    pub(crate) fn first_unguarded(&self, route: &str) -> bool {
        let mut seen = self
            .unguarded_routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.len() < MAX_LOGGED_ROUTES && seen.insert(route.to_owned())
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("required", &self.required)
            .field("methods", &self.methods)
            .field("max_key_len", &self.max_key_len)
            .field("max_request_body", &self.max_request_body)
            .field("max_stored_body", &self.max_stored_body)
            .field("principal", &self.principal.as_ref().map(|_| ".."))
            .field("dropped_headers", &self.dropped_headers)
            .field("fail_open", &self.fail_open)
            .field("max_retry_after", &self.max_retry_after)
            .field("mismatch_status", &self.mismatch_status)
            .field("key_source", &self.key_source)
            .field("payload_match", &self.payload_match)
            .field("deadline_from", &self.deadline_from.as_ref().map(|_| ".."))
            .field("on_replay", &self.on_replay.as_ref().map(|_| ".."))
            .field("transactional", &self.tx.is_some())
            .finish_non_exhaustive()
    }
}

/// The status of the answer to a key reused with another request: see
/// [`IdempotencyLayer::mismatch_status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MismatchStatus {
    /// `422 Unprocessable Content` (the IETF draft's; the default).
    #[default]
    UnprocessableEntity,
    /// `400 Bad Request`.
    BadRequest,
}

impl MismatchStatus {
    /// The HTTP status.
    pub fn status(self) -> StatusCode {
        match self {
            MismatchStatus::UnprocessableEntity => StatusCode::UNPROCESSABLE_ENTITY,
            MismatchStatus::BadRequest => StatusCode::BAD_REQUEST,
        }
    }
}

impl<S: Store> IdempotencyLayer<S> {
    /// A layer over `store` with a default guard (prefix `"http"`, lease 60 s renewed while the
    /// handler runs, retention 24 h, duplicates in flight rejected with 409).
    pub fn new(store: S) -> Self {
        Self::from_guard(Guard::new(store).prefix("http"))
    }

    /// A layer over a configured guard: its prefix, tenant, lease, retention, in-flight policy
    /// and replay hook apply. (Its `required` setting does not: see [`required`](Self::required).)
    pub fn from_guard(guard: Guard<S>) -> Self {
        IdempotencyLayer {
            guard: Arc::new(guard),
            config: Arc::new(Config {
                required: false,
                methods: vec![Method::POST, Method::PATCH],
                max_key_len: DEFAULT_MAX_KEY_LEN,
                max_request_body: DEFAULT_MAX_REQUEST_BODY,
                max_stored_body: DEFAULT_MAX_STORED_BODY,
                principal: None,
                cache_when: Arc::new(|status| !status.is_server_error()),
                dropped_headers: vec![DATE, SET_COOKIE],
                fail_open: false,
                max_retry_after: DEFAULT_MAX_RETRY_AFTER,
                mismatch_status: MismatchStatus::UnprocessableEntity,
                key_source: KeySource::idempotency_key(),
                payload_match: PayloadMatch::Bytes,
                payload_match_set: false,
                deadline_from: None,
                on_replay: None,
                key_docs: None,
                tx: None,
                unguarded_routes: Arc::default(),
            }),
        }
    }
}

impl<S> IdempotencyLayer<S> {
    fn with(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(Arc::make_mut(&mut self.config));
        self
    }

    /// Whether a guarded request without `Idempotency-Key` is refused with 400 (`true`) or passed
    /// to the handler unguarded (`false`, the default).
    pub fn required(self, required: bool) -> Self {
        self.with(|c| c.required = required)
    }

    /// A link to the documentation of the service's idempotency keys, sent as the problem
    /// `type` of the `400` for a missing key (with [`required`](Self::required)): the IETF
    /// draft asks that response to point to the documentation. Default `about:blank`.
    pub fn key_docs(self, url: impl Into<String>) -> Self {
        let url = url.into();
        self.with(|c| c.key_docs = Some(url))
    }

    /// The methods guarded (default POST and PATCH). Others pass through untouched: GET, PUT and
    /// DELETE are idempotent by definition.
    pub fn methods(self, methods: impl IntoIterator<Item = Method>) -> Self {
        let methods = methods.into_iter().collect();
        self.with(|c| c.methods = methods)
    }

    /// Longest key accepted (default [`DEFAULT_MAX_KEY_LEN`]); a longer one is 400.
    pub fn max_key_len(self, max: usize) -> Self {
        self.with(|c| c.max_key_len = max)
    }

    /// Largest request body a guarded request may have (default [`DEFAULT_MAX_REQUEST_BODY`]); a
    /// larger one is 413. The body is buffered to fingerprint it.
    pub fn max_request_body(self, max: usize) -> Self {
        self.with(|c| c.max_request_body = max)
    }

    /// Largest response body stored for replay (default [`DEFAULT_MAX_STORED_BODY`]). A larger
    /// response is sent to its client and the key completed without it; duplicates get 409.
    pub fn max_stored_body(self, max: usize) -> Self {
        self.with(|c| c.max_stored_body = max)
    }

    /// Who sent the request, taken from its parts (typically an extension an authentication
    /// layer inserted): part of the key, so two users sending the same key never share a record.
    /// `None` (and `Some("")`) mean no principal. Add the authentication layer *outside* this one
    /// (with axum, call `.layer(auth)` after `.layer(idempotency)`), so it runs first.
    pub fn principal(
        self,
        principal: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.with(|c| c.principal = Some(Arc::new(principal)))
    }

    /// Which response statuses are stored and replayed (default: all but 5xx). A response it
    /// refuses is sent, and its key released, so a retry runs the handler again.
    pub fn cache_when(self, cache: impl Fn(StatusCode) -> bool + Send + Sync + 'static) -> Self {
        self.with(|c| c.cache_when = Arc::new(cache))
    }

    /// Does not store this response header, so replays go without it (`Date` and `Set-Cookie`
    /// are dropped by default; hop-by-hop headers always are).
    pub fn drop_header(self, name: HeaderName) -> Self {
        self.with(|c| {
            if !c.dropped_headers.contains(&name) {
                c.dropped_headers.push(name);
            }
        })
    }

    /// Stores this response header after all (e.g. `Set-Cookie`, when replaying a session
    /// cookie to the same principal is wanted).
    pub fn keep_header(self, name: HeaderName) -> Self {
        self.with(|c| c.dropped_headers.retain(|dropped| *dropped != name))
    }

    /// When the store cannot be reached: `false` (default) answers 503 and does not run the
    /// handler; `true` runs it unguarded, with a `tracing` warning, so an outage of the store
    /// is not an outage of the service, at the price of duplicates running twice meanwhile.
    pub fn fail_open(self, fail_open: bool) -> Self {
        self.with(|c| c.fail_open = fail_open)
    }

    /// The longest `Retry-After` a 409 sends (default [`DEFAULT_MAX_RETRY_AFTER`], 1 s): the
    /// running request's remaining lease, capped at this. Set it near the handler's usual
    /// duration.
    pub fn max_retry_after(self, max: Duration) -> Self {
        self.with(|c| c.max_retry_after = max)
    }

    /// Where the key comes from (default: the `Idempotency-Key` header). Webhook senders put it
    /// elsewhere: [`KeySource::stripe`], [`KeySource::standard_webhooks`],
    /// [`KeySource::github`], [`KeySource::shopify`], [`KeySource::sns`], or any
    /// [`KeySource::header`], [`KeySource::json_body`] pointer or [`KeySource::from_request`]
    /// function of the headers and the parsed JSON body.
    ///
    /// ```
    /// use idem_guard::http::{IdempotencyLayer, KeySource, PayloadMatch};
    /// use idem_guard::MemoryStore;
    ///
    /// // GitHub redelivers with the same `X-GitHub-Delivery`; compare payloads as JSON values.
    /// let layer = IdempotencyLayer::new(MemoryStore::new())
    ///     .key_source(KeySource::github())
    ///     .payload_match(PayloadMatch::CanonicalJson)
    ///     .required(true);
    /// ```
    pub fn key_source(self, source: KeySource) -> Self {
        self.with(|c| {
            // A provider's preset compares what identifies its deliveries, unless a
            // `payload_match` of the user's says otherwise.
            if !c.payload_match_set {
                c.payload_match = source.preset_payload().cloned().unwrap_or_default();
            }
            c.key_source = source;
        })
    }

    /// The request's own deadline, from now (a timeout header, a gateway's budget): its lease
    /// never outlives it and stops being renewed there, so when the client gives up, its retry
    /// can take the key over then instead of after the guard's whole lease. `None` keeps the
    /// guard's lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_guard::http::IdempotencyLayer;
    /// use idem_guard::MemoryStore;
    ///
    /// let layer = IdempotencyLayer::new(MemoryStore::new()).deadline_from(|parts| {
    ///     let ms = parts.headers.get("x-request-timeout-ms")?.to_str().ok()?.parse().ok()?;
    ///     Some(Duration::from_millis(ms))
    /// });
    /// ```
    pub fn deadline_from(
        self,
        deadline: impl Fn(&Parts) -> Option<Duration> + Send + Sync + 'static,
    ) -> Self {
        self.with(|c| c.deadline_from = Some(Arc::new(deadline)))
    }

    /// Changes every replayed response before it is sent (after `Idempotent-Replayed: true` is
    /// set): add a header, rewrite a field of the body... Fresh responses are not passed to it.
    pub fn on_replay(
        self,
        hook: impl Fn(Response<Body>) -> Response<Body> + Send + Sync + 'static,
    ) -> Self {
        self.with(|c| c.on_replay = Some(Arc::new(hook)))
    }

    /// The status of the refusal of a key reused with another request (method, path, query or
    /// body): `422 Unprocessable Content` by default, as the IETF `Idempotency-Key` draft says,
    /// or `400 Bad Request` for APIs and clients that expect it (Stripe answers 400). The
    /// problem body's `code` stays `idempotency_key_reused` either way.
    ///
    /// ```
    /// use idem_guard::http::{IdempotencyLayer, MismatchStatus};
    /// use idem_guard::MemoryStore;
    ///
    /// let layer = IdempotencyLayer::new(MemoryStore::new()).mismatch_status(MismatchStatus::BadRequest);
    /// # let _ = layer;
    /// ```
    pub fn mismatch_status(self, status: MismatchStatus) -> Self {
        self.with(|c| c.mismatch_status = status)
    }

    /// What of the body must match for a repeat to be replayed instead of refused with 422
    /// (default: every byte, [`PayloadMatch::Bytes`]).
    pub fn payload_match(self, matching: PayloadMatch) -> Self {
        self.with(|c| {
            c.payload_match = matching;
            c.payload_match_set = true;
        })
    }
}

impl IdempotencyLayer<PostgresStore> {
    /// Transactional mode (PostgreSQL), what `#[idempotent(tx = ..)]` is for a function: each
    /// guarded request gets a transaction of the store's pool, the handler writes its effect
    /// through it (the [`RequestTx`] extractor), and the layer reserves the key and stores the
    /// response in the same transaction, then commits once. The effect and the stored response
    /// commit together or not at all: a handler that fails, panics or answers with a response
    /// the layer does not store ([`cache_when`](Self::cache_when): 5xx by default) rolls back
    /// its writes with the reservation, so a retry runs on a clean slate, and a crash before
    /// the commit leaves neither. A request without a key (when not
    /// [`required`](Self::required)) gets its transaction too, committed the same way.
    ///
    /// A concurrent duplicate follows the guard's in-flight policy without waiting on the open
    /// transaction (`409`, or [`InFlight::Wait`](crate::InFlight::Wait) polls until it commits).
    /// A database that cannot be reached, or a commit that fails, is `503`: nothing of the
    /// request was applied. Add the layer to the routes whose effect is in this database (a
    /// `Router` of them, or `route_layer`).
    ///
    /// ```no_run
    /// use axum::{http::StatusCode, routing::post, Router};
    /// use idem_guard::http::{IdempotencyLayer, RequestTx};
    /// use idem_guard::{Guard, PostgresStore};
    ///
    /// async fn credit(tx: RequestTx, body: String) -> Result<String, StatusCode> {
    ///     let cents: i64 = body.trim().parse().map_err(|_| StatusCode::BAD_REQUEST)?;
    ///     let mut conn = tx.lock().await.map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    ///     let balance: i64 = sqlx::query_scalar("UPDATE accounts SET balance = balance + $1 WHERE id = 1 RETURNING balance")
    ///         .bind(cents)
    ///         .fetch_one(&mut *conn)
    ///         .await
    ///         .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    ///     Ok(balance.to_string())
    /// }
    ///
    /// # async fn app() -> Result<Router, idem_guard::Error> {
    /// let store = PostgresStore::connect("postgres://postgres@127.0.0.1:5432/test").await?;
    /// let credits = IdempotencyLayer::from_guard(Guard::new(store).prefix("credits"))
    ///     .required(true)
    ///     .transactional(true);
    /// Ok(Router::new().route("/credits", post(credit)).layer(credits))
    /// # }
    /// ```
    pub fn transactional(self, on: bool) -> Self {
        let guard = self.guard.clone();
        self.with(|c| c.tx = on.then_some(guard))
    }
}

impl<Sv, S> tower::Layer<Sv> for IdempotencyLayer<S> {
    type Service = IdempotencyService<Sv, S>;

    fn layer(&self, inner: Sv) -> Self::Service {
        IdempotencyService {
            inner,
            guard: self.guard.clone(),
            config: self.config.clone(),
        }
    }
}
