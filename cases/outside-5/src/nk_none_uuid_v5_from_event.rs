//! expect: none
//!
//! Invoice e-mail consumer on Google-style push via axum: the dedupe key is a name-based UUID
//! (v5) of the billing event id, so every redelivery maps to the same key. The random v4 is
//! only a trace id for logs.

use axum::{extract::State, http::StatusCode, Json};
use redis::aio::ConnectionManager;
use redis::AsyncCommands;
use serde::Deserialize;
use uuid::Uuid;

const INVOICE_NS: Uuid = Uuid::from_u128(0x6f1c_9a52_47e1_4c2b_9d3e_1b8a_77c0_4e11);

#[derive(Clone)]
pub struct Ctx {
    redis: ConnectionManager,
    mailer: std::sync::Arc<dyn Mailer + Send + Sync>,
}

#[async_trait::async_trait]
pub trait Mailer {
    async fn send_invoice(&self, customer: &str, invoice_id: &str) -> anyhow::Result<()>;
}

#[derive(Deserialize)]
pub struct InvoiceFinalized {
    pub event_id: String,
    pub invoice_id: String,
    pub customer_email: String,
}

pub async fn invoice_finalized(
    State(ctx): State<Ctx>,
    Json(evt): Json<InvoiceFinalized>,
) -> StatusCode {
    let trace_id = Uuid::new_v4();
    let span = tracing::info_span!("invoice_finalized", %trace_id, event = %evt.event_id);
    let _g = span.enter();

    let dedupe = Uuid::new_v5(&INVOICE_NS, evt.event_id.as_bytes());
    let key = format!("invoice-mail:{dedupe}");

    let mut redis = ctx.redis.clone();
    let opts = redis::SetOptions::default()
        .conditional_set(redis::ExistenceCheck::NX)
        .with_expiration(redis::SetExpiry::EX(3 * 24 * 3600));
    let first: Option<String> = match redis.set_options(&key, "sent", opts).await {
        Ok(v) => v,
        Err(_) => return StatusCode::SERVICE_UNAVAILABLE,
    };
    if first.is_none() {
        return StatusCode::OK;
    }

    match ctx.mailer.send_invoice(&evt.customer_email, &evt.invoice_id).await {
        Ok(()) => StatusCode::OK,
        Err(_) => {
            let _: Result<(), _> = redis.del(&key).await;
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}
