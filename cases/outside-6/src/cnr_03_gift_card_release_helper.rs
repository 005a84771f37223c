//! expect: none
//! Gift-card issuing (apalis job): the order is claimed with `SET NX PX`, the card is issued, and
//! every failure after the claim goes through `release_claim` before the error is returned.
use apalis::prelude::*;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssueGiftCard {
    pub order_id: String,
    pub recipient: String,
    pub value_cents: i64,
}

#[derive(Clone)]
pub struct Deps {
    pub redis: redis::aio::ConnectionManager,
    pub http: reqwest::Client,
    pub provider_key: String,
}

const CLAIM_MS: u64 = 10 * 60 * 1000;

async fn release_claim(conn: &mut redis::aio::ConnectionManager, key: &str) {
    let _: redis::RedisResult<()> = conn.del(key).await;
}

async fn issue(d: &Deps, job: &IssueGiftCard) -> anyhow::Result<String> {
    let v: serde_json::Value = d
        .http
        .post("https://api.giftcards.example/v1/cards")
        .bearer_auth(&d.provider_key)
        .header("Idempotency-Key", format!("giftcard-{}", job.order_id))
        .json(&serde_json::json!({ "value": job.value_cents, "recipient": job.recipient }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(v["code"].as_str().unwrap_or_default().to_owned())
}

pub async fn issue_gift_card(job: IssueGiftCard, d: Data<Deps>) -> Result<(), Error> {
    let to_err = |e: anyhow::Error| Error::Failed(std::sync::Arc::new(e.into()));
    let mut conn = d.redis.clone();
    let key = format!("giftcard:{}", job.order_id);
    let won: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg("issuing")
        .arg("NX")
        .arg("PX")
        .arg(CLAIM_MS)
        .query_async(&mut conn)
        .await
        .map_err(|e| to_err(e.into()))?;
    if won.is_none() {
        return Ok(());
    }
    let code = match issue(&d, &job).await {
        Ok(code) => code,
        Err(e) => {
            release_claim(&mut conn, &key).await;
            return Err(to_err(e));
        }
    };
    let stored: redis::RedisResult<()> = conn.set_ex(&key, format!("issued:{code}"), 90 * 86_400).await;
    if let Err(e) = stored {
        tracing::warn!(error = %e, "could not record issued card");
    }
    Ok(())
}
