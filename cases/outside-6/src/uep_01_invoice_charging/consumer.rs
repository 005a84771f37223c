use super::billing::{self, Gateway, Invoice};
use redis::aio::ConnectionManager;
use sqlx::PgPool;

const CLAIM_SECS: u64 = 24 * 3600;

async fn claim(redis: &mut ConnectionManager, invoice_id: i64) -> redis::RedisResult<bool> {
    let won: Option<String> = redis::cmd("SET")
        .arg(format!("charge-claim:{invoice_id}"))
        .arg("1")
        .arg("NX")
        .arg("EX")
        .arg(CLAIM_SECS)
        .query_async(redis)
        .await?;
    Ok(won.is_some())
}

pub async fn run(sqs: aws_sdk_sqs::Client, queue_url: String, pool: PgPool, mut redis: ConnectionManager, gw: Gateway) -> anyhow::Result<()> {
    loop {
        let out = sqs.receive_message().queue_url(&queue_url).wait_time_seconds(20).send().await?;
        for m in out.messages() {
            let invoice_id: i64 = m.body().unwrap_or_default().trim().parse()?;
            if !claim(&mut redis, invoice_id).await? {
                tracing::info!(invoice_id, "already charged or in flight");
                continue;
            }
            let found: Result<Invoice, sqlx::Error> =
                sqlx::query_as("SELECT id, payment_method_id, amount::text AS amount, currency FROM invoices WHERE id = $1")
                    .bind(invoice_id)
                    .fetch_one(&pool)
                    .await;
            let inv = match found {
                Ok(inv) => inv,
                Err(e) => {
                    tracing::error!(invoice_id, error = %e, "invoice lookup failed");
                    let _: redis::RedisResult<()> = redis::cmd("DEL").arg(format!("charge-claim:{invoice_id}")).query_async(&mut redis).await;
                    continue;
                }
            };
            match billing::charge_invoice(&gw, &pool, &inv).await {
                Ok(txn) => tracing::info!(invoice_id, %txn, "charged"),
                Err(e) => {
                    tracing::warn!(invoice_id, error = %e, "charge failed");
                    let _: redis::RedisResult<()> = redis::cmd("DEL").arg(format!("charge-claim:{invoice_id}")).query_async(&mut redis).await;
                    let _ = sqlx::query("UPDATE invoices SET status = 'charge_failed' WHERE id = $1").bind(invoice_id).execute(&pool).await;
                }
            }
            sqs.delete_message().queue_url(&queue_url).receipt_handle(m.receipt_handle().unwrap_or_default()).send().await?;
        }
    }
}
