use uuid::Uuid;

const PREFIX: &str = "ledger:posting";

/// Builds the reservation key for one posting of an account.
pub fn posting_key(account_id: &str) -> String {
    let attempt = Uuid::new_v4();
    format!("{PREFIX}:{account_id}:{attempt}")
}
