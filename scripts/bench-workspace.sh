#!/usr/bin/env bash
# Issue 36's workspace numbers, in one run: the growth of n members that all depend on one
# shared member (n doubling; at most 2.1x per doubling) and of a chain of members, then a
# whole workspace linted as its users run it (`--workspace`) against the bare parallel syn
# parse of the same files (goal: at most 2.0x), medians of interleaved iterations.
#
#   scripts/bench-workspace.sh WORKSPACE_DIR [ITERATIONS] [OLD_BINARY,...]
#
# WORKSPACE_DIR is e.g. lemmy at 439734dd:
#   git --git-dir=/work/.mirror/LemmyNet+lemmy/repo archive 439734dd638a2c06a2f907beab7dcf4646e88f86 | tar -x -C /tmp/lemmy
# ITERATIONS defaults to 7. OLD_BINARY (a `cargo-idem-lint` build, e.g. main's) is run on the
# workspace too, interleaved with the stages, and printed against the same bare parse.
# A `rust-toolchain.toml` in the workspace is overridden with this repository's toolchain
# (`cargo metadata` would otherwise ask rustup for the pinned one).
set -euo pipefail
dir=${1:?usage: scripts/bench-workspace.sh WORKSPACE_DIR [ITERATIONS] [OLD_BINARY,...]}
iterations=${2:-7}
old=${3:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-$(rustup show active-toolchain 2>/dev/null | cut -d' ' -f1)}
export RUSTUP_TOOLCHAIN
echo "== growth: n members sharing one, and a chain"
cargo bench --bench growth -- "$iterations" members_sharing_one member_chain
echo
echo "== $dir --workspace against the bare parse"
BENCH_WORKSPACE=1 BENCH_GROWTH=0 BENCH_RSS=0 BENCH_BINARIES=$old \
    cargo bench --bench lint_vs_parse -- "$dir" "$iterations"
