use super::settings;
use aws_sdk_mediaconvert::types::{Input, JobSettings, OutputGroup, OutputGroupSettings, HlsGroupSettings, OutputGroupType};

pub async fn submit_hls_job(mc: &aws_sdk_mediaconvert::Client, bucket: &str, key: &str) -> anyhow::Result<String> {
    let stem = key.trim_start_matches(settings::UPLOAD_PREFIX).trim_end_matches(".mov");
    let input = Input::builder().file_input(format!("s3://{bucket}/{key}")).build();
    let hls = OutputGroup::builder()
        .name("HLS")
        .output_group_settings(
            OutputGroupSettings::builder()
                .r#type(OutputGroupType::HlsGroupSettings)
                .hls_group_settings(
                    HlsGroupSettings::builder()
                        .destination(format!("{}/{stem}/", settings::OUTPUT_BUCKET))
                        .segment_length(6)
                        .min_segment_length(0)
                        .build(),
                )
                .build(),
        )
        .build();
    let job_settings = JobSettings::builder().inputs(input).output_groups(hls).build();

    let out = mc
        .create_job()
        .role(settings::ROLE_ARN)
        .queue(settings::QUEUE_ARN)
        .job_template(settings::JOB_TEMPLATE)
        .settings(job_settings)
        .user_metadata("source_key", key)
        .send()
        .await?;
    Ok(out.job().and_then(|j| j.id()).unwrap_or_default().to_owned())
}
