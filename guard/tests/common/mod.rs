//! Connections to the test services, one namespace per test, and a TCP proxy to cut them.
#![allow(dead_code)] // Each test binary uses a different part.

#[cfg(feature = "redis-cluster")]
pub mod cluster;
pub mod counts;
#[cfg(feature = "redis-cluster")]
pub mod failover;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "redis-cluster")]
pub mod recovery;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_guard::{MemoryStore, PostgresStore, RedisStore};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A name no other test and no earlier run uses, for Redis keys (which outlive the test).
pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("t-{name}-{}-{nanos}", std::process::id())
}

/// A fresh schema named after the test; pools built by [`pg_pool`] resolve tables in it.
pub async fn pg_schema(name: &str) -> String {
    let schema = format!("idem_t_{}", name.replace(['-', ':'], "_"));
    let admin = PgPool::connect(&database_url())
        .await
        .expect("PostgreSQL at DATABASE_URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
    )))
    .execute(&admin)
    .await
    .unwrap();
    admin.close().await;
    schema
}

pub async fn pg_pool(schema: &str, max: u32) -> PgPool {
    pg_pool_at(&database_url(), schema, max).await
}

/// How long a test client waits for a local server before failing: generous, because a busy
/// CI machine (two cores, a workspace compiling beside the tests) can stall a local server for
/// seconds, and tests that count effects must not fail on latency. Fault tests that need a
/// failure to come fast set their own short timeouts.
pub const LOCAL_SERVER_PATIENCE: Duration = Duration::from_secs(60);

pub async fn pg_pool_at(url: &str, schema: &str, max: u32) -> PgPool {
    let options: PgConnectOptions = url.parse().unwrap();
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(LOCAL_SERVER_PATIENCE)
        .connect_with(options.options([("search_path", schema)]))
        .await
        .expect("PostgreSQL at DATABASE_URL")
}

