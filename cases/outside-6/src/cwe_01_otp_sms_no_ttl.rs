//! expect: claim_without_expiry
//! 2FA SMS sender: a NATS queue subscriber claims each `auth.otp.requested` message with a raw
//! `SET key 1 NX` (no EX/PX). A failure releases the claim, but a worker killed between the SET
//! and the send leaves the key forever: the redelivered message is skipped and no code is sent.
use futures::StreamExt;
use serde::Deserialize;

#[derive(Deserialize)]
struct OtpRequested {
    request_id: String,
    phone: String,
    code: String,
}

pub async fn run(nats: async_nats::Client, mut redis: redis::aio::MultiplexedConnection, http: reqwest::Client, api_key: String) -> anyhow::Result<()> {
    let mut sub = nats.queue_subscribe("auth.otp.requested", "otp-senders".into()).await?;
    while let Some(msg) = sub.next().await {
        let Ok(req) = serde_json::from_slice::<OtpRequested>(&msg.payload) else { continue };
        let key = format!("otp-sent:{}", req.request_id);
        let won: bool = redis::cmd("SET")
            .arg(&key)
            .arg(1)
            .arg("NX")
            .query_async::<Option<String>>(&mut redis)
            .await?
            .is_some();
        if !won {
            continue;
        }
        let sent = http
            .post("https://rest.messagebird.com/messages")
            .header("Authorization", format!("AccessKey {api_key}"))
            .json(&serde_json::json!({ "recipients": [req.phone], "originator": "Acme", "body": format!("Your code: {}", req.code) }))
            .send()
            .await
            .and_then(|r| r.error_for_status());
        if let Err(e) = sent {
            tracing::warn!(error = %e, "otp sms failed");
            let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&key).query_async(&mut redis).await;
        }
    }
    Ok(())
}
