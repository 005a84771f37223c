#!/usr/bin/env bash
# The repository's test command: starts (installing them when missing) the services and tools
# the tests use, then runs `cargo test --workspace --all-features` (or `cargo test ARGS..` when
# arguments are given). Safe to run again: a service that already answers is reused.
#
#   PostgreSQL  DATABASE_URL        postgres://postgres@127.0.0.1:5432/test
#   Redis       REDIS_URL           redis://127.0.0.1:6379
#   Redis Cluster REDIS_CLUSTER_URLS six nodes on 127.0.0.1:7101-7106
#   MariaDB     MYSQL_URL           mysql://root@127.0.0.1:3306/test (idem-guard's `mysql` feature)
#   DynamoDB    DYNAMODB_ENDPOINT   http://127.0.0.1:5124 (moto, served by .ci/moto_serial.py)
#   nvim, pre-commit                (tests/nvim.rs, tests/ci_examples.rs)
#
# SQLite (idem-guard's `sqlite` feature) needs no server: each test has a file of its own.
#
# Only these are managed (and a Redis or moto URL on another loopback port): a URL of your own
# is used as given and must answer. Installing
# uses apt-get (Debian, Ubuntu) as root or through sudo, and a Python virtualenv under
# target/test-tools for moto and pre-commit when the system Python lacks them.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

DEFAULT_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL="redis://127.0.0.1:6379"
DEFAULT_MYSQL_URL="mysql://root@127.0.0.1:3306/test"
export DATABASE_URL="${DATABASE_URL:-$DEFAULT_DATABASE_URL}"
export REDIS_URL="${REDIS_URL:-$DEFAULT_REDIS_URL}"
export MYSQL_URL="${MYSQL_URL:-$DEFAULT_MYSQL_URL}"

log() { echo "test.sh: $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# Runs a command as root: directly, or through sudo.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "'$*' needs root (no sudo here); install the missing service yourself or run as root"
    fi
}

# Where services started here keep their state and logs.
if [ "$(id -u)" = 0 ]; then
    state_dir=/var/lib
    log_dir=/var/log
else
    state_dir="${XDG_STATE_HOME:-$HOME/.local/state}/idem-lint"
    log_dir="$state_dir/log"
fi

