//! `[lints.claim_not_released]`: the settings of [`crate::lints::claim_not_released`].

use serde::Deserialize;

/// `[lints.claim_not_released]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Names of the crate's functions or methods that release a claim (`"release_claim"`).
    pub releases: Vec<String>,
}
