//! `[lints.missing_idempotency_token]`: the settings of [`crate::lints::missing_idempotency_token`].

use crate::catalog::tokens::RepeatEffect;
use serde::Deserialize;

/// `[lints.missing_idempotency_token]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// APIs of other crates (or of AWS operations the table lacks) that take a token.
    pub apis: Vec<ConfiguredApi>,
    /// Which operations to report, by what a repeat without the token does: `duplicates`
    /// (the default), `conflicts`, `no_effect`.
    pub repeat_effects: Vec<RepeatEffect>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            apis: Vec::new(),
            repeat_effects: vec![RepeatEffect::Duplicates],
        }
    }
}

/// `{ crate = "payments", method = "create_refund", token = "idempotency_key" }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfiguredApi {
    /// The crate whose client has the method, as in `Cargo.toml` (`-` and `_` both work).
    #[serde(rename = "crate")]
    pub krate: Option<String>,
    /// The method starting the request builder.
    pub method: String,
    /// The builder's setter for the token.
    pub token: String,
    /// The method that sends the built request.
    #[serde(default = "default_send")]
    pub send: String,
}

fn default_send() -> String {
    "send".to_owned()
}

impl Settings {
    /// Checks the names and writes crate names as code does (`aws-sdk-s3` → `aws_sdk_s3`).
    pub fn normalize(mut self) -> Result<Settings, String> {
        for (i, api) in self.apis.iter_mut().enumerate() {
            if let Some(k) = &mut api.krate {
                *k = k.replace('-', "_");
            }
            if let Err((key, value)) = api.check() {
                return Err(format!(
                    "apis[{i}].{key}: `{value}` is not a Rust identifier"
                ));
            }
        }
        Ok(self)
    }
}

impl ConfiguredApi {
    /// The first name that is not a Rust identifier, with its key.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let names = [
            ("crate", self.krate.as_deref().unwrap_or("x")),
            ("method", &self.method),
            ("token", &self.token),
            ("send", &self.send),
        ];
        match names.iter().find(|(_, v)| !is_ident(v)) {
            Some((key, value)) => Err((key, value.to_string())),
            None => Ok(()),
        }
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}
