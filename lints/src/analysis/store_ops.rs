//! Store operations: is this call a read, a plain write, an atomic claim or a delete of a
//! Redis, DynamoDB or SQL store, with which key expressions?
//!
//! Public API:
//! - [`classify`]`(env, expr) -> Option<StoreOp>`: classifies the expression where an
//!   operation happens (a Redis command method, the `.send()` of a DynamoDB builder, the
//!   `.execute()`/`.fetch_*()` of a SQL query, a `tokio_postgres`/`rusqlite` `execute`/`query`
//!   with SQL text). Inner nodes of a chain (`.bind(x)`, `sqlx::query(..)`) return `None`,
//!   so each operation is found once.
//! - [`OpEnv`]: what classification needs from the caller (path resolution, local type
//!   evidence, strings bound to locals, dependencies). [`crate::analysis::flow`]'s walker
//!   implements it.
//! - [`Store`], [`Access`], [`StoreOp`]; SQL text is read by [`crate::analysis::sql`].
//!
//! Evidence comes from the receiver's type (`redis::aio::MultiplexedConnection`,
//! `aws_sdk_dynamodb::Client`), a resolved path (`sqlx::query`, `redis::cmd`), or a
//! dependency of the package together with a command name that only that store has
//! (`set_nx`, `get_item().send()`) or a receiver named for the store (`redis`, `conn`).
//! Without evidence, a `get`/`set` is not a store operation.

use super::resolve::DefPath;
use super::sql::{self, Assigned, OnConflict, SqlStatement, SqlVerb};
use crate::catalog::store_crates::{REDIS_CRATES, SQL_CRATES};
use crate::catalog::stores::{self, dynamodb as ddb, redis, sql as sqlc, ClaimTest, OpKind};
use crate::catalog::{NamedOp, StoreNames};
use crate::model::ir::{Expr, ExprKind, Path};
use crate::model::Span;

/// Which kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Store {
    Redis,
    DynamoDb,
    Sql,
    /// A store known only by the names of its operations (`dedupe.is_processed(id)` on a
    /// trait object or another crate's client): see [`named_op`].
    Named,
    /// A web framework's session store used as a key-value store (`session.get(k)`,
    /// `session.insert(k, v)`): see [`super::kv_store`].
    Session,
    /// A key-value store of a catalog family (sled, JetStream KV), by the family's name:
    /// see [`super::kv_store`].
    Kv(&'static str),
}

impl Store {
    pub fn name(self) -> &'static str {
        match self {
            Store::Redis => "Redis",
            Store::DynamoDb => "DynamoDB",
            Store::Sql => "SQL",
            Store::Named => "store",
            Store::Session => "session store",
            Store::Kv(name) => name,
        }
    }
}

/// What the operation does to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Access {
    /// `EXISTS`/`GET`/`HGET`, `get_item`/`query`, `SELECT` (see [`StoreOp::locking`]).
    Read,
    /// An unconditional write: `SET`/`SET EX`/`HSET`, `put_item`/`update_item` without a
    /// condition, `INSERT` without conflict handling, `UPDATE .. WHERE key = $1`.
    Write,
    /// An idempotent overwrite that cannot tell whether the row existed: `ON CONFLICT DO
    /// UPDATE`, `ON DUPLICATE KEY UPDATE`, `REPLACE`.
    Upsert,
    /// An atomic conditional write that tells the caller whether it won: `SET NX`/`set_nx`,
    /// a conditional `put_item`/`update_item`, `INSERT .. ON CONFLICT DO NOTHING`, an
    /// `UPDATE` whose `WHERE` tests the state.
    Claim,
    /// `DEL`, `delete_item`, `DELETE`.
    Delete,
}

/// The access of a catalog row's operation (`None` for expiries and transaction steps,
/// which are no access of a key).
pub(crate) fn access_of(op: OpKind) -> Option<Access> {
    Some(match op {
        OpKind::Read => Access::Read,
        OpKind::Write | OpKind::Increment => Access::Write,
        OpKind::Upsert => Access::Upsert,
        OpKind::Claim(_) => Access::Claim,
        OpKind::Delete => Access::Delete,
        OpKind::Expire | OpKind::TxBegin | OpKind::TxCommit | OpKind::TxRollback => return None,
    })
}

impl Access {
    /// Writes of any kind (not reads, not deletes).
    pub fn is_write(self) -> bool {
        matches!(self, Access::Write | Access::Upsert | Access::Claim)
    }
}

/// One classified operation. Key and value expressions borrow from the IR.
#[derive(Debug, Clone)]
pub struct StoreOp<'a> {
    pub store: Store,
    pub access: Access,
    /// How to name it in a message: `SET`, `set_nx`, `put_item`, `INSERT INTO processed`.
    pub command: String,
    /// SQL table or DynamoDB table name, when written as a literal (lower-case for SQL).
    pub table: Option<String>,
    /// The expressions that make the key: the Redis key argument, the DynamoDB key
    /// attribute values, the SQL placeholders bound to key columns / the `WHERE` clause.
    pub keys: Vec<&'a Expr>,
    /// The data written (Redis value, other attributes, other bound values).
    pub values: Vec<&'a Expr>,
    /// The whole operation.
    pub span: Span,
    /// A read that takes a lock (`SELECT .. FOR UPDATE`): not a racy check.
    pub locking: bool,
    /// A SQL insert into a table named like a dedupe/idempotency table, or a read that looks
    /// a row up by a dedupe-named column (`WHERE uniq_hash = $1`,
    /// [`super::sql::is_dedupe_key_column`]).
    pub dedupe_table: bool,
    /// Whether `keys` are certainly the key the store compares: a Redis key, a DynamoDB
    /// key attribute, a SQL conflict target, `WHERE` placeholders or a dedupe table's key
    /// column. False for a guess (an `INSERT` whose unique column is not in the text).
    pub keys_certain: bool,
    /// What the write records (a done status, an increment).
    pub shape: WriteShape,
    /// SQL columns with the value each is given, where the statement names them: an
    /// `INSERT`'s columns (a value not bound from the code has `None`), the `col = value`
    /// equalities a read, update or delete looks rows up by. Against the schema's unique
    /// keys, they tell an insert that fails when the check's row exists.
    pub columns: Vec<(String, Option<&'a Expr>)>,
}

/// What [`classify`] needs from the code around the expression.
pub trait OpEnv<'a> {
    /// Resolves a path written in the current function.
    fn resolve(&self, path: &Path) -> DefPath;
    /// The type of an expression, when the source gives evidence for it.
    fn type_of(&self, expr: &Expr) -> Option<DefPath>;
    /// The string an expression certainly holds: a literal, or a local bound to a literal.
    fn string_of(&self, expr: &Expr) -> Option<String>;
    /// Whether the package depends on crate `krate` (`redis`, `aws_sdk_dynamodb`).
    fn depends_on(&self, krate: &str) -> bool;
    /// The initializer of local `name` (`opts` of `let opts = SetOptions::default()..`),
    /// when known, so options built before the call are read too.
    fn local_init(&self, _name: &str) -> Option<&'a Expr> {
        None
    }
    /// The text of the SQL file a sqlx `query_file!(path)` of the current file names, when
    /// the driver read it.
    fn query_file_text(&self, _path: &str) -> Option<String> {
        None
    }
    /// The value of the crate `const` or `static` `path` names, when it is one the model
    /// keeps (text, a number, a `Duration`).
    fn const_value(&self, _path: &Path) -> Option<&'a Expr> {
        None
    }
    /// The request builder a crate fn called by `call` returns (`fn put(&self) ->
    /// PutItemFluentBuilder { self.client.put_item().table_name(T) }`), when it is built
    /// from the fn's receiver or parameter alone ([`self_contained_builder`]).
    fn builder_of(&self, _call: &'a Expr) -> Option<&'a Expr> {
        None
    }
    /// The store rows to read calls with: the built-in ones, and the user's when the
    /// caller has the configured catalog.
    fn stores(&self) -> &crate::catalog::stores::StoreModels {
        crate::catalog::stores::StoreModels::built_in()
    }
}

