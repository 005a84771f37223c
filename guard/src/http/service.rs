//! The middleware: one request through the guard.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response, StatusCode};
use axum::BoxError;
use http_body_util::BodyExt;
use tokio::time::Instant;
use tower::Service;
use tracing::Instrument as _;

use super::request::{self, BodyError};
use super::response::{in_progress, problem, typed_problem, StoredResponse};
use super::Config;
use crate::{Error, Fingerprint, Guard, Rejected, Store};

/// The service [`IdempotencyLayer`](super::IdempotencyLayer) wraps around an inner one.
#[derive(Debug, Clone)]
pub struct IdempotencyService<Sv, S> {
    pub(super) inner: Sv,
    pub(super) guard: Arc<Guard<S>>,
    pub(super) config: Arc<Config>,
}

impl<Sv, S, B, ResB> Service<Request<B>> for IdempotencyService<Sv, S>
where
    Sv: Service<Request<Body>, Response = Response<ResB>> + Clone + Send + 'static,
    Sv::Future: Send,
    Sv::Error: Send + 'static,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    S: Store + 'static,
{
    type Response = Response<Body>;
    type Error = Sv::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Sv::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The instance that was polled ready serves this request; the clone waits for the next.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        Box::pin(handle(
            inner,
            self.guard.clone(),
            self.config.clone(),
            request,
        ))
    }
}

/// Why the guarded body did not produce a response to store.
enum Failure<E> {
    /// The guard refused, or could not reach its store.
    Guard(Error),
    /// A response the configuration does not cache (a 5xx by default): sent as it is, and the
    /// reservation released so a retry runs again.
    Uncached(Response<Body>),
    /// The inner service failed; the reservation is released.
    Inner(E),
}

impl<E> From<Error> for Failure<E> {
    fn from(e: Error) -> Self {
        Failure::Guard(e)
    }
}

/// What the layer does with a request, decided before the guard is asked.
enum Admission {
    /// Not guarded: another method.
    PassThrough(Request<Body>),
    /// A guarded method with no key, none required: runs unguarded, and is counted and logged
    /// (a key source that finds nothing would otherwise switch the guard off silently).
    Unguarded {
        request: Request<Body>,
        route: String,
    },
    /// Refused before the guard: a bad or missing key, a body too large or unreadable.
    Refuse(Response<Body>),
    /// Guarded: the guard's key, the payload fingerprint, the request's own deadline (from now),
    /// and the request with its body buffered.
    Guard {
        key: String,
        fingerprint: Fingerprint,
        deadline: Option<Duration>,
        request: Request<Body>,
    },
}

async fn admit<B>(request: Request<B>, config: &Config) -> Admission
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    if !config.methods.contains(request.method()) {
        return Admission::PassThrough(request.map(Body::new));
    }
    let (parts, body) = request.into_parts();
    // A key in a header is read before the body, so that a request without one passes through
    // unbuffered; a key in the body needs the body first.
    let (client_key, body) = match config.key_source.header_name() {
        Some(name) => (
            request::client_key(&parts.headers, name, config.max_key_len),
            Body::new(body),
        ),
        None => match buffered(body, config).await {
            Ok(body) => {
                let json = serde_json::from_slice::<serde_json::Value>(&body).ok();
                let found = config.key_source.find_in_body(&parts, json.as_ref());
                let key = found
                    .map(|k| request::checked_key(k.as_bytes(), config.max_key_len))
                    .transpose();
                (key, Body::from(body))
            }
            Err(refusal) => return Admission::Refuse(refusal),
        },
    };
    let client_key = match client_key {
        Ok(Some(key)) => key,
        Ok(None) if config.required => {
            return Admission::Refuse(typed_problem(
                StatusCode::BAD_REQUEST,
                config.key_docs.as_deref().unwrap_or("about:blank"),
                "idempotency_key_missing",
                "this operation requires an idempotency key (the Idempotency-Key header, or where the service said to look)",
            ));
        }
        Ok(None) => {
            return Admission::Unguarded {
                route: request::route(&parts),
                request: Request::from_parts(parts, body),
            }
        }
        Err(bad) => {
            return Admission::Refuse(problem(
                StatusCode::BAD_REQUEST,
                "idempotency_key_invalid",
                &bad.to_string(),
            ))
        }
    };
    let body = match buffered(body, config).await {
        Ok(body) => body,
        Err(refusal) => return Admission::Refuse(refusal),
    };
    let json = if config.payload_match.needs_json() {
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(json) => Some(json),
            Err(e) => {
                return Admission::Refuse(problem(
                    StatusCode::BAD_REQUEST,
                    "request_body_not_json",
                    &format!(
                    "this operation compares request bodies as JSON, and this one is not JSON: {e}"
                ),
                ))
            }
        }
    } else {
        None
    };
    let principal = config.principal.as_ref().and_then(|of| of(&parts));
    let deadline = config.deadline_from.as_ref().and_then(|of| of(&parts));
    let key = request::guard_key(principal.as_deref(), &request::route(&parts), &client_key);
    match request::fingerprint(&parts, &body, json.as_ref(), &config.payload_match) {
        Ok(fingerprint) => Admission::Guard {
            key,
            fingerprint,
            deadline,
            request: request::rebuild(parts, body),
        },
        Err(e) => Admission::Refuse(refusal(&e, config)),
    }
}

