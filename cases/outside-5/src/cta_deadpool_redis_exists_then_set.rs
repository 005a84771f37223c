//! expect: check_then_act
//!
//! SMS verification-code sender behind a Kafka topic (`auth.otp.requested`). A Redis marker
//! stops re-sends, but it is checked with EXISTS and written with SETEX afterwards.

use deadpool_redis::redis::AsyncCommands;
use deadpool_redis::Pool;
use serde::Deserialize;

#[derive(Deserialize)]
pub struct OtpRequested {
    pub request_id: String,
    pub phone: String,
    pub code: String,
}

#[async_trait::async_trait]
pub trait SmsGateway: Send + Sync {
    async fn send(&self, to: &str, body: &str) -> anyhow::Result<()>;
}

pub struct OtpSender<G: SmsGateway> {
    redis: Pool,
    gateway: G,
}

impl<G: SmsGateway> OtpSender<G> {
    pub async fn on_message(&self, evt: OtpRequested) -> anyhow::Result<()> {
        let mut conn = self.redis.get().await?;
        let marker = format!("otp:sent:{}", evt.request_id);

        let already: bool = conn.exists(&marker).await?;
        if already {
            tracing::debug!(request = %evt.request_id, "otp already sent");
            return Ok(());
        }

        self.gateway
            .send(&evt.phone, &format!("Your code is {}", evt.code))
            .await?;

        let _: () = conn.set_ex(&marker, 1, 600).await?;
        Ok(())
    }
}
