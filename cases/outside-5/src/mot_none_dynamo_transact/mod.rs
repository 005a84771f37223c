//! expect: none
//!
//! Seat-booking Lambda (API Gateway -> SQS -> Lambda). The booking row and the processed-message
//! marker are written in one TransactWriteItems: the marker Put is conditioned on
//! `attribute_not_exists`, so a duplicate cancels the whole transaction, and the request token
//! is the SQS message id.

mod items;

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::Client;
use lambda_runtime::{Error, LambdaEvent};

use self::items::{booking_put, marker_put};

#[derive(serde::Deserialize)]
pub struct BookSeat {
    pub booking_id: String,
    pub show_id: String,
    pub seat: String,
    pub customer_id: String,
}

pub async fn handler(ddb: &Client, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for rec in event.payload.records {
        let message_id = rec.message_id.clone().unwrap_or_default();
        let cmd: BookSeat = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;

        let res = ddb
            .transact_write_items()
            .client_request_token(&message_id)
            .transact_items(booking_put(&cmd)?)
            .transact_items(marker_put(&message_id)?)
            .send()
            .await;

        match res {
            Ok(_) => {}
            Err(SdkError::ServiceError(se))
                if matches!(se.err(), TransactWriteItemsError::TransactionCanceledException(_)) =>
            {
                tracing::info!(%message_id, "duplicate booking message or seat taken");
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
