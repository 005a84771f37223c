//! How long one cluster store takes to answer again after a primary is killed while hundreds of
//! calls are in flight on it (issue 39 item 1), and what the run did to the keys (used by
//! `tests/redis_cluster_recovery.rs` and `scripts/cluster-recovery.sh`).
//!
//! The run: one `RedisClusterStore::connect_cluster` store, `in_flight / 2` workers that each
//! deliver a fresh key twice at once through it (so `in_flight` calls are in flight the whole
//! time), a primary killed with SIGKILL, its replica promoted, the old primary started again
//! (it rejoins as a replica, as an orchestrator would restart it). From the kill on, every
//! 250 ms a canary round delivers one fresh key on each shard through the same store; the
//! recovery time is from the promotion to the end of the first round started after the
//! promotion in which every canary call succeeded. Once every lease has ended, every key is
//! delivered once more through a fresh client: a key whose body runs again is a double effect,
//! a key refused or failing is stuck.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_guard::{Error, Guard, InFlight, RedisClusterStore, Rejected};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::cluster::{cli, poll, PrivateCluster};

/// The lease of every attempt: the final check waits it out.
pub const LEASE: Duration = Duration::from_secs(10);

/// What one run saw.
#[derive(Debug, Clone)]
pub struct Recovery {
    /// Calls in flight on the store when the primary was killed.
    pub in_flight_at_kill: usize,
    /// From the kill to the promotion (the cluster's failure detection).
    pub promotion: Duration,
    /// From the promotion to the end of the first canary round that succeeded on every shard;
    /// `None` if none did within the run's patience.
    pub recovery: Option<Duration>,
    /// Keys delivered by the load.
    pub keys: usize,
    /// Calls of the load that failed (timeouts and store errors) or succeeded.
    pub failed_calls: usize,
    pub ok_calls: usize,
    /// Keys whose body ran more than once.
    pub doubles: usize,
    /// Keys whose body ran more than once although no delivery of theirs ran the body and then
    /// failed to record its completion (a double no store outage explains).
    pub unexplained_doubles: usize,
    /// Keys refused or failing in the final delivery, after every lease ended.
    pub stuck: usize,
}

/// The slot Redis Cluster computes for `key` (CRC16/XMODEM of the hash tag or the key, modulo
/// 16384), so canary keys can be chosen per shard.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    let mut crc: u16 = 0;
    for &b in hashed {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The slot ranges of each primary serving slots, by port (`CLUSTER NODES`).
pub async fn shards(cluster: &PrivateCluster) -> HashMap<u16, Vec<(u16, u16)>> {
    let port = cluster.nodes().await[0].port;
    let text = cli(port, &["cluster", "nodes"])
        .await
        .expect("CLUSTER NODES");
    let mut shards = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() <= 8 || !f[2].contains("master") {
            continue;
        }
        let port: u16 = f[1]
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("a node address");
        let ranges = f[8..]
            .iter()
            .filter(|r| !r.starts_with('['))
            .map(|r| match r.split_once('-') {
                Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                None => (r.parse().unwrap(), r.parse().unwrap()),
            })
            .collect();
        shards.insert(port, ranges);
    }
    shards
}

/// The guard's record key for `key` under prefix `ns` (no tenant): see
/// `RedisConnection::record_key` (the keys here have no braces or `%`).
pub fn record_key(ns: &str, key: &str) -> String {
    format!("{{{ns}::{key}}}")
}

/// A fresh canary key of round `round` whose record lands in `ranges`.
fn canary_key(ns: &str, round: usize, shard: usize, ranges: &[(u16, u16)]) -> String {
    (0..)
        .map(|i| format!("canary-{round}-{shard}-{i}"))
        .find(|k| {
            let slot = key_slot(&record_key(ns, k));
            ranges.iter().any(|(a, b)| (*a..=*b).contains(&slot))
        })
        .unwrap()
}

type Effects = Arc<Mutex<HashMap<String, u32>>>;

