//! expect: missing_idempotency_token
//! Self-hosted CI autoscaler: GitHub `workflow_job` webhooks (queued) launch one ephemeral EC2
//! runner each. GitHub redelivers webhooks that time out, and the handler retries on 5xx.
use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use axum::{extract::State, http::StatusCode, Json};
use base64::Engine;
use serde::Deserialize;
use std::sync::Arc;

pub struct Scaler {
    pub ec2: aws_sdk_ec2::Client,
    pub runner_ami: String,
    pub subnet_id: String,
    pub registration_token: String,
}

#[derive(Deserialize)]
pub struct WorkflowJobEvent {
    pub action: String,
    pub workflow_job: WorkflowJob,
}

#[derive(Deserialize)]
pub struct WorkflowJob {
    pub id: u64,
    pub run_id: u64,
    pub run_attempt: u32,
    pub labels: Vec<String>,
}

fn user_data(token: &str, labels: &[String]) -> String {
    let script = format!(
        "#!/bin/bash\ncd /opt/actions-runner && ./config.sh --ephemeral --token {token} --labels {} && ./run.sh\n",
        labels.join(",")
    );
    base64::engine::general_purpose::STANDARD.encode(script)
}

pub async fn workflow_job(State(s): State<Arc<Scaler>>, Json(ev): Json<WorkflowJobEvent>) -> StatusCode {
    if ev.action != "queued" || !ev.workflow_job.labels.iter().any(|l| l == "self-hosted") {
        return StatusCode::NO_CONTENT;
    }
    let job = &ev.workflow_job;
    let tags = TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .tags(Tag::builder().key("gh-workflow-job").value(job.id.to_string()).build())
        .tags(Tag::builder().key("gh-run").value(format!("{}-{}", job.run_id, job.run_attempt)).build())
        .build();
    let launched = s
        .ec2
        .run_instances()
        .image_id(&s.runner_ami)
        .instance_type(InstanceType::C6iXlarge)
        .subnet_id(&s.subnet_id)
        .min_count(1)
        .max_count(1)
        .user_data(user_data(&s.registration_token, &job.labels))
        .tag_specifications(tags)
        .send()
        .await;
    match launched {
        Ok(out) => {
            let ids: Vec<_> = out.instances().iter().filter_map(|i| i.instance_id()).collect();
            tracing::info!(job = job.id, ?ids, "runner launched");
            StatusCode::ACCEPTED
        }
        Err(e) => {
            tracing::error!(error = %e, "run_instances failed");
            StatusCode::BAD_GATEWAY
        }
    }
}
