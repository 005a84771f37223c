use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions};
use lapin::types::FieldTable;
use lapin::Channel;
use sqlx::PgPool;

use super::payouts::{self, BankClient};
use super::PayoutRequested;

pub struct PayoutConsumer {
    pub db: PgPool,
    pub bank: BankClient,
}

impl PayoutConsumer {
    pub async fn run(&self, ch: Channel) -> anyhow::Result<()> {
        let mut deliveries = ch
            .basic_consume("payouts.requested", "payout-consumer", BasicConsumeOptions::default(), FieldTable::default())
            .await?;
        while let Some(delivery) = deliveries.next().await {
            let delivery = delivery?;
            let p: PayoutRequested = serde_json::from_slice(&delivery.data)?;
            match self.process(&p).await {
                Ok(()) => delivery.ack(BasicAckOptions::default()).await?,
                Err(e) => {
                    tracing::warn!(payout = %p.payout_id, error = %e, "payout failed");
                    delivery.nack(BasicNackOptions { requeue: false, ..Default::default() }).await?;
                }
            }
        }
        Ok(())
    }

    async fn process(&self, p: &PayoutRequested) -> anyhow::Result<()> {
        let claimed = sqlx::query(
            "INSERT INTO payout_executions (payout_id, status) VALUES ($1, 'executing') \
             ON CONFLICT (payout_id) DO NOTHING",
        )
        .bind(&p.payout_id)
        .execute(&self.db)
        .await?
        .rows_affected();
        if claimed == 0 {
            return Ok(());
        }

        match payouts::execute(&self.bank, p).await {
            Ok(bank_ref) => {
                sqlx::query("UPDATE payout_executions SET status = 'done', bank_ref = $2 WHERE payout_id = $1")
                    .bind(&p.payout_id)
                    .bind(bank_ref)
                    .execute(&self.db)
                    .await?;
                Ok(())
            }
            Err(e) => {
                sqlx::query("UPDATE payout_executions SET status = 'failed' WHERE payout_id = $1")
                    .bind(&p.payout_id)
                    .execute(&self.db)
                    .await?;
                Err(e)
            }
        }
    }
}
