//! expect: mark_outside_transaction
//! Ledger service: a Kafka consumer books card settlements. `ledger.rs` posts the journal in its
//! own transaction (Postgres implementation of `Ledger`), then `inbox.rs` marks the message
//! processed on the pool. The inbox row is claimed with a lease first, so only one consumer works
//! on a message at a time; a crash after the journal commits and before the mark re-books it.
pub mod consumer;
pub mod inbox;
pub mod ledger;
