//! expect: none
//! Build farm: a Redis-backed apalis job launches the EC2 instance for one build. The request is
//! assembled in a builder variable; the client token (from the build id and attempt) is added
//! on its own line before sending.
use apalis::prelude::*;
use aws_sdk_ec2::types::InstanceType;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchBuilder {
    pub build_id: String,
    pub attempt: u32,
    pub arch: String,
    pub spot: bool,
}

#[derive(Clone)]
pub struct Fleet {
    pub ec2: aws_sdk_ec2::Client,
    pub ami_x86: String,
    pub ami_arm: String,
    pub launch_template: String,
}

pub async fn launch_builder(job: LaunchBuilder, fleet: Data<Fleet>) -> Result<String, Error> {
    let (ami, itype) = if job.arch == "arm64" {
        (fleet.ami_arm.clone(), InstanceType::C7gXlarge)
    } else {
        (fleet.ami_x86.clone(), InstanceType::C7iXlarge)
    };
    let mut request = fleet
        .ec2
        .run_instances()
        .image_id(ami)
        .instance_type(itype)
        .launch_template(
            aws_sdk_ec2::types::LaunchTemplateSpecification::builder()
                .launch_template_name(&fleet.launch_template)
                .build(),
        )
        .min_count(1)
        .max_count(1);
    let client_token = format!("build-{}-attempt-{}", job.build_id, job.attempt);
    request = request.client_token(client_token);

    let out = request
        .send()
        .await
        .map_err(|e| Error::Failed(std::sync::Arc::new(Box::new(e))))?;
    let id = out
        .instances()
        .first()
        .and_then(|i| i.instance_id())
        .unwrap_or_default()
        .to_owned();
    tracing::info!(build = %job.build_id, instance = %id, "builder launched");
    Ok(id)
}
