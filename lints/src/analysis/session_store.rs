//! Web framework session stores (`tower_sessions::Session`, `actix_session::Session`,
//! `ruts::Session`, ...) used as a key-value store: `session.get(k)` reads, `session.insert(k,
//! v)` / `session.set(k, ..)` writes, `session.remove(k)` deletes. Idempotency middleware
//! keeps cached responses there, and none of these stores offers an atomic claim.

use super::store_ops::{receiver_name, typed_from, Access, OpEnv, Store, StoreOp, WriteShape};
use crate::catalog::store_crates::SESSION_CRATES;
use crate::model::ir::Expr;
use crate::model::Span;

/// (method, access). Reads and writes take the key first.
const SESSION_METHODS: &[(&str, Access)] = &[
    ("get", Access::Read),
    ("get_value", Access::Read),
    ("insert", Access::Write),
    ("insert_value", Access::Write),
    ("set", Access::Write),
    ("remove", Access::Delete),
    ("remove_value", Access::Delete),
];

/// Classifies `receiver.method(args)` when the receiver is a session of a session crate.
pub fn classify<'a>(
    env: &dyn OpEnv<'a>,
    receiver: &'a Expr,
    method: &str,
    args: &'a [Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    let &(_, access) = SESSION_METHODS.iter().find(|(m, _)| *m == method)?;
    let key = args.first()?;
    if !is_session_receiver(env, receiver) {
        return None;
    }
    Some(StoreOp {
        store: Store::Session,
        access,
        command: format!("session.{method}"),
        table: None,
        keys: vec![key],
        values: args.get(1).into_iter().collect(),
        span,
        locking: false,
        dedupe_table: false,
        keys_certain: true,
        shape: WriteShape::default(),
    })
}

/// A receiver typed as a session crate's type, or, when its type is not known, one named
/// `session` in a package that depends on a session crate. A known type of another crate
/// (a `HashMap` named `session`) is not a session store.
fn is_session_receiver(env: &dyn OpEnv<'_>, receiver: &Expr) -> bool {
    if let Some(typed) = typed_from(env, receiver, SESSION_CRATES) {
        return typed;
    }
    SESSION_CRATES.iter().any(|k| env.depends_on(k))
        && receiver_name(receiver).is_some_and(|n| n.eq_ignore_ascii_case("session"))
}
