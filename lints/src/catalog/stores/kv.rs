//! Key-value stores whose client methods take the key first: web framework sessions used
//! as a key-value store, sled, and async-nats JetStream key-value buckets. One row form for
//! all of them: the crates, the receiver names that stand for the store when its type is not
//! known, and the method rows.

use super::{ClaimTest, MethodRow, OpKind, Ttl};

/// One key-value family.
#[derive(Debug, Clone, Copy)]
pub struct KvFamily {
    /// How messages name the store.
    pub name: &'static str,
    /// Crates (as in `use`) whose types make a receiver this store.
    pub crates: &'static [&'static str],
    /// Receiver names that stand for the store when its type is not known and the package
    /// depends on one of `crates` (compared ignoring case).
    pub receiver_names: &'static [&'static str],
    /// How a message names a call: `{prefix}{method}`.
    pub command_prefix: &'static str,
    pub methods: &'static [MethodRow],
    /// How to make the check and the mark one atomic step in this store.
    pub claim_help: &'static str,
}

/// Web framework session stores (`tower_sessions::Session`, `actix_session::Session`,
/// `ruts::Session`, ...): idempotency middleware keeps cached responses there, and none of
/// them offers an atomic claim.
pub const SESSION: KvFamily = KvFamily {
    name: "session store",
    crates: &[
        "tower_sessions",
        "tower_sessions_core",
        "actix_session",
        "ruts",
        "axum_session",
        "axum_sessions",
        "async_session",
        "salvo_session",
    ],
    receiver_names: &["session"],
    command_prefix: "session.",
    methods: &[
        MethodRow::new("get", OpKind::Read, 0),
        MethodRow::new("get_value", OpKind::Read, 0),
        MethodRow::new("insert", OpKind::Write, 0).value(1),
        MethodRow::new("insert_value", OpKind::Write, 0).value(1),
        MethodRow::new("set", OpKind::Write, 0).value(1),
        MethodRow::new("remove", OpKind::Delete, 0),
        MethodRow::new("remove_value", OpKind::Delete, 0),
    ],
    claim_help: "a session store cannot claim a key atomically: keep idempotency records in a \
                 store that can (`SET key value NX EX ttl`, `INSERT ... ON CONFLICT DO NOTHING`, \
                 a conditional `put_item`), claimed before the handler runs",
};

/// sled (`Db`, `Tree`): `compare_and_swap(k, None, Some(v))` is the claim; its inner
/// `Result` says whether it won.
pub const SLED: KvFamily = KvFamily {
    name: "sled",
    crates: &["sled"],
    receiver_names: &["db", "tree", "sled", "sled_db"],
    command_prefix: "sled.",
    methods: &[
        MethodRow::new("get", OpKind::Read, 0).arity(1, 1),
        MethodRow::new("contains_key", OpKind::Read, 0).arity(1, 1),
        MethodRow::new("insert", OpKind::Write, 0)
            .value(1)
            .arity(2, 2),
        MethodRow::new("remove", OpKind::Delete, 0).arity(1, 1),
        MethodRow::new("compare_and_swap", OpKind::Claim(ClaimTest::Answer), 0)
            .value(2)
            .ttl(Ttl::Never)
            .arity(3, 3)
            .unique(),
        MethodRow::new("update_and_fetch", OpKind::Write, 0).arity(2, 2),
        MethodRow::new("fetch_and_update", OpKind::Write, 0).arity(2, 2),
    ],
    claim_help: "claim the key in one step before the work: `compare_and_swap(key, None, \
                 Some(value))`, and skip the work when it returns `Err(CompareAndSwapError)`",
};

/// async-nats JetStream key-value buckets (`jetstream::kv::Store`): `create` writes only a
/// new key and fails when the key exists; `update` writes only at the expected revision.
pub const NATS_KV: KvFamily = KvFamily {
    name: "JetStream KV",
    crates: &["async_nats"],
    receiver_names: &["kv", "bucket", "kv_store", "kv_bucket"],
    command_prefix: "kv.",
    methods: &[
        MethodRow::new("get", OpKind::Read, 0).arity(1, 1),
        MethodRow::new("entry", OpKind::Read, 0).arity(1, 1),
        MethodRow::new("put", OpKind::Write, 0).value(1).arity(2, 2),
        MethodRow::new("create", OpKind::Claim(ClaimTest::FailsWhenTaken), 0)
            .value(1)
            .arity(2, 2),
        MethodRow::new("update", OpKind::Claim(ClaimTest::FailsWhenTaken), 0)
            .value(1)
            .arity(3, 3),
        MethodRow::new("delete", OpKind::Delete, 0).arity(1, 1),
        MethodRow::new("purge", OpKind::Delete, 0).arity(1, 1),
    ],
    claim_help: "claim the key in one step before the work: `kv.create(key, value)`, which \
                 fails when the key exists, and skip the work on that error",
};

/// Every key-value family, in the order the engine tries them.
pub const FAMILIES: &[&KvFamily] = &[&SESSION, &SLED, &NATS_KV];

/// The family named `name`.
pub fn family(name: &str) -> Option<&'static KvFamily> {
    FAMILIES.iter().copied().find(|f| f.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_invariants() {
        for (i, f) in FAMILIES.iter().enumerate() {
            super::super::check_rows(f.methods);
            assert!(
                !f.crates.is_empty() && !f.receiver_names.is_empty(),
                "{}",
                f.name
            );
            assert!(FAMILIES[..i].iter().all(|o| o.name != f.name));
            assert!(
                f.receiver_names
                    .iter()
                    .all(|n| *n == n.to_ascii_lowercase()),
                "{}: receiver names are compared in lower case",
                f.name
            );
            // Every method has a key: these stores have no transaction rows here.
            assert!(f.methods.iter().all(|m| m.key == Some(0)), "{}", f.name);
        }
        assert_eq!(family("sled").unwrap().crates, &["sled"]);
    }
}
