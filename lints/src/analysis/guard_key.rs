//! Whether a guard is keyed by the identity of the message it guards: a claim or check on a
//! delivery, event, message or request id, an idempotency key, or a record of processed keys.
//!
//! Only such a guard says anything of another entry point that reaches the same effect: the
//! same message can come again through it. A claim keyed by a resource's state (`UPDATE user
//! SET email_verified_at = now() WHERE user_id = $1 AND email_verified_at IS NULL`) makes one
//! transition happen once; it guards its own command, and another command on the same user
//! (a login, a password reset) is a new request meant as such, not a redelivery. A lookup that
//! fails on a missing row (`UPDATE application SET name = $1 WHERE id = $2 AND deleted_at IS
//! NULL RETURNING ..`, a 404 when nothing matches) is keyed by a resource too.

use super::sql::{is_dedupe_key_column, is_dedupe_table_name};
use super::store_ops::Store;
use super::summary::StoreAccess;
use crate::model::ir::Pat;
use crate::model::FnDef;

/// Words of a variable or field name that say it holds the identity of a message or a
/// request rather than of a resource (`user_id`, `application_id`).
const MESSAGE_ID_WORDS: &[&str] = &[
    "message_id",
    "msg_id",
    "event_id",
    "delivery_id",
    "request_id",
    "command_id",
    "activity_id",
    "webhook_id",
    "job_id",
    "task_id",
    "idempot",
    "idem_key",
    "dedup",
    "nonce",
];

/// Whether a name (a variable, a field, a helper) says it is a message's identity.
pub fn names_message_id(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    MESSAGE_ID_WORDS.iter().any(|w| n.contains(w)) || is_dedupe_key_column(&n)
}

/// Whether a helper's name says it checks or records processed keys (`is_processed`,
/// `already_seen`, `mark_duplicate`), not a resource.
pub fn names_dedupe_helper(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    is_dedupe_table_name(&n)
        || ["already", "seen", "duplicate", "dedup"]
            .iter()
            .any(|w| n.contains(w))
        || names_message_id(&n)
}

/// Whether the store operation `a`, performed in `holder`, is keyed by a message's identity:
/// a key-value claim or check (`SET NX`, a KV `create`: its key exists only to say the work
/// was done), an operation on a dedupe-named table or key (`processed_events`,
/// `idempotency`, `seen:{id}`), or one whose key is built from a message-id-named value
/// (`event.event_id`, a parameter `message_id`, `idempotency_key`). A conditional update or
/// an insert on a table of the application's rows (`user`, `application`), by a key of
/// another name, claims a resource, not a message.
pub fn keyed_by_message(a: &StoreAccess, holder: &FnDef) -> bool {
    let dedupe_lit = a.key.as_ref().is_some_and(|k| {
        k.lits
            .iter()
            .any(|l| is_dedupe_table_name(&l.replace(':', "_")))
    });
    let message_root = a.key.as_ref().is_some_and(|k| {
        k.roots
            .iter()
            .any(|r| root_name(holder, r).is_some_and(names_message_id))
    });
    let rows_of_data = matches!(a.store, Store::Sql | Store::DynamoDb);
    !rows_of_data
        || a.dedupe_table
        || a.shape.key_only
        || a.table.as_deref().is_some_and(is_dedupe_table_name)
        || dedupe_lit
        || message_root
}

/// The name a key root ends with: its last field (`$1$.event_id` → `event_id`), or the
/// parameter's name for a whole parameter (`$1$` of `fn f(conn, message_id: &str)`).
fn root_name<'a>(holder: &'a FnDef, root: &'a str) -> Option<&'a str> {
    let last = root.rsplit('.').next()?;
    let Some(index) = last
        .strip_prefix('$')
        .and_then(|s| s.strip_suffix('$'))
        .and_then(|s| s.parse::<usize>().ok())
    else {
        return Some(last);
    };
    match &holder.params.get(index)?.pat {
        Pat::Ident { name, .. } => Some(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_are_not_resource_ids() {
        for n in [
            "event_id",
            "message_id",
            "idempotency_key",
            "delivery_id",
            "dedupe_key",
            "uniq_hash",
        ] {
            assert!(names_message_id(n), "{n}");
        }
        for n in ["user_id", "application_id", "id", "email", "token"] {
            assert!(!names_message_id(n), "{n}");
        }
    }
}
