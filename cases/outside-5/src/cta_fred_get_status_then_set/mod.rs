//! expect: check_then_act
//!
//! Push-notification fan-out worker. Jobs arrive on a Redis stream consumer group and may be
//! claimed again by XAUTOCLAIM after a worker stalls. The "already pushed" check and the mark
//! are two helpers in `dedupe.rs`.

mod dedupe;

use fred::clients::RedisPool;
use fred::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
pub struct PushJob {
    pub notification_id: String,
    pub device_token: String,
    pub title: String,
}

#[async_trait::async_trait]
pub trait PushProvider: Send + Sync {
    async fn push(&self, device_token: &str, title: &str) -> anyhow::Result<()>;
}

pub struct PushWorker<P> {
    redis: RedisPool,
    provider: P,
}

impl<P: PushProvider> PushWorker<P> {
    pub async fn process(&self, job: PushJob) -> anyhow::Result<()> {
        let key = dedupe::key_for(&job.notification_id, &job.device_token);
        if dedupe::already_pushed(&self.redis, &key).await? {
            return Ok(());
        }
        self.provider.push(&job.device_token, &job.title).await?;
        dedupe::mark_pushed(&self.redis, &key).await?;
        Ok(())
    }
}
