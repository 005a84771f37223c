//! expect: check_then_act
//!
//! SQS-triggered Lambda that provisions a welcome credit for new sign-ups. The idempotency
//! store is a trait; production wires the DynamoDB implementation from `dynamo.rs`.

mod dynamo;
mod store;

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent};
use serde::Deserialize;

pub use self::dynamo::DynamoIdempotencyStore;
use self::store::IdempotencyStore;

#[derive(Deserialize)]
struct SignupCompleted {
    signup_id: String,
    account_id: String,
}

#[async_trait::async_trait]
pub trait CreditsApi: Send + Sync {
    async fn grant_welcome_credit(&self, account_id: &str) -> anyhow::Result<()>;
}

pub struct Handler {
    pub store: Arc<dyn IdempotencyStore>,
    pub credits: Arc<dyn CreditsApi>,
}

impl Handler {
    pub async fn handle(&self, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
        for record in event.payload.records {
            let body = record.body.unwrap_or_default();
            let msg: SignupCompleted = serde_json::from_str(&body)?;
            let key = format!("welcome-credit#{}", msg.signup_id);

            if self.store.seen(&key).await? {
                continue;
            }
            self.credits.grant_welcome_credit(&msg.account_id).await?;
            self.store.remember(&key).await?;
        }
        Ok(())
    }
}
