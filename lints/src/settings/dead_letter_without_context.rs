//! `[lints.dead_letter_without_context]`: the settings of [`crate::lints::dead_letter_without_context`].

use serde::Deserialize;

/// `[lints.dead_letter_without_context]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// More names of dead-letter destinations (`"graveyard"`), matched as whole name parts.
    pub names: Vec<String>,
}
