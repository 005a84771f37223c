//! Transactions in a function body, and which transaction (if any) a store operation runs in.
//!
//! - Begun: `let mut tx = pool.begin().await?` (sqlx, sea-orm), `client.transaction().await?`
//!   (tokio-postgres, deadpool), `conn.transaction()?` (rusqlite), `build_transaction()
//!   .start()`; committed by `tx.commit()`. Operations run in it when their executor is the
//!   handle: `&mut *tx`, `tx.as_mut()`, `&mut tx`, `&tx`, `tx.execute(..)`, or a local alias
//!   (`let conn = &mut *tx;`).
//! - Closure: `conn.transaction(|tx| ..)` (diesel, diesel-async, sqlx, sea-orm), which commits
//!   when the closure returns; operations run in it when their executor is the closure's
//!   parameter.
//! - One request: DynamoDB `transact_write_items()`, a Redis `pipe().atomic()`: what the
//!   request carries commits together.
//!
//! Without types, a transaction is recognized by these shapes in a package that depends on a
//! database client; an executor that is neither a handle nor a parameter is "another
//! connection" ([`Executor::Other`]).

use super::binding::let_parts;
use super::flow::FnId;
use crate::model::ir::{Expr, ExprKind, Pat};
use crate::model::{FnDef, Package, Span};

/// A transaction of one function: an index into [`Transactions::txs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// Opened into a handle by `begin()`/`transaction()`, committed by `.commit()`.
    Begun,
    /// A closure passed to `transaction(..)`, committed when it returns.
    Closure,
    /// DynamoDB `transact_write_items`.
    DynamoTransactWrite,
    /// A Redis `MULTI`/`EXEC` pipeline (`pipe().atomic()`).
    RedisAtomic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tx {
    pub kind: TxKind,
    /// The expression that opens it: `pool.begin()`, the `transaction(..)` call, the request.
    pub begin: Span,
    /// Names the handle is known by: the `let` binding and its aliases, or the closure's
    /// parameter.
    pub handles: Vec<String>,
    /// `tx.commit()` calls; for a closure or a request, the call itself (it commits when it
    /// returns).
    pub commits: Vec<Span>,
    /// For a closure or a request, the code that runs inside it.
    pub region: Option<Span>,
}

/// Where a store operation runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executor {
    /// In this function's transaction.
    Tx(TxId),
    /// Through the function's `i`-th parameter (a transaction or connection the caller gives).
    Param(usize),
    /// On a connection, pool or client named so (`pool`, `self.db`): autocommit.
    Other(String),
    /// In a transaction of the called helper, committed before it returns.
    InCallee(FnId),
    /// Not known.
    Unknown,
}

/// The transactions of one function.
#[derive(Debug, Clone, Default)]
pub struct Transactions {
    pub txs: Vec<Tx>,
    /// The fn's parameters that can carry the caller's transaction (not pools).
    params: Vec<Option<String>>,
}

use crate::catalog::stores::sql::{
    TX_BEGIN as BEGIN, TX_CLOSURE as CLOSURE_TX, TX_CRATES as DB_CRATES,
};

/// Methods that keep the value's identity: the executor of `tx.as_mut()` is `tx`.
const SAME_HANDLE: &[&str] = &[
    "as_mut",
    "as_ref",
    "deref_mut",
    "deref",
    "borrow_mut",
    "borrow",
    "clone",
    "get_mut",
    "acquire",
];

