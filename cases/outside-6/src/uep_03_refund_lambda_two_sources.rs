//! expect: unguarded_entry_point
//! Refund Lambda with two triggers: refund requests arrive from SQS and are reserved in DynamoDB
//! (conditional put with a lease) before the refund; an EventBridge schedule "reconciles" pending
//! refunds and calls the same refund without the reservation.
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize, Clone)]
struct RefundRequest {
    refund_id: String,
    payment_id: String,
    amount_minor: i64,
}

struct Deps {
    ddb: aws_sdk_dynamodb::Client,
    http: reqwest::Client,
    psp_key: String,
}

async fn issue_refund(d: &Deps, r: &RefundRequest) -> anyhow::Result<()> {
    d.http
        .post(format!("https://api.psp.example/v2/payments/{}/refunds", r.payment_id))
        .bearer_auth(&d.psp_key)
        .json(&serde_json::json!({ "amount": r.amount_minor, "reference": r.refund_id }))
        .send()
        .await?
        .error_for_status()?;
    d.ddb
        .update_item()
        .table_name("refunds")
        .key("refund_id", AttributeValue::S(r.refund_id.clone()))
        .update_expression("SET #s = :done")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":done", AttributeValue::S("REFUNDED".into()))
        .send()
        .await?;
    Ok(())
}

async fn reserve(d: &Deps, refund_id: &str) -> anyhow::Result<bool> {
    let now = chrono::Utc::now().timestamp();
    let res = d
        .ddb
        .put_item()
        .table_name("refund_reservations")
        .item("refund_id", AttributeValue::S(refund_id.to_owned()))
        .item("status", AttributeValue::S("IN_PROGRESS".into()))
        .item("expires_at", AttributeValue::N((now + 900).to_string()))
        .condition_expression("attribute_not_exists(refund_id)")
        .send()
        .await;
    match res {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().map_or(false, |s| s.is_conditional_check_failed_exception()) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn release(d: &Deps, refund_id: &str) {
    let _ = d
        .ddb
        .delete_item()
        .table_name("refund_reservations")
        .key("refund_id", AttributeValue::S(refund_id.to_owned()))
        .send()
        .await;
}

async fn from_queue(d: &Deps, ev: SqsEvent) -> Result<(), Error> {
    for rec in ev.records {
        let r: RefundRequest = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;
        if !reserve(d, &r.refund_id).await? {
            continue;
        }
        if let Err(e) = issue_refund(d, &r).await {
            release(d, &r.refund_id).await;
            return Err(e.into());
        }
    }
    Ok(())
}

async fn reconcile(d: &Deps) -> Result<(), Error> {
    let pending = d
        .ddb
        .query()
        .table_name("refunds")
        .index_name("by_status")
        .key_condition_expression("#s = :p")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":p", AttributeValue::S("PENDING".into()))
        .send()
        .await?;
    for item in pending.items() {
        let get = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let r = RefundRequest {
            refund_id: get("refund_id"),
            payment_id: get("payment_id"),
            amount_minor: get("amount_minor").parse().unwrap_or(0),
        };
        issue_refund(d, &r).await?;
    }
    Ok(())
}

async fn handler(d: &Deps, event: LambdaEvent<Value>) -> Result<(), Error> {
    if event.payload.get("Records").is_some() {
        let sqs: SqsEvent = serde_json::from_value(event.payload)?;
        from_queue(d, sqs).await
    } else if event.payload.get("detail-type").and_then(Value::as_str) == Some("Scheduled Event") {
        reconcile(d).await
    } else {
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cfg = aws_config::load_from_env().await;
    let d = Deps {
        ddb: aws_sdk_dynamodb::Client::new(&cfg),
        http: reqwest::Client::new(),
        psp_key: std::env::var("PSP_KEY")?,
    };
    lambda_runtime::run(service_fn(|ev| handler(&d, ev))).await
}
