//! expect: none
//! Podcast host: an SQS consumer (long polling) starts an audio MediaConvert job per episode
//! upload. The client request token is derived in `keys.rs` from the object and its ETag (the
//! content version), so redeliveries reuse it and a re-upload gets a new one.
mod jobs;
mod keys;

use aws_sdk_sqs::Client as Sqs;
use serde::Deserialize;

#[derive(Deserialize)]
struct EpisodeUploaded {
    bucket: String,
    key: String,
    etag: String,
    episode_id: String,
}

pub async fn consume(sqs: Sqs, mc: aws_sdk_mediaconvert::Client, queue_url: String) -> anyhow::Result<()> {
    loop {
        let batch = sqs.receive_message().queue_url(&queue_url).wait_time_seconds(20).send().await?;
        for m in batch.messages() {
            let Ok(ev) = serde_json::from_str::<EpisodeUploaded>(m.body().unwrap_or_default()) else {
                tracing::warn!(message_id = m.message_id(), "unparseable upload event");
                continue;
            };
            let token = keys::transcode_token(&ev.bucket, &ev.key, &ev.etag);
            match jobs::start_audio_job(&mc, &ev.bucket, &ev.key, &ev.episode_id, token).await {
                Ok(job_id) => {
                    tracing::info!(episode = %ev.episode_id, %job_id, "transcode started");
                    sqs.delete_message()
                        .queue_url(&queue_url)
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .send()
                        .await?;
                }
                Err(e) => tracing::warn!(error = %e, "transcode not started; will be redelivered"),
            }
        }
    }
}
