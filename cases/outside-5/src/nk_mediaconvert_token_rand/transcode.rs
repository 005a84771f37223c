use aws_sdk_mediaconvert::types::{Input, JobSettings, OutputGroup};
use aws_sdk_mediaconvert::Client;

use super::token::request_token;

pub struct Transcoder {
    client: Client,
    role_arn: String,
}

impl Transcoder {
    pub fn from_conf(conf: &aws_config::SdkConfig, role_arn: String) -> Self {
        Self { client: Client::new(conf), role_arn }
    }

    pub async fn submit(&self, bucket: &str, key: &str) -> anyhow::Result<String> {
        let settings = JobSettings::builder()
            .inputs(Input::builder().file_input(format!("s3://{bucket}/{key}")).build())
            .output_groups(OutputGroup::builder().name("hls").build())
            .build();

        let token = request_token("upload");
        let out = self
            .client
            .create_job()
            .role(&self.role_arn)
            .settings(settings)
            .client_request_token(token)
            .send()
            .await?;
        Ok(out.job().and_then(|j| j.id()).unwrap_or_default().to_string())
    }
}
