//! The connection the cluster store runs over: the `redis` crate's async cluster client,
//! replaced by a fresh one when it stops answering, with the errors a failover or a slot move
//! produces (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, ...) resent instead of returned.
//!
//! Why replace the client: the `redis` crate's cluster client (1.8) runs every request of a
//! connection in one task, and while that task refreshes the slot map (after a node fails or a
//! `MOVED`) it stops polling the requests already in flight. The refresh needs the write lock
//! of the client's connection map; a request in flight that holds that lock, or waits for it
//! ahead of the refresh (the lock is fair), is never polled again, so the refresh waits
//! forever, and with it every later request of that client: each one times out, on every
//! slot, until the process restarts. With hundreds of requests in flight when a primary dies
//! this happens on nearly every failover; with a handful, rarely. A fresh client answers at
//! once. So the store watches its client: when a request has waited `stall` without the
//! client answering anything at all (no reply, no error, to any request), it builds a new
//! client from the same settings and resends the waiting requests on it.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, ServerErrorKind, Value,
};
use tokio::time::Instant;

/// How long a request waits with its client answering nothing before the client is replaced.
const STALL: Duration = Duration::from_secs(3);
/// How often a waiting request looks at its client.
const CHECK_EVERY: Duration = Duration::from_millis(500);
/// How long building a new client may take (it connects to the nodes and reads the slot map).
const REBUILD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request is resent while the cluster answers with redirects or "down" errors: a
/// promotion after `cluster-node-timeout` (Redis's default 15 s) plus the election.
const FAILOVER_PATIENCE: Duration = Duration::from_secs(20);

/// The Redis Cluster connection of [`RedisClusterStore`](crate::RedisClusterStore): the
/// `redis` crate's [`ClusterConnection`], made to survive failovers under load.
///
/// - A request that has waited 3 s (plus the `WAIT` timeout of
///   [`wait_for_replicas`](crate::RedisStore::wait_for_replicas)) while the client answered
///   nothing at all (to any request)
///   means the client is stuck (see the module source for how the `redis` crate's client gets
///   stuck); a new client is built from the same [`ClusterClient`] and every waiting request is
///   resent on it. A connection given by [`RedisStore::from_cluster`](crate::RedisStore::from_cluster)
///   has no client to rebuild from and is never replaced; build the store with
///   [`RedisStore::from_cluster_client`](crate::RedisStore::from_cluster_client) to keep your
///   own settings and the replacement.
/// - `MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN` and `READONLY` replies (a slot
///   moving, a failover under way) and "no connection for this slot" are resent, 100 ms to 1 s
///   apart, for up to 20 s, after the client's own redirections and retries gave up: they
///   reach the caller only when the cluster stays that way.
///
/// Resending is safe for the store's commands: every script it runs is fenced by the
/// attempt's owner token, so a request that ran before its reply was lost has the same effect
/// when it runs again (the cluster client resends requests cut by a failover too).
#[derive(Clone)]
pub struct RedisClusterConnection {
    shared: Arc<Shared>,
}

struct Shared {
    /// What new clients are built from; `None` for a connection given as is.
    client: Option<ClusterClient>,
    current: Mutex<Current>,
    /// One rebuild at a time; the others wait and use its result.
    rebuilding: tokio::sync::Mutex<()>,
    /// Time origin of the two instants below (kept as milliseconds, to be atomics).
    origin: Instant,
    /// When the current client last answered anything (a reply or an error other than a
    /// timeout).
    answered_ms: AtomicU64,
    /// When a rebuild was last tried, so a cluster that is down is not reconnected to by every
    /// waiting request.
    tried_ms: AtomicU64,
    /// How long the client may answer nothing before it is judged stuck: [`STALL`], plus the
    /// longest a healthy server may hold a reply (`WAIT`'s timeout), so that requests waiting
    /// for replicas are not taken for a stuck client, and resent, again and again.
    stall_ms: AtomicU64,
}

struct Current {
    generation: u64,
    conn: ClusterConnection,
}

