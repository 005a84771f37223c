use aws_sdk_mediaconvert::types::{Input, JobSettings};

const ROLE: &str = "arn:aws:iam::210987654321:role/podcast-mediaconvert";
const TEMPLATE: &str = "podcast-aac-64k-128k";

pub async fn start_audio_job(
    mc: &aws_sdk_mediaconvert::Client,
    bucket: &str,
    key: &str,
    episode_id: &str,
    token: String,
) -> anyhow::Result<String> {
    let settings = JobSettings::builder()
        .inputs(Input::builder().file_input(format!("s3://{bucket}/{key}")).build())
        .build();
    let resp = mc
        .create_job()
        .role(ROLE)
        .job_template(TEMPLATE)
        .settings(settings)
        .client_request_token(token)
        .user_metadata("episode_id", episode_id)
        .send()
        .await?;
    Ok(resp.job().and_then(|j| j.id()).map(str::to_owned).unwrap_or_default())
}
