use std::sync::Arc;

use futures::StreamExt;

use super::refunds::RefundService;
use super::RefundRequest;

pub async fn listen(nats: async_nats::Client, refunds: Arc<RefundService>) -> anyhow::Result<()> {
    let mut sub = nats
        .queue_subscribe("refunds.requested", "care-refunds".to_string())
        .await?;
    while let Some(msg) = sub.next().await {
        let req: RefundRequest = match serde_json::from_slice(&msg.payload) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "bad refund request");
                continue;
            }
        };
        match refunds.issue(&req).await {
            Ok(id) => tracing::info!(request = %req.request_id, refund = %id, "auto refund issued"),
            Err(e) => tracing::error!(request = %req.request_id, error = %e, "auto refund failed"),
        }
    }
    Ok(())
}
