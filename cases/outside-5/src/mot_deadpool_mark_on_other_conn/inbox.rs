use deadpool_postgres::Pool;

pub struct Inbox {
    pub pool: Pool,
}

impl Inbox {
    /// Fails with a unique violation when the message was already handled.
    pub async fn mark_done(&self, message_id: &str) -> anyhow::Result<()> {
        let client = self.pool.get().await?;
        client
            .execute(
                "INSERT INTO inventory_inbox (message_id, processed_at) VALUES ($1, now())",
                &[&message_id],
            )
            .await?;
        Ok(())
    }
}
