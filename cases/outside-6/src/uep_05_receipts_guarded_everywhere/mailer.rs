use aws_sdk_sesv2::types::{Destination, EmailContent, Template};
use redis::aio::ConnectionManager;

#[derive(Clone)]
pub struct Mailer {
    pub ses: aws_sdk_sesv2::Client,
    pub redis: ConnectionManager,
}

pub struct Receipt {
    pub payment_id: String,
    pub email: String,
    pub amount: String,
}

const SENT_TTL_SECS: u64 = 30 * 24 * 3600;

/// Sends the receipt at most once per `dedupe_key`.
pub async fn send_receipt_once(m: &Mailer, dedupe_key: &str, r: &Receipt) -> anyhow::Result<bool> {
    let mut conn = m.redis.clone();
    let claimed: bool = redis::cmd("SET")
        .arg(format!("receipt:{dedupe_key}"))
        .arg(&r.payment_id)
        .arg("NX")
        .arg("EX")
        .arg(SENT_TTL_SECS)
        .query_async::<Option<String>>(&mut conn)
        .await?
        .is_some();
    if !claimed {
        return Ok(false);
    }
    let data = serde_json::json!({ "payment_id": r.payment_id, "amount": r.amount }).to_string();
    let sent = m
        .ses
        .send_email()
        .from_email_address("receipts@shop.example")
        .destination(Destination::builder().to_addresses(&r.email).build())
        .content(EmailContent::builder().template(Template::builder().template_name("receipt").template_data(data).build()).build())
        .send()
        .await;
    if let Err(e) = sent {
        let _: redis::RedisResult<()> = redis::cmd("DEL").arg(format!("receipt:{dedupe_key}")).query_async(&mut conn).await;
        return Err(e.into());
    }
    Ok(true)
}
