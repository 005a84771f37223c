//! Payment APIs that take an idempotency key on the requests that move money or create
//! objects, sent through a generic HTTP client (`reqwest`, `hyper`) to their hosts. Only
//! providers whose API reference documents the key are listed; Twilio, SendGrid and Postmark
//! document none for sending, so a repeat there needs the handler's own guard, not a token.

use super::{HttpToken, SdkToken, TokenPlace};

/// One row per provider: its API hosts and where the key goes.
pub static PAYMENTS: &[HttpToken] = &[
    HttpToken {
        provider: "Stripe",
        hosts: &["api.stripe.com"],
        place: TokenPlace::Header("Idempotency-Key"),
        note: "Stripe keeps a key's result for 24 hours and answers a repeat with it",
    },
    HttpToken {
        provider: "PayPal",
        hosts: &[
            "api-m.paypal.com",
            "api-m.sandbox.paypal.com",
            "api.paypal.com",
        ],
        place: TokenPlace::Header("PayPal-Request-Id"),
        note: "PayPal answers a repeated `PayPal-Request-Id` with the first call's result",
    },
    HttpToken {
        provider: "Adyen",
        hosts: &["adyen.com", "adyenpayments.com"],
        place: TokenPlace::Header("Idempotency-Key"),
        note: "Adyen keeps a key for at least 7 days",
    },
    HttpToken {
        provider: "Square",
        hosts: &["connect.squareup.com", "connect.squareupsandbox.com"],
        place: TokenPlace::BodyField("idempotency_key"),
        note: "Square requires `idempotency_key` in the body of its create calls",
    },
    HttpToken {
        provider: "Checkout.com",
        hosts: &["api.checkout.com", "api.sandbox.checkout.com"],
        place: TokenPlace::Header("Cko-Idempotency-Key"),
        note: "Checkout.com answers a repeated key with the first payment",
    },
    HttpToken {
        provider: "GoCardless",
        hosts: &["api.gocardless.com", "api-sandbox.gocardless.com"],
        place: TokenPlace::Header("Idempotency-Key"),
        note: "GoCardless answers a repeated key with a conflict naming the first resource",
    },
];

/// Payment SDKs whose requests take the key through a request strategy: async-stripe's
/// `client.with_strategy(RequestStrategy::Idempotent(key))` (0.x) or
/// `.customize().request_strategy(RequestStrategy::Idempotent(key))` (1.x), sent as the
/// `Idempotency-Key` header. The default strategy (`Once`) and `Retry(n)` send no key of the
/// message: a redelivery creates again.
pub static SDKS: &[SdkToken] = &[SdkToken {
    provider: "Stripe",
    krate: "stripe",
    packages: &["async_stripe", "stripe"],
    calls: &["create"],
    types: &[
        "Charge",
        "CheckoutSession",
        "Customer",
        "Invoice",
        "PaymentIntent",
        "Payout",
        "Refund",
        "Subscription",
        "Transfer",
    ],
    setters: &["with_strategy", "request_strategy"],
    strategy: "RequestStrategy",
    keyed: "Idempotent",
}];
