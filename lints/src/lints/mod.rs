//! One module per lint, each opening with its documentation. [`ALL`] lists every lint and
//! [`PASSES`] the checks that report them.

pub mod check_then_act;
pub mod claim_not_released;
pub mod claim_without_expiry;
pub mod dead_letter_without_context;
pub mod kafka_producer_not_idempotent;
pub mod key_without_stage;
pub mod mark_outside_transaction;
pub mod missing_idempotency_token;
pub mod non_idempotent_update;
pub mod nondeterministic_key;
pub mod retry_without_backoff;
pub mod ttl_shorter_than_redelivery;
pub mod unguarded_entry_point;

use crate::analysis::relevance;
use crate::context::LintContext;
use crate::lint::{Lint, PARSE_ERROR, SUPPRESSION_WITHOUT_REASON, UNUSED_SUPPRESSION};
use crate::model::Package;
use crate::settings::Settings;
pub use check_then_act::CHECK_THEN_ACT;
pub use claim_not_released::CLAIM_NOT_RELEASED;
pub use claim_without_expiry::CLAIM_WITHOUT_EXPIRY;
pub use dead_letter_without_context::DEAD_LETTER_WITHOUT_CONTEXT;
pub use kafka_producer_not_idempotent::KAFKA_PRODUCER_NOT_IDEMPOTENT;
pub use key_without_stage::KEY_WITHOUT_STAGE;
pub use mark_outside_transaction::MARK_OUTSIDE_TRANSACTION;
pub use missing_idempotency_token::MISSING_IDEMPOTENCY_TOKEN;
pub use non_idempotent_update::NON_IDEMPOTENT_UPDATE;
pub use nondeterministic_key::NONDETERMINISTIC_KEY;
pub use retry_without_backoff::RETRY_WITHOUT_BACKOFF;
pub use ttl_shorter_than_redelivery::TTL_SHORTER_THAN_REDELIVERY;
pub use unguarded_entry_point::UNGUARDED_ENTRY_POINT;

/// A check over a package that reports the listed lints.
pub struct LintPass {
    pub lints: &'static [&'static Lint],
    pub check: fn(&mut LintContext<'_>),
    /// Whether the package may hold anything the pass reports, decided from what the
    /// lowering kept before any analysis is built; the pass is skipped where it is false
    /// ([`crate::analysis::relevance`]).
    pub relevant: fn(&Package, &Settings) -> bool,
    /// Whether the pass reads the call graph or the summaries (built on the thread pool:
    /// see [`crate::context`]).
    pub reads_summaries: bool,
}

/// For the passes that read no store operation and no key of their own.
fn always(_: &Package, _: &Settings) -> bool {
    true
}

/// Every lint: the input lint first, then the idempotency lints in DESIGN.md's order, then
/// the lints about suppression comments.
pub static ALL: &[&Lint] = &[
    &PARSE_ERROR,
    &NONDETERMINISTIC_KEY,
    &CHECK_THEN_ACT,
    &MISSING_IDEMPOTENCY_TOKEN,
    &UNGUARDED_ENTRY_POINT,
    &MARK_OUTSIDE_TRANSACTION,
    &CLAIM_WITHOUT_EXPIRY,
    &CLAIM_NOT_RELEASED,
    &TTL_SHORTER_THAN_REDELIVERY,
    &NON_IDEMPOTENT_UPDATE,
    &KEY_WITHOUT_STAGE,
    &RETRY_WITHOUT_BACKOFF,
    &DEAD_LETTER_WITHOUT_CONTEXT,
    &KAFKA_PRODUCER_NOT_IDEMPOTENT,
    &UNUSED_SUPPRESSION,
    &SUPPRESSION_WITHOUT_REASON,
];

pub static PASSES: &[LintPass] = &[
    LintPass {
        lints: &[&NONDETERMINISTIC_KEY],
        check: nondeterministic_key::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&CHECK_THEN_ACT],
        check: check_then_act::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&MISSING_IDEMPOTENCY_TOKEN],
        check: missing_idempotency_token::check,
        relevant: always,
        reads_summaries: false,
    },
    LintPass {
        lints: &[&UNGUARDED_ENTRY_POINT],
        check: unguarded_entry_point::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&MARK_OUTSIDE_TRANSACTION],
        check: mark_outside_transaction::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&CLAIM_WITHOUT_EXPIRY],
        check: claim_without_expiry::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&CLAIM_NOT_RELEASED],
        check: claim_not_released::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&TTL_SHORTER_THAN_REDELIVERY],
        check: ttl_shorter_than_redelivery::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&NON_IDEMPOTENT_UPDATE],
        check: non_idempotent_update::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    LintPass {
        lints: &[&KEY_WITHOUT_STAGE],
        check: key_without_stage::check,
        relevant: relevance::may_find,
        reads_summaries: true,
    },
    // The three below read loops, sends and client configs, not store operations or keys
    // ([`relevance`] says why two of them always run).
    LintPass {
        lints: &[&RETRY_WITHOUT_BACKOFF],
        check: retry_without_backoff::check,
        relevant: always,
        reads_summaries: false,
    },
    LintPass {
        lints: &[&DEAD_LETTER_WITHOUT_CONTEXT],
        check: dead_letter_without_context::check,
        relevant: always,
        reads_summaries: false,
    },
    LintPass {
        lints: &[&KAFKA_PRODUCER_NOT_IDEMPOTENT],
        check: kafka_producer_not_idempotent::check,
        relevant: relevance::may_find_kafka,
        reads_summaries: false,
    },
];

/// A stored lint is read back by name (see [`Lint`]'s `Serialize`), so a finding stored by
/// another build that has a lint this one lacks fails to deserialize.
impl<'de> serde::Deserialize<'de> for &'static Lint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        find(&name).ok_or_else(|| serde::de::Error::custom(format_args!("no lint named `{name}`")))
    }
}

/// The lint called `name` (`check_then_act`; an `idem::` prefix is accepted).
pub fn find(name: &str) -> Option<&'static Lint> {
    let name = name.strip_prefix("idem::").unwrap_or(name);
    ALL.iter().copied().find(|l| l.name == name)
}
