//! Building the Redis store over Redis Cluster (feature `redis-cluster`).

use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;

use super::cluster_conn::RedisClusterConnection;
use super::{warn_about_durability, RedisStore};
use crate::Error;

/// The cluster store: [`RedisStore`] over a [`RedisClusterConnection`] (the `redis` crate's
/// cluster client, replaced when it gets stuck).
pub type RedisClusterStore = RedisStore<RedisClusterConnection>;

impl RedisStore<RedisClusterConnection> {
    /// Connects to a Redis Cluster through any of its `nodes` (`redis://host:port` each; the
    /// client learns the others and the slot map from them).
    ///
    /// The client follows `MOVED` and `ASK` redirections and, when a node fails, refreshes the
    /// slot map and resends the request: up to 6 times, 100 ms to 2 s apart (long enough for a
    /// replica to be promoted after a `cluster-node-timeout` of a few seconds), each connection
    /// and each answer waited for at most 5 s, the whole call at most 15 s. Past that the call
    /// fails with [`Error::Store`], and the guard's own retries take over: a completion is
    /// retried until the attempt's lease ends. (Short per-node timeouts matter: a node that
    /// stops answering without closing its connections would otherwise hold up the client's
    /// slot refreshes, and with them every call.) A client that stops answering altogether (the
    /// `redis` crate's client can lock itself up during a failover under load) is replaced,
    /// and redirects a failover leaves are resent: see [`RedisClusterConnection`]. For other
    /// settings (TLS, credentials, timeouts) build the client yourself and pass it to
    /// [`from_cluster_client`](Self::from_cluster_client).
    ///
    /// Like [`connect`](RedisStore::connect), warns about persistence settings that can lose
    /// records, as one node reports them (`CONFIG GET`).
    pub async fn connect_cluster<S: AsRef<str>>(
        nodes: impl IntoIterator<Item = S>,
    ) -> Result<Self, Error> {
        let nodes: Vec<String> = nodes.into_iter().map(|n| n.as_ref().to_owned()).collect();
        if nodes.is_empty() {
            return Err(Error::store("no Redis Cluster node given"));
        }
        let client = ClusterClientBuilder::new(nodes)
            .connection_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_secs(5))
            .overall_response_timeout(Some(Duration::from_secs(15)))
            .retries(6)
            .min_retry_wait(100)
            .max_retry_wait(2_000)
            .build()
            .map_err(Error::store)?;
        Self::from_cluster_client(client).await
    }

    /// Connects through a cluster client configured by the caller; the connection is rebuilt
    /// from `client` when it gets stuck (see [`RedisClusterConnection`]). Warns about
    /// persistence settings as [`connect_cluster`](Self::connect_cluster) does.
    pub async fn from_cluster_client(client: ClusterClient) -> Result<Self, Error> {
        let mut conn = RedisClusterConnection::connect(client)
            .await
            .map_err(Error::store)?;
        warn_about_durability(&mut conn).await;
        Ok(Self::over(conn))
    }

    /// Wraps a cluster connection configured by the caller. Redirects a failover leaves are
    /// resent, but with no client to rebuild it from, a connection that gets stuck stays
    /// stuck: prefer [`from_cluster_client`](Self::from_cluster_client).
    pub fn from_cluster(conn: ClusterConnection) -> Self {
        Self::over(RedisClusterConnection::fixed(conn))
    }
}
