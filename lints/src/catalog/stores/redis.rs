//! Redis clients: `redis` (`Commands`, `AsyncCommands`, `cmd(..)`, `pipe()`), fred, and the
//! pools that hand out their connections (deadpool-redis, bb8-redis, mobc-redis, r2d2-redis).

use super::{ClaimTest, MethodRow, OpKind, Ttl};

/// Redis clients and pools (crate names as in `use`).
pub const CRATES: &[&str] = &[
    "redis",
    "deadpool_redis",
    "bb8_redis",
    "mobc_redis",
    "r2d2_redis",
    "fred",
    "redis_pool",
    "rustis",
];

const CLAIM: OpKind = OpKind::Claim(ClaimTest::Answer);

/// Command methods of `redis::Commands`/`AsyncCommands`, fred and the pools' re-exports.
/// `SADD`'s answer is how many members it added: a claim when it is tested, a plain write
/// when not (the engine asks whether the answer is tested).
pub const METHODS: &[MethodRow] = &[
    MethodRow::new("exists", OpKind::Read, 0),
    MethodRow::new("get", OpKind::Read, 0).arity(1, 1),
    MethodRow::new("hget", OpKind::Read, 0).unique(),
    MethodRow::new("hexists", OpKind::Read, 0).unique(),
    MethodRow::new("sismember", OpKind::Read, 0).unique(),
    MethodRow::new("hgetall", OpKind::Read, 0).unique(),
    MethodRow::new("set", OpKind::Write, 0)
        .value(1)
        .nx()
        .ttl(Ttl::Options)
        .arity(2, 5),
    MethodRow::new("set_ex", OpKind::Write, 0)
        .value(1)
        .ttl(Ttl::Secs(2))
        .unique(),
    MethodRow::new("pset_ex", OpKind::Write, 0)
        .value(1)
        .ttl(Ttl::Millis(2))
        .unique(),
    MethodRow::new("setex", OpKind::Write, 0)
        .value(1)
        .ttl(Ttl::Secs(2))
        .unique(),
    MethodRow::new("hset", OpKind::Write, 0).value(2).unique(),
    MethodRow::new("hset_multiple", OpKind::Write, 0)
        .value(1)
        .unique(),
    MethodRow::new("incr", OpKind::Increment, 0).value(1),
    MethodRow::new("decr", OpKind::Increment, 0).value(1),
    MethodRow::new("hincr", OpKind::Increment, 0)
        .value(2)
        .unique(),
    MethodRow::new("zincr", OpKind::Increment, 0).value(2),
    MethodRow::new("rpush", OpKind::Increment, 0)
        .value(1)
        .unique(),
    MethodRow::new("lpush", OpKind::Increment, 0)
        .value(1)
        .unique(),
    MethodRow::new("xadd", OpKind::Increment, 0)
        .value(2)
        .unique(),
    MethodRow::new("append", OpKind::Increment, 0).value(1),
    MethodRow::new("sadd", CLAIM, 0).value(1).unique(),
    MethodRow::new("set_nx", CLAIM, 0)
        .value(1)
        .ttl(Ttl::Never)
        .unique(),
    MethodRow::new("setnx", CLAIM, 0)
        .value(1)
        .ttl(Ttl::Never)
        .unique(),
    MethodRow::new("hset_nx", CLAIM, 0).value(2).unique(),
    MethodRow::new("hsetnx", CLAIM, 0).value(2).unique(),
    MethodRow::new("set_options", OpKind::Write, 0)
        .value(1)
        .nx()
        .ttl(Ttl::Options)
        .unique(),
    MethodRow::new("del", OpKind::Delete, 0),
    MethodRow::new("unlink", OpKind::Delete, 0),
];

