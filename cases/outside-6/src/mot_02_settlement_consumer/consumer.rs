use super::inbox;
use super::ledger::{Ledger, Settlement};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message;
use sqlx::PgPool;
use std::sync::Arc;

#[derive(serde::Deserialize)]
struct SettlementMsg {
    message_id: String,
    settlement_id: String,
    merchant_id: String,
    gross_minor: i64,
    fee_minor: i64,
}

async fn book(pool: &PgPool, ledger: &dyn Ledger, m: &SettlementMsg) -> anyhow::Result<()> {
    let s = Settlement {
        settlement_id: m.settlement_id.clone(),
        merchant_id: m.merchant_id.clone(),
        gross_minor: m.gross_minor,
        fee_minor: m.fee_minor,
    };
    ledger.post_settlement(&s).await?;
    inbox::mark_processed(pool, &m.message_id).await?;
    Ok(())
}

pub async fn run(consumer: StreamConsumer, pool: PgPool, ledger: Arc<dyn Ledger>) -> anyhow::Result<()> {
    consumer.subscribe(&["card.settlements"])?;
    loop {
        let msg = consumer.recv().await?;
        let Some(Ok(m)) = msg.payload().map(serde_json::from_slice::<SettlementMsg>) else {
            consumer.commit_message(&msg, CommitMode::Async)?;
            continue;
        };
        if inbox::claim(&pool, &m.message_id).await? {
            if let Err(e) = book(&pool, ledger.as_ref(), &m).await {
                tracing::error!(error = %e, message_id = %m.message_id, "settlement not booked");
                inbox::release(&pool, &m.message_id).await;
                continue;
            }
        }
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
}