impl Transactions {
    /// Finds the transactions of `f`. Empty unless the package depends on a database client
    /// (for SQL shapes), DynamoDB or Redis.
    pub fn of_fn(package: &Package, f: &FnDef) -> Transactions {
        // The `use` renames of f's file: `use sqlx::PgPool as Db;` makes `&Db` a pool.
        let uses = &package.file(f.span.file).uses;
        let is_pool_type = |ty: &crate::model::ir::Type| is_pool_type(ty, uses);
        let mut out = Transactions {
            txs: Vec::new(),
            // A pool parameter hands out autocommit connections, whatever the caller has: a
            // write on it is on "another connection", not the caller's transaction.
            params: f
                .params
                .iter()
                .map(|p| {
                    p.pat
                        .simple_name()
                        .filter(|_| !is_pool_type(&p.ty))
                        .map(str::to_owned)
                })
                .collect(),
        };
        let Some(body) = &f.body else {
            return out;
        };
        let sql = DB_CRATES.iter().any(|c| package.depends_on(c));
        let dynamo = package.depends_on("aws_sdk_dynamodb");
        let redis = package.depends_on("redis");
        if !(sql || dynamo || redis) {
            return out;
        }
        // Handles bound by `let`, with their aliases.
        let mut lets: Vec<(&str, &Expr)> = Vec::new();
        body.walk_lets(&mut |pat, init| {
            lets.extend(init.into_iter().flat_map(|i| let_parts(pat, i)))
        });
        for &(name, init) in &lets {
            if sql && opens_handle(init) {
                out.txs.push(Tx {
                    kind: TxKind::Begun,
                    begin: init.span,
                    handles: vec![name.to_owned()],
                    commits: Vec::new(),
                    region: None,
                });
            } else if let Some(t) = base_name(init).and_then(|b| out.handle_tx(&b)) {
                // `let conn = &mut *tx;`
                if matches!(
                    init.kind,
                    ExprKind::Ref { .. } | ExprKind::MethodCall { .. }
                ) {
                    out.txs[t.0 as usize].handles.push(name.to_owned());
                }
            }
        }
        // A pipeline in a local made atomic by a statement of its own (`let mut pipe =
        // redis::pipe(); pipe.atomic(); pipe.hincr(..); pipe.query_async(&mut conn)`): the
        // commands added to it run in one `MULTI`/`EXEC` when it runs.
        if redis {
            for &(name, init) in &lets {
                if !starts_pipeline(init) {
                    continue;
                }
                let mut atomic = false;
                let mut runs = Vec::new();
                body.walk(&mut |e| {
                    if let ExprKind::MethodCall {
                        receiver, method, ..
                    } = &e.kind
                    {
                        if base_name(receiver).as_deref() == Some(name) {
                            atomic |= method == "atomic";
                            if PIPE_RUNS.contains(&method.as_str()) {
                                runs.push(e.span);
                            }
                        }
                    }
                });
                if atomic && !runs.is_empty() {
                    out.txs.push(Tx {
                        kind: TxKind::RedisAtomic,
                        begin: init.span,
                        handles: vec![name.to_owned()],
                        commits: runs,
                        region: None,
                    });
                }
            }
        }
        body.walk(&mut |e| {
            if sql {
                if let Some((param, region)) = closure_tx(e) {
                    out.txs.push(Tx {
                        kind: TxKind::Closure,
                        begin: e.span,
                        handles: param.into_iter().collect(),
                        commits: vec![e.span],
                        region: Some(region),
                    });
                }
            }
            if let Some(kind) = request_tx(e, &lets, dynamo, redis) {
                out.txs.push(Tx {
                    kind,
                    begin: e.span,
                    handles: Vec::new(),
                    commits: vec![e.span],
                    region: Some(e.span),
                });
            }
            if let ExprKind::MethodCall {
                receiver, method, ..
            } = &e.kind
            {
                if method == crate::catalog::stores::sql::TX_COMMIT {
                    if let Some(t) = base_name(receiver).and_then(|b| out.handle_tx(&b)) {
                        out.txs[t.0 as usize].commits.push(e.span);
                    }
                }
            }
        });
        out
    }

    pub fn is_empty(&self) -> bool {
        self.txs.is_empty()
    }

    pub fn get(&self, id: TxId) -> &Tx {
        &self.txs[id.0 as usize]
    }

    /// The `Begun` or `Closure` transaction whose handle is named `name`.
    fn handle_tx(&self, name: &str) -> Option<TxId> {
        self.txs
            .iter()
            .rposition(|t| t.handles.iter().any(|h| h == name))
            .map(|i| TxId(i as u32))
    }

    /// The transaction committed by `e` (`tx.commit()`, or a `transaction(|tx| ..)` call once
    /// it returns).
    pub fn commit_at(&self, e: &Expr) -> Option<TxId> {
        self.txs
            .iter()
            .position(|t| t.commits.contains(&e.span))
            .map(|i| TxId(i as u32))
    }

    /// Where the store operation `op` (the expression that performs it) runs: in a
    /// transaction whose handle or region it uses, through a parameter, or elsewhere.
    pub fn executor(&self, op: &Expr) -> Executor {
        if let Some(i) = self.txs.iter().position(|t| {
            matches!(t.kind, TxKind::DynamoTransactWrite | TxKind::RedisAtomic)
                && t.region.is_some_and(|r| r.contains(op.span))
        }) {
            return Executor::Tx(TxId(i as u32));
        }
        let names = executor_names(op);
        if let Some(t) = names.iter().find_map(|n| self.handle_tx(n)) {
            return Executor::Tx(t);
        }
        if let Some(i) = names
            .iter()
            .find_map(|n| self.params.iter().position(|p| p.as_deref() == Some(n)))
        {
            return Executor::Param(i);
        }
        match names.into_iter().next() {
            Some(n) => Executor::Other(n),
            None => Executor::Unknown,
        }
    }

