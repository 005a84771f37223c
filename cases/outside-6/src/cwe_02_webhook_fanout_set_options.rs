//! expect: none
//! Outgoing webhooks: a consumer of `events.outbound` claims each (event, endpoint) pair with
//! `set_options` (NX plus EX) before delivering, and drops the claim when delivery fails.
use redis::{AsyncCommands, ExistenceCheck, SetExpiry, SetOptions};
use serde::Deserialize;

#[derive(Deserialize)]
struct Outbound {
    event_id: String,
    endpoint_url: String,
    signature: String,
    payload: serde_json::Value,
}

const CLAIM_TTL_SECS: u64 = 3 * 24 * 3600;

pub async fn deliver(mut conn: redis::aio::ConnectionManager, http: &reqwest::Client, raw: &[u8]) -> anyhow::Result<()> {
    let ev: Outbound = serde_json::from_slice(raw)?;
    let key = format!("delivered:{}:{}", ev.event_id, ev.endpoint_url);
    let opts = SetOptions::default()
        .conditional_set(ExistenceCheck::NX)
        .with_expiration(SetExpiry::EX(CLAIM_TTL_SECS));
    let claimed: Option<String> = conn.set_options(&key, "1", opts).await?;
    if claimed.is_none() {
        return Ok(());
    }
    let res = http
        .post(&ev.endpoint_url)
        .header("X-Webhook-Signature", &ev.signature)
        .header("X-Webhook-Id", &ev.event_id)
        .json(&ev.payload)
        .send()
        .await
        .and_then(|r| r.error_for_status());
    if let Err(e) = res {
        let _: redis::RedisResult<()> = conn.del(&key).await;
        return Err(e.into());
    }
    Ok(())
}
