//! expect: none
//!
//! Warehouse pick-list generator on deadpool-postgres. The order is loaded first (business
//! data), then the per-order claim is an INSERT .. ON CONFLICT DO NOTHING whose row count
//! decides whether the pick list is sent to the warehouse system.

use deadpool_postgres::Pool;

#[async_trait::async_trait]
pub trait WarehouseApi: Send + Sync {
    async fn create_pick_list(&self, order_id: i64, sku_lines: &[(String, i32)]) -> anyhow::Result<()>;
}

pub struct PickListService<W: WarehouseApi> {
    pool: Pool,
    wms: W,
}

impl<W: WarehouseApi> PickListService<W> {
    pub async fn on_order_released(&self, order_id: i64) -> anyhow::Result<()> {
        let client = self.pool.get().await?;

        let order = client
            .query_opt("SELECT status FROM orders WHERE id = $1", &[&order_id])
            .await?;
        let Some(order) = order else {
            anyhow::bail!("order {order_id} not found");
        };
        let status: String = order.get(0);
        if status != "released" {
            return Ok(());
        }

        let inserted = client
            .execute(
                "INSERT INTO pick_list_requests (order_id, requested_at) VALUES ($1, now()) \
                 ON CONFLICT (order_id) DO NOTHING",
                &[&order_id],
            )
            .await?;
        if inserted == 0 {
            return Ok(());
        }

        let lines = client
            .query("SELECT sku, qty FROM order_lines WHERE order_id = $1", &[&order_id])
            .await?
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1)))
            .collect::<Vec<_>>();

        if let Err(e) = self.wms.create_pick_list(order_id, &lines).await {
            client
                .execute("DELETE FROM pick_list_requests WHERE order_id = $1", &[&order_id])
                .await?;
            return Err(e);
        }
        Ok(())
    }
}