/// A builder chain that needs nothing of the fn it is written in but its root: every
/// argument of its calls is a literal or a constant, never a local or a parameter, so it
/// reads the same at the call of the fn that returns it.
pub(crate) fn self_contained_builder(e: &Expr) -> bool {
    let mut cur = e.peel();
    let mut calls = 0;
    loop {
        let args = match &cur.kind {
            ExprKind::MethodCall { receiver, args, .. } => {
                cur = receiver.peel();
                args
            }
            ExprKind::Call { args, .. } => {
                calls += 1;
                return calls == 1 && args.iter().all(is_constant);
            }
            ExprKind::Path(_) | ExprKind::Field { .. } => return calls > 0,
            _ => return false,
        };
        if !args.iter().all(is_constant) {
            return false;
        }
        calls += 1;
    }
}

/// A literal or a path that is not a local name (`"t"`, `TABLE`, `Self::TABLE`).
fn is_constant(e: &Expr) -> bool {
    match &e.peel().kind {
        ExprKind::Lit(_) => true,
        ExprKind::Ref { expr, .. } => is_constant(expr),
        ExprKind::Path(p) => p
            .as_ident()
            .is_none_or(|n| n.starts_with(|c: char| c.is_uppercase())),
        _ => false,
    }
}

/// How many locals a request builder is followed through (`let b = ..; let b2 = b.x(); b2.send()`).
const MAX_BUILDER_LOCALS: usize = 4;

/// Classifies `expr` if it is where a store operation happens.
pub fn classify<'a>(env: &dyn OpEnv<'a>, expr: &'a Expr) -> Option<StoreOp<'a>> {
    let ExprKind::MethodCall {
        receiver,
        method,
        args,
        ..
    } = &expr.kind
    else {
        return None;
    };
    let method = method.as_str();
    if method == ddb::TERMINAL && args.is_empty() {
        return dynamodb(env, receiver, expr.span);
    }
    if let Some(op) = sql_op(env, receiver, method, args, expr.span) {
        return Some(op);
    }
    if let Some(op) = super::query_builders::classify(env, receiver, method, args, expr.span) {
        return Some(op);
    }
    if redis::RUNNERS.contains(&method) {
        if let Some(op) = redis_cmd(env, receiver, expr.span) {
            return Some(op);
        }
        if let Some(op) = redis_pipe(env, receiver, expr.span) {
            return Some(op);
        }
    }
    redis_method(env, receiver, method, args, expr.span)
        .or_else(|| super::kv_store::classify(env, receiver, method, args, expr.span))
        .or_else(|| super::mongo_ops::classify(env, receiver, method, args, expr.span))
}

// ---------------------------------------------------------------- named operations

/// Receiver names and types that say "a store of processed keys".
const STORE_LIKE: &[&str] = &[
    "store",
    "dedup",
    "idempot",
    "processed",
    "inbox",
    "seen",
    "repo",
    "redis",
    "ledger",
    "tracker",
];

/// A call of a store operation known by its name only, whose body the analysis cannot see
/// (the caller checks that): `store.is_processed(&msg.id)` is a read, `mark_processed(id)`
/// a plain write, keyed by the key-like argument. A common word (`exists`, `record`) needs
/// a store-like receiver and a key-like argument; the other names need either.
pub fn named_op<'a>(
    env: &dyn OpEnv<'a>,
    names: &StoreNames,
    receiver: Option<&'a Expr>,
    name: &str,
    args: &'a [Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    let op = names.find(name)?;
    let key = args.iter().find(|a| is_key_like(a));
    let store_like = receiver.is_some_and(|r| {
        let by_type = env.type_of(r).map(|t| t.last().to_ascii_lowercase());
        let by_name = receiver_name(r).map(str::to_ascii_lowercase);
        [by_type, by_name]
            .iter()
            .flatten()
            .any(|n| STORE_LIKE.iter().any(|w| n.contains(w)))
    });
    let evidence = if names.is_common(name) {
        store_like && key.is_some()
    } else {
        !args.is_empty() && (store_like || key.is_some())
    };
    if !evidence {
        return None;
    }
    let key = key.or(args.first())?;
    Some(StoreOp {
        columns: Vec::new(),
        store: Store::Named,
        access: match op {
            NamedOp::Check => Access::Read,
            NamedOp::Mark => Access::Write,
        },
        command: name.to_owned(),
        table: None,
        keys: vec![key],
        values: Vec::new(),
        span,
        locking: false,
        dedupe_table: false,
        keys_certain: false,
        shape: WriteShape {
            marks_done: op == NamedOp::Mark,
            ..WriteShape::default()
        },
    })
}

/// `msg.id`, `&event_id`, `key.as_str()`, `job.id.to_string()`: a value named like a key.
pub(crate) fn is_key_like(e: &Expr) -> bool {
    let name = match &e.peel().kind {
        ExprKind::Path(p) => p.as_ident(),
        ExprKind::Field { member, .. } => Some(member.as_str()),
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(
            method.as_str(),
            "as_str" | "as_ref" | "to_string" | "to_owned" | "clone" | "as_bytes" | "into"
        ) =>
        {
            return is_key_like(receiver)
        }
        ExprKind::MethodCall { method, args, .. } if args.is_empty() => Some(method.as_str()),
        _ => None,
    };
    name.is_some_and(|n| {
        let n = n.to_ascii_lowercase();
        n == "id"
            || n == "key"
            || n.ends_with("_id")
            || n.ends_with("_key")
            || n.ends_with("token")
            || n.ends_with("id") && n.len() <= 6
    })
}

// ---------------------------------------------------------------- Redis

/// What a Redis write records: a done value, or an increment.
fn redis_shape(env: &dyn OpEnv<'_>, command: &str, value: Option<&Expr>) -> WriteShape {
    WriteShape {
        increments: redis::is_increment(command),
        ..WriteShape::of_redis_value(env, value)
    }
}

fn redis_method<'a>(
    env: &dyn OpEnv<'a>,
    receiver: &'a Expr,
    method: &str,
    args: &'a [Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    let row = redis::method(method)?;
    let (name, value_idx) = (row.method, row.value);
    let mut access = access_of(row.op)?;
    let key = args.get(row.key?)?;
    if !row.fits(args.len()) {
        return None;
    }
    // `pipe.zincr(..)` on a pipeline held in a local, as a statement of its own: the run
    // (`pipe.query_async(..)`) does not see it, so the command is an operation here.
    let added_to_local = adds_to_local_pipeline(env, receiver);
    if !added_to_local && (!is_redis_receiver(env, receiver, row) || builds_pipeline(env, receiver))
    {
        return None;
    }
    // `set_options(k, v, SetOptions::default().conditional_set(ExistenceCheck::NX))` and
    // fred's `set(k, v, expire, Some(SetOptions::NX), get)`.
    if row.nx_option
        && args[2.min(args.len())..]
            .iter()
            .any(|a| mentions_nx(env, a, 0))
    {
        access = Access::Claim;
    }
    Some(StoreOp {
        columns: Vec::new(),
        store: Store::Redis,
        access,
        command: match (access, name) {
            (Access::Claim, _) if row.nx_option => "SET NX".to_owned(),
            (_, "set_options") => "SET".to_owned(),
            _ => name.to_owned(),
        },
        table: None,
        keys: vec![key],
        values: value_idx.and_then(|i| args.get(i)).into_iter().collect(),
        span,
        locking: false,
        dedupe_table: false,
        keys_certain: true,
        shape: WriteShape {
            expiry: super::expiry::of_ttl(env, row.ttl, access, args),
            ..redis_shape(env, name, value_idx.and_then(|i| args.get(i)))
        },
    })
}

/// `redis::pipe().atomic().rpush(..)`: a step that adds a command to a pipeline, run (and
/// classified) where the pipeline is.
fn builds_pipeline<'a>(env: &dyn OpEnv<'a>, receiver: &'a Expr) -> bool {
    let (_, root) = super::query_builders::chain(env, receiver);
    let ExprKind::Call { func, .. } = &root.kind else {
        return false;
    };
    func.as_path().is_some_and(|p| {
        let resolved = env.resolve(p);
        redis::PIPE_PATHS.iter().any(|p| resolved.matches(p))
    })
}

