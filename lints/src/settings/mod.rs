//! Lint-specific settings from the config's `[lints.<name>]` tables (levels are the driver's).

pub mod claim_not_released;
pub mod claim_without_expiry;
pub mod dead_letter_without_context;
pub mod key_without_stage;
pub mod missing_idempotency_token;
pub mod models;
pub mod non_idempotent_update;
pub mod retry_without_backoff;
pub mod ttl_shorter_than_redelivery;

use crate::catalog::stores::OpKind;
use crate::catalog::{Catalog, SinkCatalog, SourceCatalog, StoreNames};
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// The settings of every lint that has some, each with its defaults.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub missing_idempotency_token: missing_idempotency_token::Settings,
    pub nondeterministic_key: NondeterministicKeySettings,
    pub check_then_act: CheckThenActSettings,
    pub unguarded_entry_point: UnguardedEntryPointSettings,
    pub mark_outside_transaction: MarkOutsideTransactionSettings,
    pub claim_without_expiry: claim_without_expiry::Settings,
    pub claim_not_released: claim_not_released::Settings,
    pub ttl_shorter_than_redelivery: ttl_shorter_than_redelivery::Settings,
    pub non_idempotent_update: non_idempotent_update::Settings,
    pub key_without_stage: key_without_stage::Settings,
    pub retry_without_backoff: retry_without_backoff::Settings,
    pub dead_letter_without_context: dead_letter_without_context::Settings,
    /// `[models]`: the user's rows of the catalog's kinds.
    pub models: models::Models,
}

/// `[lints.nondeterministic_key]`: extends the built-in catalogs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NondeterministicKeySettings {
    /// More nondeterministic sources: function paths (`"my_ids::fresh_id"`) or whole crates
    /// (`"snowflake::*"`).
    pub sources: Vec<String>,
    /// More names of bindings, fields and parameters that hold keys (`"job_key"`).
    pub key_names: Vec<String>,
}

/// `[lints.check_then_act]`: names of store operations whose body the analysis cannot see
/// (a trait object, another crate), beyond the built-in `is_processed`/`mark_processed`...
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckThenActSettings {
    /// More checks: methods or fns that read whether a key was handled (`"is_duplicate"`).
    pub checks: Vec<String>,
    /// More marks: methods or fns that record a key as handled (`"remember"`).
    pub marks: Vec<String>,
}

/// `[lints.unguarded_entry_point]`: names the analysis cannot infer. Fns are named by their
/// name, `Type::method` or a path suffix (`jobs::retry`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UnguardedEntryPointSettings {
    /// More entry points (handlers registered in ways the analysis does not see).
    pub entry_points: Vec<String>,
    /// More guards: fns whose call makes a duplicate stop (`"assert_not_duplicate"`).
    pub guards: Vec<String>,
    /// More side effects: fns whose call a duplicate must not repeat (`"push_notification"`).
    pub effects: Vec<String>,
}

/// `[lints.mark_outside_transaction]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MarkOutsideTransactionSettings {
    /// More completion marks: fns that record a key as processed (`"mark_processed"`).
    pub marks: Vec<String>,
}

impl Settings {
    /// Applies the settings table of lint `lint` (its `level` key already removed by the
    /// driver). Errors name the offending key.
    pub fn set(&mut self, lint: &str, value: serde_json::Value) -> Result<(), String> {
        match lint {
            "missing_idempotency_token" => {
                self.missing_idempotency_token =
                    parse::<missing_idempotency_token::Settings>(value)?.normalize()?;
                Ok(())
            }
            "nondeterministic_key" => {
                self.nondeterministic_key = parse(value)?;
                Ok(())
            }
            "check_then_act" => {
                self.check_then_act = parse(value)?;
                Ok(())
            }
            "unguarded_entry_point" => {
                self.unguarded_entry_point = parse(value)?;
                Ok(())
            }
            "mark_outside_transaction" => {
                self.mark_outside_transaction = parse(value)?;
                Ok(())
            }
            "claim_without_expiry" => {
                self.claim_without_expiry = parse(value)?;
                Ok(())
            }
            "claim_not_released" => {
                self.claim_not_released = parse(value)?;
                Ok(())
            }
            "ttl_shorter_than_redelivery" => {
                self.ttl_shorter_than_redelivery = parse(value)?;
                Ok(())
            }
            "non_idempotent_update" => {
                self.non_idempotent_update = parse(value)?;
                Ok(())
            }
            "key_without_stage" => {
                self.key_without_stage = parse(value)?;
                Ok(())
            }
            "retry_without_backoff" => {
                self.retry_without_backoff = parse(value)?;
                Ok(())
            }
            "dead_letter_without_context" => {
                self.dead_letter_without_context = parse(value)?;
                Ok(())
            }
            _ if value.as_object().is_some_and(|o| o.is_empty()) => Ok(()),
            _ => Err(format!("lint `{lint}` takes no settings besides `level`")),
        }
    }
}

