use std::sync::Arc;

use aws_sdk_sqs::Client as Sqs;

use super::pipeline::Pipeline;
use super::ConversionApproved;

pub struct RedriveWorker {
    pub sqs: Sqs,
    pub dlq_url: String,
    pub pipeline: Arc<Pipeline>,
}

impl RedriveWorker {
    pub async fn redrive_batch(&self) -> anyhow::Result<usize> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.dlq_url)
            .max_number_of_messages(10)
            .send()
            .await?;
        let msgs = out.messages.unwrap_or_default();
        for m in &msgs {
            let ev: ConversionApproved = serde_json::from_str(m.body().unwrap_or("{}"))?;
            self.pipeline.process(&ev).await?;
            self.sqs
                .delete_message()
                .queue_url(&self.dlq_url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await?;
        }
        Ok(msgs.len())
    }
}
