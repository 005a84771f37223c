//! expect: missing_idempotency_token
//!
//! Self-hosted CI runner autoscaler: GitHub `workflow_job.queued` webhooks are forwarded to an
//! SQS queue; this worker launches one ephemeral EC2 runner per queued job.

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use aws_sdk_ec2::Client as Ec2;
use aws_sdk_sqs::Client as Sqs;

#[derive(serde::Deserialize)]
struct JobQueued {
    workflow_job_id: u64,
    repo: String,
    labels: Vec<String>,
}

pub struct Autoscaler {
    ec2: Ec2,
    sqs: Sqs,
    queue_url: String,
    launch_template_ami: String,
}

impl Autoscaler {
    pub async fn poll(&self) -> anyhow::Result<()> {
        let resp = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .wait_time_seconds(20)
            .visibility_timeout(120)
            .send()
            .await?;
        for m in resp.messages() {
            let job: JobQueued = serde_json::from_str(m.body().unwrap_or("{}"))?;
            self.launch_runner(&job).await?;
            self.sqs
                .delete_message()
                .queue_url(&self.queue_url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await?;
        }
        Ok(())
    }

    async fn launch_runner(&self, job: &JobQueued) -> anyhow::Result<()> {
        let instance_type = if job.labels.iter().any(|l| l == "large") {
            InstanceType::C6iXlarge
        } else {
            InstanceType::C6iLarge
        };
        self.ec2
            .run_instances()
            .image_id(&self.launch_template_ami)
            .instance_type(instance_type)
            .min_count(1)
            .max_count(1)
            .instance_initiated_shutdown_behavior("terminate".into())
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Instance)
                    .tags(Tag::builder().key("workflow_job_id").value(job.workflow_job_id.to_string()).build())
                    .tags(Tag::builder().key("repo").value(&job.repo).build())
                    .build(),
            )
            .send()
            .await?;
        Ok(())
    }
}
