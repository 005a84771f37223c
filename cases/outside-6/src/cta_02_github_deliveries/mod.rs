//! expect: check_then_act
//! GitHub App backend: `pull_request` webhooks post a review-checklist comment. Deliveries are
//! remembered through a `DeliveryLog` trait object; the Postgres implementation reads, then the
//! handler writes after the comment is posted.
pub mod handler;
pub mod pg_store;
pub mod store;
