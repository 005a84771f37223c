//! expect: none
//!
//! Password-reset mailer consuming `auth.password_reset` from RabbitMQ (lapin). SES v2
//! SendEmail has no idempotency token, so the consumer claims the message id in Redis with one
//! SET NX EX before sending.

use aws_sdk_sesv2::types::{Destination, EmailContent, Template};
use aws_sdk_sesv2::Client as Ses;
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions};
use lapin::types::FieldTable;
use lapin::Channel;
use redis::aio::ConnectionManager;
use redis::{ExistenceCheck, SetExpiry, SetOptions};

pub struct ResetMailer {
    ses: Ses,
    redis: ConnectionManager,
    from: String,
}

#[derive(serde::Deserialize)]
struct ResetRequested {
    email: String,
    reset_url: String,
}

impl ResetMailer {
    pub async fn run(mut self, ch: Channel) -> anyhow::Result<()> {
        let mut consumer = ch
            .basic_consume("auth.password_reset", "reset-mailer", BasicConsumeOptions::default(), FieldTable::default())
            .await?;
        while let Some(d) = consumer.next().await {
            let d = d?;
            match self.handle(&d).await {
                Ok(()) => d.ack(BasicAckOptions::default()).await?,
                Err(_) => d.nack(BasicNackOptions { requeue: true, ..Default::default() }).await?,
            }
        }
        Ok(())
    }

    async fn handle(&mut self, d: &Delivery) -> anyhow::Result<()> {
        let msg_id = d
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .ok_or_else(|| anyhow::anyhow!("publisher must set message_id"))?;
        let req: ResetRequested = serde_json::from_slice(&d.data)?;

        let opts = SetOptions::default()
            .conditional_set(ExistenceCheck::NX)
            .with_expiration(SetExpiry::EX(86_400));
        let won: bool = redis::AsyncCommands::set_options::<_, _, Option<String>>(
            &mut self.redis,
            format!("reset-mail:{msg_id}"),
            1,
            opts,
        )
        .await?
        .is_some();
        if !won {
            return Ok(());
        }

        self.ses
            .send_email()
            .from_email_address(&self.from)
            .destination(Destination::builder().to_addresses(&req.email).build())
            .content(
                EmailContent::builder()
                    .template(
                        Template::builder()
                            .template_name("password-reset")
                            .template_data(serde_json::json!({ "url": req.reset_url }).to_string())
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await?;
        Ok(())
    }
}
