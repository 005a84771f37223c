//! Entry-point frameworks as data: the web crates whose routes are user commands, the
//! runtimes whose spawns start tasks, and the crates whose traits are data or plumbing rather
//! than callbacks that receive deliveries. The engine (`analysis::entry`) keeps the
//! machinery (attributes, route tables, trait impls); which crate is which lives here.

/// Web frameworks: a fn their routing functions take is a route handler.
pub const WEB_CRATES: &[&str] = &[
    "axum",
    "actix_web",
    "poem",
    "salvo",
    "warp",
    "tide",
    "rocket",
    "ntex",
];

/// Attributes on an `impl` block that make each of its methods a request handler, with the
/// crate that defines them: GraphQL resolvers, whose mutations are a client's commands like
/// an HTTP route's.
pub const HANDLER_IMPL_ATTRS: &[(&str, &str)] = &[
    ("async_graphql", "Object"),
    ("async_graphql", "ComplexObject"),
    ("juniper", "graphql_object"),
];

/// Runtimes and pools whose `spawn*` functions start a task.
pub const SPAWN_CRATES: &[&str] = &[
    "tokio",
    "std",
    "async_std",
    "smol",
    "actix_rt",
    "actix_web",
    "futures",
    "rayon",
    "tokio_util",
];

/// Crates whose traits a crate implements for data, formatting or plumbing, not as callbacks
/// that receive deliveries: an impl of any other crate's trait method is a framework callback
/// (a tonic service, a lapin consumer delegate, a job runner's task trait).
pub const NON_CALLBACK_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "serde",
    "serde_json",
    "thiserror",
    "anyhow",
    "futures",
    "futures_util",
    "tokio",
    "tracing",
    "clap",
    "sqlx",
    "diesel",
    "sea_orm",
    "bytes",
    "http",
    "async_trait",
    "schemars",
    "utoipa",
    "validator",
    "strum",
    "derive_more",
];

/// Message brokers whose producers or consumers a lint reads (`rdkafka`'s `ClientConfig`);
/// their consumers are entry points through the receive loops the engine finds.
pub const BROKER_CRATES: &[&str] = &[
    "rdkafka",
    "lapin",
    "async_nats",
    "rumqttc",
    "google_cloud_pubsub",
];
