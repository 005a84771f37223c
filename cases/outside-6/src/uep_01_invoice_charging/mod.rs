//! expect: unguarded_entry_point
//! Billing service. `consumer.rs` charges due invoices from SQS behind a Redis claim on the
//! invoice id; `sweeper.rs`, a cron loop that retries invoices marked `charge_failed`, calls the
//! same charge in `billing.rs` directly. A sweep racing a redelivery charges the card twice.
pub mod billing;
pub mod consumer;
pub mod sweeper;
