//! expect: check_then_act
//! Shipping service: a JetStream pull consumer buys a carrier label through Shippo for each
//! `shipping.label.requested`. Redis remembers which shipments already have a label.
use async_nats::jetstream::{self, consumer::PullConsumer};
use futures::StreamExt;
use redis::AsyncCommands;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct LabelRequested {
    shipment_id: String,
    rate_id: String,
}

const LABEL_TTL_SECS: u64 = 14 * 24 * 3600;

pub async fn run(js: jetstream::Context, redis: redis::Client, http: reqwest::Client, shippo_token: String) -> anyhow::Result<()> {
    let consumer: PullConsumer = js.get_consumer_from_stream("label-buyer", "SHIPPING").await?;
    let mut conn = redis.get_multiplexed_async_connection().await?;
    let mut messages = consumer.messages().await?;
    while let Some(msg) = messages.next().await {
        let msg = msg?;
        let req: LabelRequested = serde_json::from_slice(&msg.payload)?;
        let key = format!("label:{}", req.shipment_id);

        let already: bool = conn.exists(&key).await?;
        if already {
            msg.ack().await.map_err(|e| anyhow::anyhow!(e))?;
            continue;
        }

        let resp = http
            .post("https://api.goshippo.com/transactions/")
            .header("Authorization", format!("ShippoToken {shippo_token}"))
            .json(&serde_json::json!({ "rate": req.rate_id, "label_file_type": "PDF", "async": false }))
            .send()
            .await?
            .error_for_status()?;
        let tx: serde_json::Value = resp.json().await?;
        let label_url = tx["label_url"].as_str().unwrap_or_default().to_owned();

        let _: () = conn.set_ex(&key, &label_url, LABEL_TTL_SECS).await?;
        msg.ack().await.map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(())
}
