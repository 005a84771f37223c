//! expect: non_idempotent_update
//! Shopify `orders/paid` webhook credits loyalty points with `points = points + $1`. Shopify
//! retries a webhook that timed out or got a non-2xx; every retry credits again.
use axum::{body::Bytes, extract::State, http::{HeaderMap, StatusCode}};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use sqlx::PgPool;

#[derive(Clone)]
pub struct Ctx {
    pub pool: PgPool,
    pub shopify_secret: String,
}

fn valid(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let Some(sig) = headers.get("X-Shopify-Hmac-Sha256").and_then(|v| v.to_str().ok()) else { return false };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(body);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()) == sig
}

pub async fn orders_paid(State(ctx): State<Ctx>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if !valid(&ctx.shopify_secret, &headers, &body) {
        return StatusCode::UNAUTHORIZED;
    }
    let Ok(order) = serde_json::from_slice::<serde_json::Value>(&body) else { return StatusCode::BAD_REQUEST };
    let Some(customer_id) = order["customer"]["id"].as_i64() else { return StatusCode::OK };
    let subtotal: f64 = order["subtotal_price"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let points = subtotal.floor() as i64;

    let res = sqlx::query("UPDATE loyalty_members SET points = points + $1, updated_at = now() WHERE shopify_customer_id = $2")
        .bind(points)
        .bind(customer_id)
        .execute(&ctx.pool)
        .await;
    match res {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
