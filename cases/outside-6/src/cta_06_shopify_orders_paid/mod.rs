//! expect: none
//! Shopify `orders/paid` webhook: creates a fulfilment request. A cheap read skips obvious
//! repeats, but the decision is the `ON CONFLICT DO NOTHING RETURNING` insert of the webhook id,
//! made in the same transaction as the fulfilment request.
pub mod inbox;
pub mod pg;
pub mod routes;
