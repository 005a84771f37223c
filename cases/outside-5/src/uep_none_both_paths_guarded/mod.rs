//! expect: none
//!
//! Partner-commission payouts. Two entry points reach the payout: the partner platform's
//! webhook (warp) and a DLQ redrive worker (SQS). Both go through `Pipeline::process`, which
//! claims the conversion id in DynamoDB with a conditional put before paying.

mod pipeline;
mod redrive;
mod web;

pub use pipeline::Pipeline;
pub use redrive::RedriveWorker;
pub use web::routes;

#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct ConversionApproved {
    pub conversion_id: String,
    pub partner_id: String,
    pub commission_cents: i64,
}
