//! Lint declarations, levels and the registry of every lint.

use serde::{Deserialize, Serialize};

/// How a finding of a lint is treated. Ordered: `Allow < Warn < Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Allow,
    Warn,
    Deny,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Allow => "allow",
            Level::Warn => "warn",
            Level::Deny => "deny",
        }
    }

    /// `allow`, `warn`, `deny`. (No `forbid`: nothing here can stop a later flag from
    /// lowering a level, which is what `forbid` promises in rustc.)
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "allow" => Some(Level::Allow),
            "warn" => Some(Level::Warn),
            "deny" => Some(Level::Deny),
            _ => None,
        }
    }
}

/// A lint: its fixed name, default level, one-line description and full documentation.
#[derive(Debug)]
pub struct Lint {
    /// The name users write after `allow(`: `check_then_act`.
    pub name: &'static str,
    pub default_level: Level,
    /// One line, lower-case, no trailing period: for `--list` and SARIF `shortDescription`.
    pub desc: &'static str,
    /// The module documentation (What it does / Why is this bad? / Known problems / Example /
    /// Use instead), the single source for `--explain` and SARIF help.
    pub docs: &'static str,
    /// Lints about the input rather than the code (`parse_error`): not idempotency findings.
    pub is_meta: bool,
}

impl Lint {
    /// The documentation as Markdown. Doc comments keep the space after `///` on every line;
    /// it is removed here so code blocks and headings start at the margin.
    pub fn doc_markdown(&self) -> String {
        self.docs
            .lines()
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The code in machine output: `idem::check_then_act`.
    pub fn code(&self) -> String {
        format!("idem::{}", self.name)
    }
}

impl PartialEq for Lint {
    fn eq(&self, other: &Lint) -> bool {
        self.name == other.name
    }
}

impl Eq for Lint {}

/// Declares a lint as a `static`, taking its documentation from the doc comment above it.
///
/// ```ignore
/// declare_lint! {
///     /// ### What it does
///     /// ...
///     pub CHECK_THEN_ACT, "check_then_act", Warn,
///     "a store is read to decide, then written without an atomic condition"
/// }
/// ```
#[macro_export]
macro_rules! declare_lint {
    ($(#[doc = $doc:literal])* pub $NAME:ident, $name:literal, $level:ident, $desc:literal) => {
        $(#[doc = $doc])*
        pub static $NAME: $crate::lint::Lint = $crate::lint::Lint {
            name: $name,
            default_level: $crate::lint::Level::$level,
            desc: $desc,
            docs: concat!($($doc, "\n"),*),
            is_meta: false,
        };
    };
}

/// A source file that could not be read, found, parsed or analysed in time. The rest of the
/// crate is still linted; findings that depend on the missing file may be missed.
pub static PARSE_ERROR: Lint = Lint {
    name: "parse_error",
    default_level: Level::Warn,
    desc: "a source file could not be read or parsed, so it was not linted",
    docs: "### What it does\n\
Reports a source file that could not be linted: it does not parse, is not valid UTF-8, could \
not be read, a `mod` declaration names a file that does not exist, or parsing it took longer \
than the per-file time budget.\n\n\
### Why is this bad?\n\
Code that is not read is not checked: an idempotency mistake in it goes unreported.\n\n\
### Known problems\n\
syn parses stable Rust syntax; a file using unstable syntax may not parse.\n\n\
### Example\n\
```rust\nfn main() {\n    let x = ;\n}\n```\n\n\
### Use instead\n\
Fix the file. To silence these reports, set `parse_error = \"allow\"` in the `[lints]` table.\n",
    is_meta: true,
};

/// A suppression comment that suppresses nothing: what it allowed is no longer found there
/// (ruff's `RUF100`, clippy's unfulfilled `#[expect]`). Reported by the driver, which reads
/// the comments.
pub static UNUSED_SUPPRESSION: Lint = Lint {
    name: "unused_suppression",
    default_level: Level::Warn,
    desc: "a suppression comment allows a lint that has no finding where it applies",
    docs: "### What it does\n\
Reports an `// idem-lint: allow(..)` or `allow-file(..)` comment naming a lint that reports \
nothing where the comment applies (its line, the item below it, or the file). Only lints that \
ran are judged: a name whose lint is at `allow` is left alone.\n\n\
### Why is this bad?\n\
A suppression outlives the code it was written for: once the finding is fixed or the code \
moved, the comment silences the next real finding at that place without anyone deciding so.\n\n\
### Known problems\n\
A finding that only a wider run reports (another package linking this one) does not count.\n\n\
### Example\n\
```rust\n// idem-lint: allow(check_then_act)\nfn handler() {}\n```\n\n\
### Use instead\n\
Remove the comment, or the names in it that no longer apply (`--fix` removes a comment whose \
every name is unused). `-D unused_suppression` fails CI on them.\n",
    is_meta: true,
};

/// A suppression comment without a reason (`// idem-lint: allow(x) -- why`), like clippy's
/// `allow_attributes_without_reason`. At `allow` unless configured: set it to `warn` or
/// `deny` to require reasons.
pub static SUPPRESSION_WITHOUT_REASON: Lint = Lint {
    name: "suppression_without_reason",
    default_level: Level::Allow,
    desc: "a suppression comment gives no reason after `--`",
    docs: "### What it does\n\
Reports an `// idem-lint: allow(..)` or `allow-file(..)` comment with no reason after the \
list (`-- reason`). At `allow` by default: `[lints] suppression_without_reason = \"deny\"` \
requires every suppression to say why.\n\n\
### Why is this bad?\n\
A suppression says \"this finding is wrong here\"; without the why, the next reader cannot \
tell a considered exception from a silenced bug.\n\n\
### Known problems\n\
Any text after `--` counts as a reason.\n\n\
### Example\n\
```rust\n// idem-lint: allow(check_then_act)\nfn handler() {}\n```\n\n\
### Use instead\n\
```rust\n// idem-lint: allow(check_then_act) -- the lock above serializes the workers\nfn handler() {}\n```\n",
    is_meta: true,
};

/// A lint is stored by its name: the lints layer, which knows every lint, reads it back
/// ([`crate::lints::find`]).
impl serde::Serialize for Lint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.name.serialize(s)
    }
}
