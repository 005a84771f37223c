#!/usr/bin/env bash
# The re-run cache on a crate of many small modules, at doubling sizes: whether a cold run
# (an empty cache) stays linear in the number of files, and what the cache takes on disk.
#
#   scripts/bench-cache-modules.sh [SIZES] [ROUNDS]
#
# SIZES is a comma-separated list of module counts (default 25000,50000,100000,200000). For
# each, a crate whose `src/lib.rs` declares N modules of one small fn each is generated, and
# each round runs, interleaved so machine load hits every case alike:
#   nocache  `--no-cache`;
#   cold     an empty cache directory;
#   warm     the cache that run left.
# It prints per size the median wall time, CPU time (user + system) and system time of each
# case, cold/nocache, and the disk the cache takes after the cold run (allocated blocks, and
# the entries' lengths) against the 512 MiB budget; then, per doubling, the ratio of the cold
# run's medians (2.0 is linear). Every case must print the same findings.
# BIN=path times another binary (default: the release build). The work directory is made with
# mktemp: at 200,000 modules the crate and the cache take about 2.5 GB before pruning, so set
# TMPDIR (to a tmpfs such as /dev/shm, say) where there is room.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/cargo-idem-lint}
[[ -x $bin ]] || { echo "error: no binary at $bin (cargo build --release)" >&2; exit 2; }
IFS=, read -r -a sizes <<<"${1:-25000,50000,100000,200000}"
rounds=${2:-3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

generate() {
    local dir=$1 n=$2
    mkdir -p "$dir/src"
    printf '[package]\nname = "many"\nversion = "0.1.0"\nedition = "2021"\n' >"$dir/Cargo.toml"
    awk -v n="$n" -v d="$dir/src" 'BEGIN {
        for (i = 0; i < n; i++) {
            printf "mod m%d;\n", i >(d "/lib.rs")
            f = d "/m" i ".rs"
            printf "pub fn f%d(x: u64) -> u64 {\n    x + %d\n}\n", i, i >f
            close(f)
        }
    }'
}

# run SIZE NAME CACHE_DIR|"" : appends wall, CPU and system ms to $work/SIZE.NAME.{wall,cpu,sys}.
run() {
    local n=$1 name=$2 cache=$3 flag=()
    [[ -z $cache ]] && flag=(--no-cache)
    IDEM_LINT_CACHE_DIR=${cache:-$work/unused} /usr/bin/time -f "%e %U %S" -o "$work/time" \
        "$bin" idem-lint "$work/crate$n" --message-format json "${flag[@]}" >"$work/$name.out" || true
    read -r wall user sys <"$work/time"
    awk -v w="$wall" 'BEGIN {printf "%d\n", w * 1000}' >>"$work/$n.$name.wall"
    awk -v u="$user" -v s="$sys" 'BEGIN {printf "%d\n", (u + s) * 1000}' >>"$work/$n.$name.cpu"
    awk -v s="$sys" 'BEGIN {printf "%d\n", s * 1000}' >>"$work/$n.$name.sys"
    if [[ $name != nocache ]] && ! cmp -s "$work/nocache.out" "$work/$name.out"; then
        echo "error: $name printed other findings than --no-cache on $n modules" >&2
        exit 1
    fi
}

median() { sort -n "$work/$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "binary: $bin; $rounds rounds; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in "${sizes[@]}"; do
    generate "$work/crate$n" "$n"
    for ((i = 1; i <= rounds; i++)); do
        run "$n" nocache ""
        rm -rf "$work/cache"
        run "$n" cold "$work/cache"
        disk=$(du -s --block-size=1 "$work/cache" | cut -f1)
        apparent=$(du -s --apparent-size --block-size=1 "$work/cache" | cut -f1)
        run "$n" warm "$work/cache"
    done
    line="$n modules:"
    for name in nocache cold warm; do
        line+=" $name $(median "$n.$name.wall")/$(median "$n.$name.cpu")/$(median "$n.$name.sys")"
    done
    echo "$line ms (wall/cpu/sys medians)"
    awk -v c="$(median "$n.cold.cpu")" -v p="$(median "$n.nocache.cpu")" -v d="$disk" -v a="$apparent" 'BEGIN {
        printf "  cold/nocache cpu %.2f; cache after the cold run: %.0f MiB on disk (%.0f MiB of lengths), budget 512 MiB\n", c / p, d / 1048576, a / 1048576
    }'
    rm -rf "$work/crate$n" "$work/cache"
done
prev=""
for n in "${sizes[@]}"; do
    if [[ -n $prev ]]; then
        awk -v a="$prev" -v b="$n" -v cw="$(median "$prev.cold.wall")" -v nw="$(median "$n.cold.wall")" \
            -v cc="$(median "$prev.cold.cpu")" -v nc="$(median "$n.cold.cpu")" \
            -v cs="$(median "$prev.cold.sys")" -v ns="$(median "$n.cold.sys")" \
            -v pc="$(median "$prev.nocache.cpu")" -v qc="$(median "$n.nocache.cpu")" 'BEGIN {
            printf "%d -> %d modules, ratio of cold medians: wall %.2f, cpu %.2f, sys %.2f (nocache cpu %.2f)\n", a, b, nw / cw, nc / cc, ns / cs, qc / pc
        }'
    fi
    prev=$n
done
