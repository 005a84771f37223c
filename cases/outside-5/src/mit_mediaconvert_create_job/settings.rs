use aws_sdk_mediaconvert::types::{
    Input, JobSettings, Output, OutputGroup, OutputGroupSettings, OutputGroupType, HlsGroupSettings,
};

pub const OUTPUT_BUCKET: &str = "s3://media-renditions-prod/hls/";

pub fn hls_job(source_uri: &str, video_id: &str, heights: &[u32]) -> JobSettings {
    let outputs = heights
        .iter()
        .map(|h| Output::builder().name_modifier(format!("_{h}p")).build())
        .collect::<Vec<_>>();
    JobSettings::builder()
        .inputs(Input::builder().file_input(source_uri).build())
        .output_groups(
            OutputGroup::builder()
                .name("HLS")
                .output_group_settings(
                    OutputGroupSettings::builder()
                        .r#type(OutputGroupType::HlsGroupSettings)
                        .hls_group_settings(
                            HlsGroupSettings::builder()
                                .destination(format!("{OUTPUT_BUCKET}{video_id}/"))
                                .segment_length(6)
                                .build(),
                        )
                        .build(),
                )
                .set_outputs(Some(outputs))
                .build(),
        )
        .build()
}
