use sqlx::PgPool;

/// Takes the message for 5 minutes unless it is done or held by another consumer.
pub async fn claim(pool: &PgPool, message_id: &str) -> sqlx::Result<bool> {
    let row: Option<String> = sqlx::query_scalar(
        "INSERT INTO inbox (message_id, status, lease_until) VALUES ($1, 'processing', now() + interval '5 minutes') \
         ON CONFLICT (message_id) DO UPDATE SET status = 'processing', lease_until = EXCLUDED.lease_until \
           WHERE inbox.status <> 'processed' AND inbox.lease_until < now() \
         RETURNING message_id",
    )
    .bind(message_id)
    .fetch_optional(pool)
    .await?;
    Ok(row.is_some())
}

pub async fn release(pool: &PgPool, message_id: &str) {
    let _ = sqlx::query("UPDATE inbox SET lease_until = now() WHERE message_id = $1 AND status = 'processing'")
        .bind(message_id)
        .execute(pool)
        .await;
}

pub async fn mark_processed(pool: &PgPool, message_id: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE inbox SET status = 'processed', processed_at = now() WHERE message_id = $1")
        .bind(message_id)
        .execute(pool)
        .await?;
    Ok(())
}
