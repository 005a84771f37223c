use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use chrono::Utc;

pub enum Claim {
    Won,
    AlreadyTaken,
}

#[async_trait::async_trait]
pub trait ClaimStore: Send + Sync {
    async fn try_claim(&self, key: &str) -> anyhow::Result<Claim>;
}

pub struct DynamoClaims {
    pub client: Client,
    pub table: String,
}

#[async_trait::async_trait]
impl ClaimStore for DynamoClaims {
    async fn try_claim(&self, key: &str) -> anyhow::Result<Claim> {
        let ttl = Utc::now().timestamp() + 7 * 24 * 3600;
        let res = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(key.to_string()))
            .item("ttl", AttributeValue::N(ttl.to_string()))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(Claim::Won),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(Claim::AlreadyTaken)
            }
            Err(e) => Err(e.into()),
        }
    }
}
