use std::sync::atomic::{AtomicI64, Ordering};

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, DatabaseConnection, DbErr, EntityTrait, QueryFilter,
    ColumnTrait, TransactionTrait,
};

use super::entities::{checkpoint, customer_totals};

#[derive(serde::Deserialize)]
struct OrderPlaced {
    customer_id: String,
    total_cents: i64,
}

pub struct Projector {
    db: DatabaseConnection,
    name: String,
    last_seq: AtomicI64,
}

impl Projector {
    pub async fn load(db: DatabaseConnection, name: &str) -> Result<Self, DbErr> {
        let cp = checkpoint::Entity::find_by_id(name.to_string()).one(&db).await?;
        Ok(Self {
            db,
            name: name.to_string(),
            last_seq: AtomicI64::new(cp.map(|c| c.last_sequence).unwrap_or(0)),
        })
    }

    pub async fn handle(&self, seq: u64, payload: &[u8]) -> anyhow::Result<()> {
        let seq = seq as i64;
        if seq <= self.last_seq.load(Ordering::SeqCst) {
            return Ok(());
        }
        let ev: OrderPlaced = serde_json::from_slice(payload)?;

        self.db
            .transaction::<_, (), DbErr>(|txn| {
                Box::pin(async move {
                    customer_totals::Entity::update_many()
                        .col_expr(
                            customer_totals::Column::OrderCount,
                            Expr::col(customer_totals::Column::OrderCount).add(1),
                        )
                        .col_expr(
                            customer_totals::Column::LifetimeCents,
                            Expr::col(customer_totals::Column::LifetimeCents).add(ev.total_cents),
                        )
                        .filter(customer_totals::Column::CustomerId.eq(ev.customer_id.clone()))
                        .exec(txn)
                        .await?;
                    Ok(())
                })
            })
            .await?;

        checkpoint::ActiveModel {
            projection: Set(self.name.clone()),
            last_sequence: Set(seq),
        }
        .update(&self.db)
        .await?;
        self.last_seq.store(seq, Ordering::SeqCst);
        Ok(())
    }
}
