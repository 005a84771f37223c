use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use chrono::Utc;

use super::store::IdempotencyStore;

pub struct DynamoIdempotencyStore {
    client: Client,
    table: String,
}

impl DynamoIdempotencyStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for DynamoIdempotencyStore {
    async fn seen(&self, key: &str) -> anyhow::Result<bool> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(key.to_owned()))
            .consistent_read(true)
            .send()
            .await?;
        Ok(out.item.is_some())
    }

    async fn remember(&self, key: &str) -> anyhow::Result<()> {
        let expires = Utc::now().timestamp() + 14 * 24 * 3600;
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(key.to_owned()))
            .item("expires_at", AttributeValue::N(expires.to_string()))
            .send()
            .await?;
        Ok(())
    }
}
