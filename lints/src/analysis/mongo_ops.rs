//! MongoDB collection operations, read from the catalog's rows
//! ([`crate::catalog::stores::mongodb`]): the key is a field of the filter or document
//! (`doc! { "_id": &id }`, built in the call or in a local), the rest of the document is
//! what the write stores.

use super::store_ops::{access_of, receiver_name, typed_from, OpEnv, Store, StoreOp, WriteShape};
use crate::catalog::stores::mongodb::{self, MongoRow};
use crate::catalog::stores::{ClaimTest, OpKind};
use crate::model::ir::{Expr, ExprKind, Lit};
use crate::model::Span;

/// How many locals a document is followed through (`let filter = doc! {..}; ..find_one(filter)`).
const MAX_LOCALS: usize = 4;

/// Classifies `receiver.method(args)` when the receiver is a MongoDB collection.
pub fn classify<'a>(
    env: &dyn OpEnv<'a>,
    receiver: &'a Expr,
    method: &str,
    args: &'a [Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    let r: &MongoRow = mongodb::method(method)?;
    if !r.row.fits(args.len()) || !is_collection(env, receiver, r.row.unique) {
        return None;
    }
    let fields = document(env, args.get(r.row.key?)?, 0)?;
    let key_at = key_field(&fields)?;
    let (key_name, key) = fields[key_at];
    let mut kind = r.row.op;
    if r.state_filter_claims {
        // A filter field besides the key that holds a literal or an operator document
        // (`"state": "pending"`, `"done": { "$ne": true }`) tests the document's state.
        let tests_state = fields.iter().enumerate().any(|(i, (name, v))| {
            i != key_at
                && !name.starts_with('$')
                && matches!(v.peel().kind, ExprKind::Lit(_) | ExprKind::Macro(_))
        });
        if args[2..].iter().any(|a| sets_upsert(env, a, 0)) {
            kind = OpKind::Upsert;
        } else if tests_state {
            kind = mongodb::FILTER_CLAIM;
        }
    }
    if r.unique_id_claims && key_name == mongodb::ID_FIELD {
        kind = mongodb::ID_CLAIM;
    }
    let access = access_of(kind)?;
    // What the write stores: the document's other fields, or the update or replacement.
    let values: Vec<&'a Expr> = match r.row.value {
        Some(i) => args.get(i).into_iter().collect(),
        None if kind.writes() => fields
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != key_at)
            .map(|(_, (_, v))| *v)
            .collect(),
        None => Vec::new(),
    };
    Some(StoreOp {
        columns: Vec::new(),
        store: Store::Kv("MongoDB"),
        access,
        command: method.to_owned(),
        table: None,
        keys: vec![key],
        values,
        span,
        locking: false,
        dedupe_table: false,
        keys_certain: true,
        shape: WriteShape {
            fails_when_taken: kind == OpKind::Claim(ClaimTest::FailsWhenTaken),
            ..WriteShape::default()
        },
    })
}

/// A receiver typed as a `mongodb` type, or, when its type is not known, in a package that
/// depends on `mongodb`, one named for a collection or called with a method only a
/// collection has.
fn is_collection(env: &dyn OpEnv<'_>, receiver: &Expr, unique: bool) -> bool {
    if let Some(typed) = typed_from(env, receiver, &[mongodb::CRATE]) {
        return typed;
    }
    env.depends_on(mongodb::CRATE)
        && (unique
            || receiver_name(receiver).is_some_and(|n| {
                let n = n.to_ascii_lowercase();
                mongodb::RECEIVER_WORDS.iter().any(|w| n.contains(w))
            }))
}

/// The (name, value) fields of a document macro or of a typed collection's struct literal,
/// following the local it is bound to.
fn document<'a>(
    env: &dyn OpEnv<'a>,
    e: &'a Expr,
    depth: usize,
) -> Option<Vec<(&'a str, &'a Expr)>> {
    match &e.peel().kind {
        ExprKind::Macro(m) if m.parsed && mongodb::DOC_MACROS.contains(&m.path.last()) => Some(
            m.args
                .chunks(2)
                .filter_map(|p| match p {
                    [k, v] => Some((k.as_str_lit()?, v)),
                    _ => None,
                })
                .collect(),
        ),
        // A typed collection's document: `LabelRecord { shipment_id, .. }`.
        ExprKind::Struct { fields, .. } => {
            Some(fields.iter().map(|(n, v)| (n.as_str(), v)).collect())
        }
        ExprKind::Path(p) if depth < MAX_LOCALS => {
            document(env, env.local_init(p.as_ident()?)?, depth + 1)
        }
        // `filter.clone()`: the same document.
        ExprKind::MethodCall {
            receiver, method, ..
        } if matches!(method.as_str(), "clone" | "to_owned") && depth < MAX_LOCALS => {
            document(env, receiver, depth + 1)
        }
        _ => None,
    }
}

/// The field that keys the document: `_id`, else a key-like name, else the first field
/// that is not an operator.
fn key_field(fields: &[(&str, &Expr)]) -> Option<usize> {
    let keyish = |n: &str| {
        let n = n.to_ascii_lowercase();
        n.ends_with("id") || n.ends_with("key")
    };
    fields
        .iter()
        .position(|(n, _)| *n == mongodb::ID_FIELD)
        .or_else(|| fields.iter().position(|(n, _)| keyish(n)))
        .or_else(|| fields.iter().position(|(n, _)| !n.starts_with('$')))
}

/// Options that say `upsert(true)` (`UpdateOptions::builder().upsert(true).build()`,
/// `UpdateOptions { upsert: Some(true), .. }`), following the local they were built in.
fn sets_upsert<'a>(env: &dyn OpEnv<'a>, e: &'a Expr, depth: usize) -> bool {
    let mut found = false;
    let mut locals = Vec::new();
    e.walk(&mut |x| match &x.kind {
        ExprKind::MethodCall { method, args, .. } if method == mongodb::UPSERT => {
            found |= args.first().is_some_and(is_true);
        }
        ExprKind::Path(p) => locals.extend(p.as_ident().map(str::to_owned)),
        _ => {}
    });
    found
        || depth < MAX_LOCALS
            && locals.iter().any(|n| {
                env.local_init(n)
                    .is_some_and(|i| sets_upsert(env, i, depth + 1))
            })
}

/// `true` or `Some(true)`.
fn is_true(e: &Expr) -> bool {
    match &e.peel().kind {
        ExprKind::Lit(Lit::Bool(b)) => *b,
        ExprKind::Call { args, .. } => args.len() == 1 && is_true(&args[0]),
        _ => false,
    }
}
