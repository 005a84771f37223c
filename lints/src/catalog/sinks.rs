//! Key sinks: the places where a value is used as an idempotency or deduplication key. A
//! nondeterministic value reaching one of them means duplicates are never detected.
//!
//! - idempotency-token setters of AWS SDK builders (`client_request_token`, `client_token`,
//!   `idempotency_token`, `message_deduplication_id`, and Step Functions' `name` on a
//!   `start_execution` chain), with their `set_*` forms;
//! - the key of a store operation used as a guard (found by [`crate::analysis::store_ops`]);
//! - the `key` of `#[idempotent(...)]`;
//! - the value of an `Idempotency-Key` header on an outgoing request (and of the other
//!   headers of the payment APIs' table, and JetStream's `Nats-Msg-Id`);
//! - the key of a payment SDK's keyed request strategy (`RequestStrategy::Idempotent(key)`);
//! - bindings, struct fields and parameters whose names say they are keys
//!   (`idempotency_key`, `dedupe_id`, `request_token`, `processed_id`, ...; configurable).

/// Which kind of key sink, with what the message needs to name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SinkKind {
    /// `.client_request_token(v)` and the other token setters: the setter's name; also a
    /// payment SDK's keyed strategy (`RequestStrategy::Idempotent`).
    TokenSetter(String),
    /// The key of an atomic reservation or dedupe insert: the store command (`SET NX`,
    /// `put_item`, `INSERT INTO processed_messages`).
    GuardKey(String),
    /// `#[idempotent(key = ...)]`.
    IdempotentAttr,
    /// An `Idempotency-Key` request header.
    Header(String),
    /// A binding, field or parameter named like a key: the name.
    KeyName(String),
}

impl SinkKind {
    /// How the sink reads in a label: "used as the `client_request_token` here".
    pub fn describe(&self) -> String {
        match self {
            SinkKind::TokenSetter(m) => format!("used as the `{m}` idempotency token here"),
            SinkKind::GuardKey(cmd) => format!("used as the key of the `{cmd}` reservation here"),
            SinkKind::IdempotentAttr => "used as the `#[idempotent]` key here".to_owned(),
            SinkKind::Header(h) => format!("sent as the `{h}` header here"),
            SinkKind::KeyName(n) => format!("used as the key `{n}` here"),
        }
    }

    /// Name-based sinks are the weakest evidence: a finding prefers any other sink.
    pub fn is_name_only(&self) -> bool {
        matches!(self, SinkKind::KeyName(_))
    }
}

/// Token setters of the AWS SDKs (and their `set_` forms, handled by [`SinkCatalog::token_setter`]).
const TOKEN_SETTERS: &[&str] = &[
    "client_request_token",
    "client_token",
    "idempotency_token",
    "message_deduplication_id",
    "idempotency_key",
    "deduplication_id",
];

/// Header names that carry an idempotency key (compared case-insensitively), besides the
/// headers of the payment APIs' table ([`super::tokens::payments::PAYMENTS`]:
/// `PayPal-Request-Id`, `Cko-Idempotency-Key`).
const HEADERS: &[&str] = &[
    "idempotency-key",
    "x-idempotency-key",
    "idempotency-token",
    // JetStream drops a second message with the same id within the stream's duplicate window.
    "nats-msg-id",
];

/// Exact names that mean "this is a key", besides the `idempoten*`/`dedup*` families.
const KEY_NAMES: &[&str] = &[
    "request_token",
    "client_token",
    "client_request_token",
    "processed_id",
    "processed_key",
    "message_deduplication_id",
    "dedup_id",
    "dedupe_id",
    "dedup_key",
    "dedupe_key",
    "idempotency_key",
    "idempotency_token",
    "idempotency_id",
];

#[derive(Debug, Clone)]
pub struct SinkCatalog {
    key_names: Vec<String>,
}

