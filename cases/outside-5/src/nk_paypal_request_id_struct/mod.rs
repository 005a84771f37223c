//! expect: nondeterministic_key
//!
//! Capture worker: a RabbitMQ queue carries "capture order" commands from checkout; each is
//! captured at PayPal with the `PayPal-Request-Id` header so PayPal replays instead of
//! capturing twice.

mod command;
mod paypal;

use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions};
use lapin::types::FieldTable;
use lapin::Channel;

use self::command::CaptureCommand;
use self::paypal::PayPalClient;

pub async fn run(channel: Channel, paypal: PayPalClient) -> anyhow::Result<()> {
    let mut consumer = channel
        .basic_consume(
            "payments.capture",
            "capture-worker",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;

    while let Some(delivery) = consumer.next().await {
        let delivery = delivery?;
        let order_id: String = serde_json::from_slice(&delivery.data)?;
        let cmd = CaptureCommand::for_order(order_id);
        paypal.capture(&cmd.order_id, &cmd.request_id.to_string()).await?;
        delivery.ack(BasicAckOptions::default()).await?;
    }
    Ok(())
}
