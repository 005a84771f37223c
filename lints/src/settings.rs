//! Lint-specific settings from the config's `[lints.<name>]` tables (levels are the driver's).

use serde::de::DeserializeOwned;

/// The settings of every lint that has some, each with its defaults.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub missing_idempotency_token: crate::lints::missing_idempotency_token::Settings,
}

impl Settings {
    /// Applies the settings table of lint `lint` (its `level` key already removed by the
    /// driver). Errors name the offending key.
    pub fn set(&mut self, lint: &str, value: serde_json::Value) -> Result<(), String> {
        match lint {
            "missing_idempotency_token" => {
                self.missing_idempotency_token =
                    parse::<crate::lints::missing_idempotency_token::Settings>(value)?
                        .normalize()?;
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
