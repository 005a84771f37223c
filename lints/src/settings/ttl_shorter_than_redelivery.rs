//! `[lints.ttl_shorter_than_redelivery]`: the settings of [`crate::lints::ttl_shorter_than_redelivery`].

use serde::Deserialize;

/// `[lints.ttl_shorter_than_redelivery]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// The longest time a message may be redelivered, set outside the code (seconds).
    pub redelivery_seconds: Option<u64>,
}
