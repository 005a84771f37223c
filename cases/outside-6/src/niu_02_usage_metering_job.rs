//! expect: non_idempotent_update
//! API metering: the gateway enqueues a `RecordUsage` apalis job (Redis storage) per request
//! batch; the job adds the batch to the tenant's monthly counter with HINCRBY. apalis retries a
//! job whose worker died after the increment, so the batch is billed twice.
use apalis::prelude::*;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordUsage {
    pub batch_id: String,
    pub tenant_id: String,
    pub month: String,
    pub api_calls: i64,
    pub egress_bytes: i64,
}

pub async fn record_usage(job: RecordUsage, redis: Data<redis::aio::ConnectionManager>) -> Result<(), Error> {
    let mut conn = (*redis).clone();
    let key = format!("usage:{}:{}", job.tenant_id, job.month);
    let fail = |e: redis::RedisError| Error::Failed(std::sync::Arc::new(Box::new(e)));
    let _: i64 = conn.hincr(&key, "api_calls", job.api_calls).await.map_err(fail)?;
    let _: i64 = conn.hincr(&key, "egress_bytes", job.egress_bytes).await.map_err(fail)?;
    tracing::debug!(batch = %job.batch_id, "usage recorded");
    Ok(())
}
