//! expect: nondeterministic_key
//!
//! Ledger posting worker: long-polls the `ledger-postings` SQS queue and books each
//! posting once, using a Redis reservation as the dedupe guard.

mod keys;
mod store;

use std::sync::Arc;

use aws_sdk_sqs::Client as SqsClient;
use serde::Deserialize;
use tracing::{info, warn};

use self::keys::posting_key;
use self::store::ReservationStore;

#[derive(Debug, Deserialize)]
pub struct PostingRequested {
    pub posting_id: String,
    pub account_id: String,
    pub amount_minor: i64,
    pub currency: String,
}

pub struct LedgerWorker {
    sqs: SqsClient,
    queue_url: String,
    reservations: Arc<ReservationStore>,
    ledger: Arc<dyn LedgerApi + Send + Sync>,
}

#[async_trait::async_trait]
pub trait LedgerApi {
    async fn book(&self, posting: &PostingRequested) -> anyhow::Result<()>;
}

impl LedgerWorker {
    pub async fn run(&self) -> anyhow::Result<()> {
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(20)
                .send()
                .await?;

            for msg in out.messages.unwrap_or_default() {
                let body = msg.body().unwrap_or_default();
                let posting: PostingRequested = match serde_json::from_str(body) {
                    Ok(p) => p,
                    Err(e) => {
                        warn!(error = %e, "dropping malformed posting");
                        continue;
                    }
                };
                self.handle(&posting).await?;
                if let Some(handle) = msg.receipt_handle() {
                    self.sqs
                        .delete_message()
                        .queue_url(&self.queue_url)
                        .receipt_handle(handle)
                        .send()
                        .await?;
                }
            }
        }
    }

    async fn handle(&self, posting: &PostingRequested) -> anyhow::Result<()> {
        let key = posting_key(&posting.account_id);
        if !self.reservations.reserve(&key).await? {
            info!(%key, "posting already booked");
            return Ok(());
        }
        self.ledger.book(posting).await
    }
}
