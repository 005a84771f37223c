//! expect: missing_idempotency_token
//!
//! Wallet transfer service: a Kafka consumer on `wallet.transfers` applies each transfer as a
//! DynamoDB transaction (debit + credit). The consumer commits offsets after processing, so a
//! rebalance replays transfers.

mod ledger;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message;

use self::ledger::WalletLedger;

#[derive(serde::Deserialize)]
pub struct Transfer {
    pub transfer_id: String,
    pub from_wallet: String,
    pub to_wallet: String,
    pub amount: i64,
}

pub async fn run(consumer: StreamConsumer, ledger: WalletLedger) -> anyhow::Result<()> {
    consumer.subscribe(&["wallet.transfers"])?;
    loop {
        let m = consumer.recv().await?;
        if let Some(bytes) = m.payload() {
            let t: Transfer = serde_json::from_slice(bytes)?;
            ledger.apply(&t).await?;
        }
        consumer.commit_message(&m, CommitMode::Sync)?;
    }
}
