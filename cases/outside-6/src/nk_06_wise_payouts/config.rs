use uuid::{uuid, Uuid};

pub const WISE_API: &str = "https://api.transferwise.com";
pub const MAX_RETRIES: i32 = 8;
pub const PAYOUT_NAMESPACE: Uuid = uuid!("6f1c2a9e-4b7d-4f0e-9a51-3c8d2e7b1a40");
