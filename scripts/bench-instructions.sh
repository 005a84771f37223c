#!/usr/bin/env bash
# Instruction counts of each stage of `benches/lint_vs_parse.rs` (bare parse, our load, the
# full pipeline with every lint on, and the analysed run), one thread, under callgrind: a
# measure machine load does not move. Prints each stage's count and its ratio to bare.
#
#   scripts/bench-instructions.sh [DIR ...]
#
# Default inputs: the newest lemmy_apub and graphile_worker under $CARGO_HOME/registry/src.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 2; }
if [ $# -eq 0 ]; then
    . "$here/bench-inputs.sh"
    mapfile -t inputs < <(default_bench_inputs)
    set -- "${inputs[@]}"
fi
[ $# -gt 0 ] || { echo "usage: $0 DIR..." >&2; exit 2; }
bench=$(cargo bench --bench lint_vs_parse --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*lint_vs_parse[^"]*\)".*/\1/p' | tail -1)
[ -x "$bench" ] || { echo "could not build the lint_vs_parse bench" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total() { # stage dir iterations -> instructions of the whole process
    RAYON_NUM_THREADS=1 BENCH_GROWTH=0 BENCH_STAGE=$1 valgrind --tool=callgrind \
        --callgrind-out-file="$out/cg" "$bench" "$2" "$3" >/dev/null 2>"$out/log" ||
        { cat "$out/log" >&2; exit 1; }
    sed -n 's/^summary: //p' "$out/cg"
}
# The work runs on the pool's thread, where callgrind's --toggle-collect does not reach: one
# run's count is the difference between three runs and one (set-up and the first run's
# warm-up cancel out), halved.
count() { # stage dir -> instructions of one run
    echo $(( ($(total "$1" "$2" 3) - $(total "$1" "$2" 1)) / 2 ))
}
printf '%-28s %14s %14s %8s %14s %8s %14s %8s\n' input bare load x full x analysed x
for dir in "$@"; do
    bare=$(count bare "$dir"); load=$(count load "$dir")
    full=$(count full "$dir"); analysed=$(count analysed "$dir")
    printf '%-28s %14d %14d %7.2fx %14d %7.2fx %14d %7.2fx\n' "$(basename "$dir")" \
        "$bare" "$load" "$(echo "$load/$bare" | bc -l)" "$full" "$(echo "$full/$bare" | bc -l)" \
        "$analysed" "$(echo "$analysed/$bare" | bc -l)"
done
