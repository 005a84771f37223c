# Sourced by the bench scripts: the default inputs, the newest lemmy_apub and graphile_worker
# under $CARGO_HOME/registry/src, one directory per line (a missing crate is noted on stderr).
default_bench_inputs() {
    local reg="${CARGO_HOME:-$HOME/.cargo}/registry/src" krate dir
    for krate in lemmy_apub graphile_worker; do
        dir=$(ls -d "$reg"/*/"$krate"-[0-9]* 2>/dev/null | sort -V | tail -1)
        if [ -n "$dir" ]; then echo "$dir"; else echo "note: no $krate under $reg: skipped" >&2; fi
    done
}