/// Whether `receiver` is a pipeline held in a local (`pipe` of `let mut pipe =
/// redis::pipe(); pipe.atomic(); pipe.hincr(..)`), possibly with commands chained after it
/// in the same statement (`pipe.zincr(..).ignore().hincr(..)`).
fn adds_to_local_pipeline<'a>(env: &dyn OpEnv<'a>, receiver: &'a Expr) -> bool {
    let mut cur = receiver.peel();
    while let ExprKind::MethodCall { receiver, .. } = &cur.kind {
        cur = receiver.peel();
    }
    let Some(init) = cur
        .as_path()
        .and_then(|p| p.as_ident())
        .and_then(|n| env.local_init(n))
    else {
        return false;
    };
    let ExprKind::Call { func, .. } = &init.peel().kind else {
        return false;
    };
    func.as_path().is_some_and(|p| {
        let resolved = env.resolve(p);
        redis::PIPE_PATHS.iter().any(|p| resolved.matches(p))
    })
}

/// What the receiver's type says: `Some(true)` for a type of one of `crates`, `Some(false)`
/// for a known type of another crate (a `HashMap`, a `reqwest::Client`), `None` when the type
/// is unknown or the crate's own.
pub(crate) fn typed_from(env: &dyn OpEnv<'_>, receiver: &Expr, crates: &[&str]) -> Option<bool> {
    let ty = env.type_of(receiver)?;
    if ty.crate_name().is_some_and(|k| crates.contains(&k)) {
        return Some(true);
    }
    (!ty.is_local() && ty.segments.len() > 1).then_some(false)
}

fn is_redis_receiver(env: &dyn OpEnv<'_>, receiver: &Expr, row: &stores::MethodRow) -> bool {
    if let Some(typed) = typed_from(env, receiver, REDIS_CRATES) {
        return typed;
    }
    if !REDIS_CRATES.iter().any(|k| env.depends_on(k)) {
        return false;
    }
    if row.unique {
        return true;
    }
    receiver_name(receiver).is_some_and(|n| {
        let n = n.to_ascii_lowercase();
        n.contains("redis") || redis::RECEIVER_NAMES.contains(&n.as_str())
    })
}

/// The name a receiver is known by: `conn` of `&mut conn`, `redis` of `self.redis`,
/// `pool` of `self.pool.get().await?`.
pub(crate) fn receiver_name(e: &Expr) -> Option<&str> {
    match &e.peel().kind {
        ExprKind::Path(p) => p.as_ident(),
        ExprKind::Field { member, .. } => Some(member),
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(
            method.as_str(),
            "clone" | "as_mut" | "as_ref" | "get_mut" | "lock" | "borrow_mut" | "deref_mut"
        ) =>
        {
            receiver_name(receiver)
        }
        _ => None,
    }
}

/// Whether set options say `NX`, following locals they were built in (a few deep).
fn mentions_nx(env: &dyn OpEnv<'_>, e: &Expr, depth: usize) -> bool {
    let mut found = false;
    let mut locals = Vec::new();
    e.walk(&mut |x| match &x.kind {
        ExprKind::Path(p) => {
            found |= p.segments.iter().any(|s| s == "NX" || s == "nx");
            locals.extend(p.as_ident().map(str::to_owned));
        }
        ExprKind::MethodCall { method, .. } => found |= method == "nx",
        ExprKind::Lit(crate::model::ir::Lit::Str(s)) => found |= s.eq_ignore_ascii_case("nx"),
        _ => {}
    });
    found
        || depth < 4
            && locals.iter().any(|n| {
                env.local_init(n)
                    .is_some_and(|init| mentions_nx(env, init, depth + 1))
            })
}

/// `redis::cmd("SET").arg(&key).arg(1).arg("NX").query_async(&mut conn)`.
fn redis_cmd<'a>(env: &dyn OpEnv<'a>, receiver: &'a Expr, span: Span) -> Option<StoreOp<'a>> {
    let mut args: Vec<&'a Expr> = Vec::new();
    let mut cur = receiver.peel();
    let mut locals = 0;
    let name = loop {
        match &cur.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                args: a,
                ..
            } => {
                if matches!(method.as_str(), "arg" | "cursor_arg") {
                    args.extend(a.first());
                }
                cur = receiver.peel();
            }
            ExprKind::Call { func, args: a } => {
                let path = func.as_path()?;
                let resolved = env.resolve(path);
                if !redis::CMD_PATHS.iter().any(|p| resolved.matches(p)) {
                    // `set_cmd().arg(k)`: the command from a crate fn.
                    if locals < MAX_BUILDER_LOCALS {
                        cur = env.builder_of(cur)?.peel();
                        locals += 1;
                        continue;
                    }
                    return None;
                }
                break env.string_of(a.first()?)?;
            }
            ExprKind::Path(p) if locals < MAX_BUILDER_LOCALS => {
                cur = env.local_init(p.as_ident()?)?.peel();
                locals += 1;
            }
            _ => return None,
        }
    };
    args.reverse();
    cmd_op(env, &name, &args, span)
}

/// A raw command `name` with its arguments in order; `NX` among them makes `SET` a claim.
fn cmd_op<'a>(
    env: &dyn OpEnv<'a>,
    name: &str,
    args: &[&'a Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    let upper = name.to_ascii_uppercase();
    let nx = args.iter().any(|a| {
        env.string_of(a)
            .is_some_and(|s| s.eq_ignore_ascii_case("nx"))
    });
    let row = redis::raw(&upper)?;
    let access = match access_of(row.op)? {
        Access::Write if row.nx_option && nx => Access::Claim,
        a => a,
    };
    let value = row.value;
    let shape = WriteShape {
        expiry: super::expiry::redis_cmd(env, &upper, access, args),
        ..redis_shape(env, &upper, value.and_then(|i| args.get(i).copied()))
    };
    Some(StoreOp {
        columns: Vec::new(),
        store: Store::Redis,
        access,
        command: if row.nx_option && nx {
            "SET NX".to_owned()
        } else {
            upper
        },
        table: None,
        keys: args.first().copied().into_iter().collect(),
        values: value
            .and_then(|i| args.get(i).copied())
            .into_iter()
            .collect(),
        span,
        locking: false,
        dedupe_table: false,
        keys_certain: true,
        shape,
    })
}

