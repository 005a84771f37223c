//! expect: none
//!
//! Podcast audio normaliser: an SNS->SQS->Lambda consumer submitting a MediaConvert job per
//! episode upload. The client request token is derived from the episode, the object version
//! and the preset revision, so a redelivered notification replays the same job.

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_mediaconvert::types::{Input, JobSettings};
use aws_sdk_mediaconvert::Client;
use lambda_runtime::{Error, LambdaEvent};
use sha2::{Digest, Sha256};

const PRESET_REVISION: &str = "loudnorm-v3";

#[derive(serde::Deserialize)]
struct EpisodeUploaded {
    episode_id: String,
    s3_uri: String,
    version_id: String,
}

fn token_for(ep: &EpisodeUploaded) -> String {
    let mut h = Sha256::new();
    h.update(ep.episode_id.as_bytes());
    h.update(b"|");
    h.update(ep.version_id.as_bytes());
    h.update(b"|");
    h.update(PRESET_REVISION.as_bytes());
    hex::encode(h.finalize())[..48].to_string()
}

pub async fn handler(mc: &Client, role: &str, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for rec in event.payload.records {
        let ep: EpisodeUploaded = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;
        let settings = JobSettings::builder()
            .inputs(Input::builder().file_input(&ep.s3_uri).build())
            .build();
        mc.create_job()
            .role(role)
            .job_template(PRESET_REVISION)
            .settings(settings)
            .client_request_token(token_for(&ep))
            .send()
            .await?;
    }
    Ok(())
}
