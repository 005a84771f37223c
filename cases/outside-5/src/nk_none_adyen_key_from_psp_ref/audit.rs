use chrono::Utc;
use sqlx::PgPool;

pub struct AuditLog {
    pool: PgPool,
}

impl AuditLog {
    /// Upsert of the latest state per PSP reference; repeating it is harmless.
    pub async fn record(&self, psp_reference: &str, state: &str) -> anyhow::Result<()> {
        let at = Utc::now();
        sqlx::query(
            "INSERT INTO payment_audit (psp_reference, state, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (psp_reference) DO UPDATE SET state = EXCLUDED.state, updated_at = EXCLUDED.updated_at",
        )
        .bind(psp_reference)
        .bind(state)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
