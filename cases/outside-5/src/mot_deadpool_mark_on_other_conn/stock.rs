use tokio_postgres::Transaction;

pub async fn decrement_stock(tx: &Transaction<'_>, sku: &str, qty: i32) -> anyhow::Result<()> {
    let n = tx
        .execute(
            "UPDATE stock_levels SET on_hand = on_hand - $2 WHERE sku = $1 AND on_hand >= $2",
            &[&sku, &qty],
        )
        .await?;
    if n == 0 {
        anyhow::bail!("insufficient stock for {sku}");
    }
    Ok(())
}
