//! expect: mark_outside_transaction
//!
//! Accounting projector: consumes `payments.settled` from SQS and books a double-entry journal
//! in Postgres. Each message is leased in `journal_inbox` (atomic upsert that only wins when
//! the row is new or its lease ran out), the journal lines are written in a transaction, and
//! the inbox row is flipped to `done` on the pool after that commit. A crash between the commit
//! and the flip lets the lease expire and the redelivered message books the journal again.

use aws_sdk_sqs::Client as Sqs;
use sqlx::PgPool;

#[derive(serde::Deserialize)]
struct PaymentSettled {
    message_id: String,
    payment_id: String,
    merchant_id: String,
    gross_cents: i64,
    fee_cents: i64,
}

pub struct Projector {
    pool: PgPool,
    sqs: Sqs,
    queue_url: String,
}

impl Projector {
    async fn lease(&self, message_id: &str) -> anyhow::Result<bool> {
        let won = sqlx::query(
            "INSERT INTO journal_inbox (message_id, status, lease_until) \
             VALUES ($1, 'processing', now() + interval '5 minutes') \
             ON CONFLICT (message_id) DO UPDATE SET lease_until = EXCLUDED.lease_until \
             WHERE journal_inbox.status = 'processing' AND journal_inbox.lease_until < now()",
        )
        .bind(message_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(won == 1)
    }

    async fn book(&self, ev: &PaymentSettled) -> anyhow::Result<()> {
        if !self.lease(&ev.message_id).await? {
            return Ok(());
        }

        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO journal_lines (payment_id, account, debit, credit) VALUES \
             ($1, 'cash', $2, 0), ($1, 'fees', $3, 0), ($1, 'merchant_payable:' || $4, 0, $2 - $3)",
        )
        .bind(&ev.payment_id)
        .bind(ev.gross_cents)
        .bind(ev.fee_cents)
        .bind(&ev.merchant_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;

        sqlx::query("UPDATE journal_inbox SET status = 'done', lease_until = NULL WHERE message_id = $1")
            .bind(&ev.message_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn poll(&self) -> anyhow::Result<()> {
        let out = self.sqs.receive_message().queue_url(&self.queue_url).wait_time_seconds(20).send().await?;
        for m in out.messages.unwrap_or_default() {
            let ev: PaymentSettled = serde_json::from_str(m.body().unwrap_or("{}"))?;
            self.book(&ev).await?;
            self.sqs
                .delete_message()
                .queue_url(&self.queue_url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await?;
        }
        Ok(())
    }
}
