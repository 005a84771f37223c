//! expect: mark_outside_transaction
//! Loyalty service (Lambda on the `orders` SQS queue). Each order id is reserved in an
//! idempotency table with a 5-minute lease, the member's points are credited with `update_item`,
//! and the idempotency record is set to COMPLETED in a second, separate DynamoDB write. A timeout
//! between the two lets the lease lapse and the retry credits the points again.
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::Deserialize;

const IDEMPOTENCY_TABLE: &str = "loyalty-idempotency";
const MEMBERS_TABLE: &str = "loyalty-members";
const LEASE_SECS: i64 = 300;

#[derive(Deserialize)]
struct OrderCompleted {
    order_id: String,
    member_id: String,
    total_minor: i64,
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

async fn reserve(ddb: &Client, order_id: &str) -> anyhow::Result<bool> {
    let now = chrono::Utc::now().timestamp();
    let r = ddb
        .put_item()
        .table_name(IDEMPOTENCY_TABLE)
        .item("id", s(order_id))
        .item("status", s("INPROGRESS"))
        .item("lease_until", n(now + LEASE_SECS))
        .item("expires_at", n(now + 7 * 86_400))
        .condition_expression("attribute_not_exists(id) OR (#st = :inprogress AND lease_until < :now)")
        .expression_attribute_names("#st", "status")
        .expression_attribute_values(":inprogress", s("INPROGRESS"))
        .expression_attribute_values(":now", n(now))
        .send()
        .await;
    match r {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(|x| x.is_conditional_check_failed_exception()) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn credit(ddb: &Client, o: &OrderCompleted) -> anyhow::Result<()> {
    let points = o.total_minor / 100;
    ddb.update_item()
        .table_name(MEMBERS_TABLE)
        .key("member_id", s(&o.member_id))
        .update_expression("SET points = if_not_exists(points, :zero) + :p, last_order = :o")
        .expression_attribute_values(":zero", n(0))
        .expression_attribute_values(":p", n(points))
        .expression_attribute_values(":o", s(&o.order_id))
        .send()
        .await?;
    ddb.update_item()
        .table_name(IDEMPOTENCY_TABLE)
        .key("id", s(&o.order_id))
        .update_expression("SET #st = :done")
        .expression_attribute_names("#st", "status")
        .expression_attribute_values(":done", s("COMPLETED"))
        .send()
        .await?;
    Ok(())
}

async fn handler(ddb: &Client, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for rec in event.payload.records {
        let o: OrderCompleted = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;
        if !reserve(ddb, &o.order_id).await? {
            continue;
        }
        if let Err(e) = credit(ddb, &o).await {
            let _ = ddb.delete_item().table_name(IDEMPOTENCY_TABLE).key("id", s(&o.order_id)).send().await;
            return Err(e.into());
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cfg = aws_config::load_from_env().await;
    let ddb = Client::new(&cfg);
    lambda_runtime::run(service_fn(|ev| handler(&ddb, ev))).await
}
