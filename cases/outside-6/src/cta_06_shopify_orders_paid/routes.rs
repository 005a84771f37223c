use super::inbox::WebhookInbox;
use axum::{body::Bytes, extract::State, http::{HeaderMap, StatusCode}};
use serde::Deserialize;
use sqlx::PgPool;
use std::sync::Arc;

#[derive(Clone)]
pub struct Ctx {
    pub pool: PgPool,
    pub inbox: Arc<dyn WebhookInbox>,
}

#[derive(Deserialize)]
struct OrderPaid {
    id: i64,
    line_items: Vec<serde_json::Value>,
    shipping_address: Option<serde_json::Value>,
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

pub async fn orders_paid(State(ctx): State<Ctx>, headers: HeaderMap, body: Bytes) -> StatusCode {
    match handle(&ctx, &headers, &body).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!(error = %e, "orders/paid failed");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

async fn handle(ctx: &Ctx, headers: &HeaderMap, body: &[u8]) -> anyhow::Result<StatusCode> {
    let Some(webhook_id) = header(headers, "X-Shopify-Webhook-Id") else { return Ok(StatusCode::BAD_REQUEST) };
    if ctx.inbox.seen(webhook_id).await? {
        return Ok(StatusCode::OK);
    }
    let order: OrderPaid = serde_json::from_slice(body)?;

    let mut tx = ctx.pool.begin().await?;
    if !ctx.inbox.try_record(&mut tx, webhook_id, "orders/paid").await? {
        tx.rollback().await?;
        return Ok(StatusCode::OK);
    }
    sqlx::query(
        "INSERT INTO fulfilment_requests (shopify_order_id, lines, address, status) VALUES ($1, $2, $3, 'new')",
    )
    .bind(order.id)
    .bind(serde_json::Value::Array(order.line_items))
    .bind(order.shipping_address)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(StatusCode::OK)
}
