//! expect: none
//!
//! Tax-document projector on the `invoices.issued` Kafka topic. The inbox claim, the business
//! rows and the commit are one sqlx transaction: the claim is `INSERT .. ON CONFLICT DO
//! NOTHING` on the transaction with its row count tested, and the offset is committed only
//! after the database commit, so a replay finds the inbox row and does nothing.

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message;
use sqlx::{PgPool, Postgres, Transaction};

#[derive(serde::Deserialize)]
struct InvoiceIssued {
    event_id: uuid::Uuid,
    invoice_id: String,
    country: String,
    net_cents: i64,
    vat_cents: i64,
}

async fn claim(tx: &mut Transaction<'_, Postgres>, event_id: uuid::Uuid) -> sqlx::Result<bool> {
    let r = sqlx::query("INSERT INTO tax_inbox (event_id) VALUES ($1) ON CONFLICT (event_id) DO NOTHING")
        .bind(event_id)
        .execute(&mut **tx)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn run(pool: PgPool, consumer: StreamConsumer) -> anyhow::Result<()> {
    consumer.subscribe(&["invoices.issued"])?;
    loop {
        let msg = consumer.recv().await?;
        let ev: InvoiceIssued = match msg.payload().map(serde_json::from_slice) {
            Some(Ok(ev)) => ev,
            _ => {
                consumer.commit_message(&msg, CommitMode::Async)?;
                continue;
            }
        };

        let mut tx = pool.begin().await?;
        if claim(&mut tx, ev.event_id).await? {
            sqlx::query(
                "INSERT INTO vat_ledger (invoice_id, country, net_cents, vat_cents) VALUES ($1, $2, $3, $4)",
            )
            .bind(&ev.invoice_id)
            .bind(&ev.country)
            .bind(ev.net_cents)
            .bind(ev.vat_cents)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE vat_totals SET vat_cents = vat_cents + $2 WHERE country = $1")
                .bind(&ev.country)
                .bind(ev.vat_cents)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        consumer.commit_message(&msg, CommitMode::Sync)?;
    }
}
