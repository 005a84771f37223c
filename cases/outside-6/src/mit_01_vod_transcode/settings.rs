pub const UPLOAD_PREFIX: &str = "uploads/masters/";
pub const OUTPUT_BUCKET: &str = "s3://vod-renditions";
pub const JOB_TEMPLATE: &str = "hls-ladder-1080p";
pub const QUEUE_ARN: &str = "arn:aws:mediaconvert:eu-west-1:123456789012:queues/Default";
pub const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/MediaConvertRole";