/// Raw commands (`redis::cmd("SET").arg(k)..`, a pipeline's `.cmd("SET")`), by their
/// upper-case name; argument indices count the `.arg(..)`s.
pub const RAW: &[MethodRow] = &[
    MethodRow::new("GET", OpKind::Read, 0),
    MethodRow::new("EXISTS", OpKind::Read, 0),
    MethodRow::new("HGET", OpKind::Read, 0),
    MethodRow::new("HEXISTS", OpKind::Read, 0),
    MethodRow::new("SISMEMBER", OpKind::Read, 0),
    MethodRow::new("HGETALL", OpKind::Read, 0),
    MethodRow::new("SET", OpKind::Write, 0)
        .value(1)
        .nx()
        .ttl(Ttl::Options),
    MethodRow::new("SETNX", CLAIM, 0).value(1).ttl(Ttl::Never),
    MethodRow::new("HSETNX", CLAIM, 0).value(2),
    MethodRow::new("SADD", CLAIM, 0).value(1),
    MethodRow::new("SETEX", OpKind::Write, 0)
        .value(2)
        .ttl(Ttl::Secs(1)),
    MethodRow::new("PSETEX", OpKind::Write, 0)
        .value(2)
        .ttl(Ttl::Millis(1)),
    MethodRow::new("HSET", OpKind::Write, 0).value(2),
    MethodRow::new("MSET", OpKind::Write, 0).value(1),
    MethodRow::new("INCR", OpKind::Increment, 0).value(1),
    MethodRow::new("INCRBY", OpKind::Increment, 0).value(1),
    MethodRow::new("INCRBYFLOAT", OpKind::Increment, 0).value(1),
    MethodRow::new("DECR", OpKind::Increment, 0).value(1),
    MethodRow::new("DECRBY", OpKind::Increment, 0).value(1),
    MethodRow::new("HINCRBY", OpKind::Increment, 0).value(2),
    MethodRow::new("HINCRBYFLOAT", OpKind::Increment, 0).value(2),
    MethodRow::new("ZINCRBY", OpKind::Increment, 0).value(2),
    MethodRow::new("RPUSH", OpKind::Increment, 0).value(1),
    MethodRow::new("LPUSH", OpKind::Increment, 0).value(1),
    MethodRow::new("XADD", OpKind::Increment, 0).value(2),
    MethodRow::new("APPEND", OpKind::Increment, 0).value(1),
    MethodRow::new("DEL", OpKind::Delete, 0),
    MethodRow::new("UNLINK", OpKind::Delete, 0),
];

/// Commands that give a key a TTL after it was set, in either spelling (compared ignoring
/// case): `conn.expire(&k, 60)`, `pipe().expire(..)`, `cmd("EXPIRE")`.
pub const EXPIRES: &[MethodRow] = &[
    MethodRow::new("expire", OpKind::Expire, 0).ttl(Ttl::Secs(1)),
    MethodRow::new("pexpire", OpKind::Expire, 0).ttl(Ttl::Millis(1)),
    MethodRow::new("expire_at", OpKind::Expire, 0).ttl(Ttl::At),
    MethodRow::new("expireat", OpKind::Expire, 0).ttl(Ttl::At),
    MethodRow::new("pexpire_at", OpKind::Expire, 0).ttl(Ttl::At),
    MethodRow::new("pexpireat", OpKind::Expire, 0).ttl(Ttl::At),
];

/// Methods that run a raw command or a pipeline on a connection.
pub const RUNNERS: &[&str] = &["query_async", "query", "exec_async", "exec"];

/// Paths that start a raw command.
pub const CMD_PATHS: &[&str] = &["redis::cmd", "redis::Cmd::new"];

/// Paths that start a pipeline.
pub const PIPE_PATHS: &[&str] = &["redis::pipe", "redis::Pipeline::new"];

/// Receiver names that say "a Redis connection" in a package that depends on Redis
/// (besides any name holding `redis`).
pub const RECEIVER_NAMES: &[&str] = &[
    "conn",
    "con",
    "connection",
    "rconn",
    "redis_conn",
    "manager",
    "conn_manager",
    "connection_manager",
    "mgr",
];

/// The method row of `method`.
pub fn method(method: &str) -> Option<&'static MethodRow> {
    METHODS.iter().find(|r| r.method == method)
}

/// The row of raw command `name` (any case).
pub fn raw(name: &str) -> Option<&'static MethodRow> {
    RAW.iter().find(|r| r.method.eq_ignore_ascii_case(name))
}

/// The expire row of `name` (a method or a raw command, any case).
pub fn expire(name: &str) -> Option<&'static MethodRow> {
    EXPIRES.iter().find(|r| r.method.eq_ignore_ascii_case(name))
}

/// Whether `command` (a method or a raw command, any case) adds to what is stored.
pub fn is_increment(command: &str) -> bool {
    METHODS
        .iter()
        .chain(RAW)
        .any(|r| r.op == OpKind::Increment && r.method.eq_ignore_ascii_case(command))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_invariants() {
        super::super::check_rows(METHODS);
        super::super::check_rows(RAW);
        super::super::check_rows(EXPIRES);
        // Every raw command is upper case, as the engine compares it.
        assert!(RAW
            .iter()
            .all(|r| r.method == r.method.to_ascii_uppercase()));
        // The claims without a TTL argument say they never expire or leave it unsaid.
        assert_eq!(method("set_nx").unwrap().ttl, Ttl::Never);
        assert!(is_increment("INCRBY") && is_increment("hincr") && !is_increment("set"));
    }
}
