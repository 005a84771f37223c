//! The connections the Redis store runs over, and where each puts a record's key.

use std::borrow::Cow;

use redis::aio::ConnectionManager;

/// A connection [`RedisStore`](crate::RedisStore) can run over: a single node's
/// [`ConnectionManager`], or (feature `redis-cluster`) a Redis Cluster connection
/// ([`RedisClusterConnection`](crate::RedisClusterConnection)). The store's
/// logic is the same over both; only the key layout differs (see [`record_key`](Self::record_key)).
///
/// Sealed: the store's guarantees depend on how the connection routes and retries.
pub trait RedisConnection:
    redis::aio::ConnectionLike + Clone + Send + Sync + sealed::Sealed + 'static
{
    /// The Redis key of the guard's record for `key`.
    fn record_key(key: &str) -> Cow<'_, str>;

    /// The server may hold a reply up to `longest` (`WAIT`): a connection that watches for a
    /// stuck client must not take that silence for one.
    #[doc(hidden)]
    fn allow_replies_after(&self, _longest: std::time::Duration) {}
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for redis::aio::ConnectionManager {}
    #[cfg(feature = "redis-cluster")]
    impl Sealed for super::super::cluster_conn::RedisClusterConnection {}
}

/// One node: the guard's key as it is (the layout of every earlier version).
impl RedisConnection for ConnectionManager {
    fn record_key(key: &str) -> Cow<'_, str> {
        Cow::Borrowed(key)
    }
}

/// Redis Cluster: the whole key inside one hash tag, `{prefix:tenant:key}`.
#[cfg(feature = "redis-cluster")]
impl RedisConnection for super::cluster_conn::RedisClusterConnection {
    fn record_key(key: &str) -> Cow<'_, str> {
        Cow::Owned(cluster_key(key))
    }

    fn allow_replies_after(&self, longest: std::time::Duration) {
        super::cluster_conn::RedisClusterConnection::allow_replies_after(self, longest);
    }
}

/// `{` + the key + `}`, with `%`, `{` and `}` escaped inside (`%25`, `%7B`, `%7D`).
///
/// Why a tag around the whole key: Redis Cluster hashes only the part between the first `{` and
/// the next `}` when a key has one, so a user key such as `order-{tenant}-7` would otherwise put
/// every order of a tenant in one slot (one primary takes all of that tenant's load). Escaping the
/// braces makes the tag the full key, so slots spread by the full key; escaping `%` too keeps the
/// mapping one-to-one. Every record of one idempotency key is this one Redis key, and every
/// script touches only it, so each call stays in one slot; a record kept as more than one key
/// later would put the same tag on each.
#[cfg(any(feature = "redis-cluster", test))]
pub(crate) fn cluster_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    out.push('{');
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::cluster_key;

    /// The part of a key Redis Cluster hashes (the rule of `CLUSTER KEYSLOT`).
    fn hashed_part(key: &str) -> &str {
        if let Some(open) = key.find('{') {
            if let Some(len) = key[open + 1..].find('}') {
                if len > 0 {
                    return &key[open + 1..open + 1 + len];
                }
            }
        }
        key
    }

    #[test]
    fn the_tag_is_the_whole_key() {
        // Never empty: the guard's key always has its `prefix:tenant:` part.
        for key in [
            "refund:order-1",
            "p:t%3Aa:{tenant}-7",
            "a}b{c",
            "{}",
            "%7B",
            "::",
        ] {
            let stored = cluster_key(key);
            assert_eq!(
                hashed_part(&stored),
                &stored[1..stored.len() - 1],
                "{key} -> {stored}"
            );
        }
        assert_eq!(cluster_key("a:{t}-1"), "{a:%7Bt%7D-1}");
    }

    #[test]
    fn distinct_keys_stay_distinct() {
        // `%` is escaped too, so a key that spells an escape does not meet the escaped brace.
        assert_ne!(cluster_key("%7B"), cluster_key("{"));
        assert_ne!(cluster_key("a%25"), cluster_key("a%"));
    }
}
