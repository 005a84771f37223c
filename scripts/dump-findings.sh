#!/usr/bin/env bash
# Dumps every finding of `cargo idem-lint` (JSON lines, all lints at their defaults) on every
# fixture, on tokio, on rust-analyzer's hir-ty and on a few real crates with findings, one
# file per input, so two builds can be compared with `diff -r`:
#
#   scripts/dump-findings.sh OUT_DIR [BINARY]
#   diff -r before/ after/
#
# BINARY defaults to target/release/cargo-idem-lint (honours CARGO_TARGET_DIR). The real
# crates are the newest versions under $CARGO_HOME/registry/src (fetch them with a scratch
# project and `cargo fetch`); a missing one is skipped with a note on stderr. Each dump ends
# with the exit code, so a run that starts failing shows up as a difference too.
set -euo pipefail

out=${1:?usage: scripts/dump-findings.sh OUT_DIR [BINARY]}
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${2:-${CARGO_TARGET_DIR:-$repo/target}/release/cargo-idem-lint}
[[ -x $bin ]] || { echo "error: no binary at $bin (cargo build --release)" >&2; exit 2; }
mkdir -p "$out"
cargo_home=${CARGO_HOME:-$HOME/.cargo}
crates=(tokio ra_ap_hir_ty aws-throwaway cfn-teleport dynamo-es apalis-sql)

dump() { # NAME DIR
    local file="$out/$1.json" rc=0
    # --no-cache only exists once the re-run cache does; the dumps must compare the analysis.
    "$bin" idem-lint "$2" --message-format json $no_cache >"$file" 2>"$out/$1.stderr" || rc=$?
    echo "exit $rc" >>"$file"
}
# DUMP_CACHED=1 keeps the cache on (to compare cached runs with uncached ones).
no_cache=""
if [[ -z ${DUMP_CACHED:-} ]] && "$bin" idem-lint --help 2>/dev/null | grep -q -- --no-cache; then
    no_cache=--no-cache
fi

# The fixtures, found as tests/ui.rs finds them: a directory with a Cargo.toml, else one
# holding .rs files, else its sub-directories.
fixtures() {
    local dir=$1
    if [[ -f $dir/Cargo.toml ]] || compgen -G "$dir/*.rs" >/dev/null; then
        echo "$dir"
        return
    fi
    local sub
    for sub in "$dir"/*/; do
        if [[ -d $sub && $(basename "$sub") != target ]]; then fixtures "${sub%/}"; fi
    done
}
while read -r dir; do
    name=fixture-$(echo "${dir#"$repo"/fixtures/}" | tr / -)
    dump "$name" "$dir"
done < <(fixtures "$repo/fixtures")

for crate in "${crates[@]}"; do
    # A missing crate must not end the script (set -e, pipefail): it is skipped with a note.
    dir=$(ls -d "$cargo_home"/registry/src/*/"$crate"-[0-9]* 2>/dev/null | sort -V | tail -1 || true)
    if [[ -z $dir ]]; then
        echo "note: $crate not found under $cargo_home/registry/src, skipped" >&2
        continue
    fi
    dump "$crate" "$dir"
done
echo "$(cat "$out"/*.json | grep -c '"reason":"compiler-message"' || true) findings in $(ls "$out"/*.json | wc -l) inputs: $out" >&2
