//! Operations whose request takes an idempotency token: [`aws::AWS`], generated from the AWS
//! SDK for Rust's sources by `scripts/gen-token-catalog.py`, plus the APIs users add in the
//! config (`[lints.missing_idempotency_token] apis = [...]`).
//!
//! Not in the table: SQS `SendMessage`'s `message_deduplication_id`. Only FIFO queues take it,
//! and a FIFO queue without content-based deduplication rejects a message that lacks it, so
//! leaving it out is never a silent duplicate: either the call fails loudly or the queue
//! derives the id from the body. Which kind of queue a URL names is not in the source.

pub mod aws;
pub mod payments;

/// Where an HTTP API takes its idempotency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPlace {
    /// A request header: `Idempotency-Key`, `PayPal-Request-Id`.
    Header(&'static str),
    /// A field of the JSON body: Square's `idempotency_key`.
    BodyField(&'static str),
}

impl TokenPlace {
    /// The header or field name.
    pub fn name(self) -> &'static str {
        match self {
            TokenPlace::Header(n) | TokenPlace::BodyField(n) => n,
        }
    }
}

/// An HTTP API whose state-changing requests (`POST`) take an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpToken {
    pub provider: &'static str,
    /// Hosts of the API: a URL whose host is one of them or ends in `.` and one of them.
    pub hosts: &'static [&'static str],
    pub place: TokenPlace,
    /// What the provider does with a repeated key, one sentence.
    pub note: &'static str,
}

/// A payment SDK whose create calls take an idempotency key through a request strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkToken {
    pub provider: &'static str,
    /// The crate as code names it: `stripe` (async-stripe).
    pub krate: &'static str,
    /// The package names that bring it, as dependencies are listed (`-` as `_`).
    pub packages: &'static [&'static str],
    /// Associated functions that create: `Refund::create(&client, params)`.
    pub calls: &'static [&'static str],
    /// The crate's types whose `calls` move money or make objects.
    pub types: &'static [&'static str],
    /// Methods that set the strategy, on the client or the request.
    pub setters: &'static [&'static str],
    /// The strategy type: `RequestStrategy`.
    pub strategy: &'static str,
    /// The strategy variant that carries a key: `RequestStrategy::Idempotent(key)`.
    pub keyed: &'static str,
}

/// The HTTP API a URL text points at (`https://api.stripe.com/v1/refunds`,
/// `format!("{}/v2/checkout/orders", "https://api-m.paypal.com")` as its skeleton).
pub fn http_api_of(url: &str) -> Option<&'static HttpToken> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest
        .split(['/', '?', ':', '{'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    payments::PAYMENTS.iter().find(|t| {
        t.hosts
            .iter()
            .any(|h| host == *h || host.strip_suffix(h).is_some_and(|pre| pre.ends_with('.')))
    })
}

/// Whether the token tables model crate `krate`: an AWS SDK or a payment SDK package.
pub fn models_crate(krate: &str) -> bool {
    aws::AWS.iter().any(|t| t.krate == krate)
        || payments::SDKS
            .iter()
            .any(|s| s.krate == krate || s.packages.contains(&krate))
}

/// What happens to a request sent without its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// The SDK fills in a fresh random UUID on every `send()` (a Smithy `@idempotencyToken`
    /// member): the SDK's own retries of that one `send()` are deduplicated, nothing else.
    SdkUuid,
    /// Nothing fills it: every request is a new one.
    Unset,
}

/// What repeating a request without its token does. Derived for every built-in operation by
/// `scripts/gen-token-catalog.py` from the SDK sources, by this rule:
///
/// - [`NoEffect`](RepeatEffect::NoEffect): the operation's verb removes, ends or sets
///   something (`delete_*`, `stop_*`, `cancel_*`, `update_*`, `put_*`, `associate_*`, ...):
///   a repeat leaves the state the first call made, or fails because the thing is gone.
///   Not when the token's documentation says it keeps a retry from making a duplicate or a
///   new version (Secrets Manager's `put_secret_value` adds a version per request).
/// - [`Conflicts`](RepeatEffect::Conflicts): the operation makes a thing (`create_*`,
///   `register_*`, `import_*`, `copy_*`) and its input has a required member naming it
///   (`name`, `<noun>_name`, `<noun>_identifier`: `create_change_set` requires
///   `change_set_name`), or applies a one-shot thing named so (`execute_change_set`,
///   `rollback_stack`): a repeat fails with AlreadyExists, or finds the thing applied.
/// - [`Duplicates`](RepeatEffect::Duplicates): anything else (`create_job`, `run_instances`,
///   `start_execution`, `transact_write_items`): a repeat makes a second resource or effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepeatEffect {
    Duplicates,
    Conflicts,
    NoEffect,
}

impl RepeatEffect {
    /// The setting's spelling: `duplicates`, `conflicts`, `no_effect`.
    pub fn name(self) -> &'static str {
        match self {
            RepeatEffect::Duplicates => "duplicates",
            RepeatEffect::Conflicts => "conflicts",
            RepeatEffect::NoEffect => "no_effect",
        }
    }
}

/// What a repeat of AWS operation `method` of crate `krate` (`aws_sdk_cloudformation`,
/// `create_change_set`) does, for the operations of the built-in table; `None` for any other.
pub fn repeat_effect(krate: &str, method: &str) -> Option<RepeatEffect> {
    aws::AWS
        .binary_search_by(|t| (t.krate, t.method).cmp(&(krate, method)))
        .ok()
        .map(|i| aws::AWS[i].repeat)
}

