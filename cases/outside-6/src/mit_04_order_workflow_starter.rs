//! expect: missing_idempotency_token
//! Order orchestration: an SQS-triggered Lambda starts one Step Functions execution per order
//! placed. The execution name is left to the service, so a redelivered message starts a second
//! workflow (second pick list, second shipment).
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, BatchItemFailure};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::Deserialize;

#[derive(Deserialize)]
struct OrderPlaced {
    order_id: String,
    customer_id: String,
    total_minor: i64,
}

struct Deps {
    sfn: aws_sdk_sfn::Client,
    state_machine_arn: String,
}

async fn start(deps: &Deps, body: &str) -> anyhow::Result<()> {
    let order: OrderPlaced = serde_json::from_str(body)?;
    let input = serde_json::json!({
        "orderId": order.order_id,
        "customerId": order.customer_id,
        "totalMinor": order.total_minor,
    });
    let out = deps
        .sfn
        .start_execution()
        .state_machine_arn(&deps.state_machine_arn)
        .input(input.to_string())
        .send()
        .await?;
    tracing::info!(order = %order.order_id, execution = out.execution_arn(), "workflow started");
    Ok(())
}

async fn handler(deps: &Deps, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Error> {
    let mut failures = Vec::new();
    for record in event.payload.records {
        let id = record.message_id.clone().unwrap_or_default();
        if let Err(e) = start(deps, record.body.as_deref().unwrap_or("")).await {
            tracing::error!(error = %e, message_id = %id, "start failed");
            failures.push(BatchItemFailure { item_identifier: id });
        }
    }
    Ok(SqsBatchResponse { batch_item_failures: failures })
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cfg = aws_config::load_from_env().await;
    let deps = Deps {
        sfn: aws_sdk_sfn::Client::new(&cfg),
        state_machine_arn: std::env::var("ORDER_STATE_MACHINE_ARN")?,
    };
    lambda_runtime::run(service_fn(|ev| handler(&deps, ev))).await
}
