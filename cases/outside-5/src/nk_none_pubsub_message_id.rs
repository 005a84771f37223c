//! expect: none
//!
//! Google Cloud Pub/Sub subscriber that writes search-index documents into MongoDB. The
//! dedupe key is the Pub/Sub message id; `Instant::now()` only measures handling latency.

use std::time::Instant;

use google_cloud_pubsub::subscriber::ReceivedMessage;
use google_cloud_pubsub::subscription::Subscription;
use mongodb::bson::doc;
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::Collection;
use tokio_util::sync::CancellationToken;

#[derive(serde::Serialize, serde::Deserialize)]
struct Receipt {
    #[serde(rename = "_id")]
    message_id: String,
    topic: String,
}

pub struct Indexer {
    receipts: Collection<Receipt>,
    search: std::sync::Arc<dyn SearchIndex + Send + Sync>,
}

#[async_trait::async_trait]
pub trait SearchIndex {
    async fn index_document(&self, payload: &[u8]) -> anyhow::Result<()>;
}

impl Indexer {
    pub async fn run(self: std::sync::Arc<Self>, sub: Subscription, cancel: CancellationToken) -> anyhow::Result<()> {
        sub.receive(
            move |message, _cancel| {
                let this = self.clone();
                async move {
                    let started = Instant::now();
                    match this.handle(&message).await {
                        Ok(()) => {
                            let _ = message.ack().await;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "nack");
                            let _ = message.nack().await;
                        }
                    }
                    metrics_histogram("indexer.handle_ms", started.elapsed().as_millis() as f64);
                }
            },
            cancel,
            None,
        )
        .await?;
        Ok(())
    }

    async fn handle(&self, message: &ReceivedMessage) -> anyhow::Result<()> {
        let receipt = Receipt {
            message_id: message.message.message_id.clone(),
            topic: "catalog-updates".into(),
        };
        match self.receipts.insert_one(receipt, None).await {
            Ok(_) => {}
            Err(e) if is_duplicate_key(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        if let Err(e) = self.search.index_document(&message.message.data).await {
            self.receipts
                .delete_one(doc! { "_id": &message.message.message_id }, None)
                .await?;
            return Err(e);
        }
        Ok(())
    }
}

fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    matches!(
        e.kind.as_ref(),
        ErrorKind::Write(WriteFailure::WriteError(w)) if w.code == 11000
    )
}

fn metrics_histogram(_name: &str, _value: f64) {}
