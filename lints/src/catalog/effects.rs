//! Outside effects as data: the clients whose calls reach another service (an HTTP request,
//! an e-mail, a payment), so that a repeat of the call repeats the effect. The engine
//! (`analysis::effects`) follows the calls; which crates and verbs count lives here.

/// HTTP clients whose `post(url)..send()` chains are requests to another service.
pub const HTTP_CLIENTS: &[&str] = &["reqwest", "awc", "surf", "isahc", "reqwest_middleware"];

/// E-mail clients whose `send` delivers a message.
pub const MAIL_CLIENTS: &[&str] = &["lettre"];

/// Payment SDKs whose calls named by [`PAYMENT_VERBS`] move money or make objects.
pub const PAYMENT_CRATES: &[&str] = &["stripe", "async_stripe", "paypal_rs", "square"];

/// The verbs of a payment SDK call that change something.
pub const PAYMENT_VERBS: &[&str] = &[
    "create", "update", "capture", "confirm", "cancel", "refund", "pay", "attach",
];

/// Every crate whose calls are effects (besides `aws_sdk_*`, see [`is_outside_client`]).
pub fn outside_clients() -> impl Iterator<Item = &'static str> {
    HTTP_CLIENTS
        .iter()
        .chain(MAIL_CLIENTS)
        .chain(PAYMENT_CRATES)
        .copied()
}

/// Whether calls into the dependency `krate` can be outside effects.
pub fn is_outside_client(krate: &str) -> bool {
    krate.starts_with("aws_sdk_") || outside_clients().any(|c| c == krate)
}
