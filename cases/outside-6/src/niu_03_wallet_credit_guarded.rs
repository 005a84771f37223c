//! expect: none
//! Wallet credits from an SQS-triggered Lambda: the increment runs in the same transaction as an
//! `INSERT .. ON CONFLICT DO NOTHING` of the event id, and only when that insert wrote a row.
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde::Deserialize;
use sqlx::PgPool;

#[derive(Deserialize)]
struct CashbackEarned {
    event_id: String,
    wallet_id: i64,
    amount_cents: i64,
}

async fn apply(pool: &PgPool, ev: &CashbackEarned) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    let fresh = sqlx::query("INSERT INTO applied_events (event_id, applied_at) VALUES ($1, now()) ON CONFLICT (event_id) DO NOTHING")
        .bind(&ev.event_id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        == 1;
    if !fresh {
        tx.rollback().await?;
        return Ok(());
    }
    sqlx::query("UPDATE wallets SET balance_cents = balance_cents + $1 WHERE id = $2")
        .bind(ev.amount_cents)
        .bind(ev.wallet_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

async fn handler(pool: &PgPool, event: LambdaEvent<SqsEvent>) -> Result<(), Error> {
    for rec in event.payload.records {
        let ev: CashbackEarned = serde_json::from_str(rec.body.as_deref().unwrap_or("{}"))?;
        apply(pool, &ev).await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let pool = PgPool::connect(&std::env::var("DATABASE_URL")?).await?;
    lambda_runtime::run(service_fn(|ev| handler(&pool, ev))).await
}