/// Deserializes one lint's settings table, with the serde error as the message.
pub(crate) fn parse<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

impl Settings {
    /// Every entry point named by a lint's settings, once each.
    pub fn entry_names(&self) -> Vec<String> {
        let mut names = self.unguarded_entry_point.entry_points.clone();
        for name in &self.non_idempotent_update.entry_points {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    /// Adds a row of `[[models.<kind>]]` ([`models::Models::add`]).
    pub fn add_model(&mut self, kind: &str, row: serde_json::Value) -> Result<(), String> {
        self.models.add(kind, row)
    }

    /// The built-in catalogs extended with the user's configuration: names of sources,
    /// keys, checks and marks, and the rows of `[models]` after the built-in ones.
    pub fn catalog(&self) -> Catalog {
        let settings = self;
        let cfg = &settings.nondeterministic_key;
        let models = &settings.models;
        let mut frameworks = crate::catalog::frameworks::EntryModels::default();
        frameworks.attrs.extend(&models.entry_attrs);
        frameworks.calls.extend(&models.entry_calls);
        Catalog {
            sources: SourceCatalog::default()
                .with_extra(&[cfg.sources.as_slice(), &models.sources].concat()),
            sinks: SinkCatalog::default()
                .with_extra_key_names(&[cfg.key_names.as_slice(), &models.key_names].concat()),
            store_names: StoreNames::default().with_extra(
                &settings.check_then_act.checks,
                &settings.check_then_act.marks,
            ),
            frameworks,
            stores: crate::catalog::stores::StoreModels {
                typed: models.stores.clone(),
            },
            budget: Default::default(),
        }
    }

    /// The names of fns that give a claimed key a TTL: `[lints.claim_without_expiry]
    /// expires` and the methods of `[[models.store]]` rows with `op = "expire"`.
    pub fn expire_names(&self) -> Vec<String> {
        let rows = self
            .models
            .stores
            .iter()
            .filter(|t| t.row.op == OpKind::Expire);
        let mut names = self.claim_without_expiry.expires.clone();
        names.extend(rows.map(|t| t.row.method.to_owned()));
        names
    }

    /// The names of fns that release a claim: `[lints.claim_not_released] releases` and
    /// the expiries of [`Settings::expire_names`] (an expired claim is released).
    pub fn release_names(&self) -> Vec<String> {
        let rows = self
            .models
            .stores
            .iter()
            .filter(|t| t.row.op == OpKind::Expire);
        let mut names = self.claim_not_released.releases.clone();
        names.extend(rows.map(|t| t.row.method.to_owned()));
        names
    }

    /// Side effects a duplicate must not repeat: `[lints.unguarded_entry_point] effects`
    /// and `[[models.effect]]` rows without a token.
    pub fn effect_names(&self) -> Vec<String> {
        [
            self.unguarded_entry_point.effects.as_slice(),
            &self.models.effects,
        ]
        .concat()
    }

    /// The configured APIs that take a token: `[lints.missing_idempotency_token] apis` and
    /// `[[models.effect]]` rows with one, the per-lint ones first.
    pub fn token_apis(&self) -> missing_idempotency_token::Settings {
        let mut s = self.missing_idempotency_token.clone();
        s.apis.extend(self.models.token_apis.iter().cloned());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nondeterministic_key_settings_extend_and_reject_unknown_keys() {
        let mut s = Settings::default();
        s.set(
            "nondeterministic_key",
            serde_json::json!({"sources": ["snowflake::*"], "key_names": ["job_key"]}),
        )
        .unwrap();
        assert_eq!(s.nondeterministic_key.sources, vec!["snowflake::*"]);
        let err = s
            .set("nondeterministic_key", serde_json::json!({"sourcez": []}))
            .unwrap_err();
        assert!(err.contains("sourcez"), "{err}");
        assert!(s
            .set("check_then_act", serde_json::json!({"x": 1}))
            .is_err());
        s.set("check_then_act", serde_json::json!({"checks": ["is_dup"]}))
            .unwrap();
        assert_eq!(s.check_then_act.checks, vec!["is_dup"]);
    }
}
