//! expect: retry_without_backoff
//! Merchant webhooks: `deliver.rs` posts each event to the merchant endpoint and retries in a
//! loop with the fixed delay from `config.rs`: every worker retries a struggling endpoint on the
//! same beat, with no jitter and no growth.
mod config;
pub mod deliver;
