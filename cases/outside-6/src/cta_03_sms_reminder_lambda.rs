//! expect: check_then_act
//! Appointment reminders: an SQS-triggered Lambda texts the patient through Twilio. DynamoDB
//! table `sent_reminders` is read first and written after the SMS goes out.
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client as Dynamo;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reminder {
    appointment_id: String,
    phone: String,
    starts_at: String,
}

struct Deps {
    ddb: Dynamo,
    http: reqwest::Client,
    twilio_sid: String,
    twilio_token: String,
    from_number: String,
}

async fn handle(deps: &Deps, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for record in event.payload.records {
        let body = record.body.unwrap_or_default();
        let r: Reminder = serde_json::from_str(&body)?;

        let existing = deps
            .ddb
            .get_item()
            .table_name("sent_reminders")
            .key("appointment_id", AttributeValue::S(r.appointment_id.clone()))
            .consistent_read(true)
            .send()
            .await?;
        if existing.item().is_some() {
            continue;
        }

        let url = format!("https://api.twilio.com/2010-04-01/Accounts/{}/Messages.json", deps.twilio_sid);
        let text = format!("Reminder: your appointment starts at {}", r.starts_at);
        deps.http
            .post(url)
            .basic_auth(&deps.twilio_sid, Some(&deps.twilio_token))
            .form(&[("To", r.phone.as_str()), ("From", deps.from_number.as_str()), ("Body", text.as_str())])
            .send()
            .await?
            .error_for_status()?;

        deps.ddb
            .put_item()
            .table_name("sent_reminders")
            .item("appointment_id", AttributeValue::S(r.appointment_id.clone()))
            .item("sent_at", AttributeValue::S(chrono::Utc::now().to_rfc3339()))
            .send()
            .await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cfg = aws_config::load_from_env().await;
    let deps = Deps {
        ddb: Dynamo::new(&cfg),
        http: reqwest::Client::new(),
        twilio_sid: std::env::var("TWILIO_SID")?,
        twilio_token: std::env::var("TWILIO_TOKEN")?,
        from_number: std::env::var("TWILIO_FROM")?,
    };
    lambda_runtime::run(service_fn(|ev| handle(&deps, ev))).await
}
