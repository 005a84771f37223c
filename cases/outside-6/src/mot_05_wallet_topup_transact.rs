//! expect: none
//! Wallet service (Lambda on the `topups` SQS queue): the balance credit and the processed
//! marker are one `transact_write_items`; the marker's `attribute_not_exists` condition makes a
//! redelivered top-up cancel the whole transaction, and the client request token is the top-up id.
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::Deserialize;

#[derive(Deserialize)]
struct TopUp {
    topup_id: String,
    wallet_id: String,
    amount_minor: i64,
}

async fn apply(ddb: &Client, t: &TopUp) -> anyhow::Result<()> {
    let expires = chrono::Utc::now().timestamp() + 30 * 86_400;
    let credit = Update::builder()
        .table_name("wallets")
        .key("wallet_id", AttributeValue::S(t.wallet_id.clone()))
        .update_expression("SET balance_minor = balance_minor + :a")
        .expression_attribute_values(":a", AttributeValue::N(t.amount_minor.to_string()))
        .build()?;
    let marker = Put::builder()
        .table_name("wallet-processed-topups")
        .item("topup_id", AttributeValue::S(t.topup_id.clone()))
        .item("expires_at", AttributeValue::N(expires.to_string()))
        .condition_expression("attribute_not_exists(topup_id)")
        .build()?;
    let res = ddb
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(credit).build())
        .transact_items(TransactWriteItem::builder().put(marker).build())
        .client_request_token(&t.topup_id)
        .send()
        .await;
    match res {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|x| x.is_transaction_canceled_exception()) => {
            tracing::info!(topup = %t.topup_id, "already applied");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

async fn handler(ddb: &Client, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for rec in event.payload.records {
        let t: TopUp = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;
        apply(ddb, &t).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cfg = aws_config::load_from_env().await;
    let ddb = Client::new(&cfg);
    lambda_runtime::run(service_fn(|ev| handler(&ddb, ev))).await
}
