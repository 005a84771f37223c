use async_trait::async_trait;

#[async_trait]
pub trait DeliveryLog: Send + Sync {
    async fn has_seen(&self, delivery_id: &str) -> anyhow::Result<bool>;
    async fn record(&self, delivery_id: &str, event: &str) -> anyhow::Result<()>;
}
