//! Failovers of a Redis Cluster during a run of guarded calls, on a private cluster each test
//! starts (six processes on free ports, `cluster-node-timeout` 2 s, torn down at the end): a
//! coordinated `CLUSTER FAILOVER`, and a primary killed with SIGKILL (with its replica in sync,
//! or lagging), without and with `wait_for_replicas`. Double effects and stuck keys are counted (`common::failover`); what the
//! guard guarantees is asserted, the rest printed (see the guard README for the figures).
//!
//! A key whose body ran but whose completion could not be written before its lease ended runs
//! again after the lease, whatever the store promises, and how many such keys a run has is the
//! machine's timing (how long the clients take to reach the promoted primary). So "no key runs
//! twice" is asserted as [`Figures::unexplained_doubles`]: no double beyond those keys.

mod common;

use std::time::Duration;

use common::cluster::PrivateCluster;
use common::failover::{self, Disruption, Figures};

const KEYS: usize = 300;
const NODE_TIMEOUT_MS: u64 = 2_000;

async fn failover_run(
    name: &str,
    wait: Option<(u32, Duration)>,
    disruption: Disruption,
) -> Figures {
    let mut cluster = PrivateCluster::start(name, NODE_TIMEOUT_MS).await;
    let figures = failover::run(&mut cluster, KEYS, failover::LEASE, wait, disruption).await;
    println!("{name}: {figures:?}");
    assert_eq!(
        figures.never_ran, 0,
        "every key ran once the cluster was whole"
    );
    figures
}

/// A coordinated failover: the primary stops taking writes until its replica has every one of
/// them, so no write is lost and no key runs twice, with or without `WAIT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_failover_loses_nothing() {
    let f = failover_run("manual", None, Disruption::ManualFailover).await;
    assert_eq!((f.unexplained_doubles, f.stuck), (0, 0), "{f:?}");
}

/// A primary killed mid-run: writes it had not replicated yet are lost with it, so a key can
/// run twice (counted, not asserted: how many depends on timing); no key stays stuck once its
/// lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_primary_leaves_no_stuck_key() {
    let f = failover_run("kill", None, Disruption::KillPrimary).await;
    assert_eq!(f.stuck, 0, "{f:?}");
}

/// With `wait_for_replicas(1, ..)` a body runs only once its claim is on the replica, and a
/// completion counts only once it is there too: with one replica per primary, the one promoted
/// holds every acknowledged claim and completion, so no key runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_primary_with_wait_for_replicas_runs_no_key_twice() {
    let wait = Some((1, Duration::from_secs(2)));
    let f = failover_run("kill-wait", wait, Disruption::KillPrimary).await;
    assert_eq!((f.unexplained_doubles, f.stuck), (0, 0), "{f:?}");
}

/// The same with the replica cut off when the primary dies (its link closed a second before):
/// every write of that second is lost with the primary. Without `WAIT` those keys run again (see the
/// bench for the count); with it, the claims of that second were not acknowledged, so their
/// bodies never ran, and no key runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_primary_with_lagging_replica_and_wait_for_replicas_runs_no_key_twice() {
    let wait = Some((1, Duration::from_secs(2)));
    let f = failover_run("lag-wait", wait, Disruption::KillPrimaryWhileReplicaLags).await;
    assert_eq!((f.unexplained_doubles, f.stuck), (0, 0), "{f:?}");
}
