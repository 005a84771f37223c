//! expect: none
//! Checkout API (axum): clients send an `Idempotency-Key` header. A stored response is replayed
//! if there is one; otherwise the request takes a short Redis lock with one `SET .. NX PX`,
//! charges through Stripe with the client's key, stores the response and drops the lock.
use axum::{extract::State, http::{HeaderMap, StatusCode}, Json};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub struct Checkout {
    pub redis: redis::aio::ConnectionManager,
    pub http: reqwest::Client,
    pub stripe_key: String,
}

#[derive(Deserialize)]
pub struct ChargeBody {
    pub customer: String,
    pub payment_method: String,
    pub amount_cents: i64,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct ChargeResult {
    pub payment_intent: String,
    pub status: String,
}

const LOCK_MS: u64 = 30_000;
const RESPONSE_TTL_SECS: u64 = 24 * 3600;

async fn charge(st: &Checkout, key: &str, body: &ChargeBody) -> anyhow::Result<ChargeResult> {
    let amount = body.amount_cents.to_string();
    let form = [
        ("amount", amount.as_str()),
        ("currency", "eur"),
        ("customer", body.customer.as_str()),
        ("payment_method", body.payment_method.as_str()),
        ("confirm", "true"),
    ];
    let v: serde_json::Value = st
        .http
        .post("https://api.stripe.com/v1/payment_intents")
        .basic_auth(&st.stripe_key, Option::<&str>::None)
        .header("Idempotency-Key", key)
        .form(&form)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(ChargeResult {
        payment_intent: v["id"].as_str().unwrap_or_default().into(),
        status: v["status"].as_str().unwrap_or_default().into(),
    })
}

pub async fn create_charge(
    State(st): State<Arc<Checkout>>,
    headers: HeaderMap,
    Json(body): Json<ChargeBody>,
) -> Result<Json<ChargeResult>, StatusCode> {
    let key = headers
        .get("Idempotency-Key")
        .and_then(|v| v.to_str().ok())
        .ok_or(StatusCode::BAD_REQUEST)?
        .to_owned();
    let mut conn = st.redis.clone();
    let response_key = format!("checkout:resp:{key}");
    let lock_key = format!("checkout:lock:{key}");

    let cached: Option<String> = conn.get(&response_key).await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    if let Some(json) = cached {
        let prior: ChargeResult = serde_json::from_str(&json).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
        return Ok(Json(prior));
    }

    let locked: Option<String> = redis::cmd("SET")
        .arg(&lock_key)
        .arg("1")
        .arg("NX")
        .arg("PX")
        .arg(LOCK_MS)
        .query_async(&mut conn)
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    if locked.is_none() {
        return Err(StatusCode::CONFLICT);
    }

    let outcome = charge(&st, &key, &body).await;
    let result = match outcome {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "charge failed");
            let _: redis::RedisResult<()> = conn.del(&lock_key).await;
            return Err(StatusCode::BAD_GATEWAY);
        }
    };
    if let Ok(json) = serde_json::to_string(&result) {
        let stored: redis::RedisResult<()> = conn.set_ex(&response_key, json, RESPONSE_TTL_SECS).await;
        if let Err(e) = stored {
            tracing::warn!(error = %e, "could not cache response");
        }
    }
    let _: redis::RedisResult<()> = conn.del(&lock_key).await;
    Ok(Json(result))
}
