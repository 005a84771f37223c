//! Redis Cluster: what `wait_for_replicas` costs per call and what it changes when a primary
//! dies.
//!
//! `cargo bench -p idem-guard --features redis-cluster --bench cluster_failover`
//!
//! 1. Latency on the local cluster (`REDIS_CLUSTER_URLS`, `.ci/run` starts it): `CALLS`
//!    sequential first deliveries (reserve, an empty body, complete) and as many duplicates
//!    (replays), without and with `wait_for_replicas(1, 1 s)`; the median of each.
//! 2. Failovers on private clusters (six fresh processes per run, `cluster-node-timeout` 2 s):
//!    `RUNS` runs of each disruption (a primary killed with SIGKILL, with its replica in sync or
//!    cut off) without and with `wait_for_replicas(1, 2 s)`, a fresh batch of 300 keys per round,
//!    each delivered twice at once, a 10 s lease; double effects, stuck keys and deliveries
//!    refused on store errors (`tests/common/failover.rs`).
//!
//! `CALLS` (default 2000; 0 skips part 1), `RUNS` (default 3) and `DISRUPTIONS` (`kill` or
//! `lag`: only that one) are environment variables.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::cluster::PrivateCluster;
use common::failover::{self, Disruption, Figures};
use idem_guard::{Error, Guard, RedisClusterStore};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Medians of `calls` first deliveries and `calls` duplicates.
async fn latency(store: RedisClusterStore, calls: usize) -> (Duration, Duration) {
    let guard = Guard::new(store).prefix(common::unique("bench"));
    let mut first = Vec::with_capacity(calls);
    let mut duplicate = Vec::with_capacity(calls);
    for pass in [&mut first, &mut duplicate] {
        for i in 0..calls {
            let started = Instant::now();
            let got: Result<usize, Error> =
                guard.run(&i.to_string(), &i, || async move { Ok(i) }).await;
            pass.push(started.elapsed());
            assert_eq!(got.unwrap(), i);
        }
    }
    (median(first), median(duplicate))
}

fn row(what: &str, runs: &[Figures]) {
    let sum = |f: fn(&Figures) -> usize| runs.iter().map(f).sum::<usize>();
    let each = |f: fn(&Figures) -> usize| {
        runs.iter()
            .map(|r| f(r).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "| {what} | {} ({}) | {} ({}) | {} ({}) | {} ({}) | {} ({}) |",
        sum(|f| f.keys),
        each(|f| f.keys),
        sum(|f| f.doubles),
        each(|f| f.doubles),
        sum(|f| f.stuck),
        each(|f| f.stuck),
        sum(|f| f.store_errors),
        each(|f| f.store_errors),
        sum(|f| f.unrecorded),
        each(|f| f.unrecorded),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls = env_or("CALLS", 2_000);
    let runs = env_or("RUNS", 3);

    if calls > 0 {
        let plain = common::redis_cluster_store().await;
        // Warm-up: connections to every node, scripts loaded on every primary.
        latency(plain.clone(), 200).await;
        let (first, dup) = latency(plain.clone(), calls).await;
        let waiting = plain.wait_for_replicas(1, Duration::from_secs(1));
        let (wfirst, wdup) = latency(waiting, calls).await;
        println!("latency, {calls} sequential calls each, median:\n");
        println!("| | first delivery | duplicate |\n| --- | --- | --- |");
        println!("| no WAIT | {first:.1?} | {dup:.1?} |");
        println!("| wait_for_replicas(1, 1 s) | {wfirst:.1?} | {wdup:.1?} |");
        println!(
            "| ratio | {:.2}x | {:.2}x |\n",
            wfirst.as_secs_f64() / first.as_secs_f64(),
            wdup.as_secs_f64() / dup.as_secs_f64()
        );
    }

    println!("failovers, {runs} runs each, 300 fresh keys per round; totals (per run):\n");
    println!(
        "| disruption, setting | keys | double effects | stuck keys | refused on store errors | completion not recorded within the lease |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    // `DISRUPTIONS=kill` or `lag` runs one of the two.
    let only = std::env::var("DISRUPTIONS").unwrap_or_default();
    for disruption in [
        Disruption::KillPrimary,
        Disruption::KillPrimaryWhileReplicaLags,
    ] {
        let name = match disruption {
            Disruption::KillPrimaryWhileReplicaLags => "lag",
            _ => "kill",
        };
        if !only.is_empty() && only != name {
            continue;
        }
        for wait in [None, Some((1, Duration::from_secs(2)))] {
            let mut figures = Vec::new();
            for _ in 0..runs {
                let mut cluster = PrivateCluster::start("bench", 2_000).await;
                figures.push(
                    failover::run(&mut cluster, 300, Duration::from_secs(10), wait, disruption)
                        .await,
                );
            }
            let setting = match wait {
                None => "no WAIT",
                Some(_) => "wait_for_replicas(1, 2 s)",
            };
            row(&format!("{disruption:?}, {setting}"), &figures);
        }
    }
}
