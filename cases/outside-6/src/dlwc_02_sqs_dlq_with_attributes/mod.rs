//! expect: none
//! Payout status poller: a message that cannot be processed goes to the dead-letter queue with
//! its original body, its original message id and the error, the last two as SQS message
//! attributes (the queue URL comes from `config.rs`).
mod config;

use aws_sdk_sqs::types::MessageAttributeValue;
use aws_sdk_sqs::Client;

fn attr(v: impl Into<String>) -> MessageAttributeValue {
    MessageAttributeValue::builder().data_type("String").string_value(v).build().expect("string attribute")
}

async fn handle(body: &str) -> anyhow::Result<()> {
    let v: serde_json::Value = serde_json::from_str(body)?;
    anyhow::ensure!(v["payout_id"].is_string(), "payout_id missing");
    Ok(())
}

pub async fn run(sqs: Client) -> anyhow::Result<()> {
    loop {
        let out = sqs.receive_message().queue_url(config::PAYOUT_EVENTS_QUEUE).wait_time_seconds(20).send().await?;
        for m in out.messages() {
            let body = m.body().unwrap_or_default();
            if let Err(e) = handle(body).await {
                sqs.send_message()
                    .queue_url(config::PAYOUT_EVENTS_DLQ)
                    .message_body(body)
                    .message_attributes("original_message_id", attr(m.message_id().unwrap_or_default()))
                    .message_attributes("error", attr(format!("{e:#}")))
                    .message_attributes("source_queue", attr(config::PAYOUT_EVENTS_QUEUE))
                    .send()
                    .await?;
            }
            sqs.delete_message()
                .queue_url(config::PAYOUT_EVENTS_QUEUE)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await?;
        }
    }
}
