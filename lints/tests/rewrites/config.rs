//! A fixture's `idem-lint.toml`, applied as the driver applies it: `[lints]` levels turn
//! allow-by-default lints on (or others off), `[lints.<name>]` tables carry the settings.

use idem_lints::model::Package;
use idem_lints::{Diagnostic, Level, Lint, Settings};
use std::collections::HashMap;
use std::path::Path;

/// The levels and settings of one fixture crate.
#[derive(Default)]
pub struct FixtureConfig {
    pub settings: Settings,
    /// `lint -> enabled` for every lint the file gives a level.
    levels: HashMap<String, bool>,
}

impl FixtureConfig {
    /// The config of the fixture crate at `dir`, the defaults when it has none.
    pub fn of(dir: &Path) -> FixtureConfig {
        let mut config = FixtureConfig::default();
        let Ok(text) = std::fs::read_to_string(dir.join("idem-lint.toml")) else {
            return config;
        };
        let file: toml::Table = toml::from_str(&text).expect("fixture config parses");
        let lints = file.get("lints").and_then(toml::Value::as_table);
        for (name, value) in lints.into_iter().flatten() {
            match value {
                toml::Value::String(level) => config.set_level(name, level),
                toml::Value::Table(table) => {
                    let mut table = table.clone();
                    if let Some(level) = table.remove("level") {
                        config.set_level(name, level.as_str().expect("a level is a string"));
                    }
                    let value = serde_json::to_value(table).expect("toml converts to json");
                    config
                        .settings
                        .set(name, value)
                        .expect("fixture settings are valid");
                }
                other => panic!("{}: lint {name} is set to {other}", dir.display()),
            }
        }
        config
    }

    fn set_level(&mut self, lint: &str, level: &str) {
        self.levels.insert(lint.to_owned(), level != "allow");
    }

    fn enabled(&self, lint: &Lint) -> bool {
        self.levels
            .get(lint.name)
            .copied()
            .unwrap_or(lint.default_level != Level::Allow)
    }

    /// The findings of `package` under this config.
    pub fn check(&self, package: &Package) -> Vec<Diagnostic> {
        idem_lints::check_package(package, &self.settings, &|l| self.enabled(l))
    }
}
