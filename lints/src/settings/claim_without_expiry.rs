//! `[lints.claim_without_expiry]`: the settings of [`crate::lints::claim_without_expiry`].

use serde::Deserialize;

/// `[lints.claim_without_expiry]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Names of the crate's functions or methods that give a claimed key a TTL or lease
    /// (`"refresh_lease"`): a call of one in the function counts as an `EXPIRE`.
    pub expires: Vec<String>,
}
