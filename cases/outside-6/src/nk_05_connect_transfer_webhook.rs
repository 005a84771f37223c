//! expect: none
//! Marketplace: a Stripe webhook (`charge.succeeded`) pays the seller's share to the connected
//! account. The Idempotency-Key comes from the Stripe event id; the clock and a fresh UUID only
//! feed a metadata field and a tracing header.
use axum::{body::Bytes, extract::State, http::{HeaderMap, StatusCode}};
use chrono::Utc;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use std::sync::Arc;
use uuid::Uuid;

pub struct AppState {
    pub http: reqwest::Client,
    pub stripe_key: String,
    pub webhook_secret: String,
    pub platform_fee_bps: i64,
}

#[derive(Deserialize)]
struct StripeEvent {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    data: EventData,
}

#[derive(Deserialize)]
struct EventData {
    object: Charge,
}

#[derive(Deserialize)]
struct Charge {
    id: String,
    amount: i64,
    currency: String,
    metadata: std::collections::HashMap<String, String>,
}

fn verify(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let Some(sig) = headers.get("Stripe-Signature").and_then(|v| v.to_str().ok()) else { return false };
    let mut t = "";
    let mut v1 = "";
    for part in sig.split(',') {
        if let Some(x) = part.strip_prefix("t=") { t = x }
        if let Some(x) = part.strip_prefix("v1=") { v1 = x }
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes()) == v1
}

pub async fn stripe_webhook(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if !verify(&st.webhook_secret, &headers, &body) {
        return StatusCode::BAD_REQUEST;
    }
    let Ok(event) = serde_json::from_slice::<StripeEvent>(&body) else { return StatusCode::BAD_REQUEST };
    if event.kind != "charge.succeeded" {
        return StatusCode::OK;
    }
    let charge = event.data.object;
    let Some(seller) = charge.metadata.get("seller_account").cloned() else { return StatusCode::OK };
    let seller_share = charge.amount - charge.amount * st.platform_fee_bps / 10_000;

    let forwarded_at = Utc::now().to_rfc3339();
    let trace_id = Uuid::new_v4().to_string();
    let idempotency_key = format!("seller-transfer:{}", event.id);
    let amount = seller_share.to_string();
    let form = [
        ("amount", amount.as_str()),
        ("currency", charge.currency.as_str()),
        ("destination", seller.as_str()),
        ("source_transaction", charge.id.as_str()),
        ("metadata[forwarded_at]", forwarded_at.as_str()),
    ];
    let res = st
        .http
        .post("https://api.stripe.com/v1/transfers")
        .basic_auth(&st.stripe_key, Option::<&str>::None)
        .header("Idempotency-Key", idempotency_key)
        .header("X-Request-Id", trace_id)
        .form(&form)
        .send()
        .await;
    match res {
        Ok(r) if r.status().is_success() => StatusCode::OK,
        Ok(r) => {
            tracing::warn!(status = %r.status(), "transfer rejected");
            StatusCode::INTERNAL_SERVER_ERROR
        }
        Err(e) => {
            tracing::warn!(error = %e, "transfer failed");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}
