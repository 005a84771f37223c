//! Redis store: Lua scripts for fenced writes, over one node or a Redis Cluster.

#[cfg(feature = "redis-cluster")]
mod cluster;
#[cfg(feature = "redis-cluster")]
mod cluster_conn;
mod connection;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, Script};

#[cfg(feature = "redis-cluster")]
pub use self::cluster::RedisClusterStore;
#[cfg(feature = "redis-cluster")]
pub use self::cluster_conn::RedisClusterConnection;
pub use self::connection::RedisConnection;
use crate::key::Fingerprint;
use crate::store::{fenced, OwnerToken, Reservation, Store, StoredResult};
use crate::Error;

/// Records in Redis, one string key per record, expiring by Redis's own `PX` TTL.
///
/// Round trips: reserving, completing, releasing and renewing are one `EVALSHA` each (the first
/// call of a script on a server adds an `EVAL`), so a first delivery costs two and a duplicate
/// one. Reserving creates the record, or returns the live one, or takes over an in-progress
/// record whose lease ended (by Redis's clock, `TIME`); such a record is kept for twice its
/// lease so that the takeover is reported ([`Reservation::TakenOver`]). Completed records
/// expire by Redis's own `PX` TTL.
///
/// The value is `P|owner|fingerprint|lease_end_ms` while in progress and
/// `C|owner|fingerprint|tag|result` once completed; owner and fingerprint are fixed-width hex, so
/// the Lua scripts fence with a prefix comparison.
///
/// Over Redis Cluster (feature `redis-cluster`, [`RedisStore::connect_cluster`]) the logic is
/// the same; the record's key is the guard's key inside one hash tag (`{prefix:tenant:key}`, see
/// [`RedisConnection`]), and [`wait_for_replicas`](Self::wait_for_replicas) makes claims and
/// completions wait for replicas, which is what keeps a record through a failover.
///
/// ```no_run
/// use idem_guard::{Guard, RedisStore};
///
/// # #[tokio::main] async fn main() -> Result<(), idem_guard::Error> {
/// // Clones share one multiplexed, auto-reconnecting connection.
/// let store = RedisStore::connect("redis://127.0.0.1:6379").await?;
/// let guard = Guard::new(store).prefix("refund");
/// let refunded: Result<u64, idem_guard::Error> =
///     guard.run("refund-7f3a", &("order-1", 500), || async { Ok(500) }).await;
/// # refunded?; Ok(()) }
/// ```
/// (`no_run` here: it needs a server; `tests/conformance` runs every rule of the `Store`
/// contract against the live server.)
#[derive(Clone)]
pub struct RedisStore<C = ConnectionManager> {
    conn: C,
    scripts: Arc<Scripts>,
    replicas: Option<WaitForReplicas>,
    max_result_len: usize,
}

impl<C> std::fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

/// `WAIT replicas timeout` after each claim and completion: see [`RedisStore::wait_for_replicas`].
#[derive(Debug, Clone, Copy)]
struct WaitForReplicas {
    replicas: u32,
    timeout: Duration,
}

struct Scripts {
    reserve: Script,
    complete: Script,
    release: Script,
    renew: Script,
}

/// Creates the record, or takes over an in-progress one whose lease ended, or returns the live
/// record. An in-progress record is kept (`PX`) for twice its lease, so that a takeover can tell
/// that an earlier attempt was abandoned; its lease end, by Redis's clock, is in the value.
/// A record already ours in progress is a retried reserve whose first reply was lost (a cluster
/// client resends a request cut by a failover): it is ours, with a fresh lease.
/// KEYS[1] key; ARGV owner, fingerprint, lease ms. Returns nil (created, or ours), 'T' (taken
/// over) or the live record's value.
const RESERVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
local mine = 'P|' .. ARGV[1] .. '|'
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #mine) == mine then v = false end
if v then
  if string.sub(v, 1, 2) ~= 'P|' then return v end
  local lease_end = tonumber(string.match(v, '|(%d+)$'))
  if lease_end == nil or lease_end > now then return v end
end
redis.call('SET', KEYS[1], mine .. ARGV[2] .. '|' .. (now + lease), 'PX', lease * 2)
if v then return 'T' end
return false
";

