//! expect: unguarded_entry_point
//!
//! Marketplace payouts. The AMQP consumer claims each payout in Postgres
//! (`INSERT .. ON CONFLICT DO NOTHING`, rows affected tested) before calling the bank API.
//! A separate sweeper re-executes payouts left in `failed` state by calling the bank API
//! directly, while a redelivered AMQP message for the same payout may be in flight.

mod consumer;
mod payouts;
mod sweeper;

pub use consumer::PayoutConsumer;
pub use sweeper::FailedPayoutSweeper;

#[derive(Debug, Clone, serde::Deserialize)]
pub struct PayoutRequested {
    pub payout_id: String,
    pub seller_id: String,
    pub iban: String,
    pub amount_cents: i64,
}
