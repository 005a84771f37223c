//! Guarded calls through a failover of a private Redis Cluster, counting double effects and
//! stuck keys (used by `tests/redis_failover.rs` and `benches/cluster_failover.rs`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idem_guard::{Error, Guard, InFlight, RedisClusterStore, Rejected};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::cluster::PrivateCluster;

/// The lease the tests give every attempt: long against a failover (a few
/// `cluster-node-timeout`s), so a completion retried while the lease holds outlives the
/// promotion; the final round waits it out.
pub const LEASE: Duration = Duration::from_secs(30);

/// What a run saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Figures {
    /// Keys delivered (a fresh batch per round).
    pub keys: usize,
    /// Delivery rounds before the final one (each delivers a fresh batch of keys, every key
    /// twice at once).
    pub rounds: usize,
    /// Keys whose body ran more than once: double effects.
    pub doubles: usize,
    /// Keys whose body never ran, not even in the final round.
    pub never_ran: usize,
    /// Final-round deliveries (after every lease ended) refused as in progress or failed on the
    /// store: stuck keys.
    pub stuck: usize,
    /// Deliveries that failed with a store error during the run (the guard failed closed).
    pub store_errors: usize,
    /// Deliveries whose body ran but whose completion could not be recorded within the lease.
    pub unrecorded: usize,
    /// Keys that ran more than once although no delivery of theirs was left unrecorded: a
    /// double that no store outage explains (an acknowledged claim or completion lost). A
    /// key whose completion could not be written before its lease ended runs again once the
    /// lease is over, whatever the store promises; how many such keys there are depends on
    /// how long the clients take to reach the promoted primary, which is the machine's
    /// timing, so the tests assert on this count and print the others.
    pub unexplained_doubles: usize,
}

/// Rounds at most (a bound for the effect counters; a run takes a few dozen).
const MAX_ROUNDS: usize = 400;

/// The body's effect per key: how many times it ran.
type Effects = Arc<Vec<AtomicU32>>;

/// What happens to the cluster during the run.
#[derive(Debug, Clone, Copy)]
pub enum Disruption {
    /// `CLUSTER FAILOVER` on a replica: a coordinated failover.
    ManualFailover,
    /// A primary killed with SIGKILL; once its replica is promoted, the node is started again
    /// (empty, as an orchestrator would) and rejoins as the new primary's replica.
    KillPrimary,
    /// The same, with the replica cut off first: it is stopped (SIGSTOP) and the primary closes
    /// its replication link (`CLIENT KILL TYPE replica`), a second of deliveries goes to the
    /// primary alone, then the primary is killed and the replica resumed. What the primary took
    /// in that second never reached the replica (a replica partitioned away or stalled, then the
    /// primary lost). Stopping the replica alone is not enough: its kernel would still buffer
    /// the stream.
    KillPrimaryWhileReplicaLags,
}

