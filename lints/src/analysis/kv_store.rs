//! Key-value stores whose client methods take the key first, read from the catalog's
//! families ([`crate::catalog::stores::kv`]): web framework sessions used as a key-value
//! store (`session.get(k)`, `session.insert(k, v)`), sled (`db.get(k)`,
//! `db.compare_and_swap(k, None, Some(v))`), JetStream key-value buckets (`kv.get(k)`,
//! `kv.create(k, v)`).

use super::store_ops::access_of;
use super::store_ops::{receiver_name, typed_from, Expiry, OpEnv, Store, StoreOp, WriteShape};
use crate::catalog::stores::kv::{KvFamily, SESSION};
use crate::catalog::stores::{ClaimTest, KvOwner, OpKind};
use crate::model::ir::Expr;
use crate::model::Span;

/// Classifies `receiver.method(args)` when the receiver is a store of a key-value family or
/// of a type the user models (the catalog's
/// [`crate::catalog::stores::StoreModels::kv_rows`]).
pub fn classify<'a>(
    env: &dyn OpEnv<'a>,
    receiver: &'a Expr,
    method: &str,
    args: &'a [Expr],
    span: Span,
) -> Option<StoreOp<'a>> {
    env.stores()
        .kv_rows(method, args.len())
        .find_map(|(owner, row)| {
            let key = args.get(row.key?)?;
            let (store, command) = match owner {
                KvOwner::Family(f) => {
                    if !is_receiver_of(env, f, receiver, row.unique) {
                        return None;
                    }
                    let store = if std::ptr::eq(f, &SESSION) {
                        Store::Session
                    } else {
                        Store::Kv(f.name)
                    };
                    (store, format!("{}{method}", f.command_prefix))
                }
                KvOwner::Type(ty) => {
                    if !is_of_type(env, receiver, ty) {
                        return None;
                    }
                    (Store::Kv(ty), format!("{ty}::{method}"))
                }
            };
            let access = access_of(row.op)?;
            let stored = row.value.and_then(|i| args.get(i));
            Some(StoreOp {
                columns: Vec::new(),
                store,
                access,
                command,
                table: None,
                keys: vec![key],
                values: stored.into_iter().collect(),
                span,
                locking: false,
                dedupe_table: false,
                keys_certain: true,
                shape: WriteShape {
                    increments: row.op == OpKind::Increment,
                    fails_when_taken: row.op == OpKind::Claim(ClaimTest::FailsWhenTaken),
                    expiry: match super::expiry::of_ttl(env, row.ttl, access, args) {
                        Some(Expiry::Never)
                            if stored
                                .is_some_and(|v| super::expiry::kv_value_is_a_lease(env, v, 0)) =>
                        {
                            Some(Expiry::After(None))
                        }
                        e => e,
                    },
                    ..WriteShape::default()
                },
            })
        })
}

/// A receiver whose type is `ty`: the type's name, or a path (`store::MyKv`) its path ends
/// in. Only the type's evidence counts: a user's type has no crate to depend on, and a
/// receiver's name says nothing of it.
fn is_of_type(env: &dyn OpEnv<'_>, receiver: &Expr, ty: &str) -> bool {
    let Some(t) = env.type_of(receiver) else {
        return false;
    };
    let want: Vec<&str> = ty.split("::").filter(|s| !s.is_empty()).collect();
    let have: Vec<&str> = t
        .crate_name()
        .into_iter()
        .chain(t.segments.iter().map(String::as_str))
        .collect();
    have.len() >= want.len() && have[have.len() - want.len()..] == want[..]
}

/// A receiver typed as one of the family's crates' types, or, when its type is not known,
/// one named for the store in a package that depends on the family (a name alone is enough
/// for a method no other API has). A known type of another crate (a `HashMap` named
/// `session`) is not the store.
fn is_receiver_of(env: &dyn OpEnv<'_>, f: &KvFamily, receiver: &Expr, unique: bool) -> bool {
    if let Some(typed) = typed_from(env, receiver, f.crates) {
        return typed;
    }
    f.crates.iter().any(|k| env.depends_on(k))
        && (unique
            || receiver_name(receiver).is_some_and(|n| {
                let n = n.to_ascii_lowercase();
                f.receiver_names.contains(&n.as_str())
            }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::store_ops::Access;
    use crate::catalog::stores::kv::FAMILIES;

    #[test]
    fn every_family_maps_to_a_store() {
        for f in FAMILIES {
            for r in f.methods {
                // Every kind a key-value row uses has an access.
                assert!(access_of(r.op).is_some(), "{}: {}", f.name, r.method);
            }
        }
        assert_eq!(
            access_of(OpKind::Claim(ClaimTest::Answer)),
            Some(Access::Claim)
        );
    }
}
