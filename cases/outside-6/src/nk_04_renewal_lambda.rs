//! expect: nondeterministic_key
//! Subscription renewals: an EventBridge-scheduled Lambda charges each due subscription with
//! async-stripe. EventBridge delivers at least once and the Lambda retries on error.
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use chrono::Utc;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::Deserialize;
use stripe::{Client, CreatePaymentIntent, Currency, CustomerId, PaymentIntent, RequestStrategy};

#[derive(Debug, Clone, Deserialize)]
struct RenewalDue {
    subscription_id: String,
    customer_id: String,
    payment_method_id: String,
    amount_cents: i64,
}

async fn handler(client: &Client, event: LambdaEvent<EventBridgeEvent<RenewalDue>>) -> Result<(), Error> {
    let due = event.payload.detail;
    let strategy = RequestStrategy::Idempotent(format!(
        "renewal-{}-{}",
        due.subscription_id,
        Utc::now().timestamp()
    ));
    let client = client.clone().with_strategy(strategy);

    let customer: CustomerId = due.customer_id.parse()?;
    let mut params = CreatePaymentIntent::new(due.amount_cents, Currency::USD);
    params.customer = Some(customer);
    params.payment_method = Some(due.payment_method_id.parse()?);
    params.confirm = Some(true);
    params.off_session = Some(stripe::PaymentIntentOffSession::Exists(true));
    let intent = PaymentIntent::create(&client, params).await?;
    tracing::info!(subscription = %due.subscription_id, intent = %intent.id, "renewal charged");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let client = Client::new(std::env::var("STRIPE_SECRET_KEY")?);
    lambda_runtime::run(service_fn(|ev| handler(&client, ev))).await
}