/// The whole body (at most the configured size), or the refusal to send.
async fn buffered<B>(body: B, config: &Config) -> Result<Bytes, Response<Body>>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    match request::buffer_body(body, config.max_request_body).await {
        Ok(body) => Ok(body),
        Err(BodyError::TooLarge { max }) => {
            let detail = format!(
                "the request body is larger than the {max} bytes a guarded request may have"
            );
            Err(problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_body_too_large",
                &detail,
            ))
        }
        Err(BodyError::Read(why)) => Err(problem(
            StatusCode::BAD_REQUEST,
            "request_body_unreadable",
            &format!("the request body could not be read: {why}"),
        )),
    }
}

async fn handle<Sv, S, B, ResB>(
    mut inner: Sv,
    guard: Arc<Guard<S>>,
    config: Arc<Config>,
    request: Request<B>,
) -> Result<Response<Body>, Sv::Error>
where
    Sv: Service<Request<Body>, Response = Response<ResB>> + Send + 'static,
    Sv::Future: Send,
    Sv::Error: Send + 'static,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    S: Store + 'static,
{
    let (guard, key, fingerprint, request) = match admit(request, &config).await {
        Admission::PassThrough(request) => return pass_through(&mut inner, request).await,
        Admission::Unguarded { request, route } => {
            let span = crate::observe::span(guard.prefix_name(), None);
            return async {
                crate::observe::outcome(guard.prefix_name(), crate::observe::Seen::Unguarded);
                if config.first_unguarded(&route) {
                    tracing::warn!(
                        prefix = guard.prefix_name(),
                        route,
                        "a request of a guarded method came without an idempotency key and ran unguarded (logged once per route; `required(true)` answers 400 instead)"
                    );
                }
                match &config.tx {
                    Some(tx_guard) => {
                        super::tx::unguarded_in_tx(&mut inner, tx_guard, &config, request).await
                    }
                    None => pass_through(&mut inner, request).await,
                }
            }
            .instrument(span)
            .await;
        }
        Admission::Refuse(response) => return Ok(response),
        Admission::Guard {
            key,
            fingerprint,
            deadline,
            request,
        } => {
            // The request's own deadline bounds its lease: a client that gives up after 5 s
            // frees the key for its retry then, not after the guard's whole lease.
            if let Some(tx_guard) = &config.tx {
                // Spawned for the same reason as below: the commit must not be dropped with a
                // request whose client hung up.
                let guarded = super::tx::guarded_in_tx(
                    inner,
                    bounded(tx_guard.clone(), deadline),
                    config.clone(),
                    key,
                    fingerprint,
                    request,
                );
                return joined(tokio::spawn(guarded).await);
            }
            (bounded(guard, deadline), key, fingerprint, request)
        }
    };
    // From the reservation on, the handler and the completion run in a task of their own: when
    // the client hangs up, hyper drops this future, and a completion dropped with it would leave
    // an effect unrecorded, to be made again by the retry that takes the key over.
    let guarded = tokio::spawn(guarded(inner, guard, config, key, fingerprint, request));
    joined(guarded.await)
}

/// The guard with its lease bounded by the request's own deadline (from now), if it has one.
fn bounded<S: Clone>(guard: Arc<Guard<S>>, deadline: Option<Duration>) -> Arc<Guard<S>> {
    match deadline {
        Some(left) => Arc::new((*guard).clone().deadline(Instant::now() + left)),
        None => guard,
    }
}

/// The response of the task that ran a guarded request.
fn joined<E>(
    task: Result<Result<Response<Body>, E>, tokio::task::JoinError>,
) -> Result<Response<Body>, E> {
    match task {
        Ok(response) => response,
        // The handler panicked: the request fails as it would have without the layer.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Ok(internal_error()),
    }
}

/// One admitted request through the guard: the handler's response, a replay, or a refusal.
async fn guarded<Sv, S, ResB>(
    mut inner: Sv,
    guard: Arc<Guard<S>>,
    config: Arc<Config>,
    key: String,
    fingerprint: Fingerprint,
    request: Request<Body>,
) -> Result<Response<Body>, Sv::Error>
where
    Sv: Service<Request<Body>, Response = Response<ResB>> + Send,
    Sv::Future: Send,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
    S: Store,
{
    // The body takes the request from `pending` and leaves the response it sends in `fresh`, so
    // both are still here when the guard did not run it (fail-open) or could not record it.
    let mut pending = Some(request);
    let mut fresh = None;
    let outcome = {
        let (inner, pending, fresh, config) = (&mut inner, &mut pending, &mut fresh, &*config);
        guard
            .run_outcome(key.as_str(), fingerprint, move || {
                run_and_capture(inner, pending, fresh, config)
            })
            .await
    };
    let error = match outcome {
        Ok(stored) if stored.is_replay() => {
            let replay = stored.into_inner().replay();
            return Ok(match &config.on_replay {
                Some(hook) => hook(replay),
                None => replay,
            });
        }
        Ok(_) => return Ok(fresh.unwrap_or_else(internal_error)),
        Err(Failure::Uncached(response)) => return Ok(response),
        Err(Failure::Inner(e)) => return Err(e),
        Err(Failure::Guard(e)) => e,
    };
    if let Some(response) = fresh {
        // The handler ran and its response is real; only recording it failed. The client gets it
        // (a 5xx would make it retry an effect that happened); duplicates get 409 until the
        // record's lease ends.
        tracing::error!(key_hash = %crate::observe::key_hash(&key), error = %error, "the response was sent but could not be recorded for replay");
        return Ok(response);
    }
    match (error, pending) {
        (Error::Store(e), Some(request)) if config.fail_open => {
            tracing::warn!(key_hash = %crate::observe::key_hash(&key), error = %e, "idempotency store unavailable; running the request unguarded (fail-open)");
            pass_through(&mut inner, request).await
        }
        (e, _) => Ok(refusal_logged(&key, &e, &config)),
    }
}

