//! expect: nondeterministic_key
//!
//! Lambda triggered by S3 `ObjectCreated` on the uploads bucket: submits one MediaConvert job
//! per uploaded master. S3 notifications are at-least-once and Lambda retries async failures.

mod token;
mod transcode;

use aws_lambda_events::event::s3::S3Event;
use lambda_runtime::{service_fn, Error, LambdaEvent};

use self::transcode::Transcoder;

pub async fn main_handler() -> Result<(), Error> {
    let config = aws_config::load_from_env().await;
    let transcoder = Transcoder::from_conf(&config, std::env::var("MC_ROLE_ARN")?);
    let transcoder = &transcoder;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<S3Event>| async move {
        for record in event.payload.records {
            let bucket = record.s3.bucket.name.unwrap_or_default();
            let key = record.s3.object.key.unwrap_or_default();
            transcoder.submit(&bucket, &key).await?;
        }
        Ok::<(), Error>(())
    }))
    .await
}
