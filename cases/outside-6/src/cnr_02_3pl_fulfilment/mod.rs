//! expect: claim_not_released
//! Fulfilment Lambda (SQS): `claims::try_claim` reserves the order in DynamoDB (status and TTL),
//! then the order is pushed to the 3PL with `?`. When the 3PL call fails the claim stays
//! PENDING until the TTL, so the redelivered message is dropped as a duplicate.
mod claims;
mod threepl;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, Error, LambdaEvent};

struct Deps {
    ddb: aws_sdk_dynamodb::Client,
    wms: threepl::Wms,
}

async fn handler(d: &Deps, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for rec in event.payload.records {
        let order: threepl::Order = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;
        if !claims::try_claim(&d.ddb, &order.order_id).await? {
            tracing::info!(order = %order.order_id, "duplicate delivery");
            continue;
        }
        let shipment = d.wms.create_shipment(&order).await?;
        claims::complete(&d.ddb, &order.order_id, &shipment).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cfg = aws_config::load_from_env().await;
    let d = Deps { ddb: aws_sdk_dynamodb::Client::new(&cfg), wms: threepl::Wms::from_env()? };
    lambda_runtime::run(service_fn(|ev| handler(&d, ev))).await
}
