use async_trait::async_trait;
use sqlx::{Postgres, Transaction};

#[async_trait]
pub trait WebhookInbox: Send + Sync {
    /// Fast path only: may say "no" for a webhook that is being processed right now.
    async fn seen(&self, webhook_id: &str) -> anyhow::Result<bool>;
    /// Records the webhook id inside `tx`; `false` when another delivery already recorded it.
    async fn try_record(&self, tx: &mut Transaction<'static, Postgres>, webhook_id: &str, topic: &str) -> anyhow::Result<bool>;
}
