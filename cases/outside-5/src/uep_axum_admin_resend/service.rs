use axum::extract::{Path, State};
use axum::http::StatusCode;
use sqlx::PgPool;

use super::AppState;

pub struct OrderService {
    pub db: PgPool,
}

impl OrderService {
    pub async fn customer_email(&self, order_id: &str) -> anyhow::Result<String> {
        let (email,): (String,) = sqlx::query_as("SELECT email FROM orders WHERE id = $1")
            .bind(order_id)
            .fetch_one(&self.db)
            .await?;
        Ok(email)
    }
}

pub async fn confirm_order(
    State(st): State<AppState>,
    Path(order_id): Path<String>,
) -> Result<StatusCode, StatusCode> {
    let key = format!("order-confirmation:{order_id}");
    let first = st
        .guard
        .claim(&key, 30 * 24 * 3600)
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    if !first {
        return Ok(StatusCode::OK);
    }
    let email = st.orders.customer_email(&order_id).await.map_err(|_| StatusCode::NOT_FOUND)?;
    st.mailer
        .send_confirmation(&order_id, &email)
        .await
        .map_err(|_| StatusCode::BAD_GATEWAY)?;
    Ok(StatusCode::ACCEPTED)
}
