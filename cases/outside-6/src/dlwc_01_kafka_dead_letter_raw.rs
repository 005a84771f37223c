//! expect: dead_letter_without_context
//! Chargeback processor: a message that fails is copied as-is to `chargebacks.dead_letter` and
//! committed. The dead letter carries the original bytes but not the error, the attempt count or
//! where it came from, so nobody can tell a bad payload from a PSP outage when replaying.
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;
use std::time::Duration;

const DEAD_LETTER_TOPIC: &str = "chargebacks.dead_letter";

async fn process(pool: &sqlx::PgPool, payload: &[u8]) -> anyhow::Result<()> {
    let cb: serde_json::Value = serde_json::from_slice(payload)?;
    sqlx::query("INSERT INTO chargebacks (psp_reference, reason, amount_minor) VALUES ($1, $2, $3) ON CONFLICT (psp_reference) DO NOTHING")
        .bind(cb["psp_reference"].as_str())
        .bind(cb["reason"].as_str())
        .bind(cb["amount_minor"].as_i64())
        .execute(pool)
        .await?;
    Ok(())
}

pub async fn run(consumer: StreamConsumer, producer: FutureProducer, pool: sqlx::PgPool) -> anyhow::Result<()> {
    consumer.subscribe(&["chargebacks"])?;
    loop {
        let msg = consumer.recv().await?;
        let payload = msg.payload().unwrap_or_default();
        if let Err(e) = process(&pool, payload).await {
            tracing::error!(error = %e, offset = msg.offset(), "chargeback failed, dead-lettering");
            let key = msg.key().unwrap_or_default();
            producer
                .send(FutureRecord::to(DEAD_LETTER_TOPIC).key(key).payload(payload), Duration::from_secs(5))
                .await
                .map_err(|(e, _)| e)?;
        }
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
}
