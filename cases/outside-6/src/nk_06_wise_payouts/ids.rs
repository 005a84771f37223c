use super::config::PAYOUT_NAMESPACE;
use uuid::Uuid;

/// The same payout always maps to the same transfer id.
pub fn transfer_uuid(payout_id: i64) -> Uuid {
    Uuid::new_v5(&PAYOUT_NAMESPACE, format!("payout:{payout_id}").as_bytes())
}
