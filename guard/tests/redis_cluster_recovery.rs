//! Issue 39 item 1: a Redis Cluster store answers again within 10 s of a failover while
//! hundreds of calls are in flight on it. One run per CI (a private cluster of six fresh
//! processes on free ports, `common::cluster`); `scripts/cluster-recovery.sh` runs it 5 x 5
//! times and prints the measured recovery times.

mod common;

use std::time::Duration;

use common::cluster::PrivateCluster;
use common::recovery;

/// The spec: calls answer again within this long after the replica is promoted.
const RECOVERY_BOUND: Duration = Duration::from_secs(10);

/// Prints the `redis` crate's log lines at `RECOVERY_LOG` level and above (`warn`, `info`,
/// `debug`), with the time since the logger started: what its cluster client does during the
/// failover.
struct StderrLog(std::time::Instant);

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.target().starts_with("redis")
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!(
                "{:9.3} {} {}: {}",
                self.0.elapsed().as_secs_f64(),
                r.level(),
                r.target(),
                r.args()
            );
        }
    }
    fn flush(&self) {}
}

fn init_log() {
    let level = match std::env::var("RECOVERY_LOG").as_deref() {
        Ok("warn") => log::LevelFilter::Warn,
        Ok("info") => log::LevelFilter::Info,
        Ok("debug") => log::LevelFilter::Debug,
        _ => return,
    };
    let logger = Box::leak(Box::new(StderrLog(std::time::Instant::now())));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A primary killed with SIGKILL while 600 calls are in flight on one store (each key delivered
/// twice at once), with `wait_for_replicas(1, 2 s)` so that no acknowledged claim is lost with
/// the primary: the same store answers on every shard again within 10 s of the promotion, no
/// key runs twice and none is stuck once its lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_store_answers_again_within_10_s_of_a_failover_under_load() {
    init_log();
    let in_flight = env_or("RECOVERY_IN_FLIGHT", 600) as usize;
    // Past the bound the run goes on a while, so a failing run reports how long it took.
    let patience = Duration::from_secs(env_or("RECOVERY_PATIENCE_S", 30));
    let node_timeout = env_or("RECOVERY_NODE_TIMEOUT_MS", 2_000);
    let wait = match env_or("RECOVERY_WAIT", 1) {
        0 => None,
        n => Some((n as u32, Duration::from_secs(2))),
    };
    let mut cluster = PrivateCluster::start("recovery", node_timeout).await;
    let r = recovery::run(&mut cluster, in_flight, patience, wait).await;
    // One line the script collects.
    println!(
        "RECOVERY in_flight_at_kill={} promotion_ms={} recovery_ms={} keys={} ok_calls={} failed_calls={} doubles={} unexplained_doubles={} stuck={}",
        r.in_flight_at_kill,
        r.promotion.as_millis(),
        r.recovery.map_or("none".into(), |d| d.as_millis().to_string()),
        r.keys,
        r.ok_calls,
        r.failed_calls,
        r.doubles,
        r.unexplained_doubles,
        r.stuck
    );
    assert!(r.in_flight_at_kill >= 500, "{r:?}");
    assert!(
        r.recovery.is_some_and(|d| d <= RECOVERY_BOUND),
        "the store did not answer on every shard within {RECOVERY_BOUND:?} of the promotion: {r:?}"
    );
    assert_eq!(r.stuck, 0, "{r:?}");
    if wait.is_some() {
        assert_eq!(r.unexplained_doubles, 0, "{r:?}");
    }
}

/// The primary (port) serving `slot`.
fn owner(shards: &std::collections::HashMap<u16, Vec<(u16, u16)>>, slot: u16) -> u16 {
    *shards
        .iter()
        .find(|(_, ranges)| ranges.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
        .expect("every slot is served")
        .0
}

/// `CLUSTER SETSLOT slot ..` on a node.
async fn setslot(port: u16, slot: u16, args: &[&str]) {
    let slot = slot.to_string();
    let mut all = vec!["cluster", "setslot", slot.as_str()];
    all.extend_from_slice(args);
    let reply = common::cluster::cli(port, &all).await;
    assert_eq!(reply.as_deref(), Some("OK"), "{all:?} on {port}");
}

/// Issue 39 item 8: `MOVED` and `ASK` replies while slots change hands reach the caller only
/// if the cluster stays that way. The client here follows no redirection itself (`retries(0)`,
/// as when a failover outlasts its retries): a slot moved to another primary after the client
/// read the slot map answers `MOVED`, and a slot being migrated answers `ASK` until the
/// migration ends a second later; both calls succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_while_slots_move_do_not_reach_the_caller() {
    use idem_guard::{Error, Guard, RedisStore};

    let cluster = PrivateCluster::start("redirects", 2_000).await;
    let conn = redis::cluster::ClusterClientBuilder::new(cluster.urls())
        .retries(0)
        .build()
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let ns = common::unique("redirects");
    let guard = Guard::new(RedisStore::from_cluster(conn)).prefix(ns.clone());
    // Scripts loaded on every primary, the slot map read.
    let warm: Result<u8, Error> = guard.run("warm", &0, || async { Ok(0) }).await;
    warm.unwrap();
    let warm_slot = recovery::key_slot(&recovery::record_key(&ns, "warm"));

    let shards = recovery::shards(&cluster).await;
    let nodes = cluster.nodes().await;
    let id = |port: u16| nodes.iter().find(|n| n.port == port).unwrap().id.clone();
    // Two keys in distinct empty slots (a fresh cluster holds only `warm`).
    let mut keys = (0..)
        .map(|i| format!("moving-{i}"))
        .filter(|k| recovery::key_slot(&recovery::record_key(&ns, k)) != warm_slot);
    let (moved_key, asked_key) = (
        keys.next().unwrap(),
        loop {
            let k = keys.next().unwrap();
            let a = recovery::key_slot(&recovery::record_key(&ns, &k));
            if a != recovery::key_slot(&recovery::record_key(&ns, "moving-0")) {
                break k;
            }
        },
    );
    let slot_of = |k: &str| recovery::key_slot(&recovery::record_key(&ns, k));
    let other = |from: u16| *shards.keys().find(|p| **p != from).unwrap();

    // MOVED: the slot now belongs to another primary (told to every primary; the replicas learn
    // it by gossip).
    let slot = slot_of(&moved_key);
    let (from, to) = (owner(&shards, slot), other(owner(&shards, slot)));
    for port in [to, from] {
        setslot(port, slot, &["node", &id(to)]).await;
    }
    let got: Result<u8, Error> = guard.run(&moved_key, &1, || async { Ok(1) }).await;
    assert_eq!(got.unwrap(), 1, "a slot moved: MOVED is followed");

    // ASK: the slot is being migrated (the key is on neither node), then the migration ends.
    let slot = slot_of(&asked_key);
    let (from, to) = (owner(&shards, slot), other(owner(&shards, slot)));
    setslot(to, slot, &["importing", &id(from)]).await;
    setslot(from, slot, &["migrating", &id(to)]).await;
    let finish = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        (to, from, slot)
    });
    let call = guard.run(&asked_key, &2, || async { Ok::<u8, Error>(2) });
    let (got, done) = tokio::join!(call, async {
        let (to, from, slot) = finish.await.unwrap();
        for port in [to, from] {
            setslot(port, slot, &["node", &id(to)]).await;
        }
    });
    let () = done;
    assert_eq!(
        got.unwrap(),
        2,
        "a slot migrating: ASK, then MOVED, is followed"
    );
}
