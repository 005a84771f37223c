//! expect: mark_outside_transaction
//!
//! Rewards Lambda (SQS trigger): a purchase event adds points to the member's balance. The
//! event is first leased in the `reward-events` table with a conditional put (new, or a stale
//! lease), the balance is incremented with UpdateItem, and the event is then marked COMPLETED
//! with a second, separate UpdateItem. A timeout between the two writes lets the lease lapse and
//! the SQS retry adds the points again.

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use chrono::Utc;
use lambda_runtime::{Error, LambdaEvent};

const EVENTS_TABLE: &str = "reward-events";
const MEMBERS_TABLE: &str = "reward-members";
const LEASE_SECS: i64 = 300;

#[derive(serde::Deserialize)]
struct PurchaseRecorded {
    event_id: String,
    member_id: String,
    points: i64,
}

pub async fn handler(ddb: &Client, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for rec in event.payload.records {
        let ev: PurchaseRecorded = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;
        let now = Utc::now().timestamp();

        let leased = ddb
            .put_item()
            .table_name(EVENTS_TABLE)
            .item("event_id", AttributeValue::S(ev.event_id.clone()))
            .item("status", AttributeValue::S("IN_PROGRESS".into()))
            .item("lease_until", AttributeValue::N((now + LEASE_SECS).to_string()))
            .condition_expression("attribute_not_exists(event_id) OR (#s = :inprog AND lease_until < :now)")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":inprog", AttributeValue::S("IN_PROGRESS".into()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .send()
            .await;
        if let Err(e) = leased {
            if e.as_service_error().map(|s| s.is_conditional_check_failed_exception()).unwrap_or(false) {
                continue;
            }
            return Err(e.into());
        }

        ddb.update_item()
            .table_name(MEMBERS_TABLE)
            .key("member_id", AttributeValue::S(ev.member_id.clone()))
            .update_expression("ADD points_balance :p")
            .expression_attribute_values(":p", AttributeValue::N(ev.points.to_string()))
            .send()
            .await?;

        ddb.update_item()
            .table_name(EVENTS_TABLE)
            .key("event_id", AttributeValue::S(ev.event_id.clone()))
            .update_expression("SET #s = :done REMOVE lease_until")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":done", AttributeValue::S("COMPLETED".into()))
            .send()
            .await?;
    }
    Ok(())
}
