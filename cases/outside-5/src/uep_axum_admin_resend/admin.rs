use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::AppState;

pub async fn resend_confirmation(
    State(st): State<AppState>,
    Path(order_id): Path<String>,
) -> Result<StatusCode, StatusCode> {
    let email = st.orders.customer_email(&order_id).await.map_err(|_| StatusCode::NOT_FOUND)?;
    tracing::info!(%order_id, "admin resend of order confirmation");
    st.mailer
        .send_confirmation(&order_id, &email)
        .await
        .map_err(|_| StatusCode::BAD_GATEWAY)?;
    Ok(StatusCode::ACCEPTED)
}