/// What a repeat of client method `method` does when the crate is not known: the table's
/// answer if every crate with an operation of that name agrees, else `None`.
pub fn repeat_effect_of_method(method: &str) -> Option<RepeatEffect> {
    let mut found = aws::AWS
        .iter()
        .filter(|t| t.method == method)
        .map(|t| t.repeat);
    let first = found.next()?;
    found.all(|r| r == first).then_some(first)
}

/// One operation of the built-in table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenApi {
    /// The crate as code names it: `aws_sdk_mediaconvert`.
    pub krate: &'static str,
    /// The client method starting the operation's fluent builder: `create_job`.
    pub method: &'static str,
    /// The builder's setter for the token: `client_request_token`.
    pub token: &'static str,
    pub fill: Fill,
    pub repeat: RepeatEffect,
    /// The required member that makes a repeat conflict ([`RepeatEffect::Conflicts`]).
    pub naming: Option<&'static str>,
    /// What the SDK documentation says of the token, one sentence.
    pub note: &'static str,
}

/// An operation the lint looks for, from the built-in table or the user's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api<'a> {
    /// `None` for a configured API without a crate: the method name alone identifies it.
    pub krate: Option<&'a str>,
    pub method: &'a str,
    pub token: &'a str,
    /// The method that sends the built request.
    pub send: &'a str,
    pub fill: Fill,
    pub note: &'a str,
    /// An AWS SDK operation: its client type is the crate's `Client`.
    pub is_aws: bool,
    /// Configured APIs are taken to duplicate.
    pub repeat: RepeatEffect,
    pub naming: Option<&'a str>,
}

impl<'a> From<&'a TokenApi> for Api<'a> {
    fn from(t: &'a TokenApi) -> Api<'a> {
        Api {
            krate: Some(t.krate),
            method: t.method,
            token: t.token,
            send: "send",
            fill: t.fill,
            note: t.note,
            is_aws: true,
            repeat: t.repeat,
            naming: t.naming,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::aws::AWS;
    use super::Fill;

    fn find(krate: &str, method: &str) -> Option<&'static super::TokenApi> {
        AWS.iter().find(|t| t.krate == krate && t.method == method)
    }

    #[test]
    fn the_table_holds_the_operations_the_design_names() {
        let want = [
            ("aws_sdk_mediaconvert", "create_job", "client_request_token"),
            (
                "aws_sdk_dynamodb",
                "transact_write_items",
                "client_request_token",
            ),
            ("aws_sdk_ec2", "run_instances", "client_token"),
            ("aws_sdk_sfn", "start_execution", "name"),
            ("aws_sdk_efs", "create_file_system", "creation_token"),
        ];
        for (krate, method, token) in want {
            let t = find(krate, method).unwrap_or_else(|| panic!("{krate} {method}"));
            assert_eq!(t.token, token);
        }
        assert_eq!(
            find("aws_sdk_mediaconvert", "create_job").map(|t| t.fill),
            Some(Fill::SdkUuid)
        );
        assert!(find("aws_sdk_sqs", "send_message").is_none());
        assert!(find("aws_sdk_codepipeline", "acknowledge_third_party_job").is_none());
    }

    #[test]
    fn repeats_are_classified_by_verb_and_naming_member() {
        use super::{repeat_effect, RepeatEffect::*};
        let want = [
            ("aws_sdk_mediaconvert", "create_job", Duplicates),
            ("aws_sdk_ec2", "run_instances", Duplicates),
            ("aws_sdk_sfn", "start_execution", Duplicates),
            ("aws_sdk_dynamodb", "transact_write_items", Duplicates),
            ("aws_sdk_cloudformation", "create_change_set", Conflicts),
            ("aws_sdk_cloudformation", "create_stack", Conflicts),
            ("aws_sdk_cloudformation", "execute_change_set", Conflicts),
            ("aws_sdk_cloudformation", "update_stack", NoEffect),
            ("aws_sdk_amp", "delete_workspace", NoEffect),
            ("aws_sdk_secretsmanager", "put_secret_value", Duplicates),
        ];
        for (krate, method, effect) in want {
            assert_eq!(
                repeat_effect(krate, method),
                Some(effect),
                "{krate} {method}"
            );
        }
        assert_eq!(
            find("aws_sdk_cloudformation", "create_change_set").and_then(|t| t.naming),
            Some("change_set_name")
        );
        assert_eq!(repeat_effect("aws_sdk_sqs", "send_message"), None);
        for t in AWS {
            if t.method.starts_with("delete_") || t.method.starts_with("describe_") {
                assert_eq!(t.repeat, NoEffect, "{}", t.method);
            }
            assert_eq!(t.naming.is_some(), t.repeat == Conflicts, "{}", t.method);
        }
    }

    #[test]
    fn urls_name_their_provider_by_host_only() {
        use super::http_api_of;
        let provider = |u: &str| http_api_of(u).map(|t| t.provider);
        assert_eq!(
            provider("https://api.stripe.com/v1/refunds"),
            Some("Stripe")
        );
        assert_eq!(
            provider("https://api-m.sandbox.paypal.com/v2/checkout/orders"),
            Some("PayPal")
        );
        assert_eq!(
            provider("https://checkout-test.adyen.com/v71/payments"),
            Some("Adyen")
        );
        assert_eq!(provider("https://evil.example/api.stripe.com"), None);
        assert_eq!(provider("https://notadyen.com/payments"), None);
        assert_eq!(provider("https://api.github.com/repos"), None);
        for t in super::payments::PAYMENTS {
            assert!(!t.hosts.is_empty() && !t.place.name().is_empty(), "{t:?}");
        }
    }

    #[test]
    fn the_table_is_sorted_without_duplicates() {
        for pair in AWS.windows(2) {
            let key = |t: &super::TokenApi| (t.krate, t.method, t.token);
            assert!(key(&pair[0]) < key(&pair[1]), "{:?}", pair[1]);
        }
    }
}