    /// The executor passed as argument `arg` of a call, seen from this function (to map a
    /// callee's [`Executor::Param`] to the caller's).
    pub fn executor_of_arg(&self, arg: &Expr) -> Executor {
        match base_name(arg) {
            Some(n) => {
                if let Some(t) = self.handle_tx(&n) {
                    Executor::Tx(t)
                } else if let Some(i) = self.params.iter().position(|p| p.as_deref() == Some(&n)) {
                    Executor::Param(i)
                } else {
                    Executor::Other(n)
                }
            }
            None => Executor::Unknown,
        }
    }
}

/// A handle named as a transaction (`tx`, `txn`, `transaction`, `db_tx`): one begun
/// elsewhere, typically by a helper that returns it (zero2prod's `try_processing` hands the
/// caller the transaction of its claim).
pub fn names_a_transaction(name: &str) -> bool {
    is_named_one_of(name, &["tx", "txn", "transaction", "trx"])
}

/// Whether the last segment of `name` (`self.db_tx` → `db_tx`) is one of `words`, or starts
/// or ends with one as a `_`-separated word.
pub fn is_named_one_of(name: &str, words: &[&str]) -> bool {
    let n = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    words
        .iter()
        .any(|w| n == *w || n.starts_with(&format!("{w}_")) || n.ends_with(&format!("_{w}")))
}

/// `&PgPool`, `Pool<Postgres>`, `&DatabaseConnection` (sea-orm's pool), `deadpool_postgres::Pool`,
/// also under the name a `use .. as ..` of the file gives it.
fn is_pool_type(ty: &crate::model::ir::Type, uses: &[crate::model::UseDecl]) -> bool {
    let pool = |last: &str| last.ends_with("Pool") || last == "DatabaseConnection";
    ty.core_path().is_some_and(|p| {
        let last = p.last();
        pool(last)
            || p.segments.len() == 1
                && last.starts_with(char::is_uppercase)
                && uses
                    .iter()
                    .any(|u| u.alias == last && u.path.last().is_some_and(|l| pool(l)))
    })
}

/// `pool.begin().await?`, `client.transaction().await?`, `conn.transaction()?`,
/// `client.build_transaction().start().await?`.
fn opens_handle(init: &Expr) -> bool {
    // `pool.begin().await.map_err(Error::from)?`, `match pool.begin().await { Ok(t) => t,
    // Err(e) => return Err(e) }`: the handle under the error's conversion or test.
    let mut init = init.peel();
    loop {
        init = match &init.kind {
            ExprKind::MethodCall {
                receiver, method, ..
            } if super::guards::ERROR_CONVERSIONS.contains(&method.as_str()) => receiver.peel(),
            ExprKind::Match { scrutinee, .. } => scrutinee.peel(),
            _ => break,
        };
    }
    match &init.kind {
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } => {
            let no_closure = !args
                .iter()
                .any(|a| matches!(a.kind, ExprKind::Closure { .. }));
            let start_of_builder = method == "start"
                && matches!(&receiver.peel().kind, ExprKind::MethodCall { method, .. } if method.starts_with("build_transaction") || method == "transaction_builder");
            no_closure
                && (BEGIN.contains(&method.as_str()) && method != "start" || start_of_builder)
        }
        _ => false,
    }
}

/// `x.transaction(|tx| ..)`: the closure's parameter and body span.
fn closure_tx(e: &Expr) -> Option<(Option<String>, Span)> {
    let ExprKind::MethodCall { method, args, .. } = &e.kind else {
        return None;
    };
    if !CLOSURE_TX.contains(&method.as_str()) {
        return None;
    }
    // diesel's `run` only on `build_transaction()`.
    if method == "run" && !e.method_chain().contains(&"build_transaction") {
        return None;
    }
    args.iter().find_map(|a| match &a.kind {
        ExprKind::Closure { params, body, .. } => Some((
            params.first().and_then(Pat::simple_name).map(str::to_owned),
            body.span,
        )),
        _ => None,
    })
}

/// Methods that run a Redis pipeline.
const PIPE_RUNS: &[&str] = &["query_async", "query", "exec_async", "exec"];

/// `redis::pipe()`, `Pipeline::new()`: a call that starts a pipeline.
fn starts_pipeline(init: &Expr) -> bool {
    let ExprKind::Call { func, .. } = &init.peel().kind else {
        return false;
    };
    func.as_path().is_some_and(|p| {
        let segs = &p.segments;
        segs.last().is_some_and(|l| l == "pipe")
            || segs.len() >= 2
                && segs[segs.len() - 2] == "Pipeline"
                && segs[segs.len() - 1] == "new"
    })
}

