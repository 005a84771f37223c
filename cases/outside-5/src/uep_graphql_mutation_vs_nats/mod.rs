//! expect: unguarded_entry_point
//!
//! Customer-care refunds. Agents issue refunds from the console through the `issueRefund`
//! GraphQL mutation, which claims the refund request id (sea-orm, ON CONFLICT DO NOTHING) before
//! calling Stripe. The fraud service publishes `refunds.requested` on NATS for automatic
//! refunds; that listener calls the same refund service with no claim.

pub mod claims;
pub mod listener;
pub mod refunds;
pub mod schema;

#[derive(Debug, Clone, serde::Deserialize, async_graphql::InputObject)]
pub struct RefundRequest {
    pub request_id: String,
    pub payment_intent: String,
    pub amount_cents: i64,
}
