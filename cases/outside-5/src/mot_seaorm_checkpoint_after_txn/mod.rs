//! expect: mark_outside_transaction
//!
//! Read-model projector for the `ORDERS` JetStream stream (one durable pull consumer, acked
//! after handling). Events at or below the stored checkpoint are skipped; the read-model rows
//! are written in a sea-orm transaction and the checkpoint is saved afterwards on the plain
//! connection. A crash after the commit and before the checkpoint (or the ack) re-applies the
//! event, and `apply` adds the line totals again.

mod entities;
mod projection;

use async_nats::jetstream::consumer::PullConsumer;
use futures::StreamExt;
use sea_orm::DatabaseConnection;

use self::projection::Projector;

pub async fn run(consumer: PullConsumer, db: DatabaseConnection) -> anyhow::Result<()> {
    let projector = Projector::load(db, "orders-summary").await?;
    let mut messages = consumer.messages().await?;
    while let Some(msg) = messages.next().await {
        let msg = msg.map_err(|e| anyhow::anyhow!(e))?;
        let seq = msg.info().map_err(|e| anyhow::anyhow!(e))?.stream_sequence;
        projector.handle(seq, &msg.payload).await?;
        msg.ack().await.map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(())
}
