//! expect: none
//! Balance projection: a Kafka consumer of `ledger.balance_changed` copies the ledger's
//! authoritative balance and version into the read model. Every write sets values from the
//! message (guarded by the version), so a redelivery rewrites the same row and hash.
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message;
use redis::AsyncCommands;
use serde::Deserialize;
use sqlx::PgPool;

#[derive(Deserialize)]
struct BalanceChanged {
    account_id: String,
    balance_minor: i64,
    version: i64,
}

pub async fn run(consumer: StreamConsumer, pool: PgPool, mut cache: redis::aio::ConnectionManager) -> anyhow::Result<()> {
    consumer.subscribe(&["ledger.balance_changed"])?;
    loop {
        let msg = consumer.recv().await?;
        if let Some(Ok(ev)) = msg.payload().map(serde_json::from_slice::<BalanceChanged>) {
            sqlx::query(
                "UPDATE account_balances SET balance_minor = $2, version = $3, refreshed_at = now() \
                 WHERE account_id = $1 AND version < $3",
            )
            .bind(&ev.account_id)
            .bind(ev.balance_minor)
            .bind(ev.version)
            .execute(&pool)
            .await?;
            let _: () = cache
                .hset_multiple(
                    format!("balance:{}", ev.account_id),
                    &[("minor", ev.balance_minor), ("version", ev.version)],
                )
                .await?;
        }
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
}
