use async_trait::async_trait;
use sqlx::PgPool;

pub struct Settlement {
    pub settlement_id: String,
    pub merchant_id: String,
    pub gross_minor: i64,
    pub fee_minor: i64,
}

#[async_trait]
pub trait Ledger: Send + Sync {
    async fn post_settlement(&self, s: &Settlement) -> anyhow::Result<()>;
}

pub struct PgLedger {
    pub pool: PgPool,
}

#[async_trait]
impl Ledger for PgLedger {
    async fn post_settlement(&self, s: &Settlement) -> anyhow::Result<()> {
        let mut tx = self.pool.begin().await?;
        let journal_id: i64 = sqlx::query_scalar("INSERT INTO journals (source, source_id) VALUES ('settlement', $1) RETURNING id")
            .bind(&s.settlement_id)
            .fetch_one(&mut *tx)
            .await?;
        for (account, amount) in [
            ("merchant_payable", s.gross_minor - s.fee_minor),
            ("fee_revenue", s.fee_minor),
            ("scheme_receivable", -s.gross_minor),
        ] {
            sqlx::query("INSERT INTO postings (journal_id, merchant_id, account, amount_minor) VALUES ($1, $2, $3, $4)")
                .bind(journal_id)
                .bind(&s.merchant_id)
                .bind(account)
                .bind(amount)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
