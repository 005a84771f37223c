#!/usr/bin/env bash
# Issue 39 item 1, measured: a primary of a private Redis Cluster killed while hundreds of calls
# are in flight on one idem-guard store; how long that same store takes to answer on every
# shard again after the replica is promoted. Runs `tests/redis_cluster_recovery.rs` SETS x RUNS
# times (default 5 x 5), one failover per run, each on its own cluster of six fresh
# `redis-server` processes on free ports (so it disturbs no other cluster on the machine), and
# prints every run's line and the recovery times of each set (min / median / max).
#
#   scripts/cluster-recovery.sh                 5 sets of 5 runs
#   SETS=1 RUNS=3 scripts/cluster-recovery.sh
#   RECOVERY_IN_FLIGHT=1000 RECOVERY_WAIT=0 scripts/cluster-recovery.sh
#
# RECOVERY_IN_FLIGHT (calls in flight, default 600), RECOVERY_WAIT (replicas for
# `wait_for_replicas`, default 1; 0: none), RECOVERY_NODE_TIMEOUT_MS (cluster-node-timeout,
# default 2000) and RECOVERY_PATIENCE_S (how long a run waits for the store, default 30) are
# passed to the test. Not part of CI: CI runs the test once (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
sets="${SETS:-5}"
runs="${RUNS:-5}"
log="${LOG:-target/cluster-recovery.log}"
mkdir -p "$(dirname "$log")"
: >"$log"

# Built once; the runs start the test binary itself, so a build elsewhere in the tree does not
# hold them up on cargo's lock.
bin="$(cargo test -p idem-guard --features redis-cluster --test redis_cluster_recovery --no-run 2>&1 \
    | tee /dev/stderr | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -n 1)"
[ -x "$bin" ] || { echo "error: the test binary was not found" >&2; exit 1; }
# A copy: a build during the runs replaces the binary, and every run must measure the same code.
copy="$(mktemp /tmp/cluster-recovery.XXXXXX)"
trap 'rm -f "$copy"' EXIT
cp "$bin" "$copy"
chmod +x "$copy"
bin="$copy"
failed=0
for set in $(seq 1 "$sets"); do
    times=()
    for run in $(seq 1 "$runs"); do
        out="$("$bin" the_same_store --nocapture 2>&1)" && status=ok || { status=FAILED; failed=$((failed + 1)); }
        line="$(grep -o 'RECOVERY .*' <<<"$out" | tail -n 1 || true)"
        echo "set $set run $run $status: ${line:-no RECOVERY line}" | tee -a "$log"
        if [ "$status" = FAILED ]; then
            echo "$out" >>"$log"
        fi
        ms="$(grep -o 'recovery_ms=[0-9a-z]*' <<<"$line" | cut -d= -f2 || true)"
        times+=("${ms:-none}")
    done
    summary="$(printf '%s\n' "${times[@]}" | python3 -c '
import sys
v = [l.strip() for l in sys.stdin if l.strip()]
n = sorted(int(x) for x in v if x.isdigit())
none = len(v) - len(n)
if n:
    print(f"recovery ms: min {n[0]} median {n[len(n)//2]} max {n[-1]}" + (f", {none} never" if none else ""))
else:
    print(f"recovery: never in {none} runs")
')"
    echo "set $set: ${times[*]} -> $summary" | tee -a "$log"
done
echo "$failed failed of $((sets * runs)) runs (log: $log)"
[ "$failed" -eq 0 ]
