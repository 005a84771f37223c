use super::mailer::{self, Mailer, Receipt};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message;
use serde::Deserialize;

#[derive(Deserialize)]
struct Settled {
    event_id: String,
    payment_id: String,
    email: String,
    amount: String,
}

pub async fn run(consumer: StreamConsumer, m: Mailer) -> anyhow::Result<()> {
    consumer.subscribe(&["payments.settled"])?;
    loop {
        let msg = consumer.recv().await?;
        if let Some(Ok(ev)) = msg.payload().map(serde_json::from_slice::<Settled>) {
            let r = Receipt { payment_id: ev.payment_id, email: ev.email, amount: ev.amount };
            let key = format!("settled:{}", ev.event_id);
            if let Err(e) = mailer::send_receipt_once(&m, &key, &r).await {
                tracing::error!(error = %e, "receipt failed");
                continue;
            }
        }
        consumer.commit_message(&msg, CommitMode::Async)?;
    }
}