/// `redis::pipe().atomic().cmd("SET").arg(&k).arg(1).arg("NX").ignore().expire(&k, 60)
/// .query_async(&mut conn)` and `pipe().set_nx(&k, 1).query_async(..)`: one operation stands
/// for the pipeline, its strongest command (a claim, then a write, a read, a delete).
fn redis_pipe<'a>(env: &dyn OpEnv<'a>, receiver: &'a Expr, span: Span) -> Option<StoreOp<'a>> {
    let (mut steps, root) = super::query_builders::chain(env, receiver);
    let ExprKind::Call { func, .. } = &root.kind else {
        return None;
    };
    let resolved = env.resolve(func.as_path()?);
    if !redis::PIPE_PATHS.iter().any(|p| resolved.matches(p)) {
        return None;
    }
    steps.reverse();
    let mut ops: Vec<StoreOp<'a>> = Vec::new();
    let mut raw: Option<(String, Vec<&'a Expr>)> = None;
    // An `EXPIRE` of the pipeline gives its claim a TTL.
    let mut expire = None;
    let mut pipe_expire = None;
    let mut flush = |raw: &mut Option<(String, Vec<&'a Expr>)>, ops: &mut Vec<StoreOp<'a>>| {
        if let Some((name, args)) = raw.take() {
            expire = expire.or(super::expiry::pipeline_expire(env, &name, &args));
            ops.extend(cmd_op(env, &name, &args, span));
        }
    };
    for (method, args) in steps {
        match method {
            "arg" => {
                if let Some((_, a)) = raw.as_mut() {
                    a.extend(args.first());
                }
            }
            "ignore" | "atomic" => {}
            "cmd" => {
                flush(&mut raw, &mut ops);
                raw = args
                    .first()
                    .and_then(|a| env.string_of(a))
                    .map(|n| (n, Vec::new()));
            }
            _ => {
                flush(&mut raw, &mut ops);
                let all: Vec<&Expr> = args.iter().collect();
                pipe_expire = pipe_expire.or(super::expiry::pipeline_expire(env, method, &all));
                let Some(row) = redis::method(method) else {
                    continue;
                };
                let (name, access) = (row.method, access_of(row.op).unwrap_or(Access::Write));
                let Some(key) = row.key.and_then(|k| args.get(k)) else {
                    continue;
                };
                let value = row.value.and_then(|i| args.get(i));
                ops.push(StoreOp {
                    columns: Vec::new(),
                    store: Store::Redis,
                    access,
                    command: name.to_owned(),
                    table: None,
                    keys: vec![key],
                    values: value.into_iter().collect(),
                    span,
                    locking: false,
                    dedupe_table: false,
                    keys_certain: true,
                    shape: WriteShape {
                        expiry: super::expiry::of_ttl(env, row.ttl, access, args),
                        ..redis_shape(env, name, value)
                    },
                });
            }
        }
    }
    flush(&mut raw, &mut ops);
    let pipe_expire = pipe_expire.or(expire);
    let rank = |a: Access| match a {
        Access::Claim => 4,
        Access::Write => 3,
        Access::Upsert => 2,
        Access::Read => 1,
        Access::Delete => 0,
    };
    let mut op = ops.into_iter().max_by_key(|o| rank(o.access))?;
    if op.shape.expiry == Some(Expiry::Never) && pipe_expire.is_some() {
        op.shape.expiry = pipe_expire;
    }
    Some(op)
}

// ---------------------------------------------------------------- DynamoDB

/// `client.put_item().table_name(t).item("pk", v).condition_expression(c).send()`.
fn dynamodb<'a>(env: &dyn OpEnv<'a>, receiver: &'a Expr, span: Span) -> Option<StoreOp<'a>> {
    // The chain from `.send()` down to the operation method on the client.
    let mut calls: Vec<(&'a str, &'a [Expr])> = Vec::new();
    let mut cur = receiver.peel();
    let mut locals = 0;
    let client = loop {
        // `self.put().item(..).send()`: the builder from a crate fn.
        if locals < MAX_BUILDER_LOCALS
            && matches!(
                cur.kind,
                ExprKind::Call { .. } | ExprKind::MethodCall { .. }
            )
        {
            if let Some(built) = env.builder_of(cur) {
                cur = built.peel();
                locals += 1;
                continue;
            }
        }
        match &cur.kind {
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                calls.push((method.as_str(), args.as_slice()));
                if args.is_empty() && ddb::request(method).is_some() {
                    break receiver;
                }
                cur = receiver.peel();
            }
            // `let request = ddb.put_item()..; request.send()`: the builder in a local.
            ExprKind::Path(p) if locals < MAX_BUILDER_LOCALS => {
                cur = env.local_init(p.as_ident()?)?.peel();
                locals += 1;
            }
            _ => return None,
        }
    };
    let (op, _) = *calls.last()?;
    let row = ddb::request(op)?;
    let typed = env.type_of(client).is_some_and(|t| t.matches(ddb::CLIENT));
    if !typed && !env.depends_on(ddb::CRATE) {
        return None;
    }
    let setter = |name: &'static str| calls.iter().filter(move |(m, _)| *m == name);
    let setters =
        |names: &'static [&'static str]| calls.iter().filter(move |(m, _)| names.contains(m));
    let table = setters(ddb::TABLE).find_map(|(_, a)| a.first().and_then(|e| env.string_of(e)));
    let condition = setters(ddb::CONDITION).find_map(|(_, a)| a.first());
    let kind = if condition.is_some() {
        row.conditional
    } else {
        row.op
    };
    let row_access = access_of(kind)?;
    let condition_text = condition
        .and_then(|c| env.string_of(c))
        .map(|text| with_attribute_names(env, &calls, &text));
    let pairs = |name: &'static str| {
        setter(name).filter_map(|(_, a)| match a {
            [k, v] => Some((env.string_of(k), v)),
            _ => None,
        })
    };
    if op == "transact_write_items" {
        return Some(transact_write(env, &calls, table, span));
    }
    let (access, keys, values): (Access, Vec<&Expr>, Vec<&Expr>) = match row.key_setter {
        // A write keyed by a setter stores the expression's values beside it.
        Some(key) => (
            row_access,
            pairs(key).map(|(_, v)| v).collect(),
            if row_access.is_write() {
                pairs(ddb::VALUES).map(|(_, v)| v).collect()
            } else {
                vec![]
            },
        ),
        None => {
            // put_item: the key attribute is the one the condition tests, else a key-like
            // attribute name, else the first attribute written (`calls` runs from `.send()`
            // back to `put_item()`, so that is the last one here).
            let items: Vec<(Option<String>, &Expr)> = pairs(ddb::ITEM).collect();
            let tested = |n: &str| {
                condition_text
                    .as_deref()
                    .is_some_and(|c| c.contains(&format!("attribute_not_exists({n})")))
            };
            let keyish = |n: &str| {
                let l = n.to_ascii_lowercase();
                l == "pk" || l == "id" || l == "key" || l.ends_with("_id") || l.ends_with("id")
            };
            let mut key_idx: Vec<usize> = (0..items.len())
                .filter(|&i| items[i].0.as_deref().is_some_and(tested))
                .collect();
            // Of several key-like names (`file_id`, `owner_id`), the key is written first:
            // the others are data beside it.
            if key_idx.is_empty() {
                key_idx = (0..items.len())
                    .rev()
                    .filter(|&i| items[i].0.as_deref().is_some_and(keyish))
                    .take(1)
                    .collect();
            }
            if key_idx.is_empty() && !items.is_empty() {
                key_idx.push(items.len() - 1);
            }
            let keys = key_idx.iter().map(|&i| items[i].1).collect();
            let values = (0..items.len())
                .filter(|i| !key_idx.contains(i))
                .map(|i| items[i].1)
                .collect();
            (row_access, keys, values)
        }
    };
    let update_text = setters(ddb::UPDATE)
        .find_map(|(_, a)| a.first().and_then(|e| env.string_of(e)))
        .map(|text| with_attribute_names(env, &calls, &text));
    let attributes: Vec<(Option<String>, &Expr)> =
        pairs(ddb::ITEM).chain(pairs(ddb::VALUES)).collect();
    let mut shape = WriteShape::of_dynamodb(env, update_text.as_deref(), &attributes);
    shape.fails_when_taken = kind == OpKind::Claim(ClaimTest::FailsWhenTaken);
    if row.key_setter.is_none() && access == Access::Claim {
        let items: Vec<(Option<String>, &Expr)> = pairs(ddb::ITEM).collect();
        let whole = calls.iter().any(|(m, _)| *m == ddb::WHOLE_ITEM);
        shape.expiry = super::expiry::dynamodb_put(env, condition_text.as_deref(), &items, whole);
    }
    Some(StoreOp {
        columns: Vec::new(),
        store: Store::DynamoDb,
        access,
        command: op.to_owned(),
        table,
        keys,
        values,
        span,
        locking: false,
        dedupe_table: false,
        keys_certain: true,
        shape,
    })
}

/// `SET #s = :done` with `.expression_attribute_names("#s", "status")`: the text with the
/// names put back, so the update reads as `SET status = :done`.
fn with_attribute_names(env: &dyn OpEnv<'_>, calls: &[(&str, &[Expr])], text: &str) -> String {
    let mut out = text.to_owned();
    for (_, args) in calls.iter().filter(|(m, _)| *m == ddb::NAMES) {
        if let [placeholder, name] = args {
            if let (Some(p), Some(n)) = (env.string_of(placeholder), env.string_of(name)) {
                out = out.replace(&p, &n);
            }
        }
    }
    out
}

