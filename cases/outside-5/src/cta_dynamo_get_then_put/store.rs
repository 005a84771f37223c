#[async_trait::async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Has this key been processed already?
    async fn seen(&self, key: &str) -> anyhow::Result<bool>;
    /// Record the key as processed.
    async fn remember(&self, key: &str) -> anyhow::Result<()>;
}
