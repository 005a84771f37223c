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

/// A lint is stored by its name: the lints layer, which knows every lint, reads it back
/// ([`crate::lints::find`]).
impl serde::Serialize for Lint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.name.serialize(s)
    }
}
