use super::billing::{self, Gateway, Invoice};
use sqlx::PgPool;
use std::time::Duration;

/// Every ten minutes, try the failed invoices again.
pub async fn sweep_forever(pool: PgPool, gw: Gateway) {
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    loop {
        tick.tick().await;
        let failed: Vec<Invoice> = match sqlx::query_as(
            "SELECT id, payment_method_id, amount::text AS amount, currency FROM invoices WHERE status = 'charge_failed' LIMIT 200",
        )
        .fetch_all(&pool)
        .await
        {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "sweep query failed");
                continue;
            }
        };
        for inv in failed {
            if let Err(e) = billing::charge_invoice(&gw, &pool, &inv).await {
                tracing::warn!(invoice = inv.id, error = %e, "retry charge failed");
            }
        }
    }
}