/// Waits until every connection of `pool` is back in it: a connection returned to a `PgPool`
/// is pinged by a task of the pool's own, and only then counted idle. Waits on the pool, not
/// on a clock (up to [`LOCAL_SERVER_PATIENCE`], for a pool that would never settle).
pub async fn pool_settled(pool: &PgPool) {
    let deadline = tokio::time::Instant::now() + LOCAL_SERVER_PATIENCE;
    while pool.num_idle() < pool.size() as usize {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool kept a connection out for {LOCAL_SERVER_PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub async fn postgres_store(schema: &str) -> PostgresStore {
    PostgresStore::from_pool(pg_pool(schema, 4).await)
        .await
        .unwrap()
}

/// A Redis store whose client waits for the server as long as [`LOCAL_SERVER_PATIENCE`].
pub async fn redis_store() -> RedisStore {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(LOCAL_SERVER_PATIENCE))
        .set_response_timeout(Some(LOCAL_SERVER_PATIENCE));
    let client = redis::Client::open(redis_url()).unwrap();
    RedisStore::new(
        ConnectionManager::new_with_config(client, config)
            .await
            .expect("Redis at REDIS_URL"),
    )
}

/// The nodes of the local Redis Cluster (`.ci/run` starts one on ports 7101-7106 and exports
/// `REDIS_CLUSTER_URLS`, comma-separated).
#[cfg(feature = "redis-cluster")]
pub fn redis_cluster_urls() -> Vec<String> {
    std::env::var("REDIS_CLUSTER_URLS")
        .unwrap_or_else(|_| {
            (7101..=7106)
                .map(|p| format!("redis://127.0.0.1:{p}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .split(',')
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect()
}

/// A cluster client whose requests wait as long as [`LOCAL_SERVER_PATIENCE`], resent on
/// `MOVED`/`ASK` and node failures.
#[cfg(feature = "redis-cluster")]
pub async fn redis_cluster_connection(nodes: &[String]) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
        .connection_timeout(LOCAL_SERVER_PATIENCE)
        .response_timeout(LOCAL_SERVER_PATIENCE)
        .retries(10)
        .min_retry_wait(100)
        .max_retry_wait(2_000)
        .build()
        .unwrap()
        .get_async_connection()
        .await
        .expect("Redis Cluster at REDIS_CLUSTER_URLS (.ci/run starts one)")
}

/// The store over the local Redis Cluster, with a patient client.
#[cfg(feature = "redis-cluster")]
pub async fn redis_cluster_store() -> idem_guard::RedisClusterStore {
    RedisStore::from_cluster(redis_cluster_connection(&redis_cluster_urls()).await)
}

/// A Redis store that retries once and briefly, for fault tests through a [`Proxy`]: a proxy
/// that is down refuses or closes connections at once, so failures come fast without a short
/// timeout, and a slow machine does not turn an answer into a failure.
pub async fn redis_store_at(url: &str) -> RedisStore {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(LOCAL_SERVER_PATIENCE))
        .set_response_timeout(Some(LOCAL_SERVER_PATIENCE))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(100));
    let client = redis::Client::open(url).unwrap();
    RedisStore::new(
        ConnectionManager::new_with_config(client, config)
            .await
            .unwrap(),
    )
}

/// The local DynamoDB-compatible server (`.ci/run` starts moto there).
#[cfg(feature = "dynamodb")]
pub fn dynamodb_endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:5124".into())
}

/// A store on a fresh table named after the test, at `DYNAMODB_ENDPOINT`.
#[cfg(feature = "dynamodb")]
pub async fn dynamodb_store(name: &str) -> idem_guard::DynamoDbStore {
    dynamodb_store_at(&dynamodb_endpoint(), &unique(name)).await
}

/// A client of the local server whose attempts may take as long as [`LOCAL_SERVER_PATIENCE`]
/// (`local_client` gives each 3 s, which a loaded CI machine exceeded once: "operation attempt
/// timeout (single attempt) occurred after 3s"). The store's own per-call timeout still bounds
/// each call; tests that want a failure fast set that.
#[cfg(feature = "dynamodb")]
pub fn dynamodb_client(endpoint: &str) -> idem_guard::aws_sdk_dynamodb::Client {
    use idem_guard::aws_sdk_dynamodb::config::timeout::TimeoutConfig;
    let local = idem_guard::dynamodb::local_client(endpoint);
    let patient = TimeoutConfig::builder()
        .connect_timeout(LOCAL_SERVER_PATIENCE)
        .operation_attempt_timeout(LOCAL_SERVER_PATIENCE)
        .build();
    let config = local.config().to_builder().timeout_config(patient).build();
    idem_guard::aws_sdk_dynamodb::Client::from_conf(config)
}

/// A store on the table `table` (created if missing) at `endpoint`, with a patient client
/// ([`dynamodb_client`]) and the store's default per-call timeout.
#[cfg(feature = "dynamodb")]
pub async fn dynamodb_store_at(endpoint: &str, table: &str) -> idem_guard::DynamoDbStore {
    let client = dynamodb_client(endpoint);
    let store = idem_guard::DynamoDbStore::new(client, table);
    store
        .create_table_if_missing()
        .await
        .expect("a DynamoDB-compatible server at DYNAMODB_ENDPOINT (.ci/run starts moto)");
    store
}

/// The attribute names of [`dynamodb_custom_store`]'s table: a single-table layout (`PK`,
/// `SK`) with every record attribute renamed.
#[cfg(feature = "dynamodb")]
pub fn custom_attributes() -> idem_guard::dynamodb::Attributes {
    idem_guard::dynamodb::Attributes::default()
        .partition_key("PK")
        .sort_key("SK", "IDEMPOTENCY")
        .owner("idem_owner")
        .fingerprint("idem_fp")
        .status("idem_status")
        .result("idem_result")
        .expiry("idem_expires_at_ms")
        .ttl("idem_ttl")
}

/// A store over a fresh table named after the test whose key schema is `PK` (hash) and `SK`
/// (range), created here with a raw `CreateTable` (not by the store), with
/// [`custom_attributes`].
#[cfg(feature = "dynamodb")]
pub async fn dynamodb_custom_store(name: &str) -> idem_guard::DynamoDbStore {
    use idem_guard::aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
        TableStatus,
    };
    let client = dynamodb_client(&dynamodb_endpoint());
    let table = unique(name);
    let mut create = client
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest);
    for (attribute, kind) in [("PK", KeyType::Hash), ("SK", KeyType::Range)] {
        create = create
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(attribute)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .unwrap(),
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(attribute)
                    .key_type(kind)
                    .build()
                    .unwrap(),
            );
    }
    create
        .send()
        .await
        .expect("a DynamoDB-compatible server at DYNAMODB_ENDPOINT (.ci/run starts moto)");
    let deadline = tokio::time::Instant::now() + LOCAL_SERVER_PATIENCE;
    loop {
        let described = client
            .describe_table()
            .table_name(&table)
            .send()
            .await
            .unwrap();
        if described.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "table never active");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    idem_guard::DynamoDbStore::new(client, table)
        .attributes(custom_attributes())
        .unwrap()
}

/// Counts the HTTP requests a DynamoDB client sends (every attempt, retries included): the
/// store's round trips, counted by the SDK itself.
#[cfg(feature = "dynamodb")]
#[derive(Debug, Clone, Default)]
pub struct RequestCounter(Arc<AtomicU64>);

#[cfg(feature = "dynamodb")]
impl RequestCounter {
    /// Requests since the counter was made or last taken.
    pub fn take(&self) -> u64 {
        self.0.swap(0, Ordering::SeqCst)
    }
}

