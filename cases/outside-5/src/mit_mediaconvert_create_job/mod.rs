//! expect: missing_idempotency_token
//!
//! Video pipeline: the `videos.uploaded` SQS queue feeds a Lambda that starts a MediaConvert
//! job per upload. Retries of the batch (partial failures, timeouts) submit the job again.

mod settings;
mod submit;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent};

use self::submit::JobSubmitter;

#[derive(serde::Deserialize)]
pub struct VideoUploaded {
    pub video_id: String,
    pub source_uri: String,
    pub renditions: Vec<u32>,
}

pub async fn handler(submitter: &JobSubmitter, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for record in event.payload.records {
        let msg: VideoUploaded = serde_json::from_str(record.body.as_deref().unwrap_or_default())?;
        let job_id = submitter.submit(&msg).await?;
        tracing::info!(video = %msg.video_id, %job_id, "transcode submitted");
    }
    Ok(())
}