/// `client.transact_write_items().transact_items(item)..send()`: one request that writes
/// every item or none. What it records is read from the items built in the chain or in
/// locals (`Update::builder()..build()?`, a few deep): an increment among them makes it a
/// business write, a done status a mark. Items handed over whole (`set_transact_items(items)`)
/// are not read, and the request is then taken for an overwrite.
fn transact_write<'a>(
    env: &dyn OpEnv<'a>,
    calls: &[(&'a str, &'a [Expr])],
    table: Option<String>,
    span: Span,
) -> StoreOp<'a> {
    let mut updates = Vec::new();
    let mut attributes: Vec<(Option<String>, &'a Expr)> = Vec::new();
    let mut conditions = Vec::new();
    let items: Vec<&'a Expr> = calls
        .iter()
        .filter(|(m, _)| *m == ddb::TRANSACT_ITEMS)
        .filter_map(|(_, a)| a.first())
        .collect();
    for item in &items {
        let mut parts = ItemParts {
            updates: &mut updates,
            attributes: &mut attributes,
            conditions: &mut conditions,
        };
        transact_item(env, item, 0, &mut parts);
    }
    let text = updates.join(", ");
    let mut shape = WriteShape::of_dynamodb(env, Some(&text), &attributes);
    // An item put on the condition that it does not exist yet (the processed marker) cancels
    // the whole request when it does: a repeat fails instead of writing again.
    shape.fails_when_taken = conditions
        .iter()
        .any(|c| c.to_ascii_lowercase().contains("attribute_not_exists"));
    StoreOp {
        columns: Vec::new(),
        store: Store::DynamoDb,
        access: Access::Write,
        command: "transact_write_items".to_owned(),
        table,
        keys: Vec::new(),
        // The items: data, so a check before the request never reads it as a marker.
        values: items,
        span,
        locking: false,
        dedupe_table: false,
        keys_certain: false,
        shape,
    }
}

/// What the items of a transaction hold: update texts, attributes, condition texts.
struct ItemParts<'p, 'a> {
    updates: &'p mut Vec<String>,
    attributes: &'p mut Vec<(Option<String>, &'a Expr)>,
    conditions: &'p mut Vec<String>,
}

/// The update texts, attributes and conditions of one transaction item, following the
/// builders (`TransactWriteItem::builder().update(u)`) and the locals holding them.
fn transact_item<'a>(
    env: &dyn OpEnv<'a>,
    e: &'a Expr,
    depth: usize,
    parts: &mut ItemParts<'_, 'a>,
) {
    if depth > 4 {
        return;
    }
    let (steps, _) = super::query_builders::chain(env, e);
    for &(method, args) in &steps {
        match (method, args) {
            (m, [text]) if ddb::UPDATE.contains(&m) => {
                let calls: Vec<(&str, &[Expr])> = steps.clone();
                parts.updates.extend(
                    env.string_of(text)
                        .map(|t| with_attribute_names(env, &calls, &t)),
                );
            }
            (m, [text]) if ddb::CONDITION.contains(&m) => {
                parts.conditions.extend(env.string_of(text));
            }
            (m, [name, value]) if m == ddb::ITEM || m == ddb::VALUES => {
                parts.attributes.push((env.string_of(name), value));
            }
            (m, [inner]) if ddb::TRANSACT_ITEM_PARTS.contains(&m) => {
                transact_item(env, inner, depth + 1, parts);
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------- SQL

/// SQL text and its bound arguments, found at the root of a query chain.
struct SqlRoot<'a> {
    text: String,
    binds: Vec<&'a Expr>,
}

fn sql_op<'a>(
    env: &dyn OpEnv<'a>,
    receiver: &'a Expr,
    method: &str,
    args: &'a [Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    let root = if sqlc::RUNNERS.contains(&method) {
        sql_chain(env, receiver).or_else(|| args.first().and_then(|a| sql_chain(env, a)))
    } else {
        None
    };
    let root = match root {
        Some(r) => r,
        None if sqlc::TEXT_METHODS.contains(&method) => {
            if !SQL_CRATES.iter().any(|k| env.depends_on(k)) {
                return None;
            }
            let text = env.string_of(args.first()?)?;
            if !sql::looks_like_sql(&text) {
                return None;
            }
            SqlRoot {
                text,
                binds: args.get(1).map(param_list).unwrap_or_default(),
            }
        }
        None => return None,
    };
    Some(sql_statement_op(env, root, span))
}

fn sql_statement_op<'a>(env: &dyn OpEnv<'a>, root: SqlRoot<'a>, span: Span) -> StoreOp<'a> {
    let st: SqlStatement = sql::parse(&root.text);
    let access = match st.verb {
        SqlVerb::Select => Access::Read,
        SqlVerb::Insert => match st.on_conflict {
            OnConflict::None => Access::Write,
            OnConflict::DoNothing => Access::Claim,
            OnConflict::DoUpdate => Access::Upsert,
        },
        SqlVerb::Update if st.conditional_where => Access::Claim,
        SqlVerb::Update => Access::Write,
        SqlVerb::Delete => Access::Delete,
        SqlVerb::Other => Access::Read,
    };
    let verb = match st.verb {
        SqlVerb::Select => "SELECT",
        SqlVerb::Insert => "INSERT INTO",
        SqlVerb::Update => "UPDATE",
        SqlVerb::Delete => "DELETE FROM",
        SqlVerb::Other => "query",
    };
    let command = match &st.table {
        Some(t) => format!("{verb} {t}"),
        None => verb.to_owned(),
    };
    let pick = |idx: Vec<usize>| -> Vec<&Expr> {
        idx.into_iter()
            .filter_map(|i| root.binds.get(i).copied())
            .collect()
    };
    let bound = |p: &Option<usize>| p.and_then(|i| root.binds.get(i).copied());
    let columns = match st.verb {
        SqlVerb::Insert => st
            .columns
            .iter()
            .map(|(c, p)| (c.clone(), bound(p)))
            .collect(),
        _ => st
            .where_eq
            .iter()
            .map(|(c, p)| (c.clone(), bound(&Some(*p))))
            .collect(),
    };
    StoreOp {
        columns,
        store: Store::Sql,
        access,
        command,
        table: st.table.clone(),
        keys: pick(st.key_params()),
        values: pick(st.value_params()),
        span,
        locking: st.locking,
        dedupe_table: st.verb == SqlVerb::Insert && st.is_dedupe_table()
            || st.reads_by_dedupe_key(),
        shape: WriteShape {
            expiry: super::expiry::sql_claim(&st),
            ..WriteShape::of_sql(env, &st, &root.binds)
        },
        keys_certain: st.keys_certain(),
    }
}

/// The SQL root of a query chain: `sqlx::query("..").bind(a).bind(b)`, `query!("..", a)`,
/// `query_as!(T, "..", a)`, `diesel::sql_query("..").bind::<T, _>(a)`,
/// `Statement::from_sql_and_values(backend, "..", [a.into()])`.
fn sql_chain<'a>(env: &dyn OpEnv<'a>, e: &'a Expr) -> Option<SqlRoot<'a>> {
    let mut binds: Vec<&'a Expr> = Vec::new();
    let mut cur = e.peel();
    let mut locals = 0;
    loop {
        match &cur.kind {
            // `let query = sqlx::query!(..); transaction.execute(query)`: the local's
            // initializer (a few deep).
            ExprKind::Path(p) if locals < 4 => {
                cur = env.local_init(p.as_ident()?)?.peel();
                locals += 1;
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
                ..
            } => {
                if method == sqlc::BIND {
                    binds.extend(args.first());
                } else if !sqlc::PASS_THROUGH.contains(&method.as_str()) {
                    return None;
                }
                cur = receiver.peel();
            }
            ExprKind::Call { func, args } => {
                let path = func.as_path()?;
                let resolved = env.resolve(path);
                let row = sqlc::QUERY_FNS.iter().find(|q| resolved.matches(q.path))?;
                let text = env.string_of(args.get(row.text)?)?;
                binds.reverse();
                if let Some(values) = row.values {
                    binds = args.get(values).map(param_list).unwrap_or_default();
                }
                return Some(SqlRoot { text, binds });
            }
            ExprKind::Macro(m) => {
                let name = m.path.last();
                let resolved = env.resolve(&m.path);
                let sqlx_macro = resolved.crate_name() == Some(sqlc::MACRO_CRATE)
                    || (m.path.segments.len() == 1 && env.depends_on(sqlc::MACRO_CRATE));
                if !sqlx_macro || !name.starts_with("query") {
                    return None;
                }
                let text_at = m.args.iter().position(|a| a.as_str_lit().is_some())?;
                let written = m.args[text_at].as_str_lit()?;
                // `query_file!("queries/mark.sql", id)`: the file's text, read by the driver
                // relative to the package root as sqlx does.
                let text = if crate::model::is_query_file_macro(name) {
                    env.query_file_text(written)?
                } else if name.contains("file") {
                    return None;
                } else {
                    written.to_owned()
                };
                // Inline captures are not arguments of `query!`; lowering appends them
                // after the real ones only for `{name}` text, which SQL rarely contains.
                let binds = m.args[text_at + 1..]
                    .iter()
                    .filter(|a| a.span != m.args[text_at].span)
                    .collect();
                return Some(SqlRoot { text, binds });
            }
            _ => return None,
        }
    }
}

/// `&[&a, &b]`, `params![a, b]`, `(a, b)`, `vec![a.into()]`: the bound values in order.
fn param_list(e: &Expr) -> Vec<&Expr> {
    match &e.peel().kind {
        ExprKind::Array(items) | ExprKind::Tuple(items) => items.iter().collect(),
        ExprKind::Macro(m) => m.args.iter().collect(),
        _ => vec![],
    }
}

// ---------------------------------------------------------------- what a write records

/// What a write records, which tells a completion mark ("this key is done") from a business
/// write, and a naturally idempotent write from one a retry must not repeat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WriteShape {
    /// Sets a status to a done-like value (`status = 'done'`, `"COMPLETED"`), or a
    /// processed/completed timestamp or flag (`processed_at = now()`).
    pub marks_done: bool,
    /// Adds to what is stored (`balance = balance + $1`, DynamoDB `ADD`): repeating it
    /// changes the result.
    pub increments: bool,
    /// A plain SQL insert of only a dedupe table's key (and timestamps): the key is the
    /// primary key, so a repeat fails instead of writing twice.
    pub key_only: bool,
    /// When what a claim or a TTL'd write stores goes away by itself; `None` where the
    /// store model does not tell (reads, most writes, `SADD`, conditional updates).
    pub expiry: Option<Expiry>,
    /// Appends to a stored list (DynamoDB `SET l = list_append(l, :v)`): a repeat appends
    /// again. Kept apart from `increments`, which the completion and effect models read.
    pub appends: bool,
    /// Every column or attribute the write increments counts deliveries or versions
    /// (`attempts = attempts + 1`, `ADD retry_count :one`, `version = version + 1`): a
    /// repeat is meant to count again, not a business effect applied twice.
    pub counts_bookkeeping: bool,
    /// A SQL `UPDATE` (text, diesel, sea-query, sea-orm): it changes rows already there and
    /// adds none. Unless it increments, appends or marks them done, a repeat writes the same
    /// values again.
    pub updates_rows: bool,
    /// A claim that answers by failing when the key is taken (a conditional `put_item`,
    /// JetStream KV `create`): a `?` on it tests its answer. Also a write that fails when
    /// repeated because it carries such a claim (a `TransactWriteItems` with an item put on
    /// `attribute_not_exists`).
    pub fails_when_taken: bool,
}

