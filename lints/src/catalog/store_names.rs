//! Names of store operations whose body the analysis cannot see (a trait object, another
//! crate's client): `is_processed(id)` reads whether a key was handled, `mark_processed(id)`
//! records it. Users add their own names in `[lints.check_then_act] checks = [..], marks =
//! [..]`.

/// Check and mark names, built in and configured.
#[derive(Debug, Clone)]
pub struct StoreNames {
    checks: Vec<String>,
    marks: Vec<String>,
}

/// Names that say "was this key handled?".
const CHECKS: &[&str] = &[
    "is_processed",
    "already_processed",
    "was_processed",
    "has_processed",
    "is_handled",
    "already_handled",
    "is_duplicate",
    "has_seen",
    "seen",
    "exists",
];

/// Names that say "this key is handled now".
const MARKS: &[&str] = &[
    "mark_processed",
    "mark_as_processed",
    "mark_handled",
    "mark_done",
    "mark_seen",
    "set_processed",
    "record",
];

/// Names common outside idempotency code (`path.exists()`, `metrics.record(..)`): taken as
/// store operations only on a store-like receiver with a key-like argument.
const COMMON: &[&str] = &["exists", "record", "seen"];

/// What a name does to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedOp {
    Check,
    Mark,
}

impl Default for StoreNames {
    fn default() -> Self {
        StoreNames {
            checks: CHECKS.iter().map(|s| s.to_string()).collect(),
            marks: MARKS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl StoreNames {
    /// The built-in names and `checks`/`marks` from the configuration.
    pub fn with_extra(mut self, checks: &[String], marks: &[String]) -> StoreNames {
        self.checks.extend(checks.iter().cloned());
        self.marks.extend(marks.iter().cloned());
        self
    }

    /// What `name` does, if it names a check or a mark.
    pub fn find(&self, name: &str) -> Option<NamedOp> {
        if self.checks.iter().any(|c| c == name) {
            Some(NamedOp::Check)
        } else if self.marks.iter().any(|m| m == name) {
            Some(NamedOp::Mark)
        } else {
            None
        }
    }

    /// Whether `name` is a common word that needs a store-like receiver too.
    pub fn is_common(&self, name: &str) -> bool {
        COMMON.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_names_extend_the_built_in_ones() {
        let n = StoreNames::default().with_extra(&["is_dup".into()], &["remember".into()]);
        assert_eq!(n.find("is_processed"), Some(NamedOp::Check));
        assert_eq!(n.find("is_dup"), Some(NamedOp::Check));
        assert_eq!(n.find("remember"), Some(NamedOp::Mark));
        assert_eq!(n.find("get"), None);
        assert!(n.is_common("exists") && !n.is_common("is_processed"));
    }
}