impl Default for SinkCatalog {
    fn default() -> Self {
        SinkCatalog {
            key_names: KEY_NAMES.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl SinkCatalog {
    pub fn with_extra_key_names(mut self, extra: &[String]) -> Self {
        self.key_names.extend(extra.iter().cloned());
        self
    }

    /// Whether a binding, field or parameter called `name` holds an idempotency key:
    /// a configured or built-in key name, or a name of the `idempoten*`/`dedup*` families
    /// that ends in `key`, `id` or `token` (`dedupe_key`, `idempotencyKey`,
    /// `deduplication_id`). `created_at`, `dedup_window` and `id` are not keys.
    pub fn is_key_name(&self, name: &str) -> bool {
        // Case-insensitive without lowering a copy: every name of the package is asked.
        let name = name.trim_start_matches('_').as_bytes();
        if self
            .key_names
            .iter()
            .any(|k| k.as_bytes().eq_ignore_ascii_case(name))
        {
            return true;
        }
        let ends = |tail: &[u8]| {
            name.len() >= tail.len() && name[name.len() - tail.len()..].eq_ignore_ascii_case(tail)
        };
        let family = name.len() >= 5 && name[..5].eq_ignore_ascii_case(b"dedup")
            || super::contains_ignore_ascii_case(name, b"idempoten");
        family && (ends(b"key") || ends(b"id") || ends(b"token"))
    }

    /// Whether method `name` (`client_request_token`, `set_client_token`) sets an
    /// idempotency token of a request builder. Step Functions' `name` is a token only on a
    /// `start_execution` chain, which [`Self::is_step_functions_name`] checks.
    pub fn token_setter(&self, name: &str) -> Option<&'static str> {
        let base = name.strip_prefix("set_").unwrap_or(name);
        TOKEN_SETTERS.iter().copied().find(|t| *t == base)
    }

    /// `.name(v)` / `.set_name(v)` on a builder chain that contains `start_execution()`.
    pub fn is_step_functions_name(&self, method: &str, chain: &[&str]) -> bool {
        matches!(method, "name" | "set_name") && chain.contains(&"start_execution")
    }

    /// The keyed request strategy `path` builds, when it is one of a payment SDK's
    /// ([`super::tokens::payments::SDKS`]): `stripe::RequestStrategy::Idempotent` is
    /// `RequestStrategy::Idempotent`, whose one argument is the key.
    pub fn keyed_strategy(&self, path: &crate::names::DefPath) -> Option<String> {
        let krate = path.crate_name()?;
        let [.., ty, variant] = &*path.segments else {
            return None;
        };
        super::tokens::payments::SDKS
            .iter()
            .find(|s| {
                (s.krate == krate || s.packages.contains(&krate))
                    && s.strategy == ty.as_str()
                    && s.keyed == variant.as_str()
            })
            .map(|s| format!("{}::{}", s.strategy, s.keyed))
    }

    /// Whether `name` is the keyed variant of a payment SDK's strategy (`Idempotent`): a
    /// path written to build one ends in it (the relevance test's necessary condition).
    pub fn is_keyed_variant(&self, name: &str) -> bool {
        super::tokens::payments::SDKS
            .iter()
            .any(|s| s.keyed == name)
    }

    /// Whether a header name (`"Idempotency-Key"`) carries an idempotency key.
    pub fn is_idempotency_header(&self, header: &str) -> bool {
        let header = header.trim();
        HEADERS.iter().any(|h| h.eq_ignore_ascii_case(header))
            || super::tokens::payments::PAYMENTS.iter().any(|api| {
                matches!(api.place, super::tokens::TokenPlace::Header(h) if h.eq_ignore_ascii_case(header))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_are_recognised_by_family_and_list() {
        let c = SinkCatalog::default();
        for yes in [
            "idempotency_key",
            "dedupe_key",
            "dedup_id",
            "deduplication_id",
            "request_token",
            "processed_id",
            "idempotencyKey",
            "_idempotency_key",
        ] {
            assert!(c.is_key_name(yes), "{yes}");
        }
        for no in [
            "id",
            "created_at",
            "dedup_window",
            "key_len",
            "token_count",
            "order_id",
        ] {
            assert!(!c.is_key_name(no), "{no}");
        }
        assert!(c
            .clone()
            .with_extra_key_names(&["job_key".into()])
            .is_key_name("job_key"));
    }

    #[test]
    fn token_setters_and_headers() {
        let c = SinkCatalog::default();
        assert_eq!(
            c.token_setter("set_client_request_token"),
            Some("client_request_token")
        );
        assert_eq!(c.token_setter("name"), None);
        assert!(c.is_step_functions_name("name", &["start_execution", "send"]));
        assert!(!c.is_step_functions_name("name", &["create_bucket"]));
        assert!(c.is_idempotency_header("Idempotency-Key"));
        assert!(c.is_idempotency_header("PayPal-Request-Id"));
        assert!(c.is_idempotency_header("Nats-Msg-Id"));
        assert!(!c.is_idempotency_header("X-Request-Id"));
        assert!(!c.is_idempotency_header("Content-Type"));
    }
}