/// The handler's response body, read whole to be stored; a body that fails to read becomes a
/// 500 problem, logged with what happens next (`then`: the key is released, the transaction
/// rolled back).
pub(super) async fn read_body<ResB>(body: ResB, then: &str) -> Result<Bytes, Response<Body>>
where
    ResB: HttpBody<Data = Bytes>,
    ResB::Error: Into<BoxError>,
{
    match body.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => {
            let why: BoxError = e.into();
            tracing::error!(error = %why, "the response body failed; {then}");
            Err(problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "response_body_failed",
                "the handler's response body failed while it was being read",
            ))
        }
    }
}

/// The guarded body: calls the inner service, and returns what to store of its response (or the
/// response to send without storing it).
async fn run_and_capture<Sv, ResB>(
    inner: &mut Sv,
    pending: &mut Option<Request<Body>>,
    fresh: &mut Option<Response<Body>>,
    config: &Config,
) -> Result<StoredResponse, Failure<Sv::Error>>
where
    Sv: Service<Request<Body>, Response = Response<ResB>>,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    // The guard calls its body at most once, so the request is there.
    let request = pending
        .take()
        .ok_or_else(|| Failure::Uncached(internal_error()))?;
    let response = inner.call(request).await.map_err(Failure::Inner)?;
    if !(config.cache_when)(response.status()) {
        return Err(Failure::Uncached(response.map(Body::new)));
    }
    let (parts, body) = response.into_parts();
    let body = read_body(body, "releasing the key")
        .await
        .map_err(Failure::Uncached)?;
    let stored = StoredResponse::capture(
        &parts,
        &body,
        &config.dropped_headers,
        config.max_stored_body,
    );
    *fresh = Some(Response::from_parts(parts, Body::from(body)));
    Ok(stored)
}

/// Sends a request the layer does not guard straight to the inner service.
async fn pass_through<Sv, B, ResB>(
    inner: &mut Sv,
    request: Request<B>,
) -> Result<Response<Body>, Sv::Error>
where
    Sv: Service<Request<Body>, Response = Response<ResB>>,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let response = inner.call(request.map(Body::new)).await?;
    Ok(response.map(Body::new))
}

pub(super) fn refusal_logged(key: &str, e: &Error, config: &Config) -> Response<Body> {
    if matches!(e, Error::Store(_)) {
        tracing::error!(key_hash = %crate::observe::key_hash(key), error = %e, "idempotency store unavailable; the request was refused");
    }
    refusal(e, config)
}

/// The answer to a request the guard did not run (IETF `Idempotency-Key` draft, section 2.7).
fn refusal(e: &Error, config: &Config) -> Response<Body> {
    match e {
        Error::Rejected(Rejected::InProgress { retry_after, .. }) => {
            in_progress((*retry_after).min(config.max_retry_after))
        }
        Error::Rejected(Rejected::PayloadMismatch { .. }) => problem(
            config.mismatch_status.status(),
            "idempotency_key_reused",
            "this Idempotency-Key was already used for a different request (method, path, query or body differ)",
        ),
        Error::Store(_) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "idempotency_store_unavailable",
            "the idempotency store cannot be reached, so the request was not processed; retry later",
        ),
        Error::InvalidKey(why) => problem(
            StatusCode::BAD_REQUEST,
            "idempotency_key_invalid",
            &format!("the Idempotency-Key cannot be used: {why}"),
        ),
        Error::Decode { reason, .. } => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "idempotency_record_unreadable",
            &format!("the stored response of this Idempotency-Key cannot be replayed: {reason}"),
        ),
        Error::ResultTooLarge { len, limit, .. } => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "idempotency_response_too_large",
            &format!("the response ({len} bytes encoded) is over the idempotency store's limit of {limit} bytes, so it was not stored; this key will not run again"),
        ),
        Error::MissingKey | Error::NotOwner { .. } | Error::Payload(_) => internal_error(),
    }
}

pub(super) fn internal_error() -> Response<Body> {
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "idempotency_internal_error",
        "the idempotency layer failed",
    )
}