/// The `.send()` of a `transact_write_items()` chain, or the `query_async`/`query` of a
/// `pipe().atomic()` chain, also when the chain was begun in a local (`let p =
/// redis::pipe().atomic()..; p.query_async(conn)`).
fn request_tx(e: &Expr, lets: &[(&str, &Expr)], dynamo: bool, redis: bool) -> Option<TxKind> {
    let ExprKind::MethodCall { method, .. } = &e.kind else {
        return None;
    };
    let mut chain = e.method_chain();
    let mut root = e.peel();
    for _ in 0..4 {
        while let ExprKind::MethodCall { receiver, .. } = &root.kind {
            root = receiver.peel();
        }
        let Some(name) = root.as_path().and_then(|p| p.as_ident()) else {
            break;
        };
        let mut defs = lets.iter().filter(|(n, _)| *n == name);
        let (Some((_, init)), None) = (defs.next(), defs.next()) else {
            break;
        };
        chain.extend(init.method_chain());
        root = init.peel();
    }
    if dynamo && method == "send" && chain.contains(&"transact_write_items") {
        return Some(TxKind::DynamoTransactWrite);
    }
    let executes = matches!(
        method.as_str(),
        "query_async" | "query" | "exec_async" | "exec"
    );
    if redis && executes && chain.contains(&"atomic") {
        return Some(TxKind::RedisAtomic);
    }
    None
}

/// The local or field an executor expression names: `tx` of `&mut *tx`, `tx.as_mut()`,
/// `&mut tx`; `self.pool` of `&self.pool`.
pub fn base_name(e: &Expr) -> Option<String> {
    match &e.peel().kind {
        ExprKind::Path(p) => p.as_ident().map(str::to_owned),
        ExprKind::Field { base, member } => base_name(base).map(|b| format!("{b}.{member}")),
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } if args.is_empty() && SAME_HANDLE.contains(&method.as_str()) => base_name(receiver),
        // `POOL.get().expect("..")`: the handle kept in a static's cell, unwrapped.
        ExprKind::MethodCall {
            receiver,
            method,
            args,
            ..
        } if method == "get" && args.is_empty()
            || matches!(method.as_str(), "expect" | "unwrap") =>
        {
            base_name(receiver)
        }
        _ => None,
    }
}

