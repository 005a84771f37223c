use sea_orm::entity::prelude::*;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveValue::Set, DatabaseConnection};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "refund_claims")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub request_id: String,
    pub claimed_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

/// True when this caller inserted the claim row.
pub async fn claim(db: &DatabaseConnection, request_id: &str) -> Result<bool, DbErr> {
    let row = ActiveModel {
        request_id: Set(request_id.to_owned()),
        claimed_at: Set(chrono::Utc::now()),
    };
    let inserted = Entity::insert(row)
        .on_conflict(OnConflict::column(Column::RequestId).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(inserted == 1)
}
