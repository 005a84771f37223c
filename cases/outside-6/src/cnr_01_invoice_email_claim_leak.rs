//! expect: claim_not_released
//! Invoice mailer (SQS consumer): claims the invoice id with `SET .. NX EX 86400`, then renders
//! the PDF and sends it with `?` on each step. Any error leaves the claim; the redelivered
//! message finds it taken and the customer never gets the invoice (for a day, after which the
//! queue has given up).
use aws_sdk_sesv2::types::{Destination, EmailContent, RawMessage};
use aws_sdk_sesv2::primitives::Blob;

pub struct InvoiceMailer {
    pub sqs: aws_sdk_sqs::Client,
    pub ses: aws_sdk_sesv2::Client,
    pub redis: redis::aio::ConnectionManager,
    pub renderer: reqwest::Client,
    pub queue_url: String,
}

impl InvoiceMailer {
    async fn handle(&self, body: &str) -> anyhow::Result<()> {
        let msg: serde_json::Value = serde_json::from_str(body)?;
        let invoice_id = msg["invoice_id"].as_str().unwrap_or_default().to_owned();
        let to = msg["email"].as_str().unwrap_or_default().to_owned();
        let mut conn = self.redis.clone();
        let claimed: Option<String> = redis::cmd("SET")
            .arg(format!("invoice-mail:{invoice_id}"))
            .arg("1")
            .arg("NX")
            .arg("EX")
            .arg(86_400)
            .query_async(&mut conn)
            .await?;
        if claimed.is_none() {
            return Ok(());
        }
        let pdf = self
            .renderer
            .get(format!("http://pdf-renderer.internal/invoices/{invoice_id}.eml"))
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        self.ses
            .send_email()
            .from_email_address("billing@example.com")
            .destination(Destination::builder().to_addresses(to).build())
            .content(EmailContent::builder().raw(RawMessage::builder().data(Blob::new(pdf.to_vec())).build()?).build())
            .send()
            .await?;
        Ok(())
    }

    pub async fn run(&self) -> anyhow::Result<()> {
        loop {
            let out = self.sqs.receive_message().queue_url(&self.queue_url).wait_time_seconds(20).send().await?;
            for m in out.messages() {
                match self.handle(m.body().unwrap_or_default()).await {
                    Ok(()) => {
                        self.sqs.delete_message().queue_url(&self.queue_url).receipt_handle(m.receipt_handle().unwrap_or_default()).send().await?;
                    }
                    Err(e) => tracing::warn!(error = %e, "invoice mail failed; will be redelivered"),
                }
            }
        }
    }
}