/// Candidate executors of an operation: the root of its receiver chain (`tx` of
/// `tx.execute(q)`, `client` of `client.put_item()..send()`) and its outermost call's
/// arguments (`&mut *tx` of `query(..).execute(&mut *tx)`).
fn executor_names(op: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    if let ExprKind::MethodCall { args, .. } = &op.peel().kind {
        out.extend(args.iter().filter_map(base_name));
    }
    let mut cur = op.peel();
    loop {
        match &cur.kind {
            ExprKind::MethodCall { receiver, .. } => cur = receiver.peel(),
            ExprKind::Field { .. } | ExprKind::Path(_) => {
                if let Some(n) = base_name(cur) {
                    // The receiver names the executor first when it is a handle.
                    out.insert(0, n);
                }
                break;
            }
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    /// The transactions of the fn `f` in `src`, and the executor of every `.execute(..)` /
    /// `.send()` / `.query_async(..)` call, in order.
    fn txs(deps: &[&str], src: &str) -> (Transactions, Vec<Executor>) {
        let package = testing::package("app", deps, &[("crate", src)]);
        let f = package.files[0].fns.iter().find(|f| f.name == "f").unwrap();
        let t = Transactions::of_fn(&package, f);
        let mut execs = Vec::new();
        f.body.as_ref().unwrap().walk(&mut |e| {
            if let ExprKind::MethodCall { method, .. } = &e.kind {
                if matches!(method.as_str(), "execute" | "send" | "hset") {
                    execs.push(t.executor(e));
                }
            }
        });
        (t, execs)
    }

    #[test]
    fn begun_transactions_own_their_handle_and_aliases() {
        let (t, ex) = txs(
            &["sqlx"],
            "async fn f(pool: &PgPool, other: &mut PgConnection) {
                 let mut tx = pool.begin().await?;
                 sqlx::query(\"UPDATE a\").execute(&mut *tx).await?;
                 sqlx::query(\"UPDATE b\").execute(tx.as_mut()).await?;
                 let conn = &mut *tx;
                 sqlx::query(\"UPDATE c\").execute(conn).await?;
                 tx.commit().await?;
                 sqlx::query(\"INSERT d\").execute(pool).await?;
                 sqlx::query(\"INSERT e\").execute(&mut *other).await?;
             }",
        );
        assert_eq!(t.txs.len(), 1);
        assert_eq!(t.txs[0].kind, TxKind::Begun);
        assert_eq!(t.txs[0].commits.len(), 1);
        assert_eq!(
            ex,
            vec![
                Executor::Tx(TxId(0)),
                Executor::Tx(TxId(0)),
                Executor::Tx(TxId(0)),
                // A pool parameter autocommits whatever the caller holds.
                Executor::Other("pool".into()),
                Executor::Param(1),
            ]
        );
    }

    #[test]
    fn tokio_postgres_transactions_execute_on_the_handle() {
        let (t, ex) = txs(
            &["tokio-postgres"],
            "async fn f(client: &mut Client) {
                 let tx = client.transaction().await?;
                 tx.execute(\"UPDATE a\", &[]).await?;
                 tx.commit().await?;
                 client.execute(\"INSERT b\", &[]).await?;
             }",
        );
        assert_eq!(t.txs[0].commits.len(), 1);
        assert_eq!(ex, vec![Executor::Tx(TxId(0)), Executor::Param(0)]);
    }

    #[test]
    fn closure_transactions_run_on_their_parameter() {
        let (t, ex) = txs(
            &["diesel"],
            "fn f(conn: &mut PgConnection) {
                 conn.transaction(|c| {
                     diesel::update(a).execute(c)?;
                     diesel::insert_into(b).execute(conn)?;
                     Ok(())
                 })?;
             }",
        );
        assert_eq!(t.txs.len(), 1);
        assert_eq!(t.txs[0].kind, TxKind::Closure);
        assert_eq!(ex, vec![Executor::Tx(TxId(0)), Executor::Param(0)]);
    }

    #[test]
    fn sea_orm_begin_and_closure_transactions() {
        let (t, ex) = txs(
            &["sea-orm"],
            "async fn f(db: &DatabaseConnection) {
                 let txn = db.begin().await?;
                 txn.execute(a).await?;
                 txn.commit().await?;
                 db.transaction::<_, (), DbErr>(|t| Box::pin(async move {
                     t.execute(b).await?;
                     Ok(())
                 })).await?;
                 db.execute(c).await?;
             }",
        );
        let kinds: Vec<TxKind> = t.txs.iter().map(|t| t.kind).collect();
        assert_eq!(kinds, vec![TxKind::Begun, TxKind::Closure]);
        assert_eq!(
            ex,
            vec![
                Executor::Tx(TxId(0)),
                Executor::Tx(TxId(1)),
                Executor::Other("db".into())
            ]
        );
    }

    #[test]
    fn one_request_transactions_cover_their_items() {
        let (t, ex) = txs(
            &["aws-sdk-dynamodb", "redis"],
            "async fn f(ddb: &Client, conn: &mut Conn) {
                 ddb.transact_write_items().transact_items(a).transact_items(b).send().await?;
                 ddb.put_item().table_name(\"t\").send().await?;
                 redis::pipe().atomic().hset(k, f, v).query_async(conn).await?;
             }",
        );
        let kinds: Vec<TxKind> = t.txs.iter().map(|t| t.kind).collect();
        assert_eq!(
            kinds,
            vec![TxKind::DynamoTransactWrite, TxKind::RedisAtomic]
        );
        assert_eq!(
            ex,
            vec![
                Executor::Tx(TxId(0)),
                Executor::Param(0),
                Executor::Tx(TxId(1))
            ]
        );
    }

    #[test]
    fn a_pipeline_made_atomic_by_a_statement_holds_its_commands() {
        let (t, ex) = txs(
            &["redis"],
            "async fn f(conn: &mut Conn) {
                 let mut p = redis::pipe();
                 p.atomic();
                 p.hset(k, f, v).ignore();
                 p.query_async(conn).await?;
                 let mut plain = redis::pipe();
                 plain.hset(k, f, v).ignore();
                 plain.query_async(conn).await?;
             }",
        );
        let kinds: Vec<TxKind> = t.txs.iter().map(|t| t.kind).collect();
        assert_eq!(kinds, vec![TxKind::RedisAtomic]);
        assert_eq!(t.txs[0].commits.len(), 1);
        assert_eq!(
            ex,
            vec![Executor::Tx(TxId(0)), Executor::Other("plain".into())]
        );
    }

    #[test]
    fn no_database_client_no_transactions() {
        let (t, _) = txs(
            &[],
            "fn f(s: &mut Parser) { let tx = s.begin(); tx.commit(); }",
        );
        assert!(t.is_empty());
    }
}
