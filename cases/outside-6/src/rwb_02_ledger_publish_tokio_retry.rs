//! expect: retry_without_backoff
//! Ledger outbox relay: publishes each outbox row to NATS JetStream through `tokio-retry` with an
//! exponential strategy that has neither jitter nor a cap on attempts; during a broker outage
//! every relay retries forever in lockstep.
use tokio_retry::strategy::ExponentialBackoff;
use tokio_retry::Retry;

pub struct OutboxRow {
    pub id: i64,
    pub subject: String,
    pub payload: Vec<u8>,
}

pub async fn publish(js: &async_nats::jetstream::Context, row: &OutboxRow) -> anyhow::Result<()> {
    let strategy = ExponentialBackoff::from_millis(50).factor(2).max_delay(std::time::Duration::from_secs(30));
    Retry::spawn(strategy, || async {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", row.id.to_string().as_str());
        js.publish_with_headers(row.subject.clone(), headers, row.payload.clone().into())
            .await?
            .await
            .map(|_| ())
    })
    .await?;
    Ok(())
}
