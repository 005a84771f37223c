//! expect: none
//! Creator payouts through Wise: a fang task per payout. Wise deduplicates transfers on the
//! `customerTransactionId` body field, which must be a UUID; it is a name-based UUID (v5)
//! derived from the payout id, so every retry sends the same one.
mod config;
mod ids;

use fang::async_trait;
use fang::asynk::async_queue::AsyncQueueable;
use fang::serde::{Deserialize, Serialize};
use fang::typetag;
use fang::{AsyncRunnable, FangError};
use serde_json::json;

#[derive(Serialize, Deserialize, Debug)]
#[serde(crate = "fang::serde")]
pub struct PayCreator {
    pub payout_id: i64,
    pub quote_id: String,
    pub recipient_account: i64,
    pub reference: String,
}

#[typetag::serde]
#[async_trait]
impl AsyncRunnable for PayCreator {
    async fn run(&self, _queue: &mut dyn AsyncQueueable) -> Result<(), FangError> {
        let started = std::time::Instant::now();
        let transaction_id = ids::transfer_uuid(self.payout_id);
        let body = json!({
            "targetAccount": self.recipient_account,
            "quoteUuid": self.quote_id,
            "customerTransactionId": transaction_id.to_string(),
            "details": { "reference": self.reference },
        });
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/transfers", config::WISE_API))
            .bearer_auth(std::env::var("WISE_TOKEN").unwrap_or_default())
            .json(&body)
            .send()
            .await
            .map_err(|e| FangError { description: e.to_string() })?;
        if !resp.status().is_success() {
            return Err(FangError { description: format!("wise returned {}", resp.status()) });
        }
        tracing::info!(payout_id = self.payout_id, elapsed_ms = started.elapsed().as_millis() as u64, "transfer created");
        Ok(())
    }

    fn max_retries(&self) -> i32 {
        config::MAX_RETRIES
    }
}
