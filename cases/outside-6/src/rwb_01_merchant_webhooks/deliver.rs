use super::config::{MAX_ATTEMPTS, REQUEST_TIMEOUT, RETRY_DELAY};

pub struct Delivery {
    pub event_id: String,
    pub url: String,
    pub signature: String,
    pub body: String,
}

pub async fn deliver(http: &reqwest::Client, d: &Delivery) -> anyhow::Result<u16> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let res = http
            .post(&d.url)
            .timeout(REQUEST_TIMEOUT)
            .header("Content-Type", "application/json")
            .header("X-Event-Id", &d.event_id)
            .header("X-Signature", &d.signature)
            .body(d.body.clone())
            .send()
            .await
            .and_then(|r| r.error_for_status());
        match res {
            Ok(r) => return Ok(r.status().as_u16()),
            Err(e) if attempt < MAX_ATTEMPTS => {
                tracing::warn!(event = %d.event_id, attempt, error = %e, "webhook delivery failed, retrying");
                tokio::time::sleep(RETRY_DELAY).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
