use aws_sdk_ec2::types::InstanceType;
use aws_sdk_ec2::Client as Ec2;

use super::config::{CPU_INSTANCE, GPU_INSTANCE, SANDBOX_AMI, SUBNET_ID};
use super::SandboxRequested;

pub struct Provisioner {
    pub ec2: Ec2,
}

impl Provisioner {
    pub async fn launch(&self, req: &SandboxRequested) -> anyhow::Result<String> {
        let itype = if req.gpu { GPU_INSTANCE } else { CPU_INSTANCE };
        let out = self
            .ec2
            .run_instances()
            .client_token(&req.request_id)
            .image_id(SANDBOX_AMI)
            .subnet_id(SUBNET_ID)
            .instance_type(InstanceType::from(itype))
            .min_count(1)
            .max_count(1)
            .send()
            .await?;
        let id = out
            .instances()
            .first()
            .and_then(|i| i.instance_id())
            .unwrap_or_default()
            .to_string();
        Ok(id)
    }
}
