use fred::clients::RedisPool;
use fred::prelude::*;
use fred::types::Expiration;

const PUSHED_TTL_SECS: i64 = 48 * 3600;

pub fn key_for(notification_id: &str, device_token: &str) -> String {
    format!("push:{notification_id}:{device_token}")
}

pub async fn already_pushed(redis: &RedisPool, key: &str) -> Result<bool, RedisError> {
    let status: Option<String> = redis.get(key).await?;
    Ok(matches!(status.as_deref(), Some("pushed")))
}

pub async fn mark_pushed(redis: &RedisPool, key: &str) -> Result<(), RedisError> {
    redis
        .set::<(), _, _>(key, "pushed", Some(Expiration::EX(PUSHED_TTL_SECS)), None, false)
        .await
}
