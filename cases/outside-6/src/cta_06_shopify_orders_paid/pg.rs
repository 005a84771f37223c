use super::inbox::WebhookInbox;
use async_trait::async_trait;
use sqlx::{PgPool, Postgres, Transaction};

pub struct PgInbox {
    pub pool: PgPool,
}

#[async_trait]
impl WebhookInbox for PgInbox {
    async fn seen(&self, webhook_id: &str) -> anyhow::Result<bool> {
        let row: Option<(String,)> = sqlx::query_as("SELECT webhook_id FROM shopify_webhooks WHERE webhook_id = $1")
            .bind(webhook_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    async fn try_record(&self, tx: &mut Transaction<'static, Postgres>, webhook_id: &str, topic: &str) -> anyhow::Result<bool> {
        let inserted: Option<String> = sqlx::query_scalar(
            "INSERT INTO shopify_webhooks (webhook_id, topic, received_at) VALUES ($1, $2, now()) \
             ON CONFLICT (webhook_id) DO NOTHING RETURNING webhook_id",
        )
        .bind(webhook_id)
        .bind(topic)
        .fetch_optional(&mut **tx)
        .await?;
        Ok(inserted.is_some())
    }
}
