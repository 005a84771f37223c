//! expect: nondeterministic_key
//!
//! Outbox relay: reads pending rows from the outbox table and publishes them to JetStream,
//! relying on the stream's duplicate window (`Nats-Msg-Id`) when the relay crashes after a
//! publish and before it deletes the row.

use std::time::{SystemTime, UNIX_EPOCH};

use async_nats::jetstream;
use async_nats::HeaderMap;
use tokio_postgres::Client;

pub struct OutboxRelay {
    js: jetstream::Context,
    db: Client,
}

impl OutboxRelay {
    pub async fn drain_once(&self) -> anyhow::Result<usize> {
        let rows = self
            .db
            .query(
                "SELECT id, subject, payload FROM outbox ORDER BY id LIMIT 100",
                &[],
            )
            .await?;

        for row in &rows {
            let id: i64 = row.get(0);
            let subject: String = row.get(1);
            let payload: Vec<u8> = row.get(2);

            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)?
                .as_nanos();
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", format!("outbox-{nanos}").as_str());

            self.js
                .publish_with_headers(subject, headers, payload.into())
                .await?
                .await?;

            self.db.execute("DELETE FROM outbox WHERE id = $1", &[&id]).await?;
        }
        Ok(rows.len())
    }
}