impl std::fmt::Debug for RedisClusterConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisClusterConnection")
            .field("generation", &self.generation())
            .field("replaceable", &self.shared.client.is_some())
            .finish_non_exhaustive()
    }
}

impl RedisClusterConnection {
    /// Connects through `client`; the connection is replaced from it when it gets stuck.
    pub async fn connect(client: ClusterClient) -> RedisResult<Self> {
        let conn = client.get_async_connection().await?;
        Ok(Self::new(Some(client), conn))
    }

    /// A connection the caller built: redirects are resent, but it is never replaced.
    pub fn fixed(conn: ClusterConnection) -> Self {
        Self::new(None, conn)
    }

    fn new(client: Option<ClusterClient>, conn: ClusterConnection) -> Self {
        RedisClusterConnection {
            shared: Arc::new(Shared {
                client,
                current: Mutex::new(Current {
                    generation: 0,
                    conn,
                }),
                rebuilding: tokio::sync::Mutex::new(()),
                origin: Instant::now(),
                answered_ms: AtomicU64::new(0),
                tried_ms: AtomicU64::new(0),
                stall_ms: AtomicU64::new(STALL.as_millis() as u64),
            }),
        }
    }

    /// Requests may be held by the server up to `longest` (`WAIT`): the client is judged stuck
    /// only after answering nothing for `longest` plus 3 s.
    pub(crate) fn allow_replies_after(&self, longest: Duration) {
        let stall = u64::try_from((STALL + longest).as_millis()).unwrap_or(u64::MAX);
        self.shared.stall_ms.fetch_max(stall, Ordering::Relaxed);
    }

    /// How many times the client was replaced.
    pub fn generation(&self) -> u64 {
        self.shared.current().0
    }

