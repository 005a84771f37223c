//! expect: check_then_act
//!
//! Shipment-label service: a NATS queue group delivers `shipments.label.requested`; labels are
//! bought from the carrier once per shipment. The "bought" marker lives in MongoDB and is read
//! with find_one before the purchase and inserted after it.

use async_nats::Client;
use futures::StreamExt;
use mongodb::bson::{doc, DateTime};
use mongodb::{Collection, Database};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct LabelRequested {
    shipment_id: String,
    carrier: String,
}

#[derive(Serialize, Deserialize)]
struct LabelRecord {
    shipment_id: String,
    tracking_number: String,
    bought_at: DateTime,
}

#[async_trait::async_trait]
pub trait CarrierApi: Send + Sync {
    async fn buy_label(&self, carrier: &str, shipment_id: &str) -> anyhow::Result<String>;
}

pub async fn run(nats: Client, db: Database, carrier: impl CarrierApi) -> anyhow::Result<()> {
    let labels: Collection<LabelRecord> = db.collection("labels");
    let mut sub = nats
        .queue_subscribe("shipments.label.requested", "label-buyers".into())
        .await?;

    while let Some(msg) = sub.next().await {
        let req: LabelRequested = serde_json::from_slice(&msg.payload)?;

        let existing = labels
            .find_one(doc! { "shipment_id": &req.shipment_id }, None)
            .await?;
        if existing.is_some() {
            continue;
        }

        let tracking_number = carrier.buy_label(&req.carrier, &req.shipment_id).await?;
        labels
            .insert_one(
                LabelRecord {
                    shipment_id: req.shipment_id.clone(),
                    tracking_number,
                    bought_at: DateTime::now(),
                },
                None,
            )
            .await?;
    }
    Ok(())
}
