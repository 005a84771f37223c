//! `[lints.key_without_stage]`: the settings of [`crate::lints::key_without_stage`].

/// `[lints.key_without_stage]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// More reservations: fns or methods whose first key-like argument they reserve
    /// (`"try_reserve"`), matched by name at the call.
    pub claims: Vec<String>,
}