    /// Sends one request (built by `send` on a clone of the current client), watching the
    /// client while it waits, and resends it on a new client or after a failover error.
    async fn call<T, F, Fut>(
        &self,
        mut send: F,
        failover_error: impl Fn(&T) -> Option<RedisError>,
    ) -> RedisResult<T>
    where
        F: FnMut(ClusterConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let shared = &self.shared;
        let started = Instant::now();
        let mut pause = Duration::from_millis(100);
        loop {
            let (generation, conn) = shared.current();
            let sent = Instant::now();
            let request = send(conn);
            tokio::pin!(request);
            let answer = loop {
                tokio::select! {
                    answer = &mut request => break Some(answer),
                    () = tokio::time::sleep(CHECK_EVERY) => {
                        if shared.replace_if_stuck(generation, sent).await {
                            // Dropping the request withdraws it from the stuck client.
                            break None;
                        }
                    }
                }
            };
            let Some(answer) = answer else { continue };
            let error = match answer {
                Ok(value) => match failover_error(&value) {
                    None => {
                        shared.answered();
                        return Ok(value);
                    }
                    Some(e) => e,
                },
                Err(e) => e,
            };
            if !error.is_timeout() {
                shared.answered();
            }
            if !is_failover_error(&error) || started.elapsed() + pause > FAILOVER_PATIENCE {
                return Err(error);
            }
            tracing::debug!(target: "idem_guard::redis", error = %error, "resending after a cluster redirect or failover error");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }
}

impl Shared {
    fn current(&self) -> (u64, ClusterConnection) {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        (current.generation, current.conn.clone())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn answered(&self) {
        self.answered_ms.fetch_max(self.now_ms(), Ordering::Relaxed);
    }

    fn stall(&self) -> Duration {
        Duration::from_millis(self.stall_ms.load(Ordering::Relaxed))
    }

    /// Whether the client has answered nothing since `since`, for at least the stall time.
    fn silent_since(&self, since: Instant) -> bool {
        let answered =
            self.origin + Duration::from_millis(self.answered_ms.load(Ordering::Relaxed));
        answered < since && since.elapsed() >= self.stall()
    }

    /// Replaces the client of `generation` when it has been silent since `sent` (the request
    /// asking) for [`STALL`]. True when the request should be resent: the client was replaced,
    /// here or by another request.
    async fn replace_if_stuck(&self, generation: u64, sent: Instant) -> bool {
        let Some(client) = &self.client else {
            return false;
        };
        if self.current().0 != generation {
            return true;
        }
        if !self.silent_since(sent) {
            return false;
        }
        let _one = self.rebuilding.lock().await;
        if self.current().0 != generation {
            return true;
        }
        let tried = self.tried_ms.load(Ordering::Relaxed);
        if tried != 0 && Duration::from_millis(self.now_ms().saturating_sub(tried)) < self.stall() {
            return false;
        }
        self.tried_ms.store(self.now_ms().max(1), Ordering::Relaxed);
        match tokio::time::timeout(REBUILD_TIMEOUT, client.get_async_connection()).await {
            Ok(Ok(conn)) => {
                let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
                current.generation += 1;
                current.conn = conn;
                tracing::warn!(
                    target: "idem_guard::redis",
                    generation = current.generation,
                    "the Redis Cluster client answered nothing for {:?}: replaced by a new one, waiting requests resent",
                    self.stall()
                );
                drop(current);
                // The new client gets its own stall time before it can be judged.
                self.answered();
                true
            }
            Ok(Err(e)) => {
                tracing::warn!(target: "idem_guard::redis", error = %e, "the Redis Cluster client is stuck and a new one could not connect");
                false
            }
            Err(_) => {
                tracing::warn!(target: "idem_guard::redis", "the Redis Cluster client is stuck and a new one did not connect within {REBUILD_TIMEOUT:?}");
                false
            }
        }
    }
}

/// The errors of a cluster in motion: a slot served elsewhere (`MOVED`, `ASK`), a slot being
/// migrated or a cluster without a primary for it for now (`TRYAGAIN`, `CLUSTERDOWN`,
/// `MASTERDOWN`), a write reaching a primary just demoted (`READONLY`), or a client that has no
/// connection for the slot yet.
fn is_failover_error(e: &RedisError) -> bool {
    match e.kind() {
        ErrorKind::Server(kind) => matches!(
            kind,
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ReadOnly
        ),
        ErrorKind::ClusterConnectionNotFound => true,
        _ => false,
    }
}

/// A failover error a reply carries as a value (a pipeline's reply holds one per command).
fn failover_error_in(value: &Value) -> Option<RedisError> {
    match value {
        Value::ServerError(e) => {
            let e = RedisError::from(e.clone());
            is_failover_error(&e).then_some(e)
        }
        _ => None,
    }
}

fn failover_error_in_all(values: &[Value]) -> Option<RedisError> {
    values.iter().find_map(failover_error_in)
}

impl redis::aio::ConnectionLike for RedisClusterConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(self.call(
            move |mut conn| async move { conn.req_packed_command(cmd).await },
            failover_error_in,
        ))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.call(
            move |mut conn| async move { conn.req_packed_commands(pipeline, offset, count).await },
            |values: &Vec<Value>| failover_error_in_all(values),
        ))
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(text: &str) -> RedisError {
        match redis::parse_redis_value(text.as_bytes()).unwrap() {
            Value::ServerError(e) => e.into(),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn failover_errors_are_resent_others_are_not() {
        for text in [
            "-MOVED 3999 127.0.0.1:6381\r\n",
            "-ASK 3999 127.0.0.1:6381\r\n",
            "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
            "-CLUSTERDOWN The cluster is down\r\n",
            "-MASTERDOWN Link with MASTER is down\r\n",
            "-READONLY You can't write against a read only replica.\r\n",
        ] {
            assert!(is_failover_error(&server_error(text)), "{text}");
        }
        for text in [
            "-ERR wrong number of arguments\r\n",
            "-NOSCRIPT No matching script\r\n",
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
        ] {
            assert!(!is_failover_error(&server_error(text)), "{text}");
        }
        let moved = redis::parse_redis_value(b"-MOVED 1 127.0.0.1:1\r\n").unwrap();
        assert!(failover_error_in_all(&[Value::Int(1), moved]).is_some());
        assert!(failover_error_in_all(&[Value::Int(1), Value::Nil]).is_none());
    }
}
