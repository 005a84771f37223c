//! Identifiers minted by the payouts service.
use ulid::Ulid;

/// Prefixed, sortable identifiers (`po_01H...`), used for request ids and idempotency keys.
pub fn request_key(prefix: &str) -> String {
    format!("{prefix}_{}", Ulid::new().to_string().to_lowercase())
}
