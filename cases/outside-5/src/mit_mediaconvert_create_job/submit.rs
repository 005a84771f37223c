use aws_sdk_mediaconvert::Client as MediaConvert;

use super::settings::hls_job;
use super::VideoUploaded;

pub struct JobSubmitter {
    pub mc: MediaConvert,
    pub role_arn: String,
    pub queue_arn: String,
}

impl JobSubmitter {
    pub async fn submit(&self, msg: &VideoUploaded) -> anyhow::Result<String> {
        let settings = hls_job(&msg.source_uri, &msg.video_id, &msg.renditions);
        let resp = self
            .mc
            .create_job()
            .role(&self.role_arn)
            .queue(&self.queue_arn)
            .user_metadata("video_id", &msg.video_id)
            .settings(settings)
            .send()
            .await?;
        Ok(resp
            .job
            .and_then(|j| j.id)
            .unwrap_or_default())
    }
}