#[cfg(feature = "dynamodb")]
impl idem_guard::aws_sdk_dynamodb::config::Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_transmit(
        &self,
        _: &idem_guard::aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef<
            '_,
        >,
        _: &idem_guard::aws_sdk_dynamodb::config::RuntimeComponents,
        _: &mut idem_guard::aws_sdk_dynamodb::config::ConfigBag,
    ) -> Result<(), idem_guard::aws_sdk_dynamodb::error::BoxError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A store on a fresh table at `endpoint` whose client counts its requests.
#[cfg(feature = "dynamodb")]
pub async fn dynamodb_store_counted(
    endpoint: &str,
    name: &str,
) -> (idem_guard::DynamoDbStore, RequestCounter) {
    let store = dynamodb_store_at(endpoint, &unique(name)).await;
    let counter = RequestCounter::default();
    let config = store
        .client()
        .config()
        .to_builder()
        .interceptor(counter.clone())
        .build();
    let client = idem_guard::aws_sdk_dynamodb::Client::from_conf(config);
    (
        idem_guard::DynamoDbStore::new(client, store.table()),
        counter,
    )
}

pub fn memory_store() -> MemoryStore {
    MemoryStore::new()
}

/// The port of a `scheme://[user@]host:port[/db]` URL.
pub fn port_of(url: &str, default: u16) -> u16 {
    url.split('@')
        .next_back()
        .and_then(|rest| rest.rsplit(':').next())
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(default)
}

/// `DATABASE_URL` with its host and port replaced by the proxy's.
pub fn database_url_through(proxy: &Proxy) -> String {
    let url = database_url();
    let host_port = url
        .split('@')
        .next_back()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    url.replacen(&host_port, &format!("127.0.0.1:{}", proxy.port), 1)
}

/// A loopback TCP proxy in front of a service: `cut` closes every open connection, `down`
/// refuses new ones until `up`. Lets a test drop a store's connection at a chosen moment.
///
/// A cut takes effect when `cut` (or `down`) returns, not when the connections' tasks next
/// run: each connection remembers the cut count it was opened under and forwards no byte, in
/// either direction, once the count has moved on. So a request the client sends after `cut`
/// never reaches the server (issue 39: closing by notification alone raced with a completion
/// sent right after the cut, which sometimes got through and only its reply was lost).
///
/// It also counts round trips: every time a client speaks after the server did (or first), one
/// more request went out and waited for its answer. And it can lose a reply: see
/// [`lose_reply_to`](Self::lose_reply_to).
#[derive(Clone)]
pub struct Proxy {
    pub port: u16,
    down: Arc<AtomicBool>,
    cut: Arc<Notify>,
    /// How many cuts so far: a connection opened before the last one forwards nothing.
    cuts: Arc<AtomicU64>,
    round_trips: Arc<AtomicU64>,
    lose: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
}

impl Proxy {
    pub async fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = Proxy {
            port,
            down: Arc::default(),
            cut: Arc::new(Notify::new()),
            cuts: Arc::default(),
            round_trips: Arc::default(),
            lose: Arc::default(),
        };
        let p = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                // Read before `down`, which `down()` sets before counting its cut: a
                // connection accepted while the proxy goes down is refused or counts as cut.
                let opened_under = p.cuts.load(Ordering::SeqCst);
                if p.down.load(Ordering::SeqCst) {
                    continue; // dropping `client` refuses the connection
                }
                let cut = p.cut.clone();
                let cuts = p.cuts.clone();
                let trips = p.round_trips.clone();
                let lose = p.lose.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)).await else {
                        return;
                    };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let live = || cuts.load(Ordering::SeqCst) == opened_under;
                    let client_spoke = AtomicBool::new(false);
                    let losing = AtomicBool::new(false);
                    let up = async {
                        let mut buf = vec![0u8; 64 * 1024];
                        while let Ok(n @ 1..) = cr.read(&mut buf).await {
                            if !live() {
                                break; // sent after a cut: never reaches the server
                            }
                            if !client_spoke.swap(true, Ordering::SeqCst) {
                                trips.fetch_add(1, Ordering::SeqCst);
                            }
                            if take_marker(&lose, &buf[..n]) {
                                losing.store(true, Ordering::SeqCst);
                            }
                            if sw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    };
                    let down = async {
                        let mut buf = vec![0u8; 64 * 1024];
                        while let Ok(n @ 1..) = sr.read(&mut buf).await {
                            if losing.load(Ordering::SeqCst) || !live() {
                                break; // the server answered; the client never hears it
                            }
                            client_spoke.store(false, Ordering::SeqCst);
                            if cw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    };
                    // Either side closing, or a cut, closes both.
                    tokio::select! {
                        () = up => {}
                        () = down => {}
                        () = cut.notified() => {}
                    }
                });
            }
        });
        proxy
    }

    /// Round trips through the proxy since it started or since the last call.
    pub fn take_round_trips(&self) -> u64 {
        self.round_trips.swap(0, Ordering::SeqCst)
    }

    /// Lets the next request whose bytes contain `marker` reach the server, then closes its
    /// connection when the server answers, without passing the answer on: the request took
    /// effect and its reply was lost.
    pub fn lose_reply_to(&self, marker: &[u8]) {
        *self.lose.lock().unwrap() = Some(marker.to_vec());
    }

    /// Closes every connection open through the proxy.
    pub fn cut(&self) {
        self.cuts.fetch_add(1, Ordering::SeqCst);
        self.cut.notify_waiters();
    }

    pub fn down(&self) {
        self.down.store(true, Ordering::SeqCst);
        self.cut();
    }

    pub fn up(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

/// Whether `bytes` hold the marker set by [`Proxy::lose_reply_to`]; takes it if so.
fn take_marker(lose: &std::sync::Mutex<Option<Vec<u8>>>, bytes: &[u8]) -> bool {
    let mut lose = lose.lock().unwrap();
    let found = lose
        .as_deref()
        .is_some_and(|marker| bytes.windows(marker.len()).any(|w| w == marker));
    if found {
        *lose = None;
    }
    found
}

/// The error type the test handlers return.
#[derive(Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub enum TestError {
    Guard(String),
    Failed(String),
    Transient(String),
}

