//! A private Redis Cluster for destructive tests: six `redis-server` processes (three primaries,
//! three replicas) on free loopback ports, state in a temporary directory, all killed and
//! removed when the value is dropped (a panicking test too). Nodes may be killed and restarted.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long cluster operations (start, promotion, healing) may take before the test fails:
/// generous, a loaded 2-core machine stalls processes for seconds, and nothing asserted depends
/// on these durations.
pub const CLUSTER_PATIENCE: Duration = Duration::from_secs(120);

pub struct PrivateCluster {
    dir: PathBuf,
    ports: Vec<u16>,
    /// `None` while a node is killed.
    nodes: Vec<Option<Child>>,
    node_timeout_ms: u64,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    pub failed: bool,
    /// The id of its primary, for a replica.
    pub primary_id: Option<String>,
    pub has_slots: bool,
}

impl PrivateCluster {
    /// Starts six nodes and creates the cluster (`--cluster-replicas 1`), then waits until every
    /// node reports `cluster_state:ok` with all slots served. `node_timeout_ms` is
    /// `cluster-node-timeout`: how long a silent primary takes to be failed over.
    pub async fn start(name: &str, node_timeout_ms: u64) -> PrivateCluster {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "idem-cluster-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ports = free_ports(6, nanos as u64 ^ u64::from(std::process::id()));
        let mut cluster = PrivateCluster {
            dir,
            ports: ports.clone(),
            nodes: Vec::new(),
            node_timeout_ms,
        };
        for &port in &ports {
            std::fs::create_dir_all(cluster.node_dir(port)).unwrap();
            let child = cluster.spawn(port);
            cluster.nodes.push(Some(child));
        }
        for &port in &ports {
            poll("a node answering PING", || async move {
                cli(port, &["ping"]).await.as_deref() == Some("PONG")
            })
            .await;
        }
        let mut create = tokio::process::Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for port in &ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let created = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .await
            .expect("redis-cli");
        assert!(
            created.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        cluster.wait_healthy().await;
        // A replica that never finished its first sync cannot be promoted (its data counts as
        // too old), so a failover needs this first.
        cluster.wait_replicated().await;
        cluster
    }

    fn node_dir(&self, port: u16) -> PathBuf {
        self.dir.join(port.to_string())
    }

    fn spawn(&self, port: u16) -> Child {
        let dir = self.node_dir(port);
        Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(&dir)
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args(["--cluster-node-timeout", &self.node_timeout_ms.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            // Sync replicas at once rather than after the default 5 s of batching.
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH")
    }

    /// `redis://127.0.0.1:port` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    fn live_ports(&self) -> Vec<u16> {
        self.ports
            .iter()
            .zip(&self.nodes)
            .filter(|(_, n)| n.is_some())
            .map(|(p, _)| *p)
            .collect()
    }

    /// Waits until every live node reports `cluster_state:ok`, all 16384 slots served and no
    /// node failed or suspected.
    pub async fn wait_healthy(&self) {
        let ports = self.live_ports();
        poll("the cluster healthy on every live node", || {
            let ports = ports.clone();
            async move {
                for port in ports {
                    let Some(info) = cli(port, &["cluster", "info"]).await else {
                        return false;
                    };
                    let ok = ["cluster_state:ok", "cluster_slots_ok:16384"]
                        .iter()
                        .all(|l| info.lines().any(|line| line.trim() == *l));
                    let suspect = info.lines().any(|l| {
                        l.starts_with("cluster_slots_pfail:") && l.trim() != "cluster_slots_pfail:0"
                    });
                    if !ok || suspect {
                        return false;
                    }
                }
                true
            }
        })
        .await;
    }

    /// Waits until every primary serving slots has a replica online (`INFO replication`), as
    /// `WAIT 1` needs.
    pub async fn wait_replicated(&self) {
        poll("a replica online for every primary", || async {
            let nodes = self.nodes().await;
            for n in nodes.iter().filter(|n| n.primary && n.has_slots) {
                let Some(info) = cli(n.port, &["info", "replication"]).await else {
                    return false;
                };
                let online = info
                    .lines()
                    .any(|l| l.starts_with("slave0:") && l.contains("state=online"));
                if !online {
                    return false;
                }
            }
            true
        })
        .await;
    }

    /// The cluster's nodes as a live node sees them.
    pub async fn nodes(&self) -> Vec<Node> {
        for port in self.live_ports() {
            if let Some(text) = cli(port, &["cluster", "nodes"]).await {
                return parse_nodes(&text);
            }
        }
        panic!("no live node answers CLUSTER NODES");
    }

    /// A primary serving slots and its replica: `(primary port, replica port)`. Polled: a node
    /// learns the roles of the others by gossip.
    pub async fn primary_and_replica(&self) -> (u16, u16) {
        let started = Instant::now();
        loop {
            let nodes = self.nodes().await;
            let pair = nodes
                .iter()
                .filter(|n| n.primary && n.has_slots && !n.failed)
                .find_map(|primary| {
                    nodes
                        .iter()
                        .find(|n| n.primary_id.as_deref() == Some(primary.id.as_str()) && !n.failed)
                        .map(|replica| (primary.port, replica.port))
                });
            if let Some(pair) = pair {
                return pair;
            }
            assert!(
                started.elapsed() < CLUSTER_PATIENCE,
                "no primary with a replica in {nodes:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether `port` reports itself a primary serving slots.
    pub async fn is_serving_primary(port: u16) -> bool {
        cli(port, &["cluster", "nodes"]).await.is_some_and(|text| {
            parse_nodes(&text)
                .iter()
                .any(|n| n.port == port && n.primary && n.has_slots)
        })
    }

    /// `CLUSTER FAILOVER` on a replica (a coordinated failover: its primary stops writes until
    /// the replica has caught up), then waits until the replica serves the slots. Redis gives
    /// up a manual failover whose handshake takes more than 5 s (a busy machine), so one not
    /// done within 15 s is asked for again, up to [`CLUSTER_PATIENCE`].
    pub async fn manual_failover(&self, replica: u16) {
        let started = Instant::now();
        loop {
            let reply = cli(replica, &["cluster", "failover"]).await;
            // Asked again after a promotion the last poll missed: a primary refuses it.
            if reply.as_deref() != Some("OK") && Self::is_serving_primary(replica).await {
                return;
            }
            assert_eq!(reply.as_deref(), Some("OK"), "CLUSTER FAILOVER");
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(15) {
                if Self::is_serving_primary(replica).await {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(
                started.elapsed() < CLUSTER_PATIENCE,
                "the replica promoted: not within {CLUSTER_PATIENCE:?}"
            );
        }
    }

    /// Kills a node with SIGKILL (no shutdown, no save).
    pub fn kill(&mut self, port: u16) {
        let i = self.ports.iter().position(|p| *p == port).unwrap();
        if let Some(mut child) = self.nodes[i].take() {
            child.kill().ok();
            child.wait().ok();
        }
    }

    /// Stops a node's process (SIGSTOP): it neither answers nor replicates until resumed.
    pub fn pause(&mut self, port: u16) {
        self.signal(port, "-STOP");
    }

    /// Resumes a paused node (SIGCONT).
    pub fn resume(&mut self, port: u16) {
        self.signal(port, "-CONT");
    }

    fn signal(&self, port: u16, signal: &str) {
        let i = self.ports.iter().position(|p| *p == port).unwrap();
        let pid = self.nodes[i].as_ref().expect("a running node").id();
        let sent = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill {signal} {pid}");
    }

    /// Starts a killed node again, with its `nodes.conf` (it rejoins, as a replica of the node
    /// promoted in its place) and no data.
    pub fn restart(&mut self, port: u16) {
        let i = self.ports.iter().position(|p| *p == port).unwrap();
        assert!(self.nodes[i].is_none(), "node {port} is running");
        self.nodes[i] = Some(self.spawn(port));
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        for child in self.nodes.iter_mut().flatten() {
            // A stopped process dies of SIGKILL as well.
            child.kill().ok();
            child.wait().ok();
        }
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

fn parse_nodes(text: &str) -> Vec<Node> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let port = f[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
            let flags: Vec<&str> = f[2].split(',').collect();
            Some(Node {
                id: f[0].to_owned(),
                port,
                primary: flags.contains(&"master"),
                failed: flags.iter().any(|x| x.starts_with("fail")),
                primary_id: (f[3] != "-").then(|| f[3].to_owned()),
                has_slots: f.len() > 8,
            })
        })
        .collect()
}

/// Runs `redis-cli -p port args..`; the reply without `\r`, or `None` when the node does not
/// answer (within 10 s).
pub async fn cli(port: u16, args: &[&str]) -> Option<String> {
    let run = tokio::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let text = text.trim_end().to_owned();
    (out.status.success() && !text.starts_with("Could not connect")).then_some(text)
}

/// Polls `condition` every 100 ms until it holds; panics after [`CLUSTER_PATIENCE`].
pub async fn poll<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !condition().await {
        assert!(
            started.elapsed() < CLUSTER_PATIENCE,
            "{what}: not within {CLUSTER_PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` ports whose cluster-bus port (+10000) is free too, from 20000-44999.
fn free_ports(n: usize, seed: u64) -> Vec<u16> {
    let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    let mut ports = Vec::with_capacity(n);
    let mut x = seed | 1;
    while ports.len() < n {
        // xorshift: a spread of candidates, different per test and run.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let p = 20_000 + (x % 25_000) as u16;
        if !ports.contains(&p) && free(p) && free(p + 10_000) {
            ports.push(p);
        }
    }
    ports
}
