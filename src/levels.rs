//! Effective lint levels: the lint's default, then the config, then `-A/-W/-D` in the order
//! given. `warnings` is rustc's special name: `-D warnings` turns every finding left at warn
//! into an error, whatever order it was given in, as rustc does.

use anyhow::{anyhow, Result};
use idem_lints::{Level, Lint};
use std::collections::HashMap;

/// One `-A/-W/-D NAME` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelFlag {
    pub level: Level,
    pub name: String,
}

/// Levels by lint name; lints not named keep their default.
#[derive(Debug, Clone, Default)]
pub struct Levels {
    by_name: HashMap<&'static str, Level>,
    /// Set by `-A/-W/-D warnings`: what a warn-level finding becomes.
    warnings: Option<Level>,
}

impl Levels {
    /// Sets `lint` to `level`, overriding anything before.
    pub fn set(&mut self, lint: &'static Lint, level: Level) {
        self.by_name.insert(lint.name, level);
    }

    /// Applies command-line flags in order; an unknown lint name is an error.
    pub fn apply_flags(&mut self, flags: &[LevelFlag]) -> Result<()> {
        for flag in flags {
            if flag.name == "warnings" {
                self.warnings = Some(flag.level);
                continue;
            }
            let lint = idem_lints::lints::find(&flag.name).ok_or_else(|| {
                anyhow!(
                    "unknown lint `{}` in `-{} {}` (see `cargo idem-lint --list`)",
                    flag.name,
                    flag_letter(flag.level),
                    flag.name
                )
            })?;
            self.set(lint, flag.level);
        }
        Ok(())
    }

    /// The level findings of `lint` are reported at.
    pub fn get(&self, lint: &Lint) -> Level {
        let level = self
            .by_name
            .get(lint.name)
            .copied()
            .unwrap_or(lint.default_level);
        match (level, self.warnings) {
            (Level::Warn, Some(w)) => w,
            _ => level,
        }
    }
}

fn flag_letter(level: Level) -> char {
    match level {
        Level::Allow => 'A',
        Level::Warn => 'W',
        Level::Deny => 'D',
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idem_lints::lint::PARSE_ERROR;

    fn flag(level: Level, name: &str) -> LevelFlag {
        LevelFlag {
            level,
            name: name.to_string(),
        }
    }

    #[test]
    fn later_flags_win_and_warnings_applies_last() {
        let mut levels = Levels::default();
        assert_eq!(levels.get(&PARSE_ERROR), Level::Warn);
        levels.set(&PARSE_ERROR, Level::Deny);
        levels
            .apply_flags(&[
                flag(Level::Deny, "parse_error"),
                flag(Level::Allow, "idem::parse_error"),
            ])
            .expect("known lint");
        assert_eq!(levels.get(&PARSE_ERROR), Level::Allow);
        levels
            .apply_flags(&[
                flag(Level::Deny, "warnings"),
                flag(Level::Warn, "parse_error"),
            ])
            .expect("known lint");
        assert_eq!(levels.get(&PARSE_ERROR), Level::Deny);
        assert!(levels.apply_flags(&[flag(Level::Deny, "nope")]).is_err());
    }
}
