//! expect: nondeterministic_key
//!
//! Support-tool webhook: the helpdesk posts "refund approved" events; we forward a refund to
//! Stripe with an Idempotency-Key header. The helpdesk retries on any non-2xx.

use axum::{extract::State, http::StatusCode, routing::post, Json, Router};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    http: reqwest::Client,
    stripe_secret: Arc<str>,
}

#[derive(Deserialize)]
pub struct RefundApproved {
    pub ticket_id: String,
    pub payment_intent: String,
    pub amount: i64,
}

#[derive(Serialize)]
struct RefundForm<'a> {
    payment_intent: &'a str,
    amount: i64,
    reason: &'a str,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/hooks/helpdesk/refund-approved", post(refund_approved))
        .with_state(state)
}

async fn refund_approved(
    State(state): State<AppState>,
    Json(evt): Json<RefundApproved>,
) -> Result<StatusCode, StatusCode> {
    let idempotency_key = format!(
        "refund-{}-{}",
        evt.payment_intent,
        Utc::now().timestamp_millis()
    );

    let resp = state
        .http
        .post("https://api.stripe.com/v1/refunds")
        .bearer_auth(&*state.stripe_secret)
        .header("Idempotency-Key", idempotency_key)
        .form(&RefundForm {
            payment_intent: &evt.payment_intent,
            amount: evt.amount,
            reason: "requested_by_customer",
        })
        .send()
        .await
        .map_err(|_| StatusCode::BAD_GATEWAY)?;

    if resp.status().is_success() {
        tracing::info!(ticket = %evt.ticket_id, "refund created");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(StatusCode::BAD_GATEWAY)
    }
}
