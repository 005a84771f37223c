use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client as Dynamo;

use super::ConversionApproved;

#[async_trait::async_trait]
pub trait PayoutRail: Send + Sync {
    async fn pay_commission(&self, partner_id: &str, cents: i64) -> anyhow::Result<()>;
}

pub struct Pipeline {
    pub ddb: Dynamo,
    pub table: String,
    pub rail: std::sync::Arc<dyn PayoutRail>,
}

pub enum Outcome {
    Paid,
    Duplicate,
}

impl Pipeline {
    async fn claim(&self, conversion_id: &str) -> anyhow::Result<bool> {
        let res = self
            .ddb
            .put_item()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(format!("commission#{conversion_id}")))
            .item("status", AttributeValue::S("paying".into()))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) => match e.into_service_error() {
                err if err.is_conditional_check_failed_exception() => Ok(false),
                err => Err(err.into()),
            },
        }
    }

    pub async fn process(&self, ev: &ConversionApproved) -> anyhow::Result<Outcome> {
        if !self.claim(&ev.conversion_id).await? {
            return Ok(Outcome::Duplicate);
        }
        self.rail.pay_commission(&ev.partner_id, ev.commission_cents).await?;
        Ok(Outcome::Paid)
    }
}
