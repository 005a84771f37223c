//! expect: none
//!
//! GPU sandbox broker: users request a sandbox through the API, which enqueues a
//! `SandboxRequested` command on SQS with a request id minted by the API from the client's
//! Idempotency-Key. The worker passes that request id as the EC2 ClientToken.

mod config;
mod provision;

use aws_sdk_sqs::Client as Sqs;

use self::provision::Provisioner;

#[derive(serde::Deserialize)]
pub struct SandboxRequested {
    pub request_id: String,
    pub user_id: String,
    pub gpu: bool,
}

pub async fn drain(sqs: &Sqs, queue_url: &str, prov: &Provisioner) -> anyhow::Result<()> {
    let out = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(5)
        .wait_time_seconds(config::LONG_POLL_SECS)
        .send()
        .await?;
    for msg in out.messages.unwrap_or_default() {
        let req: SandboxRequested = serde_json::from_str(msg.body().unwrap_or("{}"))?;
        let instance_id = prov.launch(&req).await?;
        tracing::info!(request = %req.request_id, %instance_id, "sandbox launched");
        sqs.delete_message()
            .queue_url(queue_url)
            .receipt_handle(msg.receipt_handle().unwrap_or_default())
            .send()
            .await?;
    }
    Ok(())
}
