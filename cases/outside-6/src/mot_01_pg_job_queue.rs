//! expect: mark_outside_transaction
//! Invoicing worker on a home-grown Postgres job queue (`FOR UPDATE SKIP LOCKED` with a lease).
//! The invoice is written and committed in one transaction; the job is marked `done` afterwards
//! on the pool. A crash between the two lets the lease expire and the job run again: a second
//! invoice for the same period.
use sqlx::{PgPool, Row};
use std::time::Duration;

#[derive(sqlx::FromRow)]
struct Job {
    id: i64,
    payload: serde_json::Value,
}

async fn next_job(pool: &PgPool) -> sqlx::Result<Option<Job>> {
    sqlx::query_as(
        "UPDATE jobs SET status = 'running', locked_until = now() + interval '10 minutes' \
         WHERE id = (SELECT id FROM jobs WHERE queue = 'invoicing' \
                       AND (status = 'queued' OR (status = 'running' AND locked_until < now())) \
                     ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) \
         RETURNING id, payload",
    )
    .fetch_optional(pool)
    .await
}

async fn issue_invoice(pool: &PgPool, job: &Job) -> anyhow::Result<()> {
    let account_id = job.payload["account_id"].as_i64().unwrap_or_default();
    let period = job.payload["period"].as_str().unwrap_or_default().to_owned();
    let mut tx = pool.begin().await?;
    let usage = sqlx::query("SELECT coalesce(sum(units), 0) AS units FROM usage_records WHERE account_id = $1 AND period = $2")
        .bind(account_id)
        .bind(&period)
        .fetch_one(&mut *tx)
        .await?;
    let units: i64 = usage.get("units");
    sqlx::query("INSERT INTO invoices (account_id, period, units, amount_cents, issued_at) VALUES ($1, $2, $3, $4, now())")
        .bind(account_id)
        .bind(&period)
        .bind(units)
        .bind(units * 12)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;

    sqlx::query("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = $1")
        .bind(job.id)
        .execute(pool)
        .await?;
    Ok(())
}

pub async fn work(pool: PgPool) -> anyhow::Result<()> {
    loop {
        let Some(job) = next_job(&pool).await? else {
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        };
        if let Err(e) = issue_invoice(&pool, &job).await {
            tracing::error!(job = job.id, error = %e, "invoice job failed");
            sqlx::query("UPDATE jobs SET status = 'failed', last_error = $2, locked_until = NULL WHERE id = $1")
                .bind(job.id)
                .bind(e.to_string())
                .execute(&pool)
                .await?;
        }
    }
}
