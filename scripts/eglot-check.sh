#!/usr/bin/env bash
# Checks the README's Emacs eglot setup by hand (not part of .ci/run, which tests Neovim):
# batch Emacs with Debian's eglot and rust-mode opens a copy of fixtures/lsp, prints the
# diagnostics it received, edits the buffer without saving and prints them again.
#
#   apt-get install emacs-nox elpa-eglot elpa-rust-mode   # Debian 12: Emacs 28.2, eglot 1.9
#   scripts/eglot-check.sh [BIN_DIR]                      # BIN_DIR holds cargo-idem-lint
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=${1:-$repo/target/release}
[ -x "$bin_dir/cargo-idem-lint" ] || { echo "no cargo-idem-lint in $bin_dir (cargo build --release)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$repo/fixtures/lsp" "$work/crate"
git -C "$work/crate" init -q   # project.el finds the project by its VC root
PATH="$bin_dir:$PATH" EG_ROOT="$work/crate" timeout 120 \
  emacs --batch -l "$repo/scripts/eglot/check.el" 2>&1 | grep -E '^==|^  line'