impl Disruption {
    async fn apply(self, cluster: &mut PrivateCluster) {
        let (primary, replica) = cluster.primary_and_replica().await;
        match self {
            Disruption::ManualFailover => cluster.manual_failover(replica).await,
            Disruption::KillPrimary | Disruption::KillPrimaryWhileReplicaLags => {
                let lag = matches!(self, Disruption::KillPrimaryWhileReplicaLags);
                if lag {
                    cluster.pause(replica);
                    let cut = super::cluster::cli(primary, &["client", "kill", "type", "replica"]);
                    assert!(cut.await.is_some(), "CLIENT KILL TYPE replica");
                    // Deliveries go on meanwhile; well under `cluster-node-timeout`, so the
                    // replica is not failed itself.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                cluster.kill(primary);
                if lag {
                    cluster.resume(replica);
                }
                super::cluster::poll("the replica promoted", || {
                    PrivateCluster::is_serving_primary(replica)
                })
                .await;
                cluster.restart(primary);
            }
        }
    }
}

/// Delivers a fresh batch of `keys` keys per round (each key twice at once, through two cluster
/// clients), so that new claims and completions keep being written, while `disruption` happens
/// to the cluster, and one more round after it; then, once every attempt's lease has ended and
/// every primary has a replica in sync again, delivers every key of every round once more.
/// `wait` is [`RedisClusterStore::wait_for_replicas`]'s `(replicas, timeout)`.
pub async fn run(
    cluster: &mut PrivateCluster,
    keys: usize,
    lease: Duration,
    wait: Option<(u32, Duration)>,
    disruption: Disruption,
) -> Figures {
    let urls = cluster.urls();
    let with_wait = |s: RedisClusterStore| match wait {
        Some((n, timeout)) => s.wait_for_replicas(n, timeout),
        None => s,
    };
    // The clients the run uses are what `connect_cluster` builds (short per-node timeouts),
    // not the tests' patient ones: a client that waits a minute for a stopped node holds up
    // every call meanwhile (seen: a whole run's calls timing out one minute each).
    let a = with_wait(RedisClusterStore::connect_cluster(&urls).await.unwrap());
    let b = with_wait(RedisClusterStore::connect_cluster(&urls).await.unwrap());
    let ns = super::unique("failover");
    let guards = [
        Guard::new(a).prefix(ns.clone()).lease(lease),
        Guard::new(b).prefix(ns.clone()).lease(lease),
    ];
    let effects: Effects = Arc::new((0..keys * MAX_ROUNDS).map(|_| AtomicU32::new(0)).collect());
    let figures = Arc::new(Counters::new(keys * MAX_ROUNDS));
    let disrupted = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));

    // Deliveries run in a task of their own while the disruption runs here.
    let deliveries = tokio::spawn({
        let (guards, effects, figures, disrupted, started) = (
            guards.clone(),
            effects.clone(),
            figures.clone(),
            disrupted.clone(),
            started.clone(),
        );
        async move {
            let mut rounds = 0;
            loop {
                let last = disrupted.load(Ordering::SeqCst) || rounds + 1 == MAX_ROUNDS;
                let batch = rounds * keys..(rounds + 1) * keys;
                deliver_round(&guards, batch, &effects, &figures, &started).await;
                rounds += 1;
                if last {
                    return rounds;
                }
            }
        }
    });
    // Disrupt once a good part of the first round is under way, so calls are in flight.
    super::cluster::poll("deliveries under way", || {
        let started = started.clone();
        async move { started.load(Ordering::SeqCst) >= keys / 2 }
    })
    .await;
    let t0 = Instant::now();
    let phase = |what: &str| eprintln!("{ns}: {what} at {:.1} s", t0.elapsed().as_secs_f64());
    disruption.apply(cluster).await;
    phase("disruption done");
    disrupted.store(true, Ordering::SeqCst);
    let rounds = deliveries.await.unwrap();
    phase("deliveries done");
    let last_attempt = Instant::now();
    cluster.wait_healthy().await;
    cluster.wait_replicated().await;
    phase("cluster whole");

    // Every attempt's lease has ended: each key must now replay or run, never be refused.
    tokio::time::sleep_until(last_attempt + lease + Duration::from_secs(1)).await;
    // A fresh, patient client (as a later delivery from another process would be), so the
    // verdict on each key does not hang on the state the disruption left in the run's clients.
    let fresh = with_wait(RedisClusterStore::from_cluster(
        super::redis_cluster_connection(&urls).await,
    ));
    let finale = Guard::new(fresh)
        .prefix(ns)
        .lease(lease)
        .in_flight(InFlight::Reject);
    let mut stuck = 0;
    let delivered = rounds * keys;
    for key in 0..delivered {
        let effects = effects.clone();
        let delivered = finale
            .run(&key_name(key), &key, || async move {
                effects[key].fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>(key)
            })
            .await;
        if let Err(e) = delivered {
            eprintln!("final delivery of key {key}: {e}");
            stuck += 1;
        }
    }
    Figures {
        keys: delivered,
        rounds,
        doubles: effects[..delivered]
            .iter()
            .filter(|n| n.load(Ordering::SeqCst) > 1)
            .count(),
        never_ran: effects[..delivered]
            .iter()
            .filter(|n| n.load(Ordering::SeqCst) == 0)
            .count(),
        stuck,
        store_errors: figures.store_errors.load(Ordering::SeqCst),
        unrecorded: figures.unrecorded.load(Ordering::SeqCst),
        unexplained_doubles: effects[..delivered]
            .iter()
            .zip(&figures.unrecorded_keys)
            .filter(|(n, unrecorded)| {
                n.load(Ordering::SeqCst) > 1 && !unrecorded.load(Ordering::SeqCst)
            })
            .count(),
    }
}

struct Counters {
    store_errors: AtomicUsize,
    unrecorded: AtomicUsize,
    /// Per key: whether a delivery of it ran the body and could not record the completion.
    unrecorded_keys: Vec<AtomicBool>,
}

impl Counters {
    fn new(keys: usize) -> Counters {
        Counters {
            store_errors: AtomicUsize::new(0),
            unrecorded: AtomicUsize::new(0),
            unrecorded_keys: (0..keys).map(|_| AtomicBool::new(false)).collect(),
        }
    }
}

fn key_name(key: usize) -> String {
    format!("order-{key}")
}

/// Delivers every key of `batch` twice at once, 64 deliveries in flight at most.
async fn deliver_round(
    guards: &[Guard<RedisClusterStore>; 2],
    batch: std::ops::Range<usize>,
    effects: &Effects,
    figures: &Arc<Counters>,
    started: &Arc<AtomicUsize>,
) {
    let permits = Arc::new(Semaphore::new(64));
    let mut tasks = Vec::new();
    for key in batch {
        for guard in guards {
            let (guard, effects, figures, started, permits) = (
                guard.clone(),
                effects.clone(),
                figures.clone(),
                started.clone(),
                permits.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let _permit = permits.acquire_owned().await.unwrap();
                started.fetch_add(1, Ordering::SeqCst);
                let ran = Arc::new(AtomicBool::new(false));
                let delivered = guard
                    .run(&key_name(key), &key, || {
                        let (effects, ran) = (effects.clone(), ran.clone());
                        async move {
                            effects[key].fetch_add(1, Ordering::SeqCst);
                            ran.store(true, Ordering::SeqCst);
                            // Some work after the effect, so failovers land mid-body too.
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            Ok::<_, Error>(key)
                        }
                    })
                    .await;
                match delivered {
                    Ok(_) | Err(Error::Rejected(Rejected::InProgress { .. })) => {}
                    Err(Error::Store(_)) if ran.load(Ordering::SeqCst) => {
                        figures.unrecorded.fetch_add(1, Ordering::SeqCst);
                        figures.unrecorded_keys[key].store(true, Ordering::SeqCst);
                    }
                    Err(Error::Store(_)) => {
                        figures.store_errors.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
}
