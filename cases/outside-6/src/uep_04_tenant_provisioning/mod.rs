//! expect: unguarded_entry_point
//! GitHub App: `installation.created` provisions a tenant (Stripe customer + welcome mail).
//! `webhook.rs` guards provisioning with a claim on the delivery's installation id;
//! `backfill.rs`, run by ops after an outage, provisions every installation without a tenant by
//! calling `provisioning::provision` directly, racing the webhooks GitHub is redelivering.
pub mod backfill;
pub mod provisioning;
pub mod webhook;
