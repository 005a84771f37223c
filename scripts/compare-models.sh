#!/usr/bin/env bash
# Whether two builds lower every file to the same model: each build lints the same crates into
# its own re-run cache (`IDEM_LINT_CACHE_DIR`), and every cached model and outline is compared
# byte for byte after its header (the header holds the build's tag). For a change to the
# lowering that must not change the model, a stronger check than the findings.
#
#   scripts/compare-models.sh OLD_BIN NEW_BIN OUT_DIR [DIR ...]
#
# DIRs default to every fixture crate and every crate under $CARGO_HOME/registry/src. Prints
# the entries that differ and a summary (also in OUT_DIR/report).
#
# One difference is not the lowering's: the cache is keyed by a file's text, module path and
# test status, and the model stored keeps the path of the file written first. Two files with
# the same text (generated bindings for several architectures) can be stored under either
# path, whichever thread got there first, so a differing entry whose two payloads name
# different paths is noise; running OLD_BIN against itself shows the same entries.
set -uo pipefail
old=${1:?usage: scripts/compare-models.sh OLD_BIN NEW_BIN OUT_DIR [DIR ...]}
new=${2:?usage: scripts/compare-models.sh OLD_BIN NEW_BIN OUT_DIR [DIR ...]}
out=${3:?usage: scripts/compare-models.sh OLD_BIN NEW_BIN OUT_DIR [DIR ...]}
shift 3
repo=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out" && mkdir -p "$out"
if [ $# -eq 0 ]; then
    { find "$repo/fixtures" -name Cargo.toml -printf '%h\n'
      ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/*/; } | sort -u >"$out/inputs"
else
    printf '%s\n' "$@" >"$out/inputs"
fi
while read -r dir; do
    IDEM_LINT_CACHE_DIR="$out/old" "$old" idem-lint "$dir" >/dev/null 2>&1
    IDEM_LINT_CACHE_DIR="$out/new" "$new" idem-lint "$dir" >/dev/null 2>&1
done <"$out/inputs"
o=$(ls -d "$out"/old/*/ | head -1)
n=$(ls -d "$out"/new/*/ | head -1)
# Magic (8), kind (1), key (16), payload length (8), tag (32): see src/cache/disk.rs.
header=65
while read -r entry; do
    if [ ! -f "$n/$entry" ]; then
        echo "missing $entry"
    elif ! cmp -s <(tail -c +$((header + 1)) "$o/$entry") <(tail -c +$((header + 1)) "$n/$entry"); then
        echo "differ $entry"
    fi
done < <(cd "$o" && find models outlines -type f | tee "$out/entries") | tee "$out/report"
summary="$(wc -l <"$out/entries") entries, $(grep -c '^differ' "$out/report") differ, $(grep -c '^missing' "$out/report") missing from the new build's cache"
echo "$summary" | tee -a "$out/report"