impl From<idem_guard::Error> for TestError {
    fn from(e: idem_guard::Error) -> Self {
        TestError::Guard(format!("{e:?}"))
    }
}

impl idem_guard::Classify for TestError {
    fn is_transient(&self) -> bool {
        matches!(self, TestError::Transient(_))
    }
}

/// A fresh SQLite file for the test `name` (under Cargo's temporary directory for tests),
/// removed with its WAL files first if an earlier run left it.
#[cfg(feature = "sqlite")]
pub fn sqlite_path(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("idem-guard-sqlite");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.db", name.replace([':', '/'], "_")));
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.clone().into_os_string();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    path
}

/// A store on a fresh SQLite file of its own.
#[cfg(feature = "sqlite")]
pub async fn sqlite_store(name: &str) -> idem_guard::SqliteStore {
    idem_guard::SqliteStore::open(sqlite_path(name))
        .await
        .expect("a SQLite file under CARGO_TARGET_TMPDIR")
}

/// The MySQL or MariaDB server of the tests (`scripts/test.sh` starts MariaDB there).
#[cfg(feature = "mysql")]
pub fn mysql_url() -> String {
    std::env::var("MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// A fresh database named after the test, and `MYSQL_URL` pointing at it (through `proxy`'s
/// port when given).
#[cfg(feature = "mysql")]
pub async fn mysql_database(name: &str, proxy: Option<&Proxy>) -> String {
    use sqlx::Connection as _;
    use std::hash::{Hash as _, Hasher as _};
    // Database names are at most 64 characters: a long test name is cut and told apart by
    // its hash.
    let mut name = name.replace(['-', ':'], "_");
    if name.len() > 48 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut hasher);
        name = format!("{}_{:08x}", &name[..39], hasher.finish() as u32);
    }
    let database = format!("idem_t_{name}");
    let url = mysql_url();
    let mut admin = sqlx::MySqlConnection::connect(&url)
        .await
        .expect("MySQL at MYSQL_URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {database}; CREATE DATABASE {database}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    admin.close().await.unwrap();
    let (base, _) = url.rsplit_once('/').expect("MYSQL_URL ends with /database");
    let base = match proxy {
        Some(proxy) => {
            let host_port = base.split('@').next_back().unwrap().to_owned();
            base.replacen(&host_port, &format!("127.0.0.1:{}", proxy.port), 1)
        }
        None => base.to_owned(),
    };
    format!("{base}/{database}")
}

/// A pool on `url` whose acquisitions wait as long as [`LOCAL_SERVER_PATIENCE`].
#[cfg(feature = "mysql")]
pub async fn mysql_pool(url: &str, max: u32) -> sqlx::MySqlPool {
    sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(LOCAL_SERVER_PATIENCE)
        .connect(url)
        .await
        .expect("MySQL at MYSQL_URL")
}

/// A store on a fresh database of its own.
#[cfg(feature = "mysql")]
pub async fn mysql_store(name: &str) -> idem_guard::MySqlStore {
    let url = mysql_database(name, None).await;
    idem_guard::MySqlStore::from_pool(mysql_pool(&url, 4).await)
        .await
        .unwrap()
}
