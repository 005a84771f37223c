//! Transactional mode of the layer (PostgreSQL): the handler writes through the request's
//! transaction, in which the layer also reserves and completes the key, then commits once.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Request, Response, StatusCode};
use axum::BoxError;
use sqlx::{PgConnection, Postgres, Transaction};
use tower::Service;

use super::response::{problem, StoredResponse};
use super::service::{internal_error, read_body, refusal_logged};
use super::Config;
use crate::{Error, Fingerprint, Guard, PostgresStore, TxStart};

type Shared = Arc<tokio::sync::Mutex<Option<Transaction<'static, Postgres>>>>;

/// The request's PostgreSQL transaction, opened by an
/// [`IdempotencyLayer`](super::IdempotencyLayer) in transactional mode
/// ([`transactional`](super::IdempotencyLayer::transactional)): write the request's effect
/// through it, and the layer commits it with the key's completion, or rolls both back. An axum
/// extractor (and a request extension).
///
/// ```no_run
/// use axum::http::StatusCode;
/// use idem_guard::http::RequestTx;
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
/// ```
#[derive(Clone, Debug)]
pub struct RequestTx(Shared);

/// The connection of a [`RequestTx`], locked for the statements of its holder.
#[derive(Debug)]
pub struct TxConnection<'a>(tokio::sync::MutexGuard<'a, Option<Transaction<'static, Postgres>>>);

impl RequestTx {
    fn new(tx: Transaction<'static, Postgres>) -> Self {
        RequestTx(Arc::new(tokio::sync::Mutex::new(Some(tx))))
    }

    /// The transaction's connection, for one statement or several (hold it across them).
    /// Fails once the layer has finished the request (a clone kept past the handler).
    pub async fn lock(&self) -> Result<TxConnection<'_>, Error> {
        let tx = self.0.lock().await;
        if tx.is_none() {
            return Err(Error::store(
                "the request's transaction has ended: the layer committed or rolled it back",
            ));
        }
        Ok(TxConnection(tx))
    }

    /// The transaction back from the handler (waiting for a holder to let go).
    async fn take(&self) -> Option<Transaction<'static, Postgres>> {
        self.0.lock().await.take()
    }
}

impl Deref for TxConnection<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        // `lock` only makes a `TxConnection` of a transaction that is there, and only `take`,
        // under the same lock, removes it.
        self.0.as_deref().expect("checked in `lock`")
    }
}

impl DerefMut for TxConnection<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.0.as_deref_mut().expect("checked in `lock`")
    }
}

impl<St: Send + Sync> FromRequestParts<St> for RequestTx {
    type Rejection = Response<Body>;

    async fn from_request_parts(parts: &mut Parts, _: &St) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<RequestTx>().cloned().ok_or_else(|| {
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "idempotency_no_transaction",
                "this handler takes the request's transaction, but no transactional IdempotencyLayer runs in front of it",
            )
        })
    }
}

/// Why the handler's transaction was not committed.
enum Abandoned<E> {
    /// A response not to store (a 5xx by default): sent as it is.
    Send(Response<Body>),
    Inner(E),
}

/// Calls the handler with the request's transaction, and gives the transaction back with the
/// response (buffered) when it is one to commit.
async fn call_in_tx<Sv, ResB>(
    inner: &mut Sv,
    tx: Transaction<'static, Postgres>,
    mut request: Request<Body>,
    config: &Config,
) -> Result<
    (
        Transaction<'static, Postgres>,
        axum::http::response::Parts,
        Bytes,
    ),
    Abandoned<Sv::Error>,
>
where
    Sv: Service<Request<Body>, Response = Response<ResB>>,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    let shared = RequestTx::new(tx);
    request.extensions_mut().insert(shared.clone());
    let called = inner.call(request).await;
    // Dropping the transaction rolls it back: a failed handler leaves nothing.
    let tx = shared.take().await;
    let response = called.map_err(Abandoned::Inner)?;
    if !(config.cache_when)(response.status()) {
        return Err(Abandoned::Send(response.map(Body::new)));
    }
    let (parts, body) = response.into_parts();
    let body = read_body(body, "rolling the request's transaction back")
        .await
        .map_err(Abandoned::Send)?;
    let tx = tx.ok_or_else(|| Abandoned::Send(internal_error()))?;
    Ok((tx, parts, body))
}

/// The refusal for a transaction that could not be opened or committed: the store (the
/// database) is unavailable, and nothing of the request was applied.
fn database_down(key: &str, e: sqlx::Error, config: &Config) -> Response<Body> {
    refusal_logged(key, &Error::store(e), config)
}

/// One admitted request in transactional mode: the reservation, the handler's writes and the
/// completion in one transaction, committed once.
pub(super) async fn guarded_in_tx<Sv, ResB>(
    mut inner: Sv,
    guard: Arc<Guard<PostgresStore>>,
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
{
    let mut tx = match guard.store().pool().begin().await {
        Ok(tx) => tx,
        Err(e) => return Ok(database_down(&key, e, &config)),
    };
    let started = guard
        .begin_in_tx::<_, _, _, StoredResponse, Error>(&mut tx, key.as_str(), fingerprint)
        .await;
    let attempt = match started {
        Ok(TxStart::Run(attempt)) => attempt,
        // A replay or a refusal: the transaction wrote nothing and is rolled back.
        Ok(TxStart::Done(Ok(stored))) => {
            let replay = stored.into_inner().replay();
            return Ok(match &config.on_replay {
                Some(hook) => hook(replay),
                None => replay,
            });
        }
        Ok(TxStart::Done(Err(e))) | Err(e) => return Ok(refusal_logged(&key, &e, &config)),
    };
    let (mut tx, parts, body) = match call_in_tx(&mut inner, tx, request, &config).await {
        Ok(called) => called,
        // Rolled back: the handler's writes and the reservation, so a retry runs again.
        Err(Abandoned::Send(response)) => return Ok(response),
        Err(Abandoned::Inner(e)) => return Err(e),
    };
    let stored = StoredResponse::capture(
        &parts,
        &body,
        &config.dropped_headers,
        config.max_stored_body,
    );
    // A result over the store's limit comes back as an error: rolled back with the handler's
    // writes, so nothing of the request happened.
    if let Err(e) = attempt
        .finish(&guard, &mut tx, Ok::<_, Error>(stored))
        .await
    {
        return Ok(refusal_logged(&key, &e, &config));
    }
    match tx.commit().await {
        Ok(()) => Ok(Response::from_parts(parts, Body::from(body))),
        Err(e) => Ok(database_down(&key, e, &config)),
    }
}

/// A request without a key in transactional mode: the handler still gets its transaction,
/// committed when the response is one the layer would store.
pub(super) async fn unguarded_in_tx<Sv, ResB>(
    inner: &mut Sv,
    guard: &Guard<PostgresStore>,
    config: &Config,
    request: Request<Body>,
) -> Result<Response<Body>, Sv::Error>
where
    Sv: Service<Request<Body>, Response = Response<ResB>>,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    let tx = match guard.store().pool().begin().await {
        Ok(tx) => tx,
        Err(e) => return Ok(database_down("", e, config)),
    };
    let (tx, parts, body) = match call_in_tx(inner, tx, request, config).await {
        Ok(called) => called,
        Err(Abandoned::Send(response)) => return Ok(response),
        Err(Abandoned::Inner(e)) => return Err(e),
    };
    match tx.commit().await {
        Ok(()) => Ok(Response::from_parts(parts, Body::from(body))),
        Err(e) => Ok(database_down("", e, config)),
    }
}
