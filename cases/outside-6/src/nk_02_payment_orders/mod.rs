//! expect: nondeterministic_key
//! Vendor payouts: an SQS consumer turns `PayoutApproved` into a Modern Treasury payment order.
//! The idempotency key comes from a shared helper in `ids.rs`.
mod ids;
mod treasury;

use aws_sdk_sqs::Client as SqsClient;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct PayoutApproved {
    pub payout_id: String,
    pub vendor_account_id: String,
    pub amount_cents: i64,
    pub currency: String,
}

pub async fn run(sqs: SqsClient, queue_url: String, mt: treasury::ModernTreasury) -> anyhow::Result<()> {
    loop {
        let out = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(20)
            .send()
            .await?;
        for msg in out.messages.unwrap_or_default() {
            let Some(body) = msg.body() else { continue };
            let payout: PayoutApproved = match serde_json::from_str(body) {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(error = %e, "bad payout message");
                    continue;
                }
            };
            match mt.create_payment_order(&payout).await {
                Ok(order_id) => {
                    tracing::info!(payout_id = %payout.payout_id, %order_id, "payment order created");
                    if let Some(handle) = msg.receipt_handle() {
                        sqs.delete_message().queue_url(&queue_url).receipt_handle(handle).send().await?;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "payment order failed, leaving for redelivery"),
            }
        }
    }
}
