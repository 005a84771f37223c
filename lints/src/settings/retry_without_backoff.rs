//! `[lints.retry_without_backoff]`: the settings of [`crate::lints::retry_without_backoff`].

use serde::Deserialize;

/// `[lints.retry_without_backoff]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Functions or methods that wait a growing, jittered delay (`"wait_before_retry"`): a
    /// retry loop that calls one has a proper backoff.
    pub backoff_helpers: Vec<String>,
}
