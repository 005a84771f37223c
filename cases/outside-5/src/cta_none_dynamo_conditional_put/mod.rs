//! expect: none
//!
//! EventBridge -> SQS -> Lambda consumer that e-mails a receipt per `OrderPaid` event. The
//! idempotency store's claim is one conditional PutItem (`attribute_not_exists`), and the
//! handler tests its answer.

mod claims;
mod mailer;

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent};

use self::claims::{ClaimStore, Claim};
use self::mailer::ReceiptMailer;

#[derive(serde::Deserialize)]
struct Envelope {
    id: String,
    detail: OrderPaid,
}

#[derive(serde::Deserialize)]
struct OrderPaid {
    order_id: String,
    email: String,
}

pub struct ReceiptHandler<S: ClaimStore> {
    claims: S,
    mailer: Arc<ReceiptMailer>,
}

impl<S: ClaimStore> ReceiptHandler<S> {
    pub async fn handle(&self, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
        for record in event.payload.records {
            let env: Envelope = serde_json::from_str(record.body.as_deref().unwrap_or("{}"))?;
            match self.claims.try_claim(&format!("receipt#{}", env.id)).await? {
                Claim::Won => {
                    self.mailer.send_receipt(&env.detail.email, &env.detail.order_id).await?;
                }
                Claim::AlreadyTaken => {
                    tracing::info!(event = %env.id, "duplicate OrderPaid, skipping");
                }
            }
        }
        Ok(SqsBatchResponse::default())
    }
}