/// When a stored key or row expires ([`WriteShape::expiry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expiry {
    /// Never: `SET NX` without `EX`/`PX`, `SETNX`, a conditional `put_item` without a TTL or
    /// lease attribute, a claim row with no lease, status or timestamp column.
    Never,
    /// After a TTL or lease, in milliseconds when it is a constant (`EX 3600`, `set_ex(k,
    /// v, TTL)`, a TTL attribute of `now + 3600`). A lease column or a status a reaper can
    /// reset counts as an expiry of unknown length.
    After(Option<u64>),
}

/// Names of counters that exist to count deliveries, attempts or versions.
pub fn is_bookkeeping_counter(name: &str) -> bool {
    let n = name.trim_start_matches(['#', ':']).to_ascii_lowercase();
    [
        "attempt",
        "retr",
        "tries",
        "fail",
        "deliver",
        "receive",
        "error",
        "version",
        "revision",
        "generation",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Values that say "finished".
const DONE_VALUES: &[&str] = &[
    "done",
    "processed",
    "completed",
    "complete",
    "succeeded",
    "success",
    "finished",
    "sent",
    "handled",
    "delivered",
    "applied",
    "fulfilled",
];

fn is_done_value(v: &str) -> bool {
    let v = v.trim().to_ascii_lowercase();
    DONE_VALUES.contains(&v.as_str())
}

pub(super) fn is_status_name(name: &str) -> bool {
    let n = name.trim_start_matches(['#', ':']).to_ascii_lowercase();
    n == "status" || n == "state" || n.ends_with("_status") || n.ends_with("_state")
}

/// Columns and attributes whose setting, to anything, records completion.
pub(super) fn is_completion_name(name: &str) -> bool {
    let n = name.trim_start_matches(['#', ':']).to_ascii_lowercase();
    let stem = n
        .trim_start_matches("is_")
        .trim_end_matches("_at")
        .trim_end_matches("_on");
    [
        "processed",
        "completed",
        "done",
        "finished",
        "handled",
        "delivered",
    ]
    .contains(&stem)
}

/// Whether `e` holds a done-like value: a string literal, a local bound to one, or an enum
/// variant (`JobStatus::Done`).
pub(super) fn holds_done_value(env: &dyn OpEnv<'_>, e: &Expr) -> bool {
    if env.string_of(e).is_some_and(|s| is_done_value(&s)) {
        return true;
    }
    let mut found = false;
    e.walk(&mut |x| match &x.kind {
        ExprKind::Lit(crate::model::ir::Lit::Str(s)) => found |= is_done_value(s),
        ExprKind::Path(p) if p.segments.len() > 1 => found |= is_done_value(p.last()),
        _ => {}
    });
    found
}

/// SQL functions that read the clock (`to_timestamp($1)` converts a given value instead).
const SQL_CLOCKS: &[&str] = &[
    "now",
    "current_timestamp",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "localtimestamp",
    "utc_timestamp",
    "getdate",
    "getutcdate",
    "sysdate",
    "unixepoch",
];

/// `Utc::now()`, `SystemTime::now()`, `OffsetDateTime::now_utc()`, `true`.
fn is_now_or_true(e: &Expr) -> bool {
    match &e.peel().kind {
        ExprKind::Lit(crate::model::ir::Lit::Bool(true)) => true,
        ExprKind::Call { func, .. } => func.as_path().is_some_and(|p| p.last().starts_with("now")),
        ExprKind::MethodCall {
            receiver, method, ..
        } => method.starts_with("now") || is_now_or_true(receiver),
        _ => false,
    }
}

impl WriteShape {
    /// `SET key "done"`.
    fn of_redis_value(env: &dyn OpEnv<'_>, value: Option<&Expr>) -> WriteShape {
        WriteShape {
            marks_done: value.is_some_and(|v| holds_done_value(env, v)),
            ..WriteShape::default()
        }
    }

    /// An `UPDATE`'s assignments or an `INSERT`'s values, with the bound expressions.
    fn of_sql(env: &dyn OpEnv<'_>, st: &SqlStatement, binds: &[&Expr]) -> WriteShape {
        let done = |col: &str, v: &Assigned| match v {
            // `processed_at = now()`, `done = true`; a bound value only when it is the clock
            // or `true` (a generic `done_at = $3` may as well clear it).
            _ if is_completion_name(col) => match v {
                Assigned::Literal(l) => l != "false" && l != "null",
                Assigned::Call(f) => SQL_CLOCKS.contains(&f.as_str()),
                Assigned::Param(p) => binds.get(*p).is_some_and(|b| is_now_or_true(b)),
                _ => false,
            },
            Assigned::Literal(l) => is_status_name(col) && is_done_value(l),
            Assigned::Param(p) => {
                is_status_name(col) && binds.get(*p).is_some_and(|b| holds_done_value(env, b))
            }
            _ => false,
        };
        WriteShape {
            marks_done: st.assigned.iter().any(|(c, v)| done(c, v)),
            increments: st.assigned.iter().any(|(_, v)| *v == Assigned::SelfRef),
            key_only: st.inserts_only_key(),
            expiry: None,
            appends: false,
            updates_rows: st.verb == SqlVerb::Update,
            fails_when_taken: false,
            counts_bookkeeping: {
                let mut counters = st
                    .assigned
                    .iter()
                    .filter(|(_, v)| *v == Assigned::SelfRef)
                    .peekable();
                counters.peek().is_some() && counters.all(|(c, _)| is_bookkeeping_counter(c))
            },
        }
    }

    /// A DynamoDB item or update: status attributes set to done-like values, `ADD` or
    /// `x = x + :n` updates.
    fn of_dynamodb(
        env: &dyn OpEnv<'_>,
        update: Option<&str>,
        attributes: &[(Option<String>, &Expr)],
    ) -> WriteShape {
        let text = update.unwrap_or("").to_ascii_lowercase();
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '#' | ':')))
            .filter(|w| !w.is_empty())
            .collect();
        // The actions of the expression: a comma inside a function's parentheses
        // (`if_not_exists(n, :z)`) does not end one.
        let actions = update_actions(&text);
        // `ADD n :inc`, or `SET n = n + :inc` / `SET n = if_not_exists(n, :z) + :inc`.
        let increments = words.contains(&"add")
            || actions.iter().any(|part| {
                part.split_once('=').is_some_and(|(lhs, rhs)| {
                    let lhs = lhs.trim().trim_start_matches("set").trim();
                    rhs.contains('+') && rhs.contains(lhs) && !lhs.is_empty()
                })
            });
        // `SET l = list_append(l, :v)` or `list_append(:v, l)`.
        let appends = actions.iter().any(|part| {
            part.split_once('=').is_some_and(|(lhs, rhs)| {
                let lhs = lhs.trim().trim_start_matches("set").trim();
                !lhs.is_empty() && rhs.contains("list_append") && rhs.contains(lhs)
            })
        });
        let status_in_update = words
            .iter()
            .any(|w| is_status_name(w) || is_completion_name(w));
        let marks_done = attributes.iter().any(|(name, v)| {
            let named = name
                .as_deref()
                .is_some_and(|n| is_status_name(n) || is_completion_name(n));
            let by_name = name.as_deref().is_some_and(is_completion_name);
            by_name || (named || status_in_update) && holds_done_value(env, v)
        });
        // The incremented names: `ADD n :inc` and the left side of `n = n + :inc`.
        let mut counters: Vec<&str> = words
            .windows(2)
            .filter(|w| w[0] == "add")
            .map(|w| w[1])
            .collect();
        for part in &actions {
            if let Some((lhs, rhs)) = part.split_once('=') {
                let lhs = lhs.trim().trim_start_matches("set").trim();
                if rhs.contains('+') && !lhs.is_empty() && rhs.contains(lhs) {
                    counters.push(lhs);
                }
            }
        }
        WriteShape {
            marks_done,
            increments,
            key_only: false,
            expiry: None,
            appends,
            fails_when_taken: false,
            counts_bookkeeping: increments
                && !counters.is_empty()
                && counters.iter().all(|c| is_bookkeeping_counter(c)),
            updates_rows: false,
        }
    }
}

