//! One module per lint, each opening with its documentation. [`ALL`] lists every lint and
//! [`PASSES`] the checks that report them.

use crate::context::LintContext;
use crate::lint::{Lint, PARSE_ERROR};

pub mod missing_idempotency_token;

use missing_idempotency_token::MISSING_IDEMPOTENCY_TOKEN;

/// A check over a package that reports the listed lints.
pub struct LintPass {
    pub lints: &'static [&'static Lint],
    pub check: fn(&mut LintContext<'_>),
}

/// Every lint, the input lints first, then the idempotency lints in DESIGN.md's order.
pub static ALL: &[&Lint] = &[&PARSE_ERROR, &MISSING_IDEMPOTENCY_TOKEN];

pub static PASSES: &[LintPass] = &[LintPass {
    lints: &[&MISSING_IDEMPOTENCY_TOKEN],
    check: missing_idempotency_token::check,
}];

/// The lint called `name` (`check_then_act`; an `idem::` prefix is accepted).
pub fn find(name: &str) -> Option<&'static Lint> {
    let name = name.strip_prefix("idem::").unwrap_or(name);
    ALL.iter().copied().find(|l| l.name == name)
}