apt_updated=
apt_install() {
    command -v apt-get >/dev/null 2>&1 \
        || die "'$1' is missing and this script installs with apt-get only; install it and run again"
    if [ -z "$apt_updated" ]; then
        as_root apt-get update -qq >/dev/null
        apt_updated=1
    fi
    log "installing $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Waits up to 60 s for "$1" (a function) to succeed.
wait_for() {
    for _ in $(seq 1 120); do
        if "$1"; then
            return 0
        fi
        sleep 0.5
    done
    die "$2 did not come up within 60 s"
}

# Whether something listens on a loopback port.
port_taken() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The port of a URL `scheme://[user@]host:port[/path]`.
url_port() {
    local rest="${1#*://}"
    rest="${rest##*@}"
    rest="${rest%%/*}"
    echo "${rest##*:}"
}

# --- PostgreSQL -------------------------------------------------------------------------------
postgres_up() {
    if command -v pg_isready >/dev/null 2>&1; then
        pg_isready -q -d "$DATABASE_URL"
    else
        port_taken "$(url_port "$DATABASE_URL")"
    fi
}

# The tests connect as `postgres` without a password to the database `test`.
postgres_usable() {
    psql "$DATABASE_URL" -qtAc 'select 1' >/dev/null 2>&1
}

as_postgres() {
    if [ "$(id -u)" = 0 ]; then
        su postgres -s /bin/sh -c "$*"
    else
        sudo -u postgres sh -c "$*"
    fi
}

start_postgres() {
    local installed=
    if ! command -v pg_ctlcluster >/dev/null 2>&1; then
        apt_install postgresql
        installed=1
    fi
    local version
    version="$(ls /etc/postgresql | sort -V | tail -n 1)"
    [ -n "$version" ] || die "PostgreSQL is installed but has no cluster under /etc/postgresql"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    wait_for postgres_up PostgreSQL
    if ! postgres_usable && [ -n "$installed" ]; then
        # A cluster installed just now, for the tests only: trust loopback connections (as CI
        # images do) and create the database.
        local hba="/etc/postgresql/$version/main/pg_hba.conf"
        as_root sed -i -e '1i host all all 127.0.0.1/32 trust' -e '1i host all all ::1/128 trust' "$hba"
        as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
        as_postgres "psql -qtAc 'create database test'" >/dev/null 2>&1 || true
    fi
}

if [ "$DATABASE_URL" = "$DEFAULT_DATABASE_URL" ]; then
    command -v psql >/dev/null 2>&1 || apt_install postgresql-client
    postgres_up || start_postgres
    wait_for postgres_up PostgreSQL
    if ! postgres_usable; then
        # A running server without the database: create it (the role `postgres` exists on
        # every cluster; its password, if any, is the user's to give in DATABASE_URL).
        psql "postgres://postgres@127.0.0.1:5432/postgres" -qtAc 'create database test' >/dev/null 2>&1 \
            || as_postgres "psql -qtAc 'create database test'" >/dev/null 2>&1 || true
    fi
fi
postgres_usable || die "PostgreSQL at $DATABASE_URL does not accept the tests' connection (psql \"$DATABASE_URL\" fails)"

# --- Redis ------------------------------------------------------------------------------------
command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 \
    || apt_install redis-server redis-tools
# Debian starts the service it installs; the tests want their own, with no persistence.
redis_port="$(url_port "$REDIS_URL")"
redis_up() {
    [ "$(redis-cli -u "$REDIS_URL" ping 2>/dev/null || true)" = "PONG" ]
}
# A loopback URL with nothing behind it gets a server of ours on its port.
if [[ "$REDIS_URL" =~ ^redis://(127\.0\.0\.1|localhost):[0-9]+/?$ ]] && ! redis_up; then
    mkdir -p "$state_dir/redis" "$log_dir/redis"
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$redis_port" --save "" \
        --appendonly no --dir "$state_dir/redis" --logfile "$log_dir/redis/test-$redis_port.log"
fi
wait_for redis_up "Redis at $REDIS_URL"

# --- MariaDB: idem-guard's `mysql` feature tests ------------------------------------------------
# The tests connect over TCP as root without a password to the database `test` (a database of
# their own each, created from there).
mysql_port="$(url_port "$MYSQL_URL")"
mysql_usable() {
    mariadb --protocol=tcp -h 127.0.0.1 -P "$mysql_port" -u root -e 'select 1' test >/dev/null 2>&1
}
start_mariadb() {
    command -v mariadbd >/dev/null 2>&1 || apt_install mariadb-server mariadb-client
    if ! port_taken "$mysql_port"; then
        # No systemd on CI machines: Debian's init script, or mysqld_safe as the fallback.
        if [ -x /etc/init.d/mariadb ]; then
            as_root /etc/init.d/mariadb start >/dev/null 2>&1 || true
        fi
        if ! port_taken "$mysql_port"; then
            mkdir -p "$log_dir/mysql"
            as_root sh -c "nohup mysqld_safe --bind-address=127.0.0.1 --port=$mysql_port >>'$log_dir/mysql/test.log' 2>&1 </dev/null &"
        fi
    fi
    wait_for mariadb_answers "MariaDB on port $mysql_port"
    if ! mysql_usable; then
        # A server installed just now: Debian's root logs in through the Unix socket only. Give
        # the tests a password-less root over loopback TCP, and their database.
        as_root mariadb -u root -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
            GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
            CREATE DATABASE IF NOT EXISTS test;" \
            || die "could not set up root@127.0.0.1 and the database test on MariaDB"
    fi
}
mariadb_answers() {
    port_taken "$mysql_port" && mariadb-admin --protocol=tcp -h 127.0.0.1 -P "$mysql_port" ping >/dev/null 2>&1
}
if [ "$MYSQL_URL" = "$DEFAULT_MYSQL_URL" ]; then
    command -v mariadb >/dev/null 2>&1 || apt_install mariadb-client
    mysql_usable || start_mariadb
fi
if [ "$MYSQL_URL" = "$DEFAULT_MYSQL_URL" ]; then
    mysql_usable || die "MariaDB at $MYSQL_URL does not accept the tests' connection"
fi

# --- Redis Cluster: idem-guard's `redis-cluster` feature tests ---------------------------------
# Six nodes (three primaries, three replicas) on loopback ports 7101-7106 (cluster bus: +10000),
# nodes.conf under $state_dir/redis-cluster/PORT. A cluster already up is reused; nodes of a
# dead or broken earlier run are stopped and their state wiped, then the cluster is created
# afresh.
REDIS_CLUSTER_PORTS="7101 7102 7103 7104 7105 7106"
REDIS_CLUSTER_DEFAULT_URLS="$(for p in $REDIS_CLUSTER_PORTS; do printf 'redis://127.0.0.1:%s,' "$p"; done | sed 's/,$//')"
export REDIS_CLUSTER_URLS="${REDIS_CLUSTER_URLS:-$REDIS_CLUSTER_DEFAULT_URLS}"

# A node's reply without `\r`; a process on the port that does not answer gets 5 s.
cluster_cli() {
    timeout 5 redis-cli -h 127.0.0.1 -p "$1" "${@:2}" 2>/dev/null | tr -d '\r'
}

# Every node answers, sees six nodes and all 16384 slots served, and every replica is in sync
# with its primary (tests wait for replicas with `WAIT`).
redis_cluster_up() {
    local port info
    for port in $REDIS_CLUSTER_PORTS; do
        info="$(cluster_cli "$port" cluster info)" || return 1
        grep -qx 'cluster_state:ok' <<<"$info" || return 1
        grep -qx 'cluster_slots_ok:16384' <<<"$info" || return 1
        grep -qx 'cluster_known_nodes:6' <<<"$info" || return 1
        info="$(cluster_cli "$port" info replication)" || return 1
        if grep -qx 'role:master' <<<"$info"; then
            grep -q '^slave0:.*state=online' <<<"$info" || return 1
        else
            grep -qx 'master_link_status:up' <<<"$info" || return 1
        fi
    done
}

start_redis_cluster() {
    local port dir pid
    for port in $REDIS_CLUSTER_PORTS; do
        dir="$state_dir/redis-cluster/$port"
        # A node of ours from an earlier run (its working dir says so) is stopped; anything
        # else on the port is not ours to stop.
        if port_taken "$port"; then
            if [ "$(cluster_cli "$port" config get dir | sed -n 2p)" = "$dir" ]; then
                cluster_cli "$port" shutdown nosave >/dev/null || true
                for _ in $(seq 1 20); do port_taken "$port" || break; sleep 0.5; done
            fi
        fi
        # A node that does not answer (stopped, hung) leaves its pid file: the redis-server of
        # that pid serving this port is ours.
        if [ -f "$dir/redis.pid" ] && pid="$(cat "$dir/redis.pid")" && [ -n "$pid" ] \
            && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "redis-server" ] \
            && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q ":$port"; then
            kill -9 "$pid" 2>/dev/null || true
            for _ in $(seq 1 20); do port_taken "$port" || break; sleep 0.5; done
        fi
        for p in "$port" "$((port + 10000))"; do
            if port_taken "$p"; then
                die "port $p is taken by a process that is not a Redis Cluster node of scripts/test.sh; set REDIS_CLUSTER_URLS or free the port"
            fi
        done
    done
    # Every port is free: start the six nodes from empty state.
    for port in $REDIS_CLUSTER_PORTS; do
        dir="$state_dir/redis-cluster/$port"
        rm -rf "$dir"
        mkdir -p "$dir" "$log_dir/redis"
        redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$dir" \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
            --save "" --appendonly no --repl-diskless-sync-delay 0 --pidfile "$dir/redis.pid" \
            --logfile "$log_dir/redis/cluster-$port.log"
    done
    for port in $REDIS_CLUSTER_PORTS; do
        for _ in $(seq 1 60); do
            [ "$(cluster_cli "$port" ping)" = "PONG" ] && break
            sleep 0.5
        done
    done
    # shellcheck disable=SC2046
    redis-cli --cluster create $(for p in $REDIS_CLUSTER_PORTS; do printf '127.0.0.1:%s ' "$p"; done) \
        --cluster-replicas 1 --cluster-yes >"$log_dir/redis/cluster-create.log" 2>&1 \
        || die "redis-cli --cluster create failed; see $log_dir/redis/cluster-create.log"
}

# Nodes that answer may still be converging (a cluster created a moment ago): a few seconds
# before starting over.
redis_cluster_settles() {
    port_taken "${REDIS_CLUSTER_PORTS%% *}" || return 1
    for _ in $(seq 1 10); do
        redis_cluster_up && return 0
        sleep 0.5
    done
    return 1
}

if [ "$REDIS_CLUSTER_URLS" = "$REDIS_CLUSTER_DEFAULT_URLS" ]; then
    redis_cluster_settles || start_redis_cluster
    wait_for redis_cluster_up "Redis Cluster (ports $REDIS_CLUSTER_PORTS)"
fi

# --- Python tools: moto (DynamoDB) and pre-commit ----------------------------------------------
# The system Python when it has them; otherwise a virtualenv of our own (Debian's Python refuses
# `pip install` outside one), whose bin/ goes on PATH for the tests.
command -v python3 >/dev/null 2>&1 || apt_install python3 python3-venv
MOTO_VERSION=5.2.1
tools_dir="$repo/target/test-tools"
python=python3
venv_python() {
    if [ ! -x "$tools_dir/venv/bin/python" ]; then
        python3 -m venv "$tools_dir/venv" >/dev/null 2>&1 || {
            apt_install python3-venv
            python3 -m venv "$tools_dir/venv"
        }
    fi
    export PATH="$tools_dir/venv/bin:$PATH"
    python="$tools_dir/venv/bin/python"
}
[ -x "$tools_dir/venv/bin/python" ] && venv_python

# Neovim: tests/nvim.rs drives Neovim's built-in LSP client against `cargo idem-lint lsp`.
command -v nvim >/dev/null 2>&1 || apt_install neovim

# pre-commit: tests/ci_examples.rs runs the hook of .pre-commit-hooks.yaml through
# `pre-commit run` on a two-crate repository.
if ! command -v pre-commit >/dev/null 2>&1; then
    venv_python
    "$python" -m pip install --quiet "pre-commit==4.*"
    command -v pre-commit >/dev/null 2>&1 || die "pre-commit did not install"
fi

# DynamoDB: moto, served one request at a time by .ci/moto_serial.py (moto's own server is
# not atomic under concurrent conditional writes; see that file).
export DYNAMODB_ENDPOINT="${DYNAMODB_ENDPOINT:-http://127.0.0.1:5124}"
command -v curl >/dev/null 2>&1 || apt_install curl
dynamodb_up() {
    [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$DYNAMODB_ENDPOINT/" \
        -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
        -H 'Content-Type: application/x-amz-json-1.0' \
        -H 'Authorization: AWS4-HMAC-SHA256 Credential=ci/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=ci' \
        -d '{}' 2>/dev/null || true)" = "200" ]
}
if [[ "$DYNAMODB_ENDPOINT" =~ ^http://(127\.0\.0\.1|localhost):[0-9]+/?$ ]] && ! dynamodb_up; then
    has_moto() { "$python" -c 'import moto.server, flask, flask_cors' 2>/dev/null; }
    if ! has_moto; then
        venv_python
        has_moto || "$python" -m pip install --quiet "moto[server]==$MOTO_VERSION"
    fi
    mkdir -p "$log_dir/moto"
    nohup "$python" .ci/moto_serial.py -H 127.0.0.1 -p "$(url_port "$DYNAMODB_ENDPOINT")" \
        >>"$log_dir/moto/ci.log" 2>&1 </dev/null &
fi
wait_for dynamodb_up "DynamoDB (moto at $DYNAMODB_ENDPOINT)"

# --- The tests --------------------------------------------------------------------------------
if [ "$#" -eq 0 ]; then
    set -- --workspace --all-features
fi
log "services up; cargo test $*"
exec cargo test "$@"
