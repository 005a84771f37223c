//! expect: mark_outside_transaction
//!
//! Inventory reservation consumer (deadpool-postgres). The inbox row (primary key on the
//! message id) is meant to make a duplicate fail and roll the stock decrement back. But the
//! decrement runs in a transaction on one pooled client while `Inbox::mark_done` takes its own
//! client from the pool: the mark commits on its own, before and independently of the
//! decrement, so a failed or interrupted commit leaves the message marked with no reservation.

mod inbox;
mod stock;

use deadpool_postgres::Pool;

use self::inbox::Inbox;
use self::stock::decrement_stock;

#[derive(serde::Deserialize)]
pub struct ReserveStock {
    pub message_id: String,
    pub sku: String,
    pub qty: i32,
}

pub struct ReservationConsumer {
    pool: Pool,
    inbox: Inbox,
}

impl ReservationConsumer {
    pub async fn handle(&self, msg: ReserveStock) -> anyhow::Result<()> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        decrement_stock(&tx, &msg.sku, msg.qty).await?;
        self.inbox.mark_done(&msg.message_id).await?;
        tx.commit().await?;
        Ok(())
    }
}