/// Completes when the record is ours (in progress, or already completed by us: a retried
/// complete whose first reply was lost) or gone (our lease lapsed and nobody took over).
/// KEYS[1] key; ARGV owner, fingerprint, tag|result, retention ms. Returns 1, or 0 if not owner.
const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
local p = 'P|' .. ARGV[1] .. '|'
local c = 'C|' .. ARGV[1] .. '|'
local fp = ARGV[2]
if v then
  if string.sub(v, 1, #p) == p then
    fp = string.sub(v, #p + 1, #p + 32)
  elseif string.sub(v, 1, #c) ~= c then
    return 0
  else
    return 1
  end
end
redis.call('SET', KEYS[1], c .. fp .. '|' .. ARGV[3], 'PX', ARGV[4])
return 1
";

/// Deletes the record if it is ours in progress; a missing record is already released.
/// KEYS[1] key; ARGV owner. Returns 1, or 0 if not owner.
const RELEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return 1 end
local p = 'P|' .. ARGV[1] .. '|'
if string.sub(v, 1, #p) == p then
  redis.call('DEL', KEYS[1])
  return 1
end
if string.sub(v, 1, #('C|' .. ARGV[1] .. '|')) == 'C|' .. ARGV[1] .. '|' then return 1 end
return 0
";

/// Restarts our lease (rewriting the value so `retry_after` stays right), recreating it if it
/// lapsed without a takeover. KEYS[1] key; ARGV owner, fingerprint, lease ms. Returns 1 or 0.
const RENEW: &str = r"
local v = redis.call('GET', KEYS[1])
local p = 'P|' .. ARGV[1] .. '|'
if v and string.sub(v, 1, #p) ~= p then
  if string.sub(v, 1, #('C|' .. ARGV[1] .. '|')) == 'C|' .. ARGV[1] .. '|' then return 1 end
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('SET', KEYS[1], p .. ARGV[2] .. '|' .. (now + lease), 'PX', lease * 2)
return 1
";

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`) with a reconnecting connection manager that
    /// gives up on a request after 5 s, so a hung server surfaces as [`Error::Store`].
    ///
    /// Then reads the server's persistence and eviction settings (`CONFIG GET`, where the server
    /// allows it) and logs a `tracing` warning for each that can lose records: no AOF and no
    /// RDB snapshots (a restart forgets every key, so every redelivery runs again), or an
    /// eviction policy other than `noeviction` (a full server drops records). See the crate
    /// README for the settings the guard needs.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let client = redis::Client::open(url).map_err(Error::store)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let mut conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(Error::store)?;
        warn_about_durability(&mut conn).await;
        Ok(Self::new(conn))
    }

    /// Wraps a connection manager configured by the caller (timeouts, TLS, credentials).
    pub fn new(conn: ConnectionManager) -> Self {
        Self::over(conn)
    }
}

impl<C: RedisConnection> RedisStore<C> {
    /// The store over any supported connection (for a cluster, see
    /// [`RedisStore::connect_cluster`] and [`RedisStore::from_cluster`]).
    pub fn over(conn: C) -> Self {
        RedisStore {
            conn,
            scripts: Arc::new(Scripts {
                reserve: Script::new(RESERVE),
                complete: Script::new(COMPLETE),
                release: Script::new(RELEASE),
                renew: Script::new(RENEW),
            }),
            replicas: None,
            max_result_len: crate::DEFAULT_MAX_RESULT_LEN,
        }
    }

    /// The longest result kept, in bytes of its encoded text (default
    /// [`DEFAULT_MAX_RESULT_LEN`](crate::DEFAULT_MAX_RESULT_LEN)): a longer one fails at once with
    /// [`Error::ResultTooLarge`](crate::Error::ResultTooLarge). See
    /// [`Store::max_result_len`](crate::Store::max_result_len).
    pub fn max_result_len(mut self, bytes: usize) -> Self {
        self.max_result_len = bytes;
        self
    }

    /// After each claim (a reserve that wrote the record, a renewal) and each completion, waits
    /// until `replicas` replicas of the node holding the key acknowledged the write, at most
    /// `timeout` (Redis `WAIT`, sent in one pipeline with the script, so it goes to that node and
    /// costs no extra round trip). A write acknowledged by fewer is an [`Error::Store`]:
    ///
    /// - a claim: the body does not run (the guard withdraws the claim), because a primary that
    ///   fails before replicating it would let a duplicate run on the promoted replica;
    /// - a completion: the guard retries it while the attempt holds its lease (as for any store
    ///   error), so the result is on a replica before the caller hears of it, or the caller gets
    ///   the error.
    ///
    /// So with it, a primary killed at any moment loses no acknowledged claim or completion as
    /// long as the replica that acknowledged is the one promoted (with one replica per primary,
    /// always). The price: with fewer live replicas than `replicas`, every new delivery fails
    /// after `timeout` (fail closed). Releases are not waited for: a lost release leaves a
    /// record that a later delivery takes over after its lease, never a second effect.
    ///
    /// The connection's response timeout must be longer than `timeout`. A `timeout` of zero
    /// (which Redis reads as "forever") waits 1 ms.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.conn.allow_replies_after(timeout);
        self.replicas = Some(WaitForReplicas { replicas, timeout });
        self
    }

    /// Runs `script` on the record of `key`; with [`wait_for_replicas`](Self::wait_for_replicas)
    /// and `replicate`, in one pipeline with `WAIT`, whose count comes back too.
    async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        key: &str,
        args: &[String],
        replicate: bool,
    ) -> Result<(T, Option<u32>), Error> {
        let mut conn = self.conn.clone();
        let mut eval = redis::cmd("EVALSHA");
        eval.arg(script.get_hash()).arg(1).arg(&*C::record_key(key));
        for arg in args {
            eval.arg(arg);
        }
        let wait = self.replicas.filter(|_| replicate);
        let mut loaded = false;
        loop {
            let answer = match wait {
                None => eval.query_async::<T>(&mut conn).await.map(|v| (v, None)),
                Some(w) => {
                    let mut pipe = redis::pipe();
                    pipe.add_command(eval.clone())
                        .cmd("WAIT")
                        .arg(w.replicas)
                        .arg(millis(w.timeout));
                    pipe.query_async::<(T, u32)>(&mut conn)
                        .await
                        .map(|(v, acked)| (v, Some(acked)))
                }
            };
            match answer {
                // The node does not know the script yet (first use, a restart, a replica just
                // promoted): load it (on every primary of a cluster) and run it again.
                Err(e)
                    if !loaded
                        && e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    script.load_async(&mut conn).await.map_err(Error::store)?;
                    loaded = true;
                }
                answer => return answer.map_err(Error::store),
            }
        }
    }

    /// `Ok` unless replicas were asked for and fewer acknowledged the write to `key`.
    fn replicated(&self, key: &str, acked: Option<u32>) -> Result<(), Error> {
        match (self.replicas, acked) {
            (Some(w), Some(acked)) if acked < w.replicas => Err(Error::store(format!(
                "the write to #{} reached {acked} of {} replicas within {:?} (WAIT)",
                crate::observe::key_hash(key),
                w.replicas,
                w.timeout
            ))),
            _ => Ok(()),
        }
    }
}

/// Logs one warning per setting that can lose records, once per connect. Managed services
/// often refuse `CONFIG`; then nothing is known and nothing is said beyond a debug line.
async fn warn_about_durability(conn: &mut impl redis::aio::ConnectionLike) {
    let config: Result<std::collections::HashMap<String, String>, _> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .arg("appendfsync")
        .arg("save")
        .arg("maxmemory-policy")
        .query_async(conn)
        .await;
    match config {
        Ok(config) => {
            let get = |name: &str| config.get(name).map(String::as_str);
            for risk in durability_risks(
                get("appendonly"),
                get("appendfsync"),
                get("save"),
                get("maxmemory-policy"),
            ) {
                tracing::warn!(target: "idem_guard::redis", "{risk}");
            }
        }
        Err(e) => tracing::debug!(
            target: "idem_guard::redis",
            error = %e,
            "cannot read the Redis persistence settings"
        ),
    }
}

/// What a Redis configuration risks for the guard's records, one sentence each.
pub(crate) fn durability_risks(
    appendonly: Option<&str>,
    appendfsync: Option<&str>,
    save: Option<&str>,
    maxmemory_policy: Option<&str>,
) -> Vec<String> {
    let mut risks = Vec::new();
    let aof = appendonly == Some("yes");
    let snapshots = save.is_some_and(|s| !s.trim().is_empty());
    if appendonly.is_some() && !aof && save.is_some() && !snapshots {
        risks.push(
            "Redis persists nothing (appendonly no, save \"\"): a restart forgets every idempotency record and every redelivery runs its handler again; set `appendonly yes` with `appendfsync everysec` (or `always`)".to_owned(),
        );
    } else if aof && appendfsync == Some("no") {
        risks.push(
            "Redis AOF is on with `appendfsync no`: a crash can lose the records of the last tens of seconds; use `appendfsync everysec` or `always`".to_owned(),
        );
    }
    if let Some(policy) = maxmemory_policy.filter(|p| *p != "noeviction") {
        risks.push(format!(
            "Redis evicts keys under memory pressure (maxmemory-policy {policy}): an evicted idempotency record lets a duplicate run again; set `maxmemory-policy noeviction` (writes then fail, and the guard fails closed)"
        ));
    }
    risks
}

fn millis(d: Duration) -> u64 {
    // Redis rejects a PX of 0; a sub-millisecond TTL means "expire as soon as possible".
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 2).max(1)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
fn in_progress_value(owner: &OwnerToken, fingerprint: Fingerprint, lease: Duration) -> String {
    format!(
        "P|{owner}|{fingerprint}|{}",
        now_ms().saturating_add(millis(lease))
    )
}

/// Parses a stored value (the reply of `SET ... GET`) into what a reservation reports.
fn parse(key: &str, value: &str) -> Result<Reservation, Error> {
    let corrupt = || {
        let key = crate::observe::key_hash(key);
        Error::store(format!("unexpected value stored under #{key}"))
    };
    let mut parts = value.splitn(5, '|');
    let (state, _owner, fp) = (parts.next(), parts.next(), parts.next());
    let fingerprint = fp.and_then(Fingerprint::from_hex).ok_or_else(corrupt)?;
    match state {
        Some("P") => {
            let until: u64 = parts
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(corrupt)?;
            let retry_after = Duration::from_millis(until.saturating_sub(now_ms()));
            Ok(Reservation::InProgress {
                fingerprint,
                retry_after,
            })
        }
        Some("C") => {
            let tag = parts
                .next()
                .and_then(|t| t.chars().next())
                .ok_or_else(corrupt)?;
            let text = parts.next().unwrap_or_default().to_owned();
            let result = StoredResult::from_tag(tag, text).ok_or_else(corrupt)?;
            Ok(Reservation::Completed {
                fingerprint,
                result,
            })
        }
        _ => Err(corrupt()),
    }
}

impl<C: RedisConnection> Store for RedisStore<C> {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        let args = [
            owner.to_string(),
            fingerprint.to_string(),
            millis(lease).to_string(),
        ];
        let (previous, acked): (Option<String>, _) =
            self.eval(&self.scripts.reserve, key, &args, true).await?;
        match previous.as_deref() {
            None => self.replicated(key, acked).map(|()| Reservation::Acquired),
            Some("T") => self.replicated(key, acked).map(|()| Reservation::TakenOver),
            // Nothing written: a live record found is as durable as its writer made it.
            Some(value) => parse(key, value),
        }
    }

    async fn complete(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        result: &StoredResult,
        retention: Duration,
    ) -> Result<(), Error> {
        let (tag, text) = result.tag_and_text();
        let args = [
            owner.to_string(),
            fingerprint.to_string(),
            format!("{tag}|{text}"),
            millis(retention).to_string(),
        ];
        let (ok, acked): (i64, _) = self.eval(&self.scripts.complete, key, &args, true).await?;
        fenced(ok == 1, key)?;
        self.replicated(key, acked)
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        let (ok, _): (i64, _) = self
            .eval(&self.scripts.release, key, &[owner.to_string()], false)
            .await?;
        fenced(ok == 1, key)
    }

    fn max_result_len(&self) -> usize {
        self.max_result_len
    }

    async fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<(), Error> {
        let args = [
            owner.to_string(),
            fingerprint.to_string(),
            millis(lease).to_string(),
        ];
        let (ok, acked): (i64, _) = self.eval(&self.scripts.renew, key, &args, true).await?;
        fenced(ok == 1, key)?;
        self.replicated(key, acked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_risks_name_each_setting() {
        let none = durability_risks(Some("no"), Some("everysec"), Some(""), Some("noeviction"));
        assert_eq!(none.len(), 1);
        assert!(none[0].contains("persists nothing"), "{none:?}");
        assert!(
            durability_risks(Some("yes"), Some("everysec"), Some(""), Some("noeviction"))
                .is_empty()
        );
        assert!(
            durability_risks(
                Some("no"),
                Some("everysec"),
                Some("3600 1"),
                Some("noeviction")
            )
            .is_empty(),
            "RDB snapshots are persistence too (weaker, but not nothing)"
        );
        let lax = durability_risks(Some("yes"), Some("no"), Some(""), Some("allkeys-lru"));
        assert_eq!(lax.len(), 2, "{lax:?}");
        assert!(lax[1].contains("allkeys-lru"));
        // Nothing known, nothing said.
        assert!(durability_risks(None, None, None, None).is_empty());
    }

    #[test]
    fn parses_what_the_scripts_write() {
        let fp = Fingerprint::of(&1).unwrap();
        let owner = OwnerToken::generate();
        let p = in_progress_value(&owner, fp, Duration::from_secs(60));
        assert!(
            matches!(parse("k", &p), Ok(Reservation::InProgress { fingerprint, retry_after })
            if fingerprint == fp && retry_after > Duration::from_secs(50))
        );
        let c = format!("C|{owner}|{fp}|o|{{\"a\":\"x|y\"}}");
        assert_eq!(
            parse("k", &c).unwrap(),
            Reservation::Completed {
                fingerprint: fp,
                result: StoredResult::Ok("{\"a\":\"x|y\"}".into())
            }
        );
        assert!(parse("k", "garbage").is_err());
        assert!(parse("k", &format!("C|{owner}|{fp}|?|1")).is_err());
    }
}
