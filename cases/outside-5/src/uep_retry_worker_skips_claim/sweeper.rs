use std::time::Duration;

use sqlx::PgPool;

use super::payouts::{self, BankClient};
use super::PayoutRequested;

pub struct FailedPayoutSweeper {
    pub db: PgPool,
    pub bank: BankClient,
}

impl FailedPayoutSweeper {
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(300));
            loop {
                tick.tick().await;
                if let Err(e) = self.sweep().await {
                    tracing::error!(error = %e, "sweep failed");
                }
            }
        })
    }

    async fn sweep(&self) -> anyhow::Result<()> {
        let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT p.payout_id, p.seller_id, p.iban, p.amount_cents \
             FROM payout_executions e JOIN payouts p USING (payout_id) \
             WHERE e.status = 'failed' LIMIT 50",
        )
        .fetch_all(&self.db)
        .await?;

        for (payout_id, seller_id, iban, amount_cents) in rows {
            let p = PayoutRequested { payout_id, seller_id, iban, amount_cents };
            let bank_ref = payouts::execute(&self.bank, &p).await?;
            sqlx::query("UPDATE payout_executions SET status = 'done', bank_ref = $2 WHERE payout_id = $1")
                .bind(&p.payout_id)
                .bind(bank_ref)
                .execute(&self.db)
                .await?;
        }
        Ok(())
    }
}
