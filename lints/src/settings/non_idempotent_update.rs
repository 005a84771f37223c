//! `[lints.non_idempotent_update]`: the settings of [`crate::lints::non_idempotent_update`].

use serde::Deserialize;

/// `[lints.non_idempotent_update]`: names the analysis cannot infer. Fns are named by their
/// name, `Type::method` or a path suffix (`jobs::retry`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// More handlers of at-least-once deliveries.
    pub entry_points: Vec<String>,
    /// More guards: fns whose call makes a duplicate stop (`"assert_not_duplicate"`).
    pub guards: Vec<String>,
    /// Fns or methods that add to stored state (`"credit_balance"`, `"ledger.append"`'s
    /// `append`), matched by name at the call.
    pub increments: Vec<String>,
}
