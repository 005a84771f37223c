use redis::aio::ConnectionManager;

pub struct RedisGuard {
    pub conn: ConnectionManager,
}

impl RedisGuard {
    /// Atomically claims `key` for `ttl_secs`; true when this caller is first.
    pub async fn claim(&self, key: &str, ttl_secs: u64) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        let r: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(ttl_secs)
            .query_async(&mut conn)
            .await?;
        Ok(r.is_some())
    }
}
