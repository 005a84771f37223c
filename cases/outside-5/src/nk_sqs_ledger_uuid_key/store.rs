use deadpool_redis::{redis::cmd, Pool};

const RESERVATION_TTL_SECS: u64 = 7 * 24 * 3600;

pub struct ReservationStore {
    pool: Pool,
}

impl ReservationStore {
    pub fn new(pool: Pool) -> Self {
        Self { pool }
    }

    /// True when this caller won the reservation.
    pub async fn reserve(&self, key: &str) -> anyhow::Result<bool> {
        let mut conn = self.pool.get().await?;
        let won: Option<String> = cmd("SET")
            .arg(key)
            .arg("1")
            .arg("NX")
            .arg("EX")
            .arg(RESERVATION_TTL_SECS)
            .query_async(&mut conn)
            .await?;
        Ok(won.is_some())
    }
}
