use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;

use super::Transfer;

pub struct WalletLedger {
    pub ddb: Client,
    pub table: String,
}

impl WalletLedger {
    fn balance_update(&self, wallet: &str, delta: i64) -> anyhow::Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .key("wallet_id", AttributeValue::S(wallet.to_string()))
            .update_expression("SET balance = balance + :d")
            .condition_expression("balance + :d >= :zero")
            .expression_attribute_values(":d", AttributeValue::N(delta.to_string()))
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .build()?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    pub async fn apply(&self, t: &Transfer) -> anyhow::Result<()> {
        let items = vec![
            self.balance_update(&t.from_wallet, -t.amount)?,
            self.balance_update(&t.to_wallet, t.amount)?,
        ];
        self.ddb
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await?;
        Ok(())
    }
}
