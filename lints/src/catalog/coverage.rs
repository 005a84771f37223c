//! Which dependencies the catalog has a model for, so a run can say which crates a package
//! calls into that the analysis reads as opaque: a store, queue or payment client that is
//! not modelled hides its reads, claims and effects, and the user should know (`--verbose`).

use super::{effects, frameworks, store_crates, tokens};

/// Crates that hold no store, queue, effect or entry point of their own (data, errors,
/// logging, formats, async plumbing, tests, build helpers): not worth naming as unmodelled.
/// The framework table's plumbing crates ([`frameworks::NON_CALLBACK_CRATES`]) count too.
const NEUTRAL: &[&str] = &[
    "ahash",
    "arc_swap",
    "assert_matches",
    "async_stream",
    "base64",
    "bincode",
    "bitflags",
    "cfg_if",
    "color_eyre",
    "config",
    "console",
    "criterion",
    "crossbeam",
    "crossbeam_channel",
    "dashmap",
    "derivative",
    "derive_builder",
    "dotenv",
    "dotenvy",
    "either",
    "enum_map",
    "env_logger",
    "envy",
    "eyre",
    "fake",
    "figment",
    "futures_core",
    "hashbrown",
    "hex",
    "http_body",
    "http_body_util",
    "humantime",
    "hyper",
    "hyper_util",
    "indexmap",
    "indoc",
    "insta",
    "itertools",
    "jsonwebtoken",
    "lazy_static",
    "log",
    "metrics",
    "mime",
    "mockall",
    "num",
    "num_traits",
    "once_cell",
    "opentelemetry",
    "parking_lot",
    "paste",
    "percent_encoding",
    "pin_project",
    "pin_project_lite",
    "pretty_assertions",
    "proptest",
    "prost",
    "prost_types",
    "quickcheck",
    "rand_core",
    "rayon",
    "regex",
    "rstest",
    "rust_decimal",
    "rustls",
    "secrecy",
    "semver",
    "serde_derive",
    "serde_with",
    "serde_yaml",
    "sha2",
    "smallvec",
    "strum_macros",
    "tempfile",
    "test_log",
    "tokio_stream",
    "tokio_test",
    "tokio_util",
    "toml",
    "tower",
    "tower_http",
    "tower_layer",
    "tower_service",
    "tracing_futures",
    "tracing_opentelemetry",
    "tracing_subscriber",
    "tracing_test",
    "url",
    "wiremock",
];

/// Words in a crate's name that suggest a store, queue or client of another service: the
/// unmodelled crates to name first, since each may hide reads, claims or effects.
const IO_WORDS: &[&str] = &[
    "amqp",
    "bb8",
    "cache",
    "cassandra",
    "clickhouse",
    "client",
    "deadpool",
    "dynamo",
    "elastic",
    "email",
    "grpc",
    "http",
    "kafka",
    "lapin",
    "mail",
    "moka",
    "mongo",
    "mq",
    "mysql",
    "nats",
    "pay",
    "pg",
    "postgres",
    "pubsub",
    "pulsar",
    "queue",
    "redis",
    "s3",
    "scylla",
    "sdk",
    "smtp",
    "sns",
    "sql",
    "sqs",
    "stripe",
    "tonic",
    "twilio",
    "webhook",
];

/// Whether `krate`'s name suggests a store, queue or outside client ([`IO_WORDS`]).
pub fn looks_like_io(krate: &str) -> bool {
    IO_WORDS.iter().any(|w| krate.contains(w))
}

/// Whether the catalog models `krate` (a dependency's crate name, `-` as `_`): its store
/// operations, effects, tokens, entry points, retry policies or value sources.
pub fn is_modelled(krate: &str) -> bool {
    store_crates::store_crates().any(|c| c == krate)
        || effects::is_outside_client(krate)
        || tokens::models_crate(krate)
        || frameworks::WEB_CRATES.contains(&krate)
        || frameworks::HANDLER_IMPL_ATTRS
            .iter()
            .any(|(c, _)| *c == krate)
        || super::retries::RETRY_CRATES.contains(&krate)
        || frameworks::BROKER_CRATES.contains(&krate)
        || super::sources::names_crate(krate)
}

/// Whether `krate` is known to hold nothing the analysis would read.
fn is_neutral(krate: &str) -> bool {
    NEUTRAL.contains(&krate) || frameworks::NON_CALLBACK_CRATES.contains(&krate)
}

/// The dependencies of `deps` the catalog neither models nor knows to be neutral, in order,
/// without `members` (the workspace's own crates, read as code).
pub fn unmodelled<'a>(deps: &'a [String], members: &[String]) -> Vec<&'a str> {
    deps.iter()
        .map(String::as_str)
        .filter(|d| !is_modelled(d) && !is_neutral(d) && !members.iter().any(|m| m == d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_effects_and_frameworks_are_modelled() {
        for krate in [
            "redis",
            "sqlx",
            "sled",
            "mongodb",
            "aws_sdk_sqs",
            "reqwest",
            "axum",
            "stripe",
            "rdkafka",
            "backon",
        ] {
            assert!(is_modelled(krate), "{krate}");
        }
        assert!(!is_modelled("pulsar"));
        assert!(looks_like_io("scylla") && looks_like_io("bb8_lapin") && !looks_like_io("ratatui"));
    }

    #[test]
    fn unmodelled_skips_neutral_crates_and_members() {
        let deps: Vec<String> = ["serde", "pulsar", "my_common", "redis", "lapin_pool"]
            .map(String::from)
            .to_vec();
        let members = vec!["my_common".to_owned()];
        assert_eq!(unmodelled(&deps, &members), ["pulsar", "lapin_pool"]);
    }

    #[test]
    fn neutral_list_is_sorted_and_disjoint_from_models() {
        assert!(
            NEUTRAL.windows(2).all(|w| w[0] < w[1]),
            "keep NEUTRAL sorted"
        );
        for n in NEUTRAL {
            assert!(!is_modelled(n), "{n} is modelled and listed as neutral");
        }
    }
}
