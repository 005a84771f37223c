use async_graphql::{Context, Object, Result};
use sea_orm::DatabaseConnection;

use super::claims;
use super::refunds::RefundService;
use super::RefundRequest;

pub struct CareMutation;

#[Object]
impl CareMutation {
    async fn issue_refund(&self, ctx: &Context<'_>, input: RefundRequest) -> Result<Option<String>> {
        let db = ctx.data::<DatabaseConnection>()?;
        let refunds = ctx.data::<RefundService>()?;
        if !claims::claim(db, &input.request_id).await? {
            return Ok(None);
        }
        let id = refunds.issue(&input).await?;
        Ok(Some(id))
    }
}