/// The comma-separated actions of a DynamoDB update expression, split only at the commas
/// outside parentheses: `SET n = if_not_exists(n, :z) + :inc, m = :v` has two.
fn update_actions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Krate;
    use crate::model::ir::Stmt;
    use crate::model::{lower_file, FileId};

    struct Env {
        deps: Vec<&'static str>,
    }

    impl OpEnv<'_> for Env {
        fn resolve(&self, path: &Path) -> DefPath {
            let mut segs = path.segments.clone();
            // The tests write `use`-free full paths, except for these imported names.
            match segs[0].as_str() {
                "query" | "query_as" => segs.insert(0, "sqlx".into()),
                "cmd" => segs.insert(0, "redis".into()),
                _ => {}
            }
            DefPath {
                krate: Krate::Extern(segs[0].as_str().into()),
                segments: segs[1..].into(),
            }
        }
        fn type_of(&self, _: &Expr) -> Option<DefPath> {
            None
        }
        fn string_of(&self, e: &Expr) -> Option<String> {
            e.as_str_lit().map(str::to_owned)
        }
        fn depends_on(&self, k: &str) -> bool {
            self.deps.contains(&k)
        }
    }

    /// Classifies the outermost expression of each statement of `f`'s body.
    fn ops(deps: &[&'static str], body: &str) -> Vec<(Store, Access, String, usize)> {
        let src = format!("async fn f() {{ {body} }}");
        let file = lower_file(&src, FileId(0), vec!["crate".into()], false).unwrap();
        let env = Env {
            deps: deps.to_vec(),
        };
        let mut out = Vec::new();
        for stmt in &file.fns[0].body.as_ref().unwrap().stmts {
            let (Stmt::Expr { expr, .. }
            | Stmt::Let {
                init: Some(expr), ..
            }) = stmt
            else {
                continue;
            };
            if let Some(op) = classify(&env, expr.peel()) {
                out.push((op.store, op.access, op.command, op.keys.len()));
            }
        }
        out
    }

    #[test]
    fn redis_commands_need_evidence_and_nx_makes_a_claim() {
        let got = ops(
            &["redis"],
            r#"conn.exists(&key).await?;
               conn.set(&key, 1).await?;
               conn.set_nx(&key, 1).await?;
               map.get(&key);
               cache.set(&key, 1);
               cmd("SET").arg(&key).arg(1).arg("NX").arg("EX").arg(60).query_async(&mut conn).await?;
               cmd("GET").arg(&key).query_async(&mut conn).await?;
               redis::pipe().atomic().cmd("SET").arg(&key).arg(1).arg("NX").ignore().expire(&key, 60).query_async(&mut conn).await?;
               redis::pipe().set(&key, 1).ignore().expire(&key, 60).query_async(&mut conn).await?;
               redis::pipe().cmd("EXISTS").arg(&key).query_async(&mut conn).await?;"#,
        );
        use Access::*;
        assert_eq!(
            got,
            vec![
                (Store::Redis, Read, "exists".into(), 1),
                (Store::Redis, Write, "set".into(), 1),
                (Store::Redis, Claim, "set_nx".into(), 1),
                (Store::Redis, Claim, "SET NX".into(), 1),
                (Store::Redis, Read, "GET".into(), 1),
                (Store::Redis, Claim, "SET NX".into(), 1),
                (Store::Redis, Write, "set".into(), 1),
                (Store::Redis, Read, "EXISTS".into(), 1),
            ]
        );
        assert!(ops(&[], "conn.exists(&key).await?;").is_empty());
    }

    #[test]
    fn dynamodb_condition_expressions_make_claims() {
        let got = ops(
            &["aws_sdk_dynamodb"],
            r#"client.get_item().table_name("t").key("pk", v).send().await?;
               client.put_item().table_name("t").item("pk", v).item("at", now).send().await?;
               client.put_item().table_name("t").item("pk", v)
                   .condition_expression("attribute_not_exists(pk)").send().await?;
               s3.get_object().bucket("b").send().await?;"#,
        );
        use Access::*;
        assert_eq!(
            got,
            vec![
                (Store::DynamoDb, Read, "get_item".into(), 1),
                (Store::DynamoDb, Write, "put_item".into(), 1),
                (Store::DynamoDb, Claim, "put_item".into(), 1),
            ]
        );
    }

    #[test]
    fn sql_text_decides_the_access() {
        let got = ops(
            &["sqlx", "tokio_postgres"],
            r#"query("SELECT 1 FROM processed WHERE id = $1").bind(id).fetch_optional(&pool).await?;
               query("INSERT INTO processed (id) VALUES ($1)").bind(id).execute(&pool).await?;
               sqlx::query!("INSERT INTO processed (id) VALUES ($1) ON CONFLICT DO NOTHING", id).execute(&pool).await?;
               client.execute("UPDATE jobs SET state = 'run' WHERE id = $1 AND state = 'new'", &[&id]).await?;
               client.query("not sql", &[]).await?;
               diesel::sql_query("INSERT INTO seen (k) VALUES ($1) ON CONFLICT (k) DO UPDATE SET k = $1").bind(k).execute(conn)?;"#,
        );
        use Access::*;
        assert_eq!(
            got,
            vec![
                (Store::Sql, Read, "SELECT processed".into(), 1),
                (Store::Sql, Write, "INSERT INTO processed".into(), 1),
                (Store::Sql, Claim, "INSERT INTO processed".into(), 1),
                (Store::Sql, Claim, "UPDATE jobs".into(), 1),
                (Store::Sql, Upsert, "INSERT INTO seen".into(), 1),
            ]
        );
    }

    /// The expiry of every operation of `f`'s body, in order.
    fn expiries(deps: &[&'static str], body: &str) -> Vec<Option<Expiry>> {
        let src = format!("async fn f() {{ {body} }}");
        let file = lower_file(&src, FileId(0), vec!["crate".into()], false).unwrap();
        let env = Env {
            deps: deps.to_vec(),
        };
        let mut out = Vec::new();
        file.fns[0].body.as_ref().unwrap().walk(&mut |e| {
            if let Some(op) = classify(&env, e) {
                out.push(op.shape.expiry);
            }
        });
        out
    }

    #[test]
    fn claims_know_when_they_expire() {
        use Expiry::*;
        let redis = expiries(
            &["redis"],
            r#"conn.set_nx(&key, 1).await?;
               cmd("SET").arg(&key).arg(1).arg("NX").query_async(&mut conn).await?;
               cmd("SET").arg(&key).arg(1).arg("NX").arg("EX").arg(60 * 60).query_async(&mut conn).await?;
               cmd("SET").arg(&key).arg(1).arg("NX").arg("PX").arg(1500).query_async(&mut conn).await?;
               conn.set_ex(&key, "1", 24 * 60 * 60).await?;
               conn.set_options(&key, 1, SetOptions::default().conditional_set(ExistenceCheck::NX)).await?;
               conn.set_options(&key, 1, SetOptions::default().conditional_set(ExistenceCheck::NX).with_expiration(SetExpiry::EX(30))).await?;
               redis::pipe().cmd("SET").arg(&key).arg(1).arg("NX").ignore().expire(&key, 90).query_async(&mut conn).await?;
               conn.set(&key, 1).await?;
               conn.get(&key).await?;"#,
        );
        assert_eq!(
            redis,
            vec![
                Some(Never),
                Some(Never),
                Some(After(Some(3_600_000))),
                Some(After(Some(1500))),
                Some(After(Some(86_400_000))),
                Some(Never),
                Some(After(Some(30_000))),
                Some(After(Some(90_000))),
                None,
                None,
            ]
        );
        let ddb = expiries(
            &["aws_sdk_dynamodb"],
            r#"ddb.put_item().table_name("c").item("pk", k).condition_expression("attribute_not_exists(pk)").send().await?;
               ddb.put_item().table_name("c").item("pk", k).item("ttl", AttributeValue::N((now + 600).to_string())).condition_expression("attribute_not_exists(pk)").send().await?;
               ddb.put_item().table_name("c").item("pk", k).item("status", s).condition_expression("attribute_not_exists(pk)").send().await?;
               ddb.put_item().table_name("c").set_item(Some(item)).condition_expression("attribute_not_exists(pk)").send().await?;
               ddb.put_item().table_name("c").item("pk", k).send().await?;"#,
        );
        assert_eq!(
            ddb,
            vec![
                Some(Never),
                Some(After(Some(600_000))),
                Some(After(None)),
                None,
                None
            ]
        );
        let sql = expiries(
            &["sqlx"],
            r#"query("INSERT INTO processed_events (id) VALUES ($1) ON CONFLICT DO NOTHING").bind(id).execute(&pool).await?;
               query("INSERT INTO processed_events (id, locked_until) VALUES ($1, $2) ON CONFLICT DO NOTHING").bind(id).bind(t).execute(&pool).await?;
               query("INSERT INTO users (email) VALUES ($1) ON CONFLICT DO NOTHING").bind(e).execute(&pool).await?;"#,
        );
        assert_eq!(sql, vec![Some(Never), Some(After(None)), None]);
    }

    /// The write shapes of the statements of `f`'s body, as (marks_done, increments).
    fn shapes(deps: &[&'static str], body: &str) -> Vec<(bool, bool)> {
        let src = format!("async fn f() {{ {body} }}");
        let file = lower_file(&src, FileId(0), vec!["crate".into()], false).unwrap();
        let env = Env {
            deps: deps.to_vec(),
        };
        let mut out = Vec::new();
        file.fns[0].body.as_ref().unwrap().walk(&mut |e| {
            if let Some(op) = classify(&env, e) {
                out.push((op.shape.marks_done, op.shape.increments));
            }
        });
        out
    }

    #[test]
    fn list_appends_and_bookkeeping_counters_are_told_apart() {
        let src = r#"async fn f() {
            ddb.update_item().table_name("t").key("pk", k).update_expression("SET entries = list_append(entries, :e)").send().await?;
            ddb.update_item().table_name("t").key("pk", k).update_expression("ADD retry_count :one").send().await?;
            ddb.update_item().table_name("t").key("pk", k).update_expression("ADD balance :n").send().await?;
            sqlx::query("UPDATE jobs SET attempts = attempts + 1 WHERE id = $1").bind(id).execute(&pool).await?;
            sqlx::query("UPDATE jobs SET attempts = attempts + 1, paid = paid + $2 WHERE id = $1").bind(id).bind(n).execute(&pool).await?;
            diesel::update(accounts.filter(id.eq(k))).set(balance.eq(balance + n)).execute(conn)?;
            diesel::update(jobs.filter(id.eq(k))).set((attempts.eq(attempts + 1), note.eq(n))).execute(conn)?;
            diesel::update(accounts.filter(id.eq(k))).set(balance.eq(n)).execute(conn)?;
        }"#;
        let file = lower_file(src, FileId(0), vec!["crate".into()], false).unwrap();
        let env = Env {
            deps: vec!["aws_sdk_dynamodb", "sqlx", "diesel"],
        };
        let mut got = Vec::new();
        file.fns[0].body.as_ref().unwrap().walk(&mut |e| {
            if let Some(op) = classify(&env, e) {
                let s = op.shape;
                got.push((s.appends, s.increments, s.counts_bookkeeping));
            }
        });
        assert_eq!(
            got,
            vec![
                (true, false, false),
                (false, true, true),
                (false, true, false),
                (false, true, true),
                (false, true, false),
                (false, true, false),
                (false, true, true),
                (false, false, false),
            ]
        );
    }

    #[test]
    fn writes_know_whether_they_mark_done_or_increment() {
        let sql = shapes(
            &["sqlx"],
            r#"sqlx::query("UPDATE jobs SET status = 'done' WHERE id = $1").bind(id).execute(&pool).await?;
               sqlx::query("UPDATE events SET processed_at = now() WHERE id = $1").bind(id).execute(&pool).await?;
               sqlx::query("UPDATE jobs SET status = $1 WHERE id = $2").bind(JobStatus::Completed).bind(id).execute(&pool).await?;
               sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE id = $2").bind(n).bind(id).execute(&pool).await?;
               sqlx::query("UPDATE accounts SET balance = $1 WHERE id = $2").bind(n).bind(id).execute(&pool).await?;
               sqlx::query("INSERT INTO t (id, n) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n").bind(id).bind(n).execute(&pool).await?;"#,
        );
        assert_eq!(
            sql,
            vec![
                (true, false),
                (true, false),
                (true, false),
                (false, true),
                (false, false),
                (false, false)
            ]
        );
        let redis = shapes(
            &["redis"],
            r#"conn.set(&key, "done").await?; conn.set(&key, payload).await?;"#,
        );
        assert_eq!(redis, vec![(true, false), (false, false)]);
        let ddb = shapes(
            &["aws_sdk_dynamodb"],
            r#"ddb.update_item().table_name("balances").key("pk", k).update_expression("ADD points :n").expression_attribute_values(":n", n).send().await?;
               ddb.put_item().table_name("requests").item("pk", k).item("status", AttributeValue::S("COMPLETED".into())).send().await?;
               ddb.update_item().table_name("t").key("pk", k).update_expression("SET total = total + :n").send().await?;
               ddb.put_item().table_name("orders").item("pk", k).item("total", n).send().await?;
               ddb.update_item().table_name("t").key("pk", k).update_expression("SET total = if_not_exists(total, :z) + :n, seen = :s").send().await?;"#,
        );
        assert_eq!(
            ddb,
            vec![
                (false, true),
                (true, false),
                (false, true),
                (false, false),
                (false, true)
            ]
        );
    }
}
