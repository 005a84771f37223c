//! expect: none
//!
//! Idempotent POST /payments (axum) for a mobile client that retries on flaky networks. A
//! completed request's response is served from Redis (fast path); otherwise the request key is
//! claimed atomically with SET NX EX before charging.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

const IN_FLIGHT_TTL: u64 = 120;
const RESULT_TTL: u64 = 24 * 3600;

#[derive(Clone)]
pub struct PaymentsState {
    pub redis: MultiplexedConnection,
    pub psp: std::sync::Arc<dyn Psp + Send + Sync>,
}

#[async_trait::async_trait]
pub trait Psp {
    async fn charge(&self, customer: &str, amount: i64, key: &str) -> anyhow::Result<String>;
}

#[derive(Deserialize)]
pub struct ChargeBody {
    customer: String,
    amount: i64,
}

#[derive(Serialize, Deserialize)]
pub struct ChargeResult {
    charge_id: String,
}

pub async fn create_payment(
    State(st): State<PaymentsState>,
    headers: HeaderMap,
    Json(body): Json<ChargeBody>,
) -> Result<Json<ChargeResult>, StatusCode> {
    let idem = headers
        .get("Idempotency-Key")
        .and_then(|v| v.to_str().ok())
        .ok_or(StatusCode::BAD_REQUEST)?;
    let result_key = format!("pay:result:{idem}");
    let lock_key = format!("pay:lock:{idem}");
    let mut redis = st.redis.clone();

    let cached: Option<String> = redis.get(&result_key).await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    if let Some(json) = cached {
        let res: ChargeResult = serde_json::from_str(&json).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
        return Ok(Json(res));
    }

    let claimed: Option<String> = redis::cmd("SET")
        .arg(&lock_key)
        .arg("in-flight")
        .arg("NX")
        .arg("EX")
        .arg(IN_FLIGHT_TTL)
        .query_async(&mut redis)
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    if claimed.is_none() {
        return Err(StatusCode::CONFLICT);
    }

    let charge_id = match st.psp.charge(&body.customer, body.amount, idem).await {
        Ok(id) => id,
        Err(_) => {
            let _: Result<(), _> = redis.del(&lock_key).await;
            return Err(StatusCode::BAD_GATEWAY);
        }
    };
    let res = ChargeResult { charge_id };
    let json = serde_json::to_string(&res).map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    let _: () = redis
        .set_ex(&result_key, json, RESULT_TTL)
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(Json(res))
}
