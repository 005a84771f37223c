//! expect: missing_idempotency_token
//! Video platform: an S3-triggered Lambda starts a MediaConvert job for every uploaded master.
//! The job is built and submitted in `transcoder.rs`; S3 notifications and Lambda retries
//! deliver the same upload more than once.
mod settings;
mod transcoder;

use aws_lambda_events::event::s3::S3Event;
use lambda_runtime::{service_fn, Error, LambdaEvent};

async fn on_upload(mc: &aws_sdk_mediaconvert::Client, event: LambdaEvent<S3Event>) -> Result<(), Error> {
    for record in event.payload.records {
        let bucket = record.s3.bucket.name.unwrap_or_default();
        let key = record.s3.object.key.unwrap_or_default();
        if !key.starts_with(settings::UPLOAD_PREFIX) {
            continue;
        }
        let job_id = transcoder::submit_hls_job(mc, &bucket, &key).await?;
        tracing::info!(%bucket, %key, %job_id, "transcode submitted");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cfg = aws_config::load_from_env().await;
    let mc = aws_sdk_mediaconvert::Client::new(&cfg);
    lambda_runtime::run(service_fn(|ev| on_upload(&mc, ev))).await
}
