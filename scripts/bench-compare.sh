#!/usr/bin/env bash
# Wall-time before/after of two builds of `benches/lint_vs_parse.rs`, measured in one run: the
# two bench binaries run alternately ROUNDS times on the same inputs (so machine noise hits
# both alike), and each prints its ratios to the bare parse. Prints, per input and stage, the
# median over the rounds of each binary's ratio, and the range.
#
#   scripts/bench-compare.sh OLD_BENCH NEW_BENCH [ROUNDS] [DIR ...]
#
# A bench binary is what `cargo bench --bench lint_vs_parse --no-run` builds (copy the old one
# before rebuilding). ROUNDS defaults to 6, each of 11 interleaved iterations; inputs default
# to the newest lemmy_apub and graphile_worker under $CARGO_HOME/registry/src. The machine
# should be otherwise idle: a compile on the other core moves single runs by half. CPU=1
# compares the ratios of the process's CPU time instead of wall time.
set -euo pipefail
old=${1:?usage: scripts/bench-compare.sh OLD_BENCH NEW_BENCH [ROUNDS] [DIR ...]}
new=${2:?usage: scripts/bench-compare.sh OLD_BENCH NEW_BENCH [ROUNDS] [DIR ...]}
rounds=${3:-6}
shift $(( $# < 3 ? $# : 3 ))
if [ $# -eq 0 ]; then
    . "$(cd "$(dirname "$0")" && pwd)/bench-inputs.sh"
    mapfile -t inputs < <(default_bench_inputs)
    set -- "${inputs[@]}"
fi
[ $# -gt 0 ] || { echo "no inputs" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
    for which in old new; do
        bin=$old
        [ "$which" = new ] && bin=$new
        # The wall table's rows: input files lines bare load (x) full (x) analysed (x)
        # findings; with CPU=1 the CPU table's: input bare load (x) full (x) analysed (x).
        BENCH_GROWTH=0 BENCH_RSS=0 "$bin" "$@" 11 | awk -v w="$which" -v cpu="${CPU:-0}" '
            !cpu && $1 == "input" || cpu && $1 == "cpu" { table = 1; next }
            table && NF == 0 { table = 0 }
            table && !cpu && NF >= 11 { r = 6 }
            table && cpu && NF >= 8 { r = 4 }
            table && r {
                for (f = r; f <= r + 4; f += 2) gsub(/[()x]/, "", $f)
                print w, $1, $r, $(r + 2), $(r + 4)
                r = 0
            }' >>"$out"
    done
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    which, name, load, full, analysed = line.split()
    rows[(name, which)].append((float(load), float(full), float(analysed)))
print(f"{'input':<28} {'stage':<9} {'old median':>10} {'new median':>10}   old range     new range")
for name in sorted({n for n, _ in rows}):
    for i, stage in enumerate(["load", "full", "analysed"]):
        o = [r[i] for r in rows[(name, "old")]]
        n = [r[i] for r in rows[(name, "new")]]
        print(f"{name:<28} {stage:<9} {statistics.median(o):>9.2f}x {statistics.median(n):>9.2f}x"
              f"   {min(o):.2f}-{max(o):.2f}x   {min(n):.2f}-{max(n):.2f}x")
PY
