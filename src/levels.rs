//! Effective lint levels: the lint's default, then the config, then `-A/-W/-D` in the order
//! given. `warnings` is rustc's special name: `-D warnings` turns every finding left at warn
//! into an error, whatever order it was given in, as rustc does. A group name ([`GROUPS`])
//! stands for its lints, set in the group's place in that order (`-W nursery -A x`).

use anyhow::{anyhow, Result};
use idem_lints::{Level, Lint};
use std::collections::HashMap;

/// Lint groups, as clippy's: a name that sets several lints at once, in `-A/-W/-D` and in
/// `[lints]`, with what it holds.
pub const GROUPS: &[(&str, &str)] = &[
    ("all", "every lint"),
    (
        "idempotency",
        "every idempotency lint (not `parse_error` and the suppression lints)",
    ),
    (
        "nursery",
        "the idempotency lints at `allow` by default, until they are precise enough to warn",
    ),
];

/// The lints of the group `name` (an `idem::` prefix is accepted); `None` when no group has
/// that name.
pub fn group(name: &str) -> Option<Vec<&'static Lint>> {
    let name = name.strip_prefix("idem::").unwrap_or(name);
    let all = idem_lints::lints::ALL.iter().copied();
    match name {
        "all" => Some(all.collect()),
        "idempotency" => Some(all.filter(|l| !l.is_meta).collect()),
        "nursery" => Some(
            all.filter(|l| !l.is_meta && l.default_level == Level::Allow)
                .collect(),
        ),
        _ => None,
    }
}

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
            if let Some(lints) = group(&flag.name) {
                for lint in lints {
                    self.set(lint, flag.level);
                }
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

    #[test]
    fn groups_set_their_lints_in_their_place() {
        use idem_lints::lints::{CHECK_THEN_ACT, CLAIM_NOT_RELEASED, CLAIM_WITHOUT_EXPIRY};
        let mut levels = Levels::default();
        levels
            .apply_flags(&[
                flag(Level::Warn, "nursery"),
                flag(Level::Allow, "claim_not_released"),
            ])
            .expect("known group");
        assert_eq!(levels.get(&CLAIM_WITHOUT_EXPIRY), Level::Warn);
        assert_eq!(levels.get(&CLAIM_NOT_RELEASED), Level::Allow);
        assert_eq!(levels.get(&PARSE_ERROR), Level::Warn, "not in the nursery");
        levels
            .apply_flags(&[flag(Level::Deny, "idem::all")])
            .expect("known group");
        for lint in idem_lints::lints::ALL {
            assert_eq!(levels.get(lint), Level::Deny, "{}", lint.name);
        }
        levels
            .apply_flags(&[flag(Level::Allow, "idempotency")])
            .expect("known group");
        assert_eq!(levels.get(&CHECK_THEN_ACT), Level::Allow);
        assert_eq!(levels.get(&PARSE_ERROR), Level::Deny);
        let nursery = group("nursery").expect("group");
        assert!(nursery.len() >= 8, "{}", nursery.len());
        assert!(nursery.iter().all(|l| l.default_level == Level::Allow));
    }
}