/// One delivery through `guard`: the body counts its effect. `Ok(true)` when it answered,
/// `Ok(false)` when it failed; `unrecorded` is set when the body ran and the call failed.
async fn deliver(
    guard: &Guard<RedisClusterStore>,
    key: &str,
    effects: &Effects,
    unrecorded: &Mutex<HashMap<String, bool>>,
) -> bool {
    let ran = Arc::new(AtomicBool::new(false));
    let got = guard
        .run(key, &key, || {
            let (effects, ran, key) = (effects.clone(), ran.clone(), key.to_owned());
            async move {
                *effects.lock().unwrap().entry(key).or_default() += 1;
                ran.store(true, Ordering::SeqCst);
                // Some work after the effect, so the kill lands mid-body too.
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok::<_, Error>(1u8)
            }
        })
        .await;
    match got {
        Ok(_) => true,
        // The twin delivery holds the key: an answer.
        Err(Error::Rejected(Rejected::InProgress { .. })) => true,
        Err(Error::Store(_)) => {
            if ran.load(Ordering::SeqCst) {
                unrecorded.lock().unwrap().insert(key.to_owned(), true);
            }
            false
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Kills a primary of `cluster` under `in_flight` calls on one store and measures the store's
/// recovery; `patience` bounds the wait for it (the run goes on that long after the promotion
/// when the store never answers again).
pub async fn run(
    cluster: &mut PrivateCluster,
    in_flight: usize,
    patience: Duration,
    wait: Option<(u32, Duration)>,
) -> Recovery {
    let urls = cluster.urls();
    let mut store = RedisClusterStore::connect_cluster(&urls).await.unwrap();
    if let Some((n, timeout)) = wait {
        store = store.wait_for_replicas(n, timeout);
    }
    let ns = super::unique("recovery");
    let guard = Guard::new(store).prefix(ns.clone()).lease(LEASE);
    let effects: Effects = Arc::default();
    let unrecorded: Arc<Mutex<HashMap<String, bool>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let next_key = Arc::new(AtomicUsize::new(0));

    let mut workers = Vec::new();
    for _ in 0..in_flight.div_ceil(2) {
        let (guard, effects, unrecorded, stop, calls, ok, failed, next_key) = (
            guard.clone(),
            effects.clone(),
            unrecorded.clone(),
            stop.clone(),
            calls.clone(),
            ok.clone(),
            failed.clone(),
            next_key.clone(),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let key = format!("k-{}", next_key.fetch_add(1, Ordering::SeqCst));
                calls.fetch_add(2, Ordering::SeqCst);
                let (a, b) = tokio::join!(
                    deliver(&guard, &key, &effects, &unrecorded),
                    deliver(&guard, &key, &effects, &unrecorded)
                );
                calls.fetch_sub(2, Ordering::SeqCst);
                for answered in [a, b] {
                    let counter = if answered { &ok } else { &failed };
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    // Every worker has its calls out, and the store has answered some (scripts loaded).
    poll("the load under way", || {
        let (calls, ok) = (calls.clone(), ok.clone());
        async move { calls.load(Ordering::SeqCst) >= in_flight && ok.load(Ordering::SeqCst) >= 1000 }
    })
    .await;

    let shards = shards(cluster).await;
    let (primary, replica) = cluster.primary_and_replica().await;
    let ranges: Vec<Vec<(u16, u16)>> = shards.values().cloned().collect();
    let in_flight_at_kill = calls.load(Ordering::SeqCst);
    let killed = Instant::now();
    cluster.kill(primary);

    // Canary rounds every 250 ms from the kill on: (started, finished, every call answered).
    let rounds: Arc<Mutex<Vec<(Instant, Instant, bool)>>> = Arc::default();
    let canary = tokio::spawn({
        let (guard, effects, unrecorded, rounds, stop, ns) = (
            guard.clone(),
            effects.clone(),
            unrecorded.clone(),
            rounds.clone(),
            stop.clone(),
            ns.clone(),
        );
        async move {
            let mut tasks = Vec::new();
            let mut round = 0;
            while !stop.load(Ordering::SeqCst) {
                let keys: Vec<String> = ranges
                    .iter()
                    .enumerate()
                    .map(|(shard, r)| canary_key(&ns, round, shard, r))
                    .collect();
                let (guard, effects, unrecorded, rounds) = (
                    guard.clone(),
                    effects.clone(),
                    unrecorded.clone(),
                    rounds.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    let started = Instant::now();
                    let mut all = true;
                    // One task per shard: the calls must not wait for one another.
                    let calls: Vec<_> = keys
                        .into_iter()
                        .map(|k| {
                            let (guard, effects, unrecorded) =
                                (guard.clone(), effects.clone(), unrecorded.clone());
                            tokio::spawn(
                                async move { deliver(&guard, &k, &effects, &unrecorded).await },
                            )
                        })
                        .collect();
                    for call in calls {
                        all &= call.await.unwrap();
                    }
                    rounds.lock().unwrap().push((started, Instant::now(), all));
                }));
                round += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    });

    poll("the replica promoted", || {
        PrivateCluster::is_serving_primary(replica)
    })
    .await;
    let promoted = Instant::now();
    cluster.restart(primary);

    // Until a round started after the promotion answered on every shard, or patience ran out.
    let recovered = || {
        rounds
            .lock()
            .unwrap()
            .iter()
            .filter(|(started, _, all)| *started >= promoted && *all)
            .map(|(_, finished, _)| *finished)
            .min()
    };
    let recovery = loop {
        if let Some(at) = recovered() {
            break Some(at - promoted);
        }
        if promoted.elapsed() > patience {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // A little more load on the recovered store, then every call is let finish.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    canary.await.unwrap();
    let last_call = Instant::now();
    cluster.wait_healthy().await;

    // Every lease has ended: each key must now replay or run, never be refused.
    tokio::time::sleep_until(last_call + LEASE + Duration::from_secs(1)).await;
    let fresh = RedisClusterStore::from_cluster(super::redis_cluster_connection(&urls).await);
    let finale = Guard::new(fresh)
        .prefix(ns)
        .lease(LEASE)
        .in_flight(InFlight::Reject);
    let keys: Vec<String> = effects.lock().unwrap().keys().cloned().collect();
    let stuck = Arc::new(AtomicUsize::new(0));
    let permits = Arc::new(Semaphore::new(64));
    let mut finals = Vec::new();
    for key in keys.clone() {
        let (finale, effects, stuck, permits) = (
            finale.clone(),
            effects.clone(),
            stuck.clone(),
            permits.clone(),
        );
        finals.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await.unwrap();
            let got = finale
                .run(&key, &key, || async {
                    *effects.lock().unwrap().entry(key.clone()).or_default() += 1;
                    Ok::<_, Error>(1u8)
                })
                .await;
            if let Err(e) = got {
                eprintln!("final delivery of {key}: {e}");
                stuck.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for f in finals {
        f.await.unwrap();
    }
    let effects = effects.lock().unwrap();
    let unrecorded = unrecorded.lock().unwrap();
    let doubles: Vec<&String> = effects
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| k)
        .collect();
    Recovery {
        in_flight_at_kill,
        promotion: promoted - killed,
        recovery,
        keys: keys.len(),
        failed_calls: failed.load(Ordering::SeqCst),
        ok_calls: ok.load(Ordering::SeqCst),
        doubles: doubles.len(),
        unexplained_doubles: doubles
            .iter()
            .filter(|k| !unrecorded.contains_key(**k))
            .count(),
        stuck: stuck.load(Ordering::SeqCst),
    }
}
