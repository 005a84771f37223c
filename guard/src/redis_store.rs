//! Redis store: `SET NX PX` reservations and Lua scripts for fenced writes.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;

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
pub struct RedisStore {
    conn: ConnectionManager,
    scripts: Arc<Scripts>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").finish_non_exhaustive()
    }
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
/// KEYS[1] key; ARGV owner, fingerprint, lease ms. Returns nil (created), 'T' (taken over) or
/// the live record's value.
const RESERVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, 2) ~= 'P|' then return v end
  local lease_end = tonumber(string.match(v, '|(%d+)$'))
  if lease_end == nil or lease_end > now then return v end
end
redis.call('SET', KEYS[1], 'P|' .. ARGV[1] .. '|' .. ARGV[2] .. '|' .. (now + lease), 'PX', lease * 2)
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
        RedisStore {
            conn,
            scripts: Arc::new(Scripts {
                reserve: Script::new(RESERVE),
                complete: Script::new(COMPLETE),
                release: Script::new(RELEASE),
                renew: Script::new(RENEW),
            }),
        }
    }
}

/// Logs one warning per setting that can lose records, once per connect. Managed services
/// often refuse `CONFIG`; then nothing is known and nothing is said beyond a debug line.
async fn warn_about_durability(conn: &mut ConnectionManager) {
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
    let corrupt = || Error::store(format!("unexpected value stored under `{key}`"));
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

impl Store for RedisStore {
    async fn reserve(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<Reservation, Error> {
        let mut conn = self.conn.clone();
        let previous: Option<String> = self
            .scripts
            .reserve
            .key(key)
            .arg(owner.as_str())
            .arg(fingerprint.to_string())
            .arg(millis(lease))
            .invoke_async(&mut conn)
            .await
            .map_err(Error::store)?;
        match previous.as_deref() {
            None => Ok(Reservation::Acquired),
            Some("T") => Ok(Reservation::TakenOver),
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
        let mut conn = self.conn.clone();
        let (tag, text) = result.tag_and_text();
        let ok: i64 = self
            .scripts
            .complete
            .key(key)
            .arg(owner.as_str())
            .arg(fingerprint.to_string())
            .arg(format!("{tag}|{text}"))
            .arg(millis(retention))
            .invoke_async(&mut conn)
            .await
            .map_err(Error::store)?;
        fenced(ok == 1, key)
    }

    async fn release(&self, key: &str, owner: &OwnerToken) -> Result<(), Error> {
        let mut conn = self.conn.clone();
        let ok: i64 = self
            .scripts
            .release
            .key(key)
            .arg(owner.as_str())
            .invoke_async(&mut conn)
            .await
            .map_err(Error::store)?;
        fenced(ok == 1, key)
    }

    async fn renew(
        &self,
        key: &str,
        fingerprint: Fingerprint,
        owner: &OwnerToken,
        lease: Duration,
    ) -> Result<(), Error> {
        let mut conn = self.conn.clone();
        let ok: i64 = self
            .scripts
            .renew
            .key(key)
            .arg(owner.as_str())
            .arg(fingerprint.to_string())
            .arg(millis(lease))
            .invoke_async(&mut conn)
            .await
            .map_err(Error::store)?;
        fenced(ok == 1, key)
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
