//! expect: check_then_act
//! Payments service: a Pub/Sub subscriber captures the authorised payment when the warehouse
//! reports `shipment.dispatched`. The order document in MongoDB is read, the capture is made
//! through Adyen, then the document is updated without re-checking its state.
use google_cloud_pubsub::subscriber::ReceivedMessage;
use google_cloud_pubsub::subscription::Subscription;
use mongodb::bson::{doc, Document};
use mongodb::Collection;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

#[derive(Deserialize)]
struct Dispatched {
    order_id: String,
}

#[derive(Clone)]
pub struct Capturer {
    pub orders: Collection<Document>,
    pub http: reqwest::Client,
    pub adyen_key: String,
    pub merchant_account: String,
}

impl Capturer {
    async fn on_message(&self, message: ReceivedMessage) -> anyhow::Result<()> {
        let evt: Dispatched = serde_json::from_slice(&message.message.data)?;
        let order = self
            .orders
            .find_one(doc! { "_id": &evt.order_id })
            .await?
            .ok_or_else(|| anyhow::anyhow!("unknown order {}", evt.order_id))?;

        if order.get_str("payment_status").unwrap_or("") != "authorised" {
            message.ack().await?;
            return Ok(());
        }
        let psp_reference = order.get_str("psp_reference")?.to_owned();
        let amount = order.get_i64("amount_minor")?;
        let currency = order.get_str("currency")?.to_owned();

        self.http
            .post(format!("https://checkout-test.adyen.com/v71/payments/{psp_reference}/captures"))
            .header("X-API-Key", &self.adyen_key)
            .json(&serde_json::json!({
                "merchantAccount": self.merchant_account,
                "amount": { "value": amount, "currency": currency },
                "reference": evt.order_id,
            }))
            .send()
            .await?
            .error_for_status()?;

        self.orders
            .update_one(
                doc! { "_id": &evt.order_id },
                doc! { "$set": { "payment_status": "captured" } },
            )
            .await?;
        message.ack().await?;
        Ok(())
    }

    pub async fn run(self, sub: Subscription, cancel: CancellationToken) -> anyhow::Result<()> {
        sub.receive(
            move |message, _cancel| {
                let this = self.clone();
                async move {
                    if let Err(e) = this.on_message(message).await {
                        tracing::error!(error = %e, "capture failed; message will be redelivered");
                    }
                }
            },
            cancel,
            None,
        )
        .await?;
        Ok(())
    }
}
