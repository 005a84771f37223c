//! expect: nondeterministic_key
//!
//! Loyalty-points consumer on the `orders.completed` topic. Dedupes with an inbox row, but the
//! inbox key is minted per consumption.

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message;
use serde::Deserialize;
use sqlx::PgPool;
use ulid::Ulid;

#[derive(Deserialize)]
struct OrderCompleted {
    order_id: i64,
    customer_id: i64,
    total_cents: i64,
}

pub async fn consume(consumer: StreamConsumer, pool: PgPool) -> anyhow::Result<()> {
    consumer.subscribe(&["orders.completed"])?;
    loop {
        let msg = consumer.recv().await?;
        let Some(payload) = msg.payload() else { continue };
        let evt: OrderCompleted = serde_json::from_slice(payload)?;

        let inbox_key = Ulid::new().to_string();
        let mut tx = pool.begin().await?;
        let claimed = sqlx::query(
            "INSERT INTO loyalty_inbox (event_key, order_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(&inbox_key)
        .bind(evt.order_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();

        if claimed == 1 {
            sqlx::query("UPDATE loyalty_accounts SET points = points + $1 WHERE customer_id = $2")
                .bind(evt.total_cents / 100)
                .bind(evt.customer_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
}
