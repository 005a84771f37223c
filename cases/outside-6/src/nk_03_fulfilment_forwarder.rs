//! expect: nondeterministic_key
//! Order service: a Kafka consumer forwards paid orders to the warehouse's SQS FIFO queue.
use chrono::Utc;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct OrderPaid {
    order_id: String,
    warehouse: String,
    lines: Vec<serde_json::Value>,
}

pub struct Forwarder {
    pub consumer: StreamConsumer,
    pub sqs: aws_sdk_sqs::Client,
    pub fulfilment_queue_url: String,
}

impl Forwarder {
    pub async fn run(&self) -> anyhow::Result<()> {
        self.consumer.subscribe(&["orders.paid"])?;
        loop {
            let msg = self.consumer.recv().await?;
            let Some(payload) = msg.payload() else { continue };
            let evt: OrderPaid = serde_json::from_slice(payload)?;
            let dedup_id = format!("{}-{}", evt.order_id, Utc::now().timestamp_millis());
            self.sqs
                .send_message()
                .queue_url(&self.fulfilment_queue_url)
                .message_group_id(&evt.warehouse)
                .message_deduplication_id(dedup_id)
                .message_body(serde_json::json!({ "order_id": evt.order_id, "lines": evt.lines }).to_string())
                .send()
                .await?;
            self.consumer.commit_message(&msg, CommitMode::Async)?;
        }
    }
}
