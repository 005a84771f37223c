//! expect: none
//! Same queue shape as a payout worker: the payout row and the job's `done` status are written
//! in one transaction, so either both commit or the job is retried with no payout recorded.
use sqlx::PgPool;
use std::time::Duration;

#[derive(sqlx::FromRow)]
struct Job {
    id: i64,
    payload: serde_json::Value,
}

async fn next_job(pool: &PgPool) -> sqlx::Result<Option<Job>> {
    sqlx::query_as(
        "UPDATE jobs SET status = 'running', locked_until = now() + interval '5 minutes' \
         WHERE id = (SELECT id FROM jobs WHERE queue = 'payout-ledger' \
                       AND (status = 'queued' OR (status = 'running' AND locked_until < now())) \
                     ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) \
         RETURNING id, payload",
    )
    .fetch_optional(pool)
    .await
}

async fn book_payout(pool: &PgPool, job: &Job) -> anyhow::Result<()> {
    let payout_id = job.payload["payout_id"].as_str().unwrap_or_default().to_owned();
    let amount: i64 = job.payload["amount_cents"].as_i64().unwrap_or_default();
    let mut tx = pool.begin().await?;
    sqlx::query(
        "INSERT INTO ledger_lines (payout_id, account, amount_cents) VALUES ($1, 'payouts_payable', $2), ($1, 'cash', -$2)",
    )
    .bind(&payout_id)
    .bind(amount)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = $1")
        .bind(job.id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn work(pool: PgPool) -> anyhow::Result<()> {
    loop {
        let Some(job) = next_job(&pool).await? else {
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        };
        if let Err(e) = book_payout(&pool, &job).await {
            tracing::error!(job = job.id, error = %e, "payout booking failed");
            sqlx::query("UPDATE jobs SET status = 'failed', last_error = $2, locked_until = NULL WHERE id = $1")
                .bind(job.id)
                .bind(e.to_string())
                .execute(&pool)
                .await?;
        }
    }
}
