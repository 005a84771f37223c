#!/usr/bin/env bash
# What the re-run cache saves, as whole-process wall time of the release binary on a copy of a
# crate (tokio by default, the newest under $CARGO_HOME/registry/src):
#
#   scripts/bench-cache.sh [CRATE_DIR] [ROUNDS]
#
# Each round runs, interleaved so machine load hits every case alike:
#   nocache  `--no-cache` (the analysis alone);
#   cold     an empty cache directory (the analysis plus writing the cache);
#   warm     the cache that run left, nothing changed;
#   edit     after appending a comment to one file (`src/lib.rs`, or the first file found).
# It prints the median of each and the ratios warm/cold and edit/cold (targets: <= 0.10 and
# <= 0.30), with the load average, and checks that every case printed the same findings
# (the edit is a comment: no finding moves).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${CARGO_TARGET_DIR:-$repo/target}/release/cargo-idem-lint
[[ -x $bin ]] || { echo "error: no binary at $bin (cargo build --release)" >&2; exit 2; }
cargo_home=${CARGO_HOME:-$HOME/.cargo}
src=${1:-$(ls -d "$cargo_home"/registry/src/*/tokio-1* 2>/dev/null | sort -V | tail -1)}
rounds=${2:-5}
[[ -d $src ]] || { echo "error: no crate to measure (fetch tokio, or pass a directory)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/crate"
rm -rf "$work/crate/target"
crate=$work/crate
edited=$crate/src/lib.rs
[[ -f $edited ]] || edited=$(find "$crate" -name '*.rs' | sort | head -1)

# run NAME CACHE_DIR|"" : appends the wall time and the CPU time (user + system, children
# included: `cargo metadata`) in ms to $work/NAME and $work/NAME.cpu, the output to NAME.out.
# On a loaded machine the wall time mostly measures waiting for a core; CPU time does not.
run() {
    local name=$1 cache=$2 flag=()
    [[ -z $cache ]] && flag=(--no-cache)
    IDEM_LINT_CACHE_DIR=${cache:-$work/unused} /usr/bin/time -f "%e %U %S" -o "$work/time" \
        "$bin" idem-lint "$crate" --message-format json "${flag[@]}" >"$work/$name.out" || true
    awk '{printf "%d\n", $1 * 1000}' "$work/time" >>"$work/$name"
    awk '{printf "%d\n", ($2 + $3) * 1000}' "$work/time" >>"$work/$name.cpu"
    if [[ $name != nocache ]] && ! cmp -s "$work/nocache.out" "$work/$name.out"; then
        echo "error: $name printed other findings than --no-cache" >&2
        exit 1
    fi
}

# Warm up the page cache and cargo's metadata (not measured).
"$bin" idem-lint "$crate" --no-cache >/dev/null 2>&1 || true
for ((i = 1; i <= rounds; i++)); do
    run nocache ""
    rm -rf "$work/cache"
    run cold "$work/cache"
    run warm "$work/cache"
    echo "// edit $i" >>"$edited"
    run edit "$work/cache"
done

median() { sort -n "$work/$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "input: $src ($(find "$crate" -name '*.rs' | wc -l) .rs files), $rounds rounds, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in wall cpu; do
    suffix=""
    [[ $kind == cpu ]] && suffix=.cpu
    nocache=$(median nocache$suffix) cold=$(median cold$suffix) warm=$(median warm$suffix) edit=$(median edit$suffix)
    echo "$kind median ms: nocache $nocache, cold $cold, warm $warm, edit $edit"
    awk -v k="$kind" -v c="$cold" -v w="$warm" -v e="$edit" -v n="$nocache" 'BEGIN {
        printf "%s: warm/cold %.3f (target <= 0.10), edit/cold %.3f (target <= 0.30), cold/nocache %.3f\n", k, w / c, e / c, c / n
    }'
done
