use super::store::DeliveryLog;
use async_trait::async_trait;
use sqlx::PgPool;

pub struct PgDeliveryLog {
    pub pool: PgPool,
}

#[async_trait]
impl DeliveryLog for PgDeliveryLog {
    async fn has_seen(&self, delivery_id: &str) -> anyhow::Result<bool> {
        let seen: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM github_deliveries WHERE delivery_id = $1)")
            .bind(delivery_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(seen)
    }

    async fn record(&self, delivery_id: &str, event: &str) -> anyhow::Result<()> {
        sqlx::query("INSERT INTO github_deliveries (delivery_id, event, received_at) VALUES ($1, $2, now())")
            .bind(delivery_id)
            .bind(event)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
